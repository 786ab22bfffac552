// The worker programs a job can need (JobSpec.worker.kind) and a worker can be
// (RegisterRequest.worker_kind): the one place that says an empty kind means the C++ daemon's
// built-in model, for the spec validation and the coordinator's matching of jobs to workers.
#ifndef PIPECOORD_PROTO_WORKER_KINDS_H_
#define PIPECOORD_PROTO_WORKER_KINDS_H_

#include <string>
#include <string_view>

namespace pipecoord::v1 {

inline constexpr char kBuiltinWorker[] = "builtin";  // worker/daemon: the C++ model
inline constexpr char kTorchWorker[] = "torch";      // python/pipecoord/torch_worker.py: the user's module

// True for "", "builtin" and "torch".
inline bool KnownWorkerKind(std::string_view kind) {
  return kind.empty() || kind == kBuiltinWorker || kind == kTorchWorker;
}

// "" -> "builtin"; any other kind as it is.
inline std::string NormalWorkerKind(std::string_view kind) {
  return kind.empty() ? std::string(kBuiltinWorker) : std::string(kind);
}

}  // namespace pipecoord::v1

#endif  // PIPECOORD_PROTO_WORKER_KINDS_H_
