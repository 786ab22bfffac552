// The gRPC services: each handler checks the call's credentials (Auth), unpacks the request, calls
// Coordinator, and maps the Status to a gRPC code. No logic lives here.
//
// The calls that wait (a worker's command stream, its telemetry and heartbeat streams, WatchJob, a Rendezvous)
// use gRPC's callback API: a reactor per call, woken by the coordinator when its worker's or job's
// state changed (Coordinator::SubscribeCommands, SubscribeJobUpdates, RendezvousAsync), so no
// thread is held per connected worker (16k workers were 32k threads with the synchronous API).
// Unary calls stay synchronous.
#ifndef PIPECOORD_COORDINATOR_SERVICE_H_
#define PIPECOORD_COORDINATOR_SERVICE_H_

#include <functional>
#include <memory>

#include <grpcpp/grpcpp.h>

#include "common/status.h"
#include "coordinator/auth.h"
#include "coordinator/coordinator.h"
#include "proto/job.grpc.pb.h"
#include "proto/worker.grpc.pb.h"

namespace pipecoord::coordinator {

grpc::Status ToGrpc(const Status& status);

// Tests only: `hook` runs on the thread about to write a server-stream message (a command, a job
// update) after the write was decided and before it is made, where a cancellation may fall in
// (service.cc, FedStream). Empty: none (the default). Not for use while streams are writing.
void SetBeforeStreamWriteForTest(std::function<void()> hook);

// `auth` (not owned, outlives the service): who may call what; null: every call is allowed.
class JobServiceImpl final : public v1::JobService::WithCallbackMethod_WatchJob<v1::JobService::Service> {
 public:
  explicit JobServiceImpl(Coordinator* c, const Auth* auth = nullptr) : c_(c), auth_(auth) {}
  grpc::Status SubmitJob(grpc::ServerContext*, const v1::SubmitJobRequest*, v1::SubmitJobResponse*) override;
  grpc::Status GetJob(grpc::ServerContext*, const v1::GetJobRequest*, v1::Job*) override;
  grpc::Status ListJobs(grpc::ServerContext*, const v1::ListJobsRequest*, v1::ListJobsResponse*) override;
  grpc::Status CancelJob(grpc::ServerContext*, const v1::CancelJobRequest*, v1::CancelJobResponse*) override;
  grpc::ServerWriteReactor<v1::JobUpdate>* WatchJob(grpc::CallbackServerContext*, const v1::WatchJobRequest*) override;
  grpc::Status ListWorkers(grpc::ServerContext*, const v1::ListWorkersRequest*, v1::ListWorkersResponse*) override;
  grpc::Status GetTrace(grpc::ServerContext*, const v1::GetTraceRequest*, v1::GetTraceResponse*) override;

 private:
  Coordinator* c_;
  const Auth* auth_;
};

class TelemetryIngest;

class WorkerServiceImpl final
    : public v1::WorkerService::WithCallbackMethod_Commands<v1::WorkerService::WithCallbackMethod_Telemetry<
          v1::WorkerService::WithCallbackMethod_Rendezvous<v1::WorkerService::WithCallbackMethod_KeepAlive<
              v1::WorkerService::Service>>>> {
 public:
  // Starts the thread that ingests telemetry (service.cc, TelemetryIngest); the service must
  // outlive the server it is registered with (its streams use the thread).
  explicit WorkerServiceImpl(Coordinator* c, const Auth* auth = nullptr);
  ~WorkerServiceImpl() override;
  grpc::Status Register(grpc::ServerContext*, const v1::RegisterRequest*, v1::RegisterResponse*) override;
  grpc::Status Heartbeat(grpc::ServerContext*, const v1::HeartbeatRequest*, v1::HeartbeatResponse*) override;
  // Heartbeats on a stream: a reactor per worker, answered on gRPC's thread (Coordinator::Heartbeat
  // never waits for the core lock).
  grpc::ServerBidiReactor<v1::HeartbeatRequest, v1::HeartbeatResponse>* KeepAlive(grpc::CallbackServerContext*) override;
  grpc::ServerWriteReactor<v1::WorkerCommand>* Commands(grpc::CallbackServerContext*, const v1::CommandsRequest*) override;
  grpc::Status ReportResult(grpc::ServerContext*, const v1::ReportResultRequest*, v1::ReportResultResponse*) override;
  grpc::Status ReleaseJob(grpc::ServerContext*, const v1::ReleaseJobRequest*, v1::ReleaseJobResponse*) override;
  grpc::ServerUnaryReactor* Rendezvous(grpc::CallbackServerContext*, const v1::RendezvousRequest*,
                                       v1::RendezvousResponse*) override;
  grpc::ServerReadReactor<v1::TelemetryBatch>* Telemetry(grpc::CallbackServerContext*, v1::TelemetryAck*) override;
  grpc::Status Deregister(grpc::ServerContext*, const v1::DeregisterRequest*, v1::DeregisterResponse*) override;
  grpc::Status Drain(grpc::ServerContext*, const v1::DrainRequest*, v1::DrainResponse*) override;

 private:
  Coordinator* c_;
  const Auth* auth_;
  std::unique_ptr<TelemetryIngest> ingest_;
};

}  // namespace pipecoord::coordinator

#endif  // PIPECOORD_COORDINATOR_SERVICE_H_
