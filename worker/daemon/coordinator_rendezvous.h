// CoordinatorRendezvous: the job's key-value rendezvous (worker/transport/rendezvous.h) over the
// coordinator's Rendezvous RPC, what a worker daemon hands its ranks (RankRunOptions::rendezvous)
// so that ranks in different processes agree on their transport and exchange NCCL's ids.
//
// rendezvous(key, value) with a value publishes it (Rendezvous(job_id, key, value, expected 1):
// the coordinator answers once it holds the value); with an empty value it waits for the key's
// value (value empty, expected 1) and returns the one value the coordinator holds. Each call
// names the worker in the "worker-id" metadata, as the coordinator's auth asks (the channel's
// client certificate must name the same worker when the coordinator is secured).
//
// Waits are bounded by `timeout` (UNAVAILABLE naming the key) and asked in slices of a second,
// so that a stop (`stopped` turning true) ends a wait within a slice rather than at the timeout.
// The coordinator's refusals keep their code: PERMISSION_DENIED (this worker is not part of the
// job any more), INVALID_ARGUMENT (a key or value out of bounds), UNAVAILABLE (the job ended, the
// coordinator is unreachable).
#ifndef PIPECOORD_WORKER_DAEMON_COORDINATOR_RENDEZVOUS_H_
#define PIPECOORD_WORKER_DAEMON_COORDINATOR_RENDEZVOUS_H_

#include <chrono>
#include <functional>
#include <string>

#include "proto/worker.grpc.pb.h"
#include "worker/transport/rendezvous.h"

namespace pipecoord::worker {

struct CoordinatorRendezvousOptions {
  std::string job_id;
  // The worker id the coordinator registered this worker as, read at each call (a worker that
  // registers again keeps its id, but the daemon holds it under its own lock).
  std::function<std::string()> worker_id;
  std::chrono::milliseconds timeout{30000};  // per call
  // True once the job is being stopped: a wait then gives up (UNAVAILABLE). Empty: never.
  std::function<bool()> stopped;
  // How long one RPC waits before the stop is looked at again.
  std::chrono::milliseconds slice{1000};
};

// `stub` must outlive the returned function and every call of it; calls may come from any thread.
RendezvousFn CoordinatorRendezvous(v1::WorkerService::StubInterface* stub, CoordinatorRendezvousOptions options);

}  // namespace pipecoord::worker

#endif  // PIPECOORD_WORKER_DAEMON_COORDINATOR_RENDEZVOUS_H_
