// Flash attention against kernels/cpu/attention (run in double on the very values the GPU reads:
// bf16 inputs are rounded first), every output NaN-poisoned before the kernels run. Metric:
// max|gpu - cpu| / max|cpu| (normwise_error.h) below 1e-4 for float outputs (o, dq, dk, dv, and
// the float lse and delta of both dtypes, except bf16's delta, which sums the bf16-rounded o) and
// 2e-2 for bf16 outputs. Shapes: batch and heads > 1, seq not a multiple of either tile (64
// keys, 32 or 64 query rows), head_dim 8, 17, 32, 40, 64, 128 (each padded tile width), one
// token, and a peaky softmax whose running max grows from tile to tile. float runs the fp32
// kernels, bf16 the tensor-core kernels (attention.h): head_dim 17 the WMMA forward, the other
// shapes the register-level mma.sync forward. Grouped-query attention: 2 and 4 query heads per
// key/value head (k, v, dk, dv [batch, seq, kv_heads, head_dim]; dk and dv summed over the group),
// on each kernel family (head_dim 17 takes WMMA); sliding windows (Mistral's: query i sees keys
// i - w < j <= i) shorter and longer than a tile, on each family. Skips without a GPU.
#include "kernels/cuda/attention.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>
#include <type_traits>
#include <vector>

#include "kernels/cpu/attention.h"
#include "kernels/cuda/gpu_test.h"
#include "kernels/cuda/normwise_error.h"

namespace pipecoord::kernels::cuda {
namespace {

struct Shape {
  cpu::AttentionDims d;
  double qk_range;  // q and k uniform in [-qk_range, qk_range): larger gives peakier softmax
};

const Shape kShapes[] = {
    {{1, 1, 1, 8}, 2.0},   {{2, 67, 3, 40}, 2.0},  {{1, 130, 2, 128}, 2.0},
    {{2, 96, 2, 64}, 2.0}, {{1, 200, 1, 17}, 2.0}, {{1, 150, 2, 32}, 6.0},
    {{.batch = 2, .seq = 130, .heads = 8, .head_dim = 64, .kv_heads = 2}, 2.0},
    {{.batch = 1, .seq = 97, .heads = 4, .head_dim = 128, .kv_heads = 2}, 2.0},
    {{.batch = 2, .seq = 70, .heads = 4, .head_dim = 17, .kv_heads = 1}, 2.0},
    {{.batch = 1, .seq = 300, .heads = 4, .head_dim = 64, .kv_heads = 2, .window = 40}, 2.0},
    {{.batch = 2, .seq = 200, .heads = 2, .head_dim = 128, .window = 100}, 2.0},
    {{.batch = 1, .seq = 150, .heads = 2, .head_dim = 17, .window = 30}, 2.0},
};

std::string Name(const cpu::AttentionDims& d) {
  return "batch " + std::to_string(d.batch) + " seq " + std::to_string(d.seq) + " heads " +
         std::to_string(d.heads) + " kv_heads " + std::to_string(d.kv()) + " head_dim " +
         std::to_string(d.head_dim) + " window " + std::to_string(d.window);
}

std::vector<double> ToDoubles(const std::vector<float>& v) { return {v.begin(), v.end()}; }

// lse[b, h, i] = log(sum over j <= i of exp(q_i . k_j / sqrt(head_dim))), in double.
std::vector<double> ReferenceLse(const std::vector<float>& q, const std::vector<float>& k,
                                 const cpu::AttentionDims& d) {
  const double scale = 1.0 / std::sqrt(static_cast<double>(d.head_dim));
  std::vector<double> lse(static_cast<size_t>(d.batch * d.heads * d.seq));
  std::vector<double> score(static_cast<size_t>(d.seq));
  for (int64_t b = 0; b < d.batch; ++b) {
    for (int64_t h = 0; h < d.heads; ++h) {
      const int64_t base = b * d.seq * d.hidden() + h * d.head_dim;
      const int64_t kv_base = b * d.seq * d.kv_hidden() + (h / d.group()) * d.head_dim;
      for (int64_t i = 0; i < d.seq; ++i) {
        double mx = -INFINITY;
        for (int64_t j = d.first_key(i); j <= i; ++j) {
          double dot = 0;
          for (int64_t c = 0; c < d.head_dim; ++c) {
            dot += static_cast<double>(q[base + i * d.hidden() + c]) *
                   k[kv_base + j * d.kv_hidden() + c];
          }
          score[j] = scale * dot;
          mx = std::max(mx, score[j]);
        }
        double sum = 0;
        for (int64_t j = d.first_key(i); j <= i; ++j) sum += std::exp(score[j] - mx);
        lse[(b * d.heads + h) * d.seq + i] = mx + std::log(sum);
      }
    }
  }
  return lse;
}

// delta[b, h, i] = dout_i . o_i per head, in double.
std::vector<double> ReferenceDelta(const std::vector<float>& dout, const std::vector<double>& o,
                                   const cpu::AttentionDims& d) {
  std::vector<double> delta(static_cast<size_t>(d.batch * d.heads * d.seq));
  for (int64_t b = 0; b < d.batch; ++b) {
    for (int64_t i = 0; i < d.seq; ++i) {
      for (int64_t h = 0; h < d.heads; ++h) {
        const int64_t row = (b * d.seq + i) * d.hidden() + h * d.head_dim;
        double sum = 0;
        for (int64_t c = 0; c < d.head_dim; ++c) sum += dout[row + c] * o[row + c];
        delta[(b * d.heads + h) * d.seq + i] = sum;
      }
    }
  }
  return delta;
}

template <typename Case>
class AttentionTest : public GpuTest {
 protected:
  using T = typename Case::type;

