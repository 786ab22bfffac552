// A simulated worker's command stream for the load benchmarks (gRPC's callback client, no thread
// per worker): counts assignments, keeps the last, and lets a cancelled job go (ReleaseJob) as a
// daemon does once its ranks stopped, so the worker is free again.
#ifndef PIPECOORD_BENCH_SIMULATED_WORKER_H_
#define PIPECOORD_BENCH_SIMULATED_WORKER_H_

#include <grpcpp/grpcpp.h>

#include <atomic>
#include <mutex>
#include <string>

#include "proto/worker.grpc.pb.h"

namespace pipecoord::bench {

class CommandReader final : public grpc::ClientReadReactor<v1::WorkerCommand> {
 public:
  CommandReader(v1::WorkerService::Stub* stub, const std::string& id, std::atomic<int>* assigned)
      : stub_(stub), assigned_(assigned) {
    req_.set_worker_id(id);
    stub->async()->Commands(&ctx_, &req_, this);
    StartRead(&cmd_);
    StartCall();
  }
  void OnReadDone(bool ok) override {
    if (!ok) return;
    if (cmd_.has_assign()) {
      std::lock_guard<std::mutex> lock(mu_);
      assignment_ = cmd_.assign();
      ++*assigned_;
    } else if (!cmd_.cancel_job_id().empty()) {
      // Let the job go, as a daemon does once its ranks stopped: the worker is free again.
      struct Call {
        grpc::ClientContext ctx;
        v1::ReleaseJobRequest req;
        v1::ReleaseJobResponse resp;
      };
      auto* call = new Call;
      call->req.set_worker_id(req_.worker_id());
      call->req.set_job_id(cmd_.cancel_job_id());
      {
        std::lock_guard<std::mutex> lock(mu_);
        call->req.set_session(assignment_.session());
      }
      stub_->async()->ReleaseJob(&call->ctx, &call->req, &call->resp, [call](grpc::Status) { delete call; });
    }
    StartRead(&cmd_);
  }
  void OnDone(const grpc::Status&) override { done_ = true; }
  void Cancel() { ctx_.TryCancel(); }
  bool done() const { return done_; }
  v1::Assignment assignment() {
    std::lock_guard<std::mutex> lock(mu_);
    return assignment_;
  }

 private:
  grpc::ClientContext ctx_;
  v1::CommandsRequest req_;
  v1::WorkerCommand cmd_;
  v1::WorkerService::Stub* stub_;
  std::atomic<int>* assigned_;
  std::mutex mu_;
  v1::Assignment assignment_;
  std::atomic<bool> done_{false};
};

}  // namespace pipecoord::bench

#endif  // PIPECOORD_BENCH_SIMULATED_WORKER_H_
