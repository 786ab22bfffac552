#include "planner/step_time.h"

#include <gtest/gtest.h>

#include "memory/presets.h"

namespace pipecoord::planner {
namespace {

TEST(StepTimeTest, BlockFlopsAreTheTextbookCount) {
  // GPT block with f = 4h: 24 s b h^2 linear + 4 s^2 b h core (Narayanan et al. 2021).
  memory::ModelSpec m = *memory::FindModelPreset("gpt3-22b");
  const double s = 2048, b = 4, h = 6144;
  BlockFlops f = ForwardBlockFlops(m, 4, 1);
  EXPECT_DOUBLE_EQ(f.linear, 24 * s * b * h * h);
  EXPECT_DOUBLE_EQ(f.core, 4 * s * s * b * h);
  BlockFlops t8 = ForwardBlockFlops(m, 4, 8);
  EXPECT_DOUBLE_EQ(t8.linear, f.linear / 8);
  EXPECT_DOUBLE_EQ(ForwardHeadFlops(m, 4, 8), 2 * s * b * h * 51200 / 8);
}

StrategyShape Shape(int m, int zero) {
  StrategyShape s;
  s.dp = 8;
  s.tp = 1;
  s.pp = 1;
  s.microbatches = m;
  s.zero = zero;
  s.bottleneck_layers = 32;
  s.bottleneck_has_head = true;
  s.params_per_rank = 6'738'415'616;
  return s;
}

TEST(StepTimeTest, DataParallelExchangeRunsOncePerStep) {
  memory::ModelSpec m = *memory::FindModelPreset("llama2-7b");
  ClusterSpec c;
  c.gpus = 8;
  for (int zero : {0, 1, 2}) {
    StepTime one = EstimateStepTime(m, c, Shape(1, zero));
    StepTime eight = EstimateStepTime(m, c, Shape(8, zero));
    EXPECT_DOUBLE_EQ(one.dp_comm_s, eight.dp_comm_s) << "zero " << zero;  // after accumulation
    EXPECT_DOUBLE_EQ(eight.compute_s, 8 * one.compute_s);
  }
  // All-reduce of fp32 gradients inside one node: 2 (d-1)/d x bytes / bandwidth + latency.
  StepTime z0 = EstimateStepTime(m, c, Shape(1, 0));
  EXPECT_DOUBLE_EQ(z0.dp_comm_s, 2.0 * 7 / 8 * 6'738'415'616.0 * 4 / c.intra_node_bandwidth + 14 * c.link_latency_s);
  // ZeRO-3 gathers the weights for every micro-batch.
  EXPECT_GT(EstimateStepTime(m, c, Shape(8, 3)).dp_comm_s, EstimateStepTime(m, c, Shape(1, 3)).dp_comm_s);
}

TEST(StepTimeTest, BubbleScalesThePipeline) {
  memory::ModelSpec m = *memory::FindModelPreset("llama2-7b");
  ClusterSpec c;
  c.gpus = 8;
  StrategyShape s = Shape(8, 0);
  s.bubble_rate = 0.25;
  StepTime t = EstimateStepTime(m, c, s);
  EXPECT_DOUBLE_EQ(t.bubble_s, (t.compute_s + t.tp_comm_s) / 3);
  s.recompute = memory::Recompute::kFull;
  EXPECT_GT(EstimateStepTime(m, c, s).compute_s, t.compute_s);
}

}  // namespace
}  // namespace pipecoord::planner
