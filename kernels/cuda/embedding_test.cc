// kernels/cuda/embedding against its CPU twin (kernels/cpu/embedding.h), f32 and bf16 storage.
//
// Metric (compare.h): max over elements of |gpu - cpu| / max(|cpu|, 1e-6 + 1e-3 max|cpu|);
// thresholds 1e-4 for float outputs (out for f32, and dtable, which is float for both), 2e-2 for
// bf16 outputs. For bf16, the inputs are rounded to bf16 first and the CPU twin runs in fp32 on
// the rounded values. Forward outputs are poisoned with NaN; dtable accumulates, so it starts
// from random values (an unwritten row keeps them and fails). Ids repeat heavily (small vocab)
// or rarely (large vocab); n and dim are not multiples of the block shapes. The weight gradient
// must also be deterministic: two runs from the same start give the same bits.
#include "kernels/cuda/embedding.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

#include "kernels/cpu/embedding.h"
#include "kernels/cpu/rng.h"
#include "kernels/cuda/compare.h"
#include "kernels/cuda/gpu_test.h"

namespace pipecoord::kernels::cuda {
namespace {

struct Shape {
  int64_t n, dim, vocab;
};
constexpr Shape kShapes[] = {{1, 1, 1},       {7, 33, 3},      {1000, 257, 13},
                             {333, 300, 5000}, {4099, 64, 101}, {70, 1000, 1}};

std::vector<int32_t> RandomIds(uint64_t seed, int64_t n, int64_t vocab) {
  cpu::Rng rng(seed);
  std::vector<int32_t> ids(static_cast<size_t>(n));
  for (int32_t& id : ids) id = static_cast<int32_t>(rng.Below(static_cast<uint32_t>(vocab)));
  return ids;
}

template <typename Case>
class EmbeddingTest : public GpuTest {};
TYPED_TEST_SUITE(EmbeddingTest, ActivationTypes, DTypeNames);

TYPED_TEST(EmbeddingTest, ForwardMatchesCpuTwin) {
  using T = typename TypeParam::type;
  for (const Shape s : kShapes) {
    SCOPED_TRACE(testing::Message() << DTypeLabel<T>() << " n " << s.n << " dim " << s.dim
                                    << " vocab " << s.vocab);
    const std::vector<float> table =
        RoundedTo<T>(RandomFloats(71 + s.n, s.vocab * s.dim, -1, 1));
    const std::vector<int32_t> ids = RandomIds(72 + s.n, s.n, s.vocab);
    std::vector<float> out_cpu(s.n * s.dim);
    cpu::EmbeddingForward(table.data(), ids.data(), out_cpu.data(), s.n, s.dim);

    DeviceBuffer<T> d_table(s.vocab * s.dim), d_out(s.n * s.dim);
    DeviceBuffer<int32_t> d_ids(s.n);
    for (const Status* st : {&d_table.status(), &d_out.status(), &d_ids.status()}) {
      PIPECOORD_ASSERT_OK(*st);
    }
    PIPECOORD_ASSERT_OK(UploadFloats(d_table, table));
    PIPECOORD_ASSERT_OK(d_ids.Upload(ids));
    PIPECOORD_ASSERT_OK(d_out.Poison());
    PIPECOORD_ASSERT_OK(EmbeddingForward(d_table.get(), d_ids.get(), d_out.get(), s.n, s.dim,
                                         s.vocab, this->stream_));
    PIPECOORD_ASSERT_OK(this->Sync());
    std::vector<float> out_gpu;
    PIPECOORD_ASSERT_OK(DownloadFloats(d_out, &out_gpu));
    const Comparison c = CompareToCpu(out_gpu, out_cpu);
    EXPECT_LT(c.error, ToleranceFor<T>()) << "out: " << c.Describe();
  }
}

TYPED_TEST(EmbeddingTest, BackwardWeightMatchesCpuTwinAndIsDeterministic) {
  using T = typename TypeParam::type;
  for (const Shape s : kShapes) {
    SCOPED_TRACE(testing::Message() << DTypeLabel<T>() << " n " << s.n << " dim " << s.dim
                                    << " vocab " << s.vocab);
    const std::vector<float> dout = RoundedTo<T>(RandomFloats(81 + s.n, s.n * s.dim, -1, 1));
    const std::vector<int32_t> ids = RandomIds(82 + s.n, s.n, s.vocab);
    const std::vector<float> dtable_start = RandomFloats(83 + s.n, s.vocab * s.dim, -1, 1);
    std::vector<float> dtable_cpu = dtable_start;
    cpu::EmbeddingBackwardWeight(dout.data(), ids.data(), dtable_cpu.data(), s.n, s.dim);

    DeviceBuffer<T> d_dout(s.n * s.dim);
    DeviceBuffer<int32_t> d_ids(s.n);
    DeviceBuffer<float> d_dtable(s.vocab * s.dim);
    for (const Status* st : {&d_dout.status(), &d_ids.status(), &d_dtable.status()}) {
      PIPECOORD_ASSERT_OK(*st);
    }
    PIPECOORD_ASSERT_OK(UploadFloats(d_dout, dout));
    PIPECOORD_ASSERT_OK(d_ids.Upload(ids));
    std::vector<float> runs[2];
    for (std::vector<float>& run : runs) {
      PIPECOORD_ASSERT_OK(d_dtable.Upload(dtable_start));
      PIPECOORD_ASSERT_OK(EmbeddingBackwardWeight(d_dout.get(), d_ids.get(), d_dtable.get(), s.n,
                                                  s.dim, s.vocab, this->stream_));
      PIPECOORD_ASSERT_OK(this->Sync());
      PIPECOORD_ASSERT_OK(d_dtable.Download(&run));
    }
    const Comparison c = CompareToCpu(runs[0], dtable_cpu);
    EXPECT_LT(c.error, kFloatTolerance) << "dtable: " << c.Describe();
    ASSERT_EQ(runs[0].size(), runs[1].size());
    EXPECT_EQ(std::memcmp(runs[0].data(), runs[1].data(), runs[0].size() * sizeof(float)), 0)
        << "two runs of the weight gradient differ";
  }
}

// An id outside [0, vocab): forward writes NaN for that row (and the right rows elsewhere);
// backward leaves the table as the in-range tokens alone would.
class EmbeddingBadIdTest : public GpuTest {};

TEST_F(EmbeddingBadIdTest, NeverReachesOutsideTheTable) {
  const int64_t n = 5, dim = 7, vocab = 4;
  const std::vector<int32_t> ids = {1, -1, 3, 4, 1};
  const std::vector<float> table = RandomFloats(91, vocab * dim, -1, 1);
  const std::vector<float> dout = RandomFloats(92, n * dim, -1, 1);
  const std::vector<float> dtable_start = RandomFloats(93, vocab * dim, -1, 1);

  DeviceBuffer<float> d_table(vocab * dim), d_out(n * dim), d_dout(n * dim),
      d_dtable(vocab * dim);
  DeviceBuffer<int32_t> d_ids(n);
  for (const Status* st : {&d_table.status(), &d_out.status(), &d_dout.status(),
                           &d_dtable.status(), &d_ids.status()}) {
    PIPECOORD_ASSERT_OK(*st);
  }
  PIPECOORD_ASSERT_OK(d_table.Upload(table));
  PIPECOORD_ASSERT_OK(d_ids.Upload(ids));
  PIPECOORD_ASSERT_OK(d_dout.Upload(dout));
  PIPECOORD_ASSERT_OK(d_dtable.Upload(dtable_start));
  PIPECOORD_ASSERT_OK(d_out.Poison());
  PIPECOORD_ASSERT_OK(
      EmbeddingForward(d_table.get(), d_ids.get(), d_out.get(), n, dim, vocab, stream_));
  PIPECOORD_ASSERT_OK(EmbeddingBackwardWeight(d_dout.get(), d_ids.get(), d_dtable.get(), n, dim,
                                              vocab, stream_));
  PIPECOORD_ASSERT_OK(Sync());
  std::vector<float> out, dtable;
  PIPECOORD_ASSERT_OK(d_out.Download(&out));
  PIPECOORD_ASSERT_OK(d_dtable.Download(&dtable));
  for (int64_t r = 0; r < n; ++r) {
    for (int64_t c = 0; c < dim; ++c) {
      const float got = out[r * dim + c];
      if (ids[r] >= 0 && ids[r] < vocab) {
        EXPECT_EQ(got, table[ids[r] * dim + c]) << "row " << r << " col " << c;
      } else {
        EXPECT_TRUE(std::isnan(got)) << "row " << r << " (bad id " << ids[r] << ") col " << c;
      }
    }
  }
  // The CPU twin on the in-range tokens only (rows 0, 2, 4).
  std::vector<float> want = dtable_start;
  for (const int64_t r : {0, 2, 4}) {
    cpu::EmbeddingBackwardWeight(dout.data() + r * dim, ids.data() + r, want.data(), 1, dim);
  }
  const Comparison c = CompareToCpu(dtable, want);
  EXPECT_LT(c.error, kFloatTolerance) << "dtable: " << c.Describe();
}

TEST(EmbeddingArgumentsTest, RejectsBadShapesWithoutAGpu) {
  float* none = nullptr;
  const int32_t* no_ids = nullptr;
  EXPECT_EQ(EmbeddingForward(none, no_ids, none, 4, 8, 0, nullptr).code(),
            Code::kInvalidArgument);  // vocab 0
  EXPECT_EQ(EmbeddingForward(none, no_ids, none, 4, 8, 10, nullptr).code(),
            Code::kInvalidArgument);  // null buffers
  EXPECT_EQ(EmbeddingBackwardWeight(none, no_ids, none, -2, 8, 10, nullptr).code(),
            Code::kInvalidArgument);
  EXPECT_TRUE(EmbeddingBackwardWeight(none, no_ids, none, 0, 8, 10, nullptr).ok());
}

}  // namespace
}  // namespace pipecoord::kernels::cuda
