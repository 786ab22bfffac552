#include "worker/daemon/coordinator_rendezvous.h"

#include <algorithm>
#include <memory>
#include <utility>

namespace pipecoord::worker {
namespace {

using Clock = std::chrono::steady_clock;

Code CodeOf(grpc::StatusCode code) {
  switch (code) {
    case grpc::StatusCode::INVALID_ARGUMENT:
      return Code::kInvalidArgument;
    case grpc::StatusCode::NOT_FOUND:
      return Code::kNotFound;
    case grpc::StatusCode::PERMISSION_DENIED:
      return Code::kPermissionDenied;
    case grpc::StatusCode::UNAUTHENTICATED:
      return Code::kUnauthenticated;
    case grpc::StatusCode::FAILED_PRECONDITION:
      return Code::kFailedPrecondition;
    case grpc::StatusCode::UNIMPLEMENTED:
      return Code::kUnimplemented;
    case grpc::StatusCode::INTERNAL:
      return Code::kInternal;
    default:
      return Code::kUnavailable;  // unreachable, overloaded, the job ended: the rank cannot go on
  }
}

}  // namespace

RendezvousFn CoordinatorRendezvous(v1::WorkerService::StubInterface* stub, CoordinatorRendezvousOptions options) {
  auto o = std::make_shared<const CoordinatorRendezvousOptions>(std::move(options));
  return [stub, o](const std::string& key, const std::string& value) -> Result<std::string> {
    const bool publishing = !value.empty();
    const std::string what = std::string(publishing ? "publishing " : "waiting for ") + "\"" + key +
                             "\" at the coordinator (job " + o->job_id + ")";
    const Clock::time_point deadline = Clock::now() + o->timeout;
    v1::RendezvousRequest req;
    req.set_job_id(o->job_id);
    req.set_key(key);
    req.set_value(value);
    req.set_expected(1);
    for (;;) {
      if (o->stopped && o->stopped()) return Unavailable(what + ": the job was stopped");
      const Clock::time_point now = Clock::now();
      if (now >= deadline) {
        return Unavailable(what + ": " + (publishing ? "not answered" : "nothing was published") + " within " +
                           std::to_string(o->timeout.count()) + " ms");
      }
      const auto slice = std::min<Clock::duration>(o->slice, deadline - now);
      grpc::ClientContext ctx;
      ctx.set_deadline(std::chrono::system_clock::now() + slice);
      ctx.AddMetadata("worker-id", o->worker_id ? o->worker_id() : std::string());
      v1::RendezvousResponse resp;
      const grpc::Status st = stub->Rendezvous(&ctx, req, &resp);
      if (st.error_code() == grpc::StatusCode::DEADLINE_EXCEEDED) continue;  // the slice ended: look again
      if (!st.ok()) return Status(CodeOf(st.error_code()), what + ": " + st.error_message());
      if (publishing) return value;
      if (resp.values_size() != 1) {
        return Internal(what + ": " + std::to_string(resp.values_size()) +
                        " workers published under the key, one was expected");
      }
      return resp.values().begin()->second;
    }
  };
}

}  // namespace pipecoord::worker
