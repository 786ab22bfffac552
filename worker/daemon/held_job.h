// HeldJob: the one job a worker daemon holds, from its assignment until it has closed every
// link of it. Stopping it reaches every phase: set-up, Connect (by shutting the transport down,
// which wakes Connect at once) and the run (the executor stops at its next action, or, when
// graceful, after the step it is in).
//
// The job's thread attaches the transport and the executor as it creates them; Cancel() from any
// other thread (the command stream, a signal) then reaches whichever exists. Thread-safe.
#ifndef PIPECOORD_WORKER_DAEMON_HELD_JOB_H_
#define PIPECOORD_WORKER_DAEMON_HELD_JOB_H_

#include <chrono>
#include <condition_variable>
#include <mutex>
#include <optional>
#include <string>

#include "proto/worker.pb.h"
#include "worker/daemon/executor.h"
#include "worker/transport/transport.h"

namespace pipecoord::worker {

class HeldJob {
 public:
  explicit HeldJob(v1::Assignment assignment) : assignment_(std::move(assignment)) {}

  const v1::Assignment& assignment() const { return assignment_; }

  // Stops the job as soon as possible, in any phase; `why` becomes the run's error. The first
  // reason given stays.
  void Cancel(const std::string& why);
  // A graceful stop (SIGTERM): a running job finishes its current step (its telemetry and
  // checkpoint complete); a job not yet running is cancelled, and, as it has done nothing, leaves
  // quietly: no failure report and no release, the worker deregisters and the coordinator queues
  // the job again. Returns true when a running step is being finished.
  bool StopGracefully();
  // A coordinated stop (the coordinator's StopAfterStep, every rank the same step): the run
  // finishes step `step`, checkpoints it and stops; applied when the executor attaches if it has
  // not yet, and kept by a later StopGracefully.
  void StopAfter(int step);
  // The run has started (its executor is attached) and is not cancelled.
  bool running() const;

  bool cancelled() const;
  // The reason given to Cancel (empty when not cancelled).
  std::string cancel_reason() const;
  // True when the job should end without a report or a release (see StopGracefully).
  bool quiet() const;

  // In-place recovery of a lost rank (jobs with jobplan::RunsStepCommit). Halt: the coordinator
  // stops the run at once to take a lost rank over: the executor stops and the data plane closes,
  // but the rank's state stays (not a cancel). Recover: the coordinator's resume for this job
  // (its generation once). WaitRecovery: the job's thread waits for it until a cancel or
  // `deadline`, and takes it (nullopt: none came).
  // after_step >= 0: not at once, but once the run finished that step (all ranks the same step).
  void Halt(int after_step = -1);
  bool halted() const;
  void Recover(v1::ResumeInPlace resume);
  std::optional<v1::ResumeInPlace> WaitRecovery(std::chrono::steady_clock::time_point deadline);

  // Its links are closed and the release is on its way: the coordinator may hand the worker its
  // next job any moment, and that is no reason to stop this one.
  void MarkReleasing();
  bool releasing() const;

  // The job's own thread. Attach makes the object reachable by Cancel; it returns false (and
  // attaches nothing) when the job is cancelled already: the caller stops. Detach before the
  // object is destroyed.
  bool AttachTransport(Transport* transport);
  bool AttachExecutor(Executor* executor);
  void Detach();

 private:
  const v1::Assignment assignment_;
  mutable std::mutex mu_;
  std::string cancel_reason_;
  bool cancelled_ = false;
  bool quiet_ = false;
  bool releasing_ = false;
  int stop_after_ = -2;  // -2: none; else a coordinated stop step
  std::condition_variable recovery_cv_;
  bool halted_ = false;
  int generation_ = 0;                      // the last recovery handed to WaitRecovery
  std::optional<v1::ResumeInPlace> recovery_;  // a recovery not taken yet
  Transport* transport_ = nullptr;
  Executor* executor_ = nullptr;
};

}  // namespace pipecoord::worker

#endif  // PIPECOORD_WORKER_DAEMON_HELD_JOB_H_