  // Device copies of one shape's inputs (rounded to T) and its outputs.
  struct Buffers {
    explicit Buffers(const cpu::AttentionDims& d)
        : tokens(static_cast<size_t>(d.batch * d.seq * d.hidden())),
          kv_tokens(static_cast<size_t>(d.batch * d.seq * d.kv_hidden())),
          stats(static_cast<size_t>(d.batch * d.heads * d.seq)),
          q(tokens),
          k(kv_tokens),
          v(kv_tokens),
          o(tokens),
          dout(tokens),
          dq(tokens),
          dk(kv_tokens),
          dv(kv_tokens),
          lse(stats),
          delta(stats) {}
    Status status() const {
      for (const Status* s :
           {&q.status(), &k.status(), &v.status(), &o.status(), &dout.status(), &dq.status(),
            &dk.status(), &dv.status(), &lse.status(), &delta.status()}) {
        if (!s->ok()) return *s;
      }
      return Status::Ok();
    }
    size_t tokens, kv_tokens, stats;
    DeviceBuffer<T> q, k, v, o, dout, dq, dk, dv;
    DeviceBuffer<float> lse, delta;
  };

  struct Inputs {
    std::vector<float> q, k, v, dout;
  };

  static Inputs MakeInputs(const Shape& shape, uint64_t seed) {
    const int64_t n = shape.d.batch * shape.d.seq * shape.d.hidden();
    const int64_t kv_n = shape.d.batch * shape.d.seq * shape.d.kv_hidden();
    return Inputs{RoundedTo<T>(RandomFloats(seed, n, -shape.qk_range, shape.qk_range)),
                  RoundedTo<T>(RandomFloats(seed + 1, kv_n, -shape.qk_range, shape.qk_range)),
                  RoundedTo<T>(RandomFloats(seed + 2, kv_n, -1.0, 1.0)),
                  RoundedTo<T>(RandomFloats(seed + 3, n, -1.0, 1.0))};
  }

