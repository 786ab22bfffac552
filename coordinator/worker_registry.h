// WorkerRegistry: the registered workers, their leases and the job each holds. A worker holds a
// job from its assignment until it says it closed every link of it (ReleaseJob), so a worker
// still finishing a job is never handed the next one; once the job's part is over on this side
// (finished, failed, cancelled or restarted) the worker is `closing`. A worker blamed for a
// broken link is `suspect`: it gets no work until a heartbeat shows it is alive (a dead one's
// lease runs out instead). The caller passes the time; no lock: the Coordinator calls it under
// its own.
#ifndef PIPECOORD_COORDINATOR_WORKER_REGISTRY_H_
#define PIPECOORD_COORDINATOR_WORKER_REGISTRY_H_

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "common/rank_layout.h"
#include "proto/worker.pb.h"
#include "proto/worker_kinds.h"

namespace pipecoord::coordinator {

struct RegisteredWorker {
  using Clock = std::chrono::steady_clock;

  // info.job_id (with rank, closing) is the job whose links the worker holds, with global_rank,
  // dp_rank and session; job_id empty: free.
  v1::WorkerInfo info;
  int global_rank = -1;
  int dp_rank = -1;
  int tp_rank = -1;
  uint64_t session = 0;
  bool suspect = false;
  bool draining = false;  // shutting down (it asked to drain its job): never handed work again
  Clock::time_point lease_expiry;
  std::vector<v1::WorkerCommand> commands;  // waiting for the worker's command stream

  bool free() const { return info.job_id().empty(); }
  // It holds that attempt of the job (closing or not).
  bool Holds(const std::string& job_id, uint64_t s) const { return info.job_id() == job_id && session == s; }
};

class WorkerRegistry {
 public:
  using Clock = RegisteredWorker::Clock;

  explicit WorkerRegistry(std::chrono::milliseconds lease) : lease_(lease) {}

  // Called with a worker's id whenever a command is queued for it (Queue, Close) or it is removed:
  // what its command stream waits on (the coordinator's StreamWakeups). Set once, before use.
  void set_on_commands(std::function<void(const std::string& id)> f) { on_commands_ = std::move(f); }
  // Queues `command` on the worker's stream.
  void Queue(RegisteredWorker& w, v1::WorkerCommand command);

  // --- Registration and leases ---
  // The id a registration gets: `requested` when set and not live, else the first
  // "worker-NNNN" not live, numbered from *next_id on (which it advances).
  std::string ChooseId(const std::string& requested, uint64_t* next_id) const;
  // Registers `id` (not live) from the request; its lease runs from `now`. A worker that still
  // holds a job given before this coordinator (re)started (held_job_id) is closing it: busy
  // until it releases it.
  RegisteredWorker& Add(const std::string& id, const v1::RegisterRequest& request, Clock::time_point now);
  // A heartbeat: the lease runs again from `now`, and a suspect is cleared. True if it was one.
  bool Renew(RegisteredWorker& worker, Clock::time_point now);
  // Ids whose lease ran out before `now`.
  std::vector<std::string> Expired(Clock::time_point now) const;
  // Forgets the worker. Returns the job it was still part of (its hold, unless closing) and its
  // rank there; job_id is empty when it held none.
  struct Left {
    std::string job_id;
    int rank = -1;
  };
  Left Remove(const std::string& id);

  RegisteredWorker* Find(const std::string& id) const;
  bool empty() const { return workers_.empty(); }
  size_t size() const { return workers_.size(); }
  // The lease the next registrations and renewals run (one already running keeps its expiry).
  void set_lease(std::chrono::milliseconds lease) { lease_ = lease; }
  // Every worker with its lease's remaining time at `now`, in id order.
  std::vector<v1::WorkerInfo> List(Clock::time_point now) const;

  // --- Holding jobs ---
  // Free workers of the device kind and worker program (proto/worker_kinds.h; "" is "builtin")
  // that are not suspect, in id order.
  std::vector<RegisteredWorker*> Available(const std::string& device_kind,
                                           const std::string& worker_kind = v1::kBuiltinWorker) const;
  // What Available(device_kind) offers a schedule "auto" job (built-in workers: only they run
  // "auto"): how many, and the smallest device memory among those that reported one (0: none did).
  struct Capacity {
    int count = 0;
    uint64_t smallest_memory_bytes = 0;
    int largest_host = 0;  // free workers on the host with the most of them
  };
  Capacity FreeCapacity(const std::string& device_kind) const;
  // The worker holds global rank `global_rank` of the job's attempt `session` (pp ranks per
  // pipeline).
  void Assign(RegisteredWorker& worker, const std::string& job_id, int global_rank, const RankLayout& layout,
              uint64_t session);
  // If worker `id` holds that attempt and is not closing it yet, it is now (free once it says
  // its links are closed), and with `cancel` it is told to stop the job.
  void Close(const std::string& id, const std::string& job_id, uint64_t session, bool cancel);
  // It released its job: free.
  void Free(RegisteredWorker& worker);
  // Blamed for a broken link (nothing if it is gone).
  void MarkSuspect(const std::string& id);

 private:
  std::chrono::milliseconds lease_;
  std::map<std::string, std::unique_ptr<RegisteredWorker>> workers_;
  std::function<void(const std::string&)> on_commands_;
};

}  // namespace pipecoord::coordinator

#endif  // PIPECOORD_COORDINATOR_WORKER_REGISTRY_H_
