// StageWorkFactors: the head's stage carries the head's FLOPs on top of its blocks' (exact
// values from the formula written out here), every other stage 1.
#include "jobplan/stage_work.h"

#include <gtest/gtest.h>

#include "jobplan/plan_job.h"
#include "jobplan/spec_validation.h"
#include "jobplan/tiny_spec_for_tests.h"

namespace pipecoord::jobplan {
namespace {

TEST(StageWorkTest, TheHeadStageCarriesTheHeadsFlops) {
  // TinySpec: 4 blocks on pp 2, h 32, ffn 128 (8h/3 rounded up to 64), s 8, vocabulary 64.
  const v1::JobSpec spec = WithDefaults(TinySpec());
  ASSERT_EQ(spec.model().ffn_hidden(), 128);
  auto plan = PlanJob(spec);
  ASSERT_TRUE(plan.ok()) << plan.status().ToString();
  const double block = 2 * (4 * 32 * 32 + 3 * 32 * 128) + 4 * 8 * 32;  // 33792
  const double head = 2 * 32 * 64;                                      // 4096
  const std::vector<double> f = StageWorkFactors(spec, *plan);
  ASSERT_EQ(f.size(), 2u);
  EXPECT_DOUBLE_EQ(f[0], 1.0);
  EXPECT_DOUBLE_EQ(f[1], (2 * block + head) / (2 * block));
  EXPECT_DOUBLE_EQ(f[1], 71680.0 / 67584.0);
}

TEST(StageWorkTest, UnevenStagesAndAHeadWithoutBlocks) {
  v1::JobSpec spec = TinySpec();
  spec.add_stage_layers(3);
  spec.add_stage_layers(1);
  spec = WithDefaults(spec);
  auto plan = PlanJob(spec);
  ASSERT_TRUE(plan.ok()) << plan.status().ToString();
  EXPECT_DOUBLE_EQ(StageWorkFactors(spec, *plan)[1], (33792.0 + 4096.0) / 33792.0);
  // A plan whose head stage holds no block: nothing to correct.
  v1::Plan p = *plan;
  p.mutable_shards(1)->set_num_layers(0);
  EXPECT_DOUBLE_EQ(StageWorkFactors(spec, p)[1], 1.0);
}

}  // namespace
}  // namespace pipecoord::jobplan
