#include "coordinator/health/memory_budget.h"

#include <gtest/gtest.h>

#include "coordinator/health/test_spec.h"

namespace pipecoord::coordinator::health {
namespace {

TEST(MemoryBudget, TinyModelByHand) {
  // h 32, f 128 (8h/3 rounded up to 64), a 4, s 8, V 64, b 2: 16 tokens per micro-batch.
  const v1::JobSpec spec = TestSpec();
  const v1::Plan plan = PlanJob(spec).value();
  const auto e = EstimateRankMemory(spec, plan);
  ASSERT_EQ(e.size(), 2u);
  // Rank 0: 2 blocks (4h^2 + 3hf + 2h = 16448 each) and the embedding (Vh = 2048), 16 B each.
  EXPECT_EQ(e[0].parameter_bytes, 16u * (2 * 16448 + 2048));
  // Per micro-batch: 2 blocks x 16 tokens x (12h + 3f + as + 2 = 802) floats, plus the embedding's
  // 16 x (4 + 4h) bytes.
  EXPECT_EQ(e[0].microbatch_bytes, 2u * 16 * 802 * 4 + 16 * (4 + 128));
  EXPECT_EQ(e[0].peak_microbatches, 2);  // 1f1b: p - r micro-batches in flight
  EXPECT_EQ(e[0].budget_bytes, 960800u);  // (559104 + 2 x 104768) x 1.25
  // Rank 1: 2 blocks and the head (h + Vh params; 16 x ((3h + 2V + 2) x 4 + 4) bytes).
  EXPECT_EQ(e[1].parameter_bytes, 16u * (2 * 16448 + 32 + 2048));
  EXPECT_EQ(e[1].microbatch_bytes, 2u * 16 * 802 * 4 + 16 * ((96 + 128 + 2) * 4 + 4));
  EXPECT_EQ(e[1].peak_microbatches, 1);
  EXPECT_EQ(plan.memory_budget_bytes(0), 960800u);
  EXPECT_EQ(plan.memory_budget_bytes(1), e[1].budget_bytes);
}

}  // namespace
}  // namespace pipecoord::coordinator::health
