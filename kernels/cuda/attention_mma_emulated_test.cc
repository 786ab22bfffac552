// The register-level flash attention kernels (attention_mma_kernels.h, the code nvcc builds) on
// the CPU under cuda_emulation.h, with mma.h's warp primitives emulated from the whole warp's
// operands. First the primitives themselves: one 16 x 16 x 8 product loaded with ldmatrix (and
// ldmatrix.trans) equals the plain product, element for element, so the fragment layouts the
// kernels rely on are the ones mma.h documents. Then the kernels against kernels/cpu/attention
// in double on the same bf16-rounded inputs, outputs NaN-poisoned: max|got - cpu| / max|cpu|
// below 2e-2 for the bf16 outputs and 1e-4 for the fp32 lse, at seq not a multiple of the
// tiles, head_dim 40 (padded to 64), 64 and 128, batch and heads > 1, and a peaky softmax;
// the backward kernels likewise for dq, dk and dv (bf16, 2e-2), from the forward kernel's lse.
// The emulation cannot see GPU-only faults (a missing barrier the scheduling hides, shared
// memory limits, the hardware's own fragment layouts): attention_test checks those on a GPU.
#include "kernels/cuda/cuda_emulation.h"  // first: the CUDA built-ins the kernels use
#include "kernels/cuda/attention_mma_kernels.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "kernels/cpu/attention.h"
#include "kernels/cuda/normwise_error.h"

