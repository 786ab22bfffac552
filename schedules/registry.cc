#include "schedules/registry.h"

#include <string>
#include <utility>

#include "schedules/comm_pass.h"
#include "schedules/reduce_grads.h"
#include "schedules/validator.h"

namespace pipecoord::schedules {

const std::vector<ScheduleInfo>& AllSchedules() {
  static const std::vector<ScheduleInfo> kSchedules = {
      {"fthenb", "all forwards, then all backwards (GPipe)", GenerateFThenB, 1, 1, false},
      {"1f1b", "warm-up, one forward one backward, cool-down (PipeDream-flush)",
       GenerateOneFOneB, 1, 1, false},
      {"eager-1f1b", "1F1B with one more warm-up forward per rank to overlap send/recv",
       GenerateEagerOneFOneB, 1, 1, false},
      {"interleaved", "interleaved 1F1B over v chunks per rank (Narayanan et al. 2021)",
       GenerateInterleaved, 2, 0, false},
      {"looped-bfs", "breadth-first over chunks: every micro-batch through chunk 0, then 1, ...",
       GenerateLoopedBfs, 2, 0, false},
      {"zbh1", "Zero Bubble ZB-H1: B/W split, 1F1B's peak activations (Qi et al. 2024)",
       GenerateZbh1, 1, 1, true},
      {"zbh2", "Zero Bubble ZB-H2: twice the warm-up, bubble near zero (Qi et al. 2024)",
       GenerateZbh2, 1, 1, true},
      {"zb-auto", "memory-limited zero-bubble search over the cost model (Qi et al. 2024)",
       GenerateZbAuto, 1, 1, true},
      {"zbv", "ZB-V: two chunks per rank in a V, 1F1B's memory (Qi et al. 2024)", GenerateZbv,
       2, 2, true, true},
      {"v-half", "V schedule with about half of 1F1B's activations (Qi et al. 2024b)",
       GenerateVHalf, 2, 2, true, true},
      {"v-min", "V schedule with about a third of 1F1B's activations (Qi et al. 2024b)",
       GenerateVMin, 2, 2, true, true},
      {"dualpipev", "DualPipeV (DeepSeek): V placement, micro-batches fed from both ends",
       GenerateDualPipeV, 2, 2, true, true},
      {"v-auto", "memory-limited search over V schedules (Qi et al. 2024b)", GenerateVAuto, 2, 2, true, true},
      {"csv", "a schedule imported from PyTorch pipelining's CSV format", GenerateFromCsv, 1, 0,
       false},
  };
  return kSchedules;
}

Result<const ScheduleInfo*> FindSchedule(std::string_view name) {
  std::string known;
  for (const ScheduleInfo& info : AllSchedules()) {
    if (name == info.name) return &info;
    known += (known.empty() ? "" : ", ") + std::string(info.name);
  }
  return NotFound("schedule: unknown name \"" + std::string(name) + "\" (known: " + known + ")");
}

Result<Schedule> GenerateComputeOrder(std::string_view name, ScheduleSpec spec) {
  auto info = FindSchedule(name);
  if (!info.ok()) return InvalidArgument(info.status().message());
  const ScheduleInfo& si = **info;
  if (spec.pp < 1) return InvalidArgument("pp: must be >= 1, got " + std::to_string(spec.pp));
  if (spec.microbatches < 1) {
    return InvalidArgument("microbatches: must be >= 1, got " + std::to_string(spec.microbatches));
  }
  if (spec.vpp < 0) return InvalidArgument("vpp: must be >= 1, got " + std::to_string(spec.vpp));
  if (spec.vpp == 0) spec.vpp = si.default_vpp;
  if (si.required_vpp != 0 && spec.vpp != si.required_vpp) {
    return InvalidArgument("vpp: schedule " + std::string(si.name) + " places exactly " +
                           std::to_string(si.required_vpp) + " chunk(s) per rank, got " +
                           std::to_string(spec.vpp));
  }
  // Bounds that keep every table the engine builds reasonable (pp x vpp x m actions).
  if (spec.pp > 4096) return InvalidArgument("pp: must be <= 4096, got " + std::to_string(spec.pp));
  if (spec.vpp > 64) return InvalidArgument("vpp: must be <= 64, got " + std::to_string(spec.vpp));
  if (spec.microbatches > 1 << 20) {
    return InvalidArgument("microbatches: must be <= 1048576, got " + std::to_string(spec.microbatches));
  }
  if (static_cast<long long>(spec.pp) * spec.vpp * spec.microbatches > 50'000'000) {
    return InvalidArgument("pp x vpp x microbatches: must be <= 50000000 actions per step");
  }
  PIPECOORD_RETURN_IF_ERROR(ValidateCostModel(spec.costs, spec.pp, spec.pp * spec.vpp));
  if (!(spec.mem_limit >= 0)) return InvalidArgument("mem-limit: must be >= 0");
  auto schedule = si.generate(spec);
  if (schedule.ok()) schedule->name = si.name;
  return schedule;
}

Result<std::vector<int>> PlaceStages(std::string_view name, const ScheduleSpec& spec) {
  auto info = FindSchedule(name);
  if (!info.ok()) return InvalidArgument(info.status().message());
  if (std::string_view((*info)->name) == "csv") {
    auto imported = GenerateComputeOrder(name, spec);  // a parse, no search
    if (!imported.ok()) return imported.status();
    return imported->stage_to_rank;
  }
  const int vpp = spec.vpp == 0 ? (*info)->default_vpp : spec.vpp;
  if (spec.pp < 1 || vpp < 1) return InvalidArgument("pp and vpp: must be >= 1");
  return (*info)->v_placement ? VPlacement(spec.pp) : LoopedPlacement(spec.pp, vpp);
}

Result<Schedule> BuildSchedule(std::string_view name, const ScheduleSpec& spec) {
  auto compute = GenerateComputeOrder(name, spec);
  if (!compute.ok()) return compute.status();
  if (spec.reduce_grads) *compute = AddReduceGrads(std::move(compute).value());
  Schedule full;
  if (compute->HasCommunication()) {
    full = std::move(compute).value();  // an imported schedule that brings its own
  } else {
    auto with_comm = AddCommunication(*compute, spec.costs);
    if (!with_comm.ok()) return InvalidArgument("schedule " + std::string(name) + ": " + with_comm.status().message());
    full = std::move(with_comm).value();
  }
  Status st = Validate(full);
  if (!st.ok()) return InvalidArgument("schedule " + std::string(name) + " is invalid: " + st.message());
  return full;
}

}  // namespace pipecoord::schedules