  // Uploads the inputs, poisons every output, runs forward then backward, waits.
  Status Run(const Inputs& in, const cpu::AttentionDims& d, Buffers& buf) {
    PIPECOORD_RETURN_IF_ERROR(buf.status());
    PIPECOORD_RETURN_IF_ERROR(UploadFloats(buf.q, in.q));
    PIPECOORD_RETURN_IF_ERROR(UploadFloats(buf.k, in.k));
    PIPECOORD_RETURN_IF_ERROR(UploadFloats(buf.v, in.v));
    PIPECOORD_RETURN_IF_ERROR(UploadFloats(buf.dout, in.dout));
    for (Status s : {buf.o.Poison(), buf.dq.Poison(), buf.dk.Poison(), buf.dv.Poison(),
                     buf.lse.Poison(), buf.delta.Poison()}) {
      PIPECOORD_RETURN_IF_ERROR(s);
    }
    PIPECOORD_RETURN_IF_ERROR(FlashAttentionForward(buf.q.get(), buf.k.get(), buf.v.get(),
                                                    buf.o.get(), buf.lse.get(), d, stream_));
    PIPECOORD_RETURN_IF_ERROR(FlashAttentionBackward(
        buf.dout.get(), buf.q.get(), buf.k.get(), buf.v.get(), buf.o.get(), buf.lse.get(),
        buf.delta.get(), buf.dq.get(), buf.dk.get(), buf.dv.get(), d, stream_));
    return Sync();
  }
};

TYPED_TEST_SUITE(AttentionTest, ActivationTypes, DTypeNames);

TYPED_TEST(AttentionTest, ForwardAndBackwardMatchCpu) {
  using T = typename TypeParam::type;
  for (const Shape& shape : kShapes) {
    const cpu::AttentionDims& d = shape.d;
    SCOPED_TRACE(Name(d));
    const auto in = this->MakeInputs(shape, 100 + d.seq);
    typename TestFixture::Buffers buf(d);
    PIPECOORD_ASSERT_OK(this->Run(in, d, buf));

    std::vector<float> o, dq, dk, dv, lse, delta;
    PIPECOORD_ASSERT_OK(DownloadFloats(buf.o, &o));
    PIPECOORD_ASSERT_OK(DownloadFloats(buf.dq, &dq));
    PIPECOORD_ASSERT_OK(DownloadFloats(buf.dk, &dk));
    PIPECOORD_ASSERT_OK(DownloadFloats(buf.dv, &dv));
    PIPECOORD_ASSERT_OK(buf.lse.Download(&lse));
    PIPECOORD_ASSERT_OK(buf.delta.Download(&delta));

    const auto q = ToDoubles(in.q), k = ToDoubles(in.k), v = ToDoubles(in.v);
    const auto dout = ToDoubles(in.dout);
    std::vector<double> probs(static_cast<size_t>(d.probs_size())), o_cpu(buf.tokens);
    cpu::AttentionForward(q.data(), k.data(), v.data(), probs.data(), o_cpu.data(), d);
    std::vector<double> dq_cpu(buf.tokens), dk_cpu(buf.kv_tokens), dv_cpu(buf.kv_tokens);
    cpu::AttentionBackward(dout.data(), q.data(), k.data(), v.data(), probs.data(), dq_cpu.data(),
                           dk_cpu.data(), dv_cpu.data(), d);

    const double tolerance = ToleranceFor<T>();
    const NormwiseError eo = CompareNormwise(o, o_cpu);
    EXPECT_LT(eo.error, tolerance) << "o: " << eo.Describe();
    const NormwiseError e_lse = CompareNormwise(lse, ReferenceLse(in.q, in.k, d));
    EXPECT_LT(e_lse.error, kFloatTolerance) << "lse: " << e_lse.Describe();
    const NormwiseError edelta = CompareNormwise(delta, ReferenceDelta(in.dout, o_cpu, d));
    EXPECT_LT(edelta.error, tolerance) << "delta: " << edelta.Describe();
    const NormwiseError edq = CompareNormwise(dq, dq_cpu);
    EXPECT_LT(edq.error, tolerance) << "dq: " << edq.Describe();
    const NormwiseError edk = CompareNormwise(dk, dk_cpu);
    EXPECT_LT(edk.error, tolerance) << "dk: " << edk.Describe();
    const NormwiseError edv = CompareNormwise(dv, dv_cpu);
    EXPECT_LT(edv.error, tolerance) << "dv: " << edv.Describe();
  }
}

// No atomics: two runs on the same inputs give the same bits in every output (with grouped-query
// attention, whose dk and dv sum 4 query heads).
TYPED_TEST(AttentionTest, RunsAreBitwiseIdentical) {
  const Shape shape{{.batch = 2, .seq = 131, .heads = 8, .head_dim = 64, .kv_heads = 2}, 2.0};
  const auto in = this->MakeInputs(shape, 7);
  typename TestFixture::Buffers first(shape.d), second(shape.d);
  PIPECOORD_ASSERT_OK(this->Run(in, shape.d, first));
  PIPECOORD_ASSERT_OK(this->Run(in, shape.d, second));
  auto same = [](auto& a, auto& b, const char* name) {
    using Host = typename std::remove_reference_t<decltype(a)>::Host;
    std::vector<Host> x, y;
    PIPECOORD_ASSERT_OK(a.Download(&x));
    PIPECOORD_ASSERT_OK(b.Download(&y));
    ASSERT_EQ(x.size(), y.size());
    EXPECT_EQ(std::memcmp(x.data(), y.data(), x.size() * sizeof(Host)), 0) << name;
  };
  same(first.o, second.o, "o");
  same(first.lse, second.lse, "lse");
  same(first.dq, second.dq, "dq");
  same(first.dk, second.dk, "dk");
  same(first.dv, second.dv, "dv");
}

}  // namespace
}  // namespace pipecoord::kernels::cuda