namespace pipecoord::kernels::cuda {
namespace {

using emulation::Floats;
using emulation::Launch;
using emulation::Poisoned;
using emulation::Random;
using emulation::RoundedTo;
using emulation::Stored;
using Bf16 = __nv_bfloat16;

// A [16 x 16] row-major and B [16 x 8] given as its transpose bt [8 x 16] (rows are B's
// columns, as k is stored) or as B itself [16 x 8] row-major (read with ldmatrix.trans): one
// warp loads both with ldmatrix and multiplies; the result must equal the plain product.
TEST(MmaPrimitivesEmulatedTest, LdMatrixAndMmaGiveThePlainProduct) {
  const std::vector<float> a = RoundedTo<Bf16>(Random(1, 16 * 16, -1, 1));
  const std::vector<float> b = RoundedTo<Bf16>(Random(2, 16 * 16, -1, 1));  // [16 k][16 n]
  std::vector<float> bt(16 * 16);
  for (int kk = 0; kk < 16; ++kk) {
    for (int n = 0; n < 16; ++n) bt[n * 16 + kk] = b[kk * 16 + n];
  }
  const std::vector<Bf16> as = Stored<Bf16>(a), bs = Stored<Bf16>(b), bts = Stored<Bf16>(bt);
  std::vector<float> from_bt(16 * 16, NAN), from_b(16 * 16, NAN);
  Launch(dim3{1, 1, 1}, dim3{32, 1, 1}, [&] {
    const int lane = static_cast<int>(threadIdx.x), g = lane / 4, t = lane % 4;
    uint32_t af[4], bf[4], bft[4];
    mma::LdMatrixX4(af, as.data() + (lane % 8 + 8 * ((lane / 8) % 2)) * 16 + 8 * (lane / 16));
    // bt's rows are n: matrices (n 0-7, k 0-7), (n 0-7, k 8-15), (n 8-15, k 0-7), (n 8-15, k 8-15).
    mma::LdMatrixX4(bf, bts.data() + (lane % 8 + 8 * (lane / 16)) * 16 + 8 * ((lane / 8) % 2));
    // b's rows are k: matrices (k 0-7, n 0-7), (k 8-15, n 0-7), (k 0-7, n 8-15), (k 8-15, n 8-15).
    mma::LdMatrixX4Trans(bft, bs.data() + (lane % 8 + 8 * ((lane / 8) % 2)) * 16 + 8 * (lane / 16));
    float d[2][4] = {}, e[2][4] = {};
    mma::MmaBf16(d[0], af, bf[0], bf[1]);
    mma::MmaBf16(d[1], af, bf[2], bf[3]);
    mma::MmaBf16(e[0], af, bft[0], bft[1]);
    mma::MmaBf16(e[1], af, bft[2], bft[3]);
    for (int nt = 0; nt < 2; ++nt) {
      for (int i = 0; i < 4; ++i) {
        const int row = g + 8 * (i / 2), col = nt * 8 + 2 * t + i % 2;
        from_bt[row * 16 + col] = d[nt][i];
        from_b[row * 16 + col] = e[nt][i];
      }
    }
  });
  for (int row = 0; row < 16; ++row) {
    for (int col = 0; col < 16; ++col) {
      float want = 0;
      for (int kk = 0; kk < 16; ++kk) want += a[row * 16 + kk] * b[kk * 16 + col];
      EXPECT_NEAR(from_bt[row * 16 + col], want, 1e-5) << row << ", " << col;
      EXPECT_NEAR(from_b[row * 16 + col], want, 1e-5) << row << ", " << col;
    }
  }
}

// Grouped-query attention: 2 query heads per key/value head at batch 2 (a head or sample index
// mixed up between the q and k/v layouts reads the wrong rows), and 3 query heads sharing one
// key/value head over more than two key tiles.
constexpr cpu::AttentionDims kGqaPairs{.batch = 2, .seq = 67, .heads = 4, .head_dim = 40, .kv_heads = 2};
constexpr cpu::AttentionDims kGqaShared{.batch = 1, .seq = 130, .heads = 3, .head_dim = 64, .kv_heads = 1};
// Sliding windows (Mistral's): one shorter than the backward's 32-key walk and the forward's
// 64-key tiles, over GQA (so whole early tiles are skipped for some blocks and partly masked for
// others), and one longer than a tile.
constexpr cpu::AttentionDims kWindowShort{.batch = 1, .seq = 200, .heads = 2, .head_dim = 40, .kv_heads = 1,
                                          .window = 24};
constexpr cpu::AttentionDims kWindowLong{.batch = 2, .seq = 150, .heads = 1, .head_dim = 64, .window = 90};

int WindowOf(const cpu::AttentionDims& d) {  // as attention.cu passes it
  return d.window > 0 && d.window < d.seq ? static_cast<int>(d.window) : 0;
}

struct Shape {
  cpu::AttentionDims d;
  double qk_range;  // q and k uniform in [-qk_range, qk_range): larger gives a peakier softmax
};

std::string Name(const cpu::AttentionDims& d) {
  return "batch " + std::to_string(d.batch) + " seq " + std::to_string(d.seq) + " heads " +
         std::to_string(d.heads) + " kv_heads " + std::to_string(d.kv()) + " head_dim " +
         std::to_string(d.head_dim) + " window " + std::to_string(d.window);
}

// q, k (uniform in +-qk_range), v and dout (in +-1), rounded to bf16: as floats for the CPU
// twin and stored for the kernels. k and v have kv_heads heads (grouped-query attention).
struct Inputs {
  std::vector<float> q, k, v, dout;
  std::vector<Bf16> qs, ks, vs, douts;
};
Inputs MakeInputs(const Shape& shape, uint64_t seed) {
  const cpu::AttentionDims& d = shape.d;
  const int64_t n = d.batch * d.seq * d.hidden(), kv_n = d.batch * d.seq * d.kv_hidden();
  Inputs in;
  in.q = RoundedTo<Bf16>(Random(seed, n, -shape.qk_range, shape.qk_range));
  in.k = RoundedTo<Bf16>(Random(seed + 1, kv_n, -shape.qk_range, shape.qk_range));
  in.v = RoundedTo<Bf16>(Random(seed + 2, kv_n, -1, 1));
  in.dout = RoundedTo<Bf16>(Random(seed + 3, n, -1, 1));
  in.qs = Stored<Bf16>(in.q);
  in.ks = Stored<Bf16>(in.k);
  in.vs = Stored<Bf16>(in.v);
  in.douts = Stored<Bf16>(in.dout);
  return in;
}

template <int kD, int kMTiles = flash_mma::kForwardMTiles>
void RunForward(const std::vector<Bf16>& q, const std::vector<Bf16>& k, const std::vector<Bf16>& v,
                std::vector<Bf16>& o, std::vector<float>& lse, const cpu::AttentionDims& d) {
  const float scale_log2 =
      static_cast<float>(1.0 / std::sqrt(static_cast<double>(d.head_dim))) * 1.4426950408889634f;
  constexpr int kRows = flash_mma::ForwardRows<kMTiles>();
  const dim3 grid{static_cast<unsigned>((d.seq + kRows - 1) / kRows),
                  static_cast<unsigned>(d.heads), static_cast<unsigned>(d.batch)};
  Launch(grid, dim3{flash_mma::kThreads, 1, 1}, [&] {
    flash_mma::FlashForwardMmaKernel<kD, kMTiles>(
        q.data(), k.data(), v.data(), o.data(), lse.data(), static_cast<int>(d.seq),
        static_cast<int>(d.heads), static_cast<int>(d.kv()), static_cast<int>(d.head_dim), WindowOf(d),
        scale_log2);
  });
}

TEST(AttentionMmaEmulatedTest, ForwardMatchesTheCpuTwin) {
  const Shape shapes[] = {{{1, 130, 1, 64}, 2.0},
                          {{2, 67, 2, 40}, 2.0},
                          {{1, 70, 1, 128}, 2.0},
                          {{1, 200, 1, 64}, 6.0},
                          {kGqaPairs, 2.0},
                          {kGqaShared, 2.0},
                          {kWindowShort, 3.0},
                          {kWindowLong, 2.0}};
  for (const Shape& shape : shapes) {
    const cpu::AttentionDims& d = shape.d;
    SCOPED_TRACE(Name(d));
    const int64_t n = d.batch * d.seq * d.hidden();
    const Inputs in =
        MakeInputs(shape, 10 * static_cast<uint64_t>(d.seq) + static_cast<uint64_t>(d.head_dim));
    const auto &q = in.q, &k = in.k, &v = in.v;
    const auto &qs = in.qs, &ks = in.ks, &vs = in.vs;
    std::vector<Bf16> o = Poisoned<Bf16>(static_cast<size_t>(n));
    std::vector<float> lse(static_cast<size_t>(d.batch * d.heads * d.seq), NAN);
    std::vector<Bf16> o1 = Poisoned<Bf16>(static_cast<size_t>(n));  // one m-tile per warp
    std::vector<float> lse1(lse.size(), NAN);
    if (d.head_dim <= 64) {
      RunForward<64, 2>(qs, ks, vs, o, lse, d);
      RunForward<64, 1>(qs, ks, vs, o1, lse1, d);
    } else {
      RunForward<128, 2>(qs, ks, vs, o, lse, d);
      RunForward<128, 1>(qs, ks, vs, o1, lse1, d);
    }

    std::vector<double> qd(q.begin(), q.end()), kd(k.begin(), k.end()), vd(v.begin(), v.end());
    std::vector<double> probs(static_cast<size_t>(d.probs_size())), o_cpu(static_cast<size_t>(n));
    cpu::AttentionForward(qd.data(), kd.data(), vd.data(), probs.data(), o_cpu.data(), d);
    const NormwiseError eo = CompareNormwise(Floats(o), o_cpu);
    EXPECT_LT(eo.error, 2e-2) << "o: " << eo.Describe();
    const NormwiseError eo1 = CompareNormwise(Floats(o1), o_cpu);
    EXPECT_LT(eo1.error, 2e-2) << "o, one m-tile per warp: " << eo1.Describe();

    // lse[b, h, i] = log(sum_j<=i exp(q_i . k_j / sqrt(head_dim))), in double.
    std::vector<double> lse_cpu(lse.size());
    const double scale = 1.0 / std::sqrt(static_cast<double>(d.head_dim));
    for (int64_t b = 0; b < d.batch; ++b) {
      for (int64_t h = 0; h < d.heads; ++h) {
        for (int64_t i = 0; i < d.seq; ++i) {
          std::vector<double> scores;
          for (int64_t j = d.first_key(i); j <= i; ++j) {
            double dot = 0;
            for (int64_t c = 0; c < d.head_dim; ++c) {
              dot += qd[((b * d.seq + i) * d.heads + h) * d.head_dim + c] *
                     kd[((b * d.seq + j) * d.kv() + h / d.group()) * d.head_dim + c];
            }
            scores.push_back(dot * scale);
          }
          double max = scores[0];
          for (double s : scores) max = std::max(max, s);
          double sum = 0;
          for (double s : scores) sum += std::exp(s - max);
          lse_cpu[static_cast<size_t>((b * d.heads + h) * d.seq + i)] = max + std::log(sum);
        }
      }
    }
    const NormwiseError el = CompareNormwise(lse, lse_cpu);
    EXPECT_LT(el.error, 1e-4) << "lse: " << el.Describe();
    const NormwiseError el1 = CompareNormwise(lse1, lse_cpu);
    EXPECT_LT(el1.error, 1e-4) << "lse, one m-tile per warp: " << el1.Describe();
  }
}

template <int kD>
void RunBackward(const std::vector<Bf16>& dout, const std::vector<Bf16>& q,
                 const std::vector<Bf16>& k, const std::vector<Bf16>& v,
                 const std::vector<float>& lse, const std::vector<float>& delta,
                 std::vector<Bf16>& dq, std::vector<Bf16>& dk, std::vector<Bf16>& dv,
                 const cpu::AttentionDims& d) {
  const float scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(d.head_dim)));
  const float scale_log2 = scale * 1.4426950408889634f;
  const unsigned heads = static_cast<unsigned>(d.heads), batch = static_cast<unsigned>(d.batch);
  const int seq = static_cast<int>(d.seq), h = static_cast<int>(d.heads);
  const int kv = static_cast<int>(d.kv()), hd = static_cast<int>(d.head_dim);
  // dk, dv: a block per key tile and key/value head, as attention.cu launches it.
  Launch(
      dim3{static_cast<unsigned>((d.seq + flash_mma::kKeys - 1) / flash_mma::kKeys),
           static_cast<unsigned>(kv), batch},
      dim3{flash_mma::kThreads, 1, 1}, [&] {
        flash_mma::FlashBackwardKeyValueMmaKernel<kD>(dout.data(), q.data(), k.data(), v.data(),
                                                      lse.data(), delta.data(), dk.data(),
                                                      dv.data(), seq, h, kv, hd, WindowOf(d), scale,
                                                      scale_log2);
      });
  Launch(
      dim3{static_cast<unsigned>((d.seq + flash_mma::kRows - 1) / flash_mma::kRows), heads, batch},
      dim3{flash_mma::kThreads, 1, 1}, [&] {
        flash_mma::FlashBackwardQueryMmaKernel<kD>(dout.data(), q.data(), k.data(), v.data(),
                                                   lse.data(), delta.data(), dq.data(), seq, h, kv,
                                                   hd, WindowOf(d), scale, scale_log2);
      });
}

