// Flash attention's stated limits (attention.h) are enforced before anything is queued, so these
// run on any machine: dimensions outside them and null buffers are INVALID_ARGUMENT.
#include <gtest/gtest.h>

#include <cstdint>

#include "kernels/cuda/attention.h"

namespace pipecoord::kernels::cuda {
namespace {

cpu::AttentionDims Dims(int64_t batch, int64_t seq, int64_t heads, int64_t head_dim) {
  cpu::AttentionDims d;
  d.batch = batch;
  d.seq = seq;
  d.heads = heads;
  d.head_dim = head_dim;
  return d;
}

TEST(AttentionLimitsTest, AcceptsTheStatedRange) {
  EXPECT_TRUE(CheckFlashAttentionDims(Dims(1, 1, 1, 1)).ok());
  EXPECT_TRUE(CheckFlashAttentionDims(Dims(1, 2048, 32, 128)).ok());
  EXPECT_TRUE(CheckFlashAttentionDims(Dims(kFlashMaxBatch, kFlashMaxSeq, kFlashMaxHeads, 77)).ok());
}

TEST(AttentionLimitsTest, RefusesEachDimensionOutsideItsRange) {
  const cpu::AttentionDims bad[] = {
      Dims(1, 16, 2, kFlashMaxHeadDim + 1),
      Dims(1, 16, 2, 0),
      Dims(0, 16, 2, 64),
      Dims(kFlashMaxBatch + 1, 16, 2, 64),
      Dims(1, 0, 2, 64),
      Dims(1, kFlashMaxSeq + 1, 2, 64),
      Dims(1, 16, 0, 64),
      Dims(1, 16, kFlashMaxHeads + 1, 64),
      Dims(1, -5, 2, 64),
  };
  for (const cpu::AttentionDims& d : bad) {
    const Status st = CheckFlashAttentionDims(d);
    EXPECT_EQ(st.code(), Code::kInvalidArgument)
        << d.batch << " " << d.seq << " " << d.heads << " " << d.head_dim << ": " << st.ToString();
  }
  EXPECT_NE(CheckFlashAttentionDims(Dims(1, 16, 2, 129)).message().find("head_dim"),
            std::string::npos);
  // Grouped-query attention: kv_heads must divide heads (0 means heads); 2 of 4 runs.
  cpu::AttentionDims gqa = Dims(1, 16, 4, 64);
  for (int64_t kv : {1, 2, 4, 0}) {
    gqa.kv_heads = kv;
    EXPECT_TRUE(CheckFlashAttentionDims(gqa).ok()) << kv;
  }
  for (int64_t kv : {3, 8, -1}) {
    gqa.kv_heads = kv;
    const Status st = CheckFlashAttentionDims(gqa);
    EXPECT_EQ(st.code(), Code::kInvalidArgument) << kv << ": " << st.ToString();
    EXPECT_NE(st.message().find("kv_heads must divide heads (4)"), std::string::npos) << st.ToString();
  }
  // Sliding windows: any length >= 1 (as long as seq or longer: plain causal), 0 none; < 0 refused.
  cpu::AttentionDims windowed = Dims(1, 16, 4, 64);
  for (int64_t w : {0, 1, 8, 16, 100}) {
    windowed.window = w;
    EXPECT_TRUE(CheckFlashAttentionDims(windowed).ok()) << w;
  }
  windowed.window = -3;
  const Status st = CheckFlashAttentionDims(windowed);
  EXPECT_EQ(st.code(), Code::kInvalidArgument) << st.ToString();
  EXPECT_NE(st.message().find("window must be >= 0"), std::string::npos) << st.ToString();
}

// The launchers refuse before touching any buffer (these addresses are never dereferenced).
TEST(AttentionLimitsTest, LaunchersRefuseBadDimsAndNullBuffersBeforeQueueing) {
  float* fake = reinterpret_cast<float*>(uintptr_t{0x1000});
  const Status head_dim =
      FlashAttentionForward(fake, fake, fake, fake, fake, Dims(1, 8, 1, 129), nullptr);
  EXPECT_EQ(head_dim.code(), Code::kInvalidArgument) << head_dim.ToString();
  const Status null_o =
      FlashAttentionForward(fake, fake, fake, nullptr, fake, Dims(1, 8, 1, 64), nullptr);
  EXPECT_EQ(null_o.code(), Code::kInvalidArgument) << null_o.ToString();
  EXPECT_NE(null_o.message().find("o is null"), std::string::npos) << null_o.message();
  const Status null_delta = FlashAttentionBackward(fake, fake, fake, fake, fake, fake, nullptr,
                                                   fake, fake, fake, Dims(1, 8, 1, 64), nullptr);
  EXPECT_EQ(null_delta.code(), Code::kInvalidArgument) << null_delta.ToString();
  const Status batch = FlashAttentionBackward(fake, fake, fake, fake, fake, fake, fake, fake, fake,
                                              fake, Dims(0, 8, 1, 64), nullptr);
  EXPECT_EQ(batch.code(), Code::kInvalidArgument) << batch.ToString();
}

}  // namespace
}  // namespace pipecoord::kernels::cuda
