#include "coordinator/service.h"

#include "coordinator/call_credentials.h"

namespace pipecoord::coordinator {
namespace {

// Streams wait in slices so they notice a cancelled client or a server shutting down.
constexpr auto kWaitSlice = std::chrono::milliseconds(500);

const Auth& OrOpen(const Auth* auth) {
  static const Auth open = Auth::Open();
  return auth != nullptr ? *auth : open;
}

}  // namespace

grpc::Status ToGrpc(const Status& s) {
  switch (s.code()) {
    case Code::kOk: return grpc::Status::OK;
    case Code::kInvalidArgument: return {grpc::StatusCode::INVALID_ARGUMENT, s.message()};
    case Code::kNotFound: return {grpc::StatusCode::NOT_FOUND, s.message()};
    case Code::kFailedPrecondition: return {grpc::StatusCode::FAILED_PRECONDITION, s.message()};
    case Code::kUnavailable: return {grpc::StatusCode::UNAVAILABLE, s.message()};
    case Code::kUnimplemented: return {grpc::StatusCode::UNIMPLEMENTED, s.message()};
    case Code::kPermissionDenied: return {grpc::StatusCode::PERMISSION_DENIED, s.message()};
    case Code::kResourceExhausted: return {grpc::StatusCode::RESOURCE_EXHAUSTED, s.message()};
    case Code::kUnauthenticated: return {grpc::StatusCode::UNAUTHENTICATED, s.message()};
    case Code::kInternal: break;
  }
  return {grpc::StatusCode::INTERNAL, s.message()};
}

grpc::Status JobServiceImpl::SubmitJob(grpc::ServerContext* ctx, const v1::SubmitJobRequest* req, v1::SubmitJobResponse* out) {
  if (Status st = OrOpen(auth_).CheckMutatingJobCall(CallCredentialsOf(*ctx), "SubmitJob"); !st.ok()) return ToGrpc(st);
  auto r = c_->SubmitJob(req->spec(), req->dry_run());
  if (r.ok()) *out = *r;
  return ToGrpc(r.status());
}

grpc::Status JobServiceImpl::GetJob(grpc::ServerContext*, const v1::GetJobRequest* req, v1::Job* out) {
  auto r = c_->GetJob(req->job_id());
  if (r.ok()) *out = *r;
  return ToGrpc(r.status());
}

grpc::Status JobServiceImpl::ListJobs(grpc::ServerContext*, const v1::ListJobsRequest*, v1::ListJobsResponse* out) {
  for (auto& j : c_->ListJobs()) *out->add_jobs() = std::move(j);
  return grpc::Status::OK;
}

grpc::Status JobServiceImpl::CancelJob(grpc::ServerContext* ctx, const v1::CancelJobRequest* req, v1::CancelJobResponse* out) {
  if (Status st = OrOpen(auth_).CheckMutatingJobCall(CallCredentialsOf(*ctx), "CancelJob"); !st.ok()) return ToGrpc(st);
  auto r = c_->CancelJob(req->job_id(), req->checkpoint());
  if (r.ok()) out->set_state(*r);
  return ToGrpc(r.status());
}

grpc::Status JobServiceImpl::WatchJob(grpc::ServerContext* ctx, const v1::WatchJobRequest* req,
                                      grpc::ServerWriter<v1::JobUpdate>* writer) {
  size_t cursor = 0;
  bool finished = false;
  while (!finished && !ctx->IsCancelled()) {
    std::vector<v1::JobUpdate> updates;
    Status st = c_->WaitJobUpdates(req->job_id(), &cursor, &updates, Clock::now() + kWaitSlice, &finished);
    if (!st.ok()) return ToGrpc(st);
    for (const auto& u : updates) {
      if (!writer->Write(u)) return grpc::Status::CANCELLED;
    }
  }
  return grpc::Status::OK;
}

grpc::Status JobServiceImpl::ListWorkers(grpc::ServerContext*, const v1::ListWorkersRequest*, v1::ListWorkersResponse* out) {
  for (auto& w : c_->ListWorkers()) *out->add_workers() = std::move(w);
  return grpc::Status::OK;
}

grpc::Status JobServiceImpl::GetTrace(grpc::ServerContext*, const v1::GetTraceRequest* req, v1::GetTraceResponse* out) {
  auto r = c_->Trace(req->job_id());
  if (r.ok()) out->set_perfetto_json(*r);
  return ToGrpc(r.status());
}

grpc::Status WorkerServiceImpl::Register(grpc::ServerContext* ctx, const v1::RegisterRequest* req, v1::RegisterResponse* out) {
  const Auth& auth = OrOpen(auth_);
  auto id = auth.RegisterAs(CallCredentialsOf(*ctx), req->worker_id());
  if (!id.ok()) return ToGrpc(id.status());
  v1::RegisterRequest request = *req;
  request.set_worker_id(*id);
  auto r = c_->Register(request, /*id_from_credentials=*/!auth.open());
  if (r.ok()) *out = *r;
  return ToGrpc(r.status());
}

grpc::Status WorkerServiceImpl::Heartbeat(grpc::ServerContext* ctx, const v1::HeartbeatRequest* req, v1::HeartbeatResponse* out) {
  if (Status st = OrOpen(auth_).CheckWorker(CallCredentialsOf(*ctx), req->worker_id()); !st.ok()) return ToGrpc(st);
  auto r = c_->Heartbeat(*req);
  if (r.ok()) *out = *r;
  return ToGrpc(r.status());
}

grpc::Status WorkerServiceImpl::Commands(grpc::ServerContext* ctx, const v1::CommandsRequest* req,
                                         grpc::ServerWriter<v1::WorkerCommand>* writer) {
  if (Status st = OrOpen(auth_).CheckWorker(CallCredentialsOf(*ctx), req->worker_id()); !st.ok()) return ToGrpc(st);
  while (!ctx->IsCancelled()) {
    std::vector<v1::WorkerCommand> commands;
    Status st = c_->WaitCommands(req->worker_id(), &commands, Clock::now() + kWaitSlice);
    if (!st.ok()) return ToGrpc(st);
    for (size_t i = 0; i < commands.size(); ++i) {
      if (!writer->Write(commands[i])) {
        // The stream broke: the worker reads these when it opens the next one.
        c_->ReturnCommands(req->worker_id(), std::vector<v1::WorkerCommand>(commands.begin() + i, commands.end()));
        return grpc::Status::CANCELLED;
      }
    }
  }
  return grpc::Status::CANCELLED;
}

grpc::Status WorkerServiceImpl::ReportResult(grpc::ServerContext* ctx, const v1::ReportResultRequest* req, v1::ReportResultResponse*) {
  if (Status st = OrOpen(auth_).CheckWorker(CallCredentialsOf(*ctx), req->worker_id()); !st.ok()) return ToGrpc(st);
  return ToGrpc(c_->ReportResult(*req));
}

grpc::Status WorkerServiceImpl::ReleaseJob(grpc::ServerContext* ctx, const v1::ReleaseJobRequest* req, v1::ReleaseJobResponse*) {
  if (Status st = OrOpen(auth_).CheckWorker(CallCredentialsOf(*ctx), req->worker_id()); !st.ok()) return ToGrpc(st);
  return ToGrpc(c_->ReleaseJob(*req));
}

grpc::Status WorkerServiceImpl::Drain(grpc::ServerContext* ctx, const v1::DrainRequest* req, v1::DrainResponse* out) {
  if (Status st = OrOpen(auth_).CheckWorker(CallCredentialsOf(*ctx), req->worker_id()); !st.ok()) return ToGrpc(st);
  auto r = c_->Drain(*req);
  if (r.ok()) *out = *r;
  return ToGrpc(r.status());
}

grpc::Status WorkerServiceImpl::Rendezvous(grpc::ServerContext* ctx, const v1::RendezvousRequest* req, v1::RendezvousResponse* out) {
  // The worker id travels in metadata so the request message stays a plain key-value.
  const CallCredentials creds = CallCredentialsOf(*ctx);
  if (auto id = OrOpen(auth_).WorkerIdentity(creds); !id.ok()) return ToGrpc(id.status());
  auto it = ctx->client_metadata().find("worker-id");
  if (it == ctx->client_metadata().end()) return {grpc::StatusCode::INVALID_ARGUMENT, "metadata worker-id: required"};
  const std::string worker_id(it->second.data(), it->second.size());
  if (Status st = OrOpen(auth_).CheckWorker(creds, worker_id); !st.ok()) return ToGrpc(st);
  auto r = c_->Rendezvous(worker_id, *req, Clock::now() + std::chrono::seconds(60));
  if (r.ok()) *out = *r;
  return ToGrpc(r.status());
}

grpc::Status WorkerServiceImpl::Telemetry(grpc::ServerContext* ctx, grpc::ServerReader<v1::TelemetryBatch>* reader, v1::TelemetryAck* ack) {
  const CallCredentials creds = CallCredentialsOf(*ctx);
  if (auto id = OrOpen(auth_).WorkerIdentity(creds); !id.ok()) return ToGrpc(id.status());
  v1::TelemetryBatch batch;
  while (reader->Read(&batch)) {
    if (Status st = OrOpen(auth_).CheckWorker(creds, batch.worker_id()); !st.ok()) return ToGrpc(st);
    Status st = c_->IngestTelemetry(batch, ack);
    if (!st.ok()) return ToGrpc(st);
  }
  return grpc::Status::OK;
}

grpc::Status WorkerServiceImpl::Deregister(grpc::ServerContext* ctx, const v1::DeregisterRequest* req,
                                           v1::DeregisterResponse*) {
  if (Status st = OrOpen(auth_).CheckWorker(CallCredentialsOf(*ctx), req->worker_id()); !st.ok()) return ToGrpc(st);
  return ToGrpc(c_->Deregister(req->worker_id()));
}

}  // namespace pipecoord::coordinator