// The backward kernels, given the forward's lse (from the forward kernel) and delta =
// rowsum(dout * o) (o rounded to bf16, as attention.cu's row-dot kernel sums it).
TEST(AttentionMmaEmulatedTest, BackwardMatchesTheCpuTwin) {
  const Shape shapes[] = {
      {{1, 130, 1, 64}, 2.0}, {{2, 67, 2, 40}, 2.0}, {{1, 70, 1, 128}, 2.0}, {{1, 97, 1, 64}, 6.0},
      {kGqaPairs, 2.0},       {kGqaShared, 2.0},      {kWindowShort, 3.0},    {kWindowLong, 2.0}};
  for (const Shape& shape : shapes) {
    const cpu::AttentionDims& d = shape.d;
    SCOPED_TRACE(Name(d));
    const int64_t n = d.batch * d.seq * d.hidden(), kv_n = d.batch * d.seq * d.kv_hidden();
    const Inputs in =
        MakeInputs(shape, 20 * static_cast<uint64_t>(d.seq) + static_cast<uint64_t>(d.head_dim));
    const auto &q = in.q, &k = in.k, &v = in.v, &dout = in.dout;
    const auto &qs = in.qs, &ks = in.ks, &vs = in.vs, &dos = in.douts;
    std::vector<Bf16> o = Poisoned<Bf16>(static_cast<size_t>(n));
    std::vector<float> lse(static_cast<size_t>(d.batch * d.heads * d.seq), NAN);
    std::vector<Bf16> dq = Poisoned<Bf16>(static_cast<size_t>(n));
    std::vector<Bf16> dk = Poisoned<Bf16>(static_cast<size_t>(kv_n));
    std::vector<Bf16> dv = Poisoned<Bf16>(static_cast<size_t>(kv_n));
    const std::vector<float> of = [&] {
      if (d.head_dim <= 64) {
        RunForward<64>(qs, ks, vs, o, lse, d);
      } else {
        RunForward<128>(qs, ks, vs, o, lse, d);
      }
      return Floats(o);
    }();
    std::vector<float> delta(lse.size());
    for (int64_t b = 0; b < d.batch; ++b) {
      for (int64_t i = 0; i < d.seq; ++i) {
        for (int64_t h = 0; h < d.heads; ++h) {
          float sum = 0;
          for (int64_t c = 0; c < d.head_dim; ++c) {
            const size_t at = static_cast<size_t>(((b * d.seq + i) * d.heads + h) * d.head_dim + c);
            sum += dout[at] * of[at];
          }
          delta[static_cast<size_t>((b * d.heads + h) * d.seq + i)] = sum;
        }
      }
    }
    if (d.head_dim <= 64) {
      RunBackward<64>(dos, qs, ks, vs, lse, delta, dq, dk, dv, d);
    } else {
      RunBackward<128>(dos, qs, ks, vs, lse, delta, dq, dk, dv, d);
    }

    std::vector<double> qd(q.begin(), q.end()), kd(k.begin(), k.end()), vd(v.begin(), v.end());
    std::vector<double> dod(dout.begin(), dout.end());
    std::vector<double> probs(static_cast<size_t>(d.probs_size())), o_cpu(static_cast<size_t>(n));
    cpu::AttentionForward(qd.data(), kd.data(), vd.data(), probs.data(), o_cpu.data(), d);
    std::vector<double> dq_cpu(static_cast<size_t>(n)), dk_cpu(static_cast<size_t>(kv_n)),
        dv_cpu(static_cast<size_t>(kv_n));
    cpu::AttentionBackward(dod.data(), qd.data(), kd.data(), vd.data(), probs.data(), dq_cpu.data(),
                           dk_cpu.data(), dv_cpu.data(), d);
    const NormwiseError eq = CompareNormwise(Floats(dq), dq_cpu);
    EXPECT_LT(eq.error, 2e-2) << "dq: " << eq.Describe();
    const NormwiseError ek = CompareNormwise(Floats(dk), dk_cpu);
    EXPECT_LT(ek.error, 2e-2) << "dk: " << ek.Describe();
    const NormwiseError ev = CompareNormwise(Floats(dv), dv_cpu);
    EXPECT_LT(ev.error, 2e-2) << "dv: " << ev.Describe();
  }
}

}  // namespace
}  // namespace pipecoord::kernels::cuda
