// HealthHooks: the worker's RunHooks. Keeps the progress the heartbeat reports, runs the
// known-answer probe (kernels/cpu/known_answer_gemm.h, seeded by the job's model seed and the
// step, at the stage's largest GEMM: jobplan/probe_placement.h) and applies this rank's
// injected faults (fault_injection.h).
#ifndef PIPECOORD_WORKER_DAEMON_HEALTH_HOOKS_H_
#define PIPECOORD_WORKER_DAEMON_HEALTH_HOOKS_H_

#include <chrono>
#include <mutex>
#include <vector>

#include "kernels/cpu/known_answer_gemm.h"
#include "proto/telemetry.pb.h"
#include "proto/worker.pb.h"
#include "worker/daemon/fault_injection.h"
#include "worker/daemon/run_hooks.h"

namespace pipecoord::worker {

class HealthHooks final : public RunHooks {
 public:
  // `faults`: the rules for this worker's global rank.
  HealthHooks(const v1::Assignment& assignment, std::vector<FaultRule> faults);

  // Where the executor is now, with progress_age_ns measured at this call (the heartbeat
  // thread calls it just before sending); thread-safe.
  v1::Progress progress() const;

  void OnActionStart(int step, int index, const v1::Action& action, int input_peer) override;
  void OnInputReady() override;
  void OnActionDone() override;
  Status BeforeCompute(int step, const v1::Action& action, const std::atomic<bool>& cancelled) override;
  void AfterCompute(int step, const v1::Action& action, int64_t elapsed_ns) override;
  Result<uint64_t> Probe(int step, const ProbeGemmFn& gemm) override;
  // A corrupt rule covers `step` (from its step on).
  bool CorruptAt(int step) const;
  uint64_t OomBytes(int step) override;

 private:
  mutable std::mutex mu_;
  v1::Progress progress_;
  std::chrono::steady_clock::time_point moved_;  // when (step, action_index) last changed
  uint64_t seed_;
  kernels::cpu::ProbeShape probe_shape_;  // jobplan::ProbeGemmFor this rank's stages
  std::vector<FaultRule> faults_;
  bool oom_applied_ = false;
  bool flipped_ = false;
  bool hung_ = false;
};

}  // namespace pipecoord::worker

#endif  // PIPECOORD_WORKER_DAEMON_HEALTH_HOOKS_H_
