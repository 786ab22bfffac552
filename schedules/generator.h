// What a schedule generator takes, and the generators themselves (one per file, registered by
// name in registry.cc). A generator only decides compute order: it returns, per rank, F/B/W/BW
// actions; the communication pass, validator and simulator are shared.
#ifndef PIPECOORD_SCHEDULES_GENERATOR_H_
#define PIPECOORD_SCHEDULES_GENERATOR_H_

#include <string>

#include "common/status.h"
#include "schedules/cost_model.h"
#include "schedules/schedule.h"

namespace pipecoord::schedules {

struct ScheduleSpec {
  int pp = 1;            // pipeline degree (ranks)
  int vpp = 0;           // chunks per rank; 0: the schedule's default
  int microbatches = 1;  // micro-batches per step
  CostModel costs;       // read by the generators (each times its order with it) and the comm pass
  double mem_limit = 0;  // zb-auto, v-auto: peak activations per rank, in CostModel's units; 0: 1F1B's
  // zb-auto, v-auto: a caller that prices a schedule by its makespan alone (the planner's bubble
  // rate) takes the baseline (zbh1, zbv) unsearched when it fits the limit and already has the
  // least makespan any schedule of the shape can have (LeastStepTime), whatever its longest rank
  // span, and the search stops at the first candidate that reaches it; the search itself still
  // ranks by the longest rank span first (memory_search.h).
  bool least_makespan_suffices = false;
  std::string csv;       // the text of a PyTorch-format CSV, for the "csv" generator
  // Data parallel (dp > 1): BuildSchedule adds one REDUCE_GRAD per stage after its last W
  // (reduce_grads.h), whose cost is costs.reduce_grad.
  bool reduce_grads = false;
};

using Generator = Result<Schedule> (*)(const ScheduleSpec& spec);

// Generators. Each expects spec.vpp already resolved (never 0) and spec.pp, spec.microbatches
// >= 1, and refuses what it cannot schedule with INVALID_ARGUMENT naming the rule.
Result<Schedule> GenerateFThenB(const ScheduleSpec& spec);
Result<Schedule> GenerateOneFOneB(const ScheduleSpec& spec);
Result<Schedule> GenerateEagerOneFOneB(const ScheduleSpec& spec);
Result<Schedule> GenerateInterleaved(const ScheduleSpec& spec);
Result<Schedule> GenerateLoopedBfs(const ScheduleSpec& spec);
Result<Schedule> GenerateZbh1(const ScheduleSpec& spec);
Result<Schedule> GenerateZbh2(const ScheduleSpec& spec);
Result<Schedule> GenerateZbAuto(const ScheduleSpec& spec);
Result<Schedule> GenerateZbv(const ScheduleSpec& spec);
Result<Schedule> GenerateVHalf(const ScheduleSpec& spec);
Result<Schedule> GenerateVMin(const ScheduleSpec& spec);
Result<Schedule> GenerateDualPipeV(const ScheduleSpec& spec);
Result<Schedule> GenerateVAuto(const ScheduleSpec& spec);
Result<Schedule> GenerateFromCsv(const ScheduleSpec& spec);

}  // namespace pipecoord::schedules

#endif  // PIPECOORD_SCHEDULES_GENERATOR_H_
