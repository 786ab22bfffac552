// RunHooks: what the executor tells the worker's health side while it walks a job list (where it
// is, for the heartbeat's progress report) and asks of it (a PROBE's checksum, injected faults
// around compute actions, memory held outside the backend). All calls come from the executor's
// thread; an implementation may block in BeforeCompute until `cancelled` turns true.
#ifndef PIPECOORD_WORKER_DAEMON_RUN_HOOKS_H_
#define PIPECOORD_WORKER_DAEMON_RUN_HOOKS_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <vector>

#include "common/status.h"
#include "kernels/cpu/known_answer_gemm.h"
#include "proto/schedule.pb.h"

namespace pipecoord::worker {

class RunHooks {
 public:
  virtual ~RunHooks() = default;
  // Action `index` of `step` starts; input_peer is the pipeline rank whose input it waits for
  // (-1: none). OnInputReady: that input is there and the action itself runs.
  virtual void OnActionStart(int step, int index, const v1::Action& action, int input_peer) = 0;
  virtual void OnInputReady() = 0;
  virtual void OnActionDone() = 0;
  // Around each compute action's kernel (inside its measured time).
  virtual Status BeforeCompute(int step, const v1::Action& action, const std::atomic<bool>& cancelled) = 0;
  virtual void AfterCompute(int step, const v1::Action& action, int64_t elapsed_ns) = 0;
  // The known-answer probe's GEMM through the rank's own training kernel, on its device:
  // y [m, n] = x [m, k] w [n, k]^T (ComputeBackend::ProbeGemm).
  using ProbeGemmFn = std::function<Status(const kernels::cpu::ProbeShape& shape, const std::vector<float>& x,
                                           const std::vector<float>& w, std::vector<float>* y)>;
  // A PROBE action: runs the numerical probe through `gemm` and returns its checksum; the
  // kernel's error (a device fault) otherwise.
  virtual Result<uint64_t> Probe(int step, const ProbeGemmFn& gemm) = 0;
  // The oom fault: bytes the executor has the backend allocate and hold from `step` on
  // (ComputeBackend::HoldBytes), returned once, at the first step the fault applies to; else 0.
  virtual uint64_t OomBytes(int step) = 0;
};

}  // namespace pipecoord::worker

#endif  // PIPECOORD_WORKER_DAEMON_RUN_HOOKS_H_
