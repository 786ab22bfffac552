// PyTorch's OVERLAP_F_B, UNSHARD, RESHARD and REDUCE_GRAD in a job: the wire carries them
// (plan_convert_test's every-op round trip), but no worker runs the first three (nor cuda workers
// REDUCE_GRAD), so a JobSpec whose CSV schedule has one is refused, naming the action, and never
// reaches a worker. CPU workers run REDUCE_GRAD (data_parallel_plan_test).
#include <gtest/gtest.h>

#include <string>

#include "jobplan/plan_convert.h"
#include "jobplan/plan_job.h"
#include "jobplan/spec_validation.h"
#include "jobplan/tiny_spec_for_tests.h"
#include "schedules/csv_format.h"

namespace pipecoord::jobplan {
namespace {

namespace sch = pipecoord::schedules;

v1::JobSpec CsvSpec(const std::string& csv, int microbatches) {
  v1::JobSpec s = TinySpec(2, "csv");
  s.set_microbatches(microbatches);
  s.set_csv_schedule(csv);
  return s;
}

TEST(PyTorchActionsPlanTest, WorkersDoNotRunThemSoThePlanIsRefused) {
  const struct {
    const char* csv;
    int microbatches;
    const char* message;
  } cases[] = {
      {"0UNSHARD,0F0,0B0,0RESHARD\n1F0,1B0\n", 1,
       "spec.csvSchedule: rank 0, position 0 (0UNSHARD): the workers do not run UNSHARD (they run F, B, W, BW, "
       "SEND/RECV, PROBE, OPT, OVERLAP_F_B (its F and backward one after the other) and, on the CPU, REDUCE_GRAD)"},
      {"0F0,0F1,0B0,0B1\n1UNSHARD,1F0,1F1,1B0,1B1,1RESHARD\n", 2,
       "spec.csvSchedule: rank 1, position 0 (1UNSHARD): the workers do not run UNSHARD (they run F, B, W, "
       "BW, SEND/RECV, PROBE, OPT, OVERLAP_F_B (its F and backward one after the other) and, on the CPU, REDUCE_GRAD)"},
  };
  for (const auto& c : cases) {
    const v1::JobSpec spec = CsvSpec(c.csv, c.microbatches);
    ASSERT_TRUE(ValidateJobSpec(spec).ok()) << ValidateJobSpec(spec).ToString();
    auto plan = PlanJob(WithDefaults(spec));
    ASSERT_FALSE(plan.ok()) << c.csv;
    EXPECT_EQ(plan.status().code(), Code::kInvalidArgument);
    EXPECT_EQ(plan.status().message(), c.message);
  }
  // Without them the same file plans, and REDUCE_GRAD plans for CPU workers, and OVERLAP_F_B.
  EXPECT_TRUE(PlanJob(WithDefaults(CsvSpec("0F0,0F1,0B0,0B1\n1F0,(1F1;1B0)OVERLAP_F_B,1B1\n", 2))).ok());
  EXPECT_TRUE(PlanJob(WithDefaults(CsvSpec("0F0,0B0\n1F0,1B0\n", 1))).ok());
  EXPECT_TRUE(PlanJob(WithDefaults(CsvSpec("0F0,0B0,0REDUCE_GRAD\n1F0,1B0,1REDUCE_GRAD\n", 1))).ok());
}

TEST(PyTorchActionsPlanTest, CheckWorkersRunNamesTheFirst) {
  auto s = sch::ParseScheduleCsv("0F0,0B0,0REDUCE_GRAD\n1F0,1B0,1REDUCE_GRAD\n");
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(CheckWorkersRun(*s, "cuda").message(),
            "rank 0, position 2 (0REDUCE_GRAD): cuda workers do not run REDUCE_GRAD (they all-reduce every gradient at "
            "OPT); CPU workers do");
  EXPECT_TRUE(CheckWorkersRun(*s, "cpu").ok());
  EXPECT_TRUE(CheckWorkersRun(*s, "").ok());
  s->ranks[0].insert(s->ranks[0].begin(), sch::Action{sch::Op::kUnshard, 0, -1, -1});
  EXPECT_EQ(CheckWorkersRun(*s, "cpu").message(),
            "rank 0, position 0 (0UNSHARD): the workers do not run UNSHARD (they run F, B, W, BW, SEND/RECV, PROBE, "
            "OPT, OVERLAP_F_B (its F and backward one after the other) and, on the CPU, REDUCE_GRAD)");
  s->ranks[0].erase(s->ranks[0].begin());
  s->ranks[0].pop_back();
  s->ranks[1].pop_back();
  EXPECT_TRUE(CheckWorkersRun(*s, "cuda").ok());
  // On the wire they keep their names and fields (the executor refuses them by name).
  const v1::Action p = ToProto(sch::Action{sch::Op::kUnshard, 1, -1, -1});
  EXPECT_EQ(p.op(), v1::UNSHARD);
  EXPECT_EQ(p.microbatch(), -1);
  EXPECT_EQ(FromProto(p), (sch::Action{sch::Op::kUnshard, 1, -1, -1}));
  EXPECT_EQ(ToProto(sch::Action{sch::Op::kOverlapFB, 0, 3, -1}).op(), v1::OVERLAP_F_B);
}

}  // namespace
}  // namespace pipecoord::jobplan
