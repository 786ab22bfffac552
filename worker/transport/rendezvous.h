// RendezvousFn: a job's key-value rendezvous, how ranks that cannot reach each other yet agree on
// something (NCCL's unique ids, the transport the job uses). The worker daemon wires it to the
// coordinator's Rendezvous RPC (worker/daemon/coordinator_rendezvous.h); ranks of one process
// use LocalRendezvous (local_rendezvous.h).
#ifndef PIPECOORD_WORKER_TRANSPORT_RENDEZVOUS_H_
#define PIPECOORD_WORKER_TRANSPORT_RENDEZVOUS_H_

#include <functional>
#include <string>

#include "common/status.h"

namespace pipecoord::worker {

// rendezvous(key, value) with a non-empty value publishes it under key (its answer is not
// used); with an empty value it waits until key has a value and returns it. The function bounds
// its own waits (UNAVAILABLE naming the key when nothing came); a caller passes its errors on
// with their code.
using RendezvousFn = std::function<Result<std::string>(const std::string& key, const std::string& value)>;

}  // namespace pipecoord::worker

#endif  // PIPECOORD_WORKER_TRANSPORT_RENDEZVOUS_H_
