// LocalRun: a whole job in one process: one thread per global rank, TCP on loopback, the
// spec's backend (the CPU one unless spec.device says "cuda"), the ranks' rendezvous in memory
// (LocalRendezvous). What the pipelined-equivalence test and the pipeline benchmarks drive. Each rank runs
// through RankRun (rank_run.h), the path the worker daemons run across processes.
#ifndef PIPECOORD_WORKER_DAEMON_LOCAL_RUN_H_
#define PIPECOORD_WORKER_DAEMON_LOCAL_RUN_H_

#include <functional>
#include <map>
#include <string>
#include <vector>

#include "common/status.h"
#include "proto/job.pb.h"
#include "worker/daemon/executor.h"

namespace pipecoord::worker {

struct LocalRunResult {
  std::vector<std::vector<StepReport>> reports;  // [global rank][step]
  double wall_seconds = 0;                       // all steps, all ranks
  // With keep_final_state: what each rank's backend holds after its last step
  // (ComputeBackend::CheckpointState copied: "stage<k>/<parameter>/value", ".../adam_m", ...),
  // [global rank] name -> values. What tests compare final weights with.
  std::vector<std::map<std::string, std::vector<float>>> final_state;
};

// Where a run keeps and finds checkpoints (spec.checkpoint_every), as a daemon's
// --checkpoint-dir, and the step it starts from (> 0: resumed from the checkpoints of job_id).
struct LocalCheckpoints {
  std::string dir;
  std::string job_id = "local";
  int start_step = 0;
  int checkpoint_dp = 0;  // Assignment.checkpoint_dp: the files were written by that many replicas
};

// Plans `spec` (validated, defaults applied) and runs it. `on_step` (optional) sees each rank's
// report before it is stored, as a daemon's telemetry would. The first error to happen is
// returned, naming its global rank (the others are woken so nothing hangs).
Result<LocalRunResult> RunLocally(const v1::JobSpec& spec,
                                  const std::function<void(int global, const StepReport&)>& on_step = {},
                                  const LocalCheckpoints& checkpoints = {},
                                  bool keep_final_state = false);

// Mean loss per step over the data-parallel replicas, from the ranks that hold the loss.
std::vector<double> StepLosses(const LocalRunResult& result);

}  // namespace pipecoord::worker

#endif  // PIPECOORD_WORKER_DAEMON_LOCAL_RUN_H_
