#include "coordinator/service.h"

#include "coordinator/call_credentials.h"

#include <atomic>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <optional>
#include <thread>

namespace pipecoord::coordinator {
namespace {

const Auth& OrOpen(const Auth* auth) {
  static const Auth open = Auth::Open();
  return auth != nullptr ? *auth : open;
}

// A server stream fed by the coordinator: on each wakeup of its subscription (and once at start)
// it takes what is new (never blocking) and writes it in order, one message in flight at a time.
// Lives until OnDone (gRPC's callback API: `delete this` there).
//
// gRPC forbids a StartWrite after Finish: once Finish is called the call may complete, run
// OnDone and be freed while a write started later is still in flight (a use after free: the
// coordinator died with "free(): invalid pointer" when a worker was killed as its commands were
// being written). A wakeup decides under mu_ and writes after it (gRPC may run a reaction on the
// calling thread), so a finish that arrives in between (OnCancel, a failed write) is held until
// that StartWrite has been made, and made by whoever made it.
std::function<void()>& BeforeStreamWrite() {
  static std::function<void()> hook;
  return hook;
}
std::atomic<bool> before_stream_write_set{false};

template <typename Message>
class FedStream : public grpc::ServerWriteReactor<Message> {
 public:
  void OnWriteDone(bool ok) override {
    {
      std::lock_guard<std::mutex> lock(mu_);
      writing_ = false;
      if (!ok) unsent_.push_front(std::move(current_));  // the client is gone: it goes back
    }
    if (!ok) {
      FinishOnce(grpc::Status::CANCELLED);
      return;
    }
    Pump();
  }
  void OnCancel() override { FinishOnce(grpc::Status::CANCELLED); }
  void OnDone() override {
    c_->Unsubscribe(token_);  // no wakeup runs or comes after this
    Unsent(std::vector<Message>(std::make_move_iterator(unsent_.begin()), std::make_move_iterator(unsent_.end())));
    delete this;
  }

 protected:
  explicit FedStream(Coordinator* c) : c_(c) {}
  // Last in the derived constructor (the wakeups call Take): `token` from subscribing Pump.
  void Start(uint64_t token) {
    token_ = token;
    Pump();
  }
  // What is new for the stream; *end: nothing more will come (the stream finishes OK once it is
  // written). An error finishes the stream with it.
  virtual Status Take(std::vector<Message>* out, bool* end) = 0;
  // The stream ended; `unsent` (in order) never reached the client.
  virtual void Unsent(std::vector<Message> /*unsent*/) {}

  void Pump() {
    std::optional<grpc::Status> finish;
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (finishing_ || writing_) return;
      if (unsent_.empty() && !end_) {
        std::vector<Message> fresh;
        if (Status st = Take(&fresh, &end_); !st.ok()) {
          finish = ToGrpc(st);
        } else {
          for (Message& m : fresh) unsent_.push_back(std::move(m));
        }
      }
      if (!finish && unsent_.empty()) {
        if (!end_) return;
        finish = grpc::Status::OK;
      }
      if (finish) {
        finishing_ = true;
      } else {
        current_ = std::move(unsent_.front());
        unsent_.pop_front();
        writing_ = true;
        ++starting_writes_;
      }
    }
    if (finish) {
      this->Finish(*std::move(finish));
      return;
    }
    if (before_stream_write_set.load(std::memory_order_acquire)) BeforeStreamWrite()();
    this->StartWrite(&current_);
    {
      std::lock_guard<std::mutex> lock(mu_);
      // A write's completion may already have started the next one (another Pump): the last of
      // them to be made carries the held finish.
      if (--starting_writes_ == 0) {
        finish = std::move(held_finish_);
        held_finish_.reset();
      }
    }
    if (finish) this->Finish(*std::move(finish));  // one that came while StartWrite was being made
  }

  Coordinator* const c_;

 private:
  void FinishOnce(grpc::Status status) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (finishing_) return;
      finishing_ = true;
      if (starting_writes_ > 0) {  // Pump finishes it right after its StartWrite
        held_finish_ = std::move(status);
        return;
      }
    }
    this->Finish(std::move(status));
  }

  uint64_t token_ = 0;
  std::mutex mu_;
  std::deque<Message> unsent_;
  Message current_;  // in flight
  bool writing_ = false, end_ = false;
  bool finishing_ = false;       // Finish called or decided: no StartWrite after it
  int starting_writes_ = 0;      // StartWrites decided under mu_, not yet made
  std::optional<grpc::Status> held_finish_;  // a finish that came meanwhile
};

// A worker's command stream (WaitCommands). Commands the stream could not deliver go back to the
// front of the worker's queue: the worker reads them on the next stream it opens.
class CommandStream final : public FedStream<v1::WorkerCommand> {
 public:
  CommandStream(Coordinator* c, std::string worker) : FedStream(c), worker_(std::move(worker)) {
    Start(c->SubscribeCommands(worker_, [this] { Pump(); }));
  }

 private:
  Status Take(std::vector<v1::WorkerCommand>* out, bool*) override { return c_->WaitCommands(worker_, out, Clock::now()); }
  void Unsent(std::vector<v1::WorkerCommand> unsent) override {
    if (!unsent.empty()) c_->ReturnCommands(worker_, std::move(unsent));
  }
  const std::string worker_;
};

// WatchJob: the job's updates from the first on, until the job is terminal and all are written.
class WatchStream final : public FedStream<v1::JobUpdate> {
 public:
  WatchStream(Coordinator* c, std::string job) : FedStream(c), job_(std::move(job)) {
    Start(c->SubscribeJobUpdates(job_, [this] { Pump(); }));
  }

 private:
  Status Take(std::vector<v1::JobUpdate>* out, bool* end) override {
    return c_->WaitJobUpdates(job_, &cursor_, out, Clock::now(), end);
  }
  const std::string job_;
  size_t cursor_ = 0;
};

// A stream refused before it started (its credentials).
template <typename Message>
class RefusedStream final : public grpc::ServerWriteReactor<Message> {
 public:
  explicit RefusedStream(grpc::Status status) { this->Finish(std::move(status)); }
  void OnDone() override { delete this; }
};

// A worker's heartbeat stream (KeepAlive): one request read, renewed and answered at a time.
// The worker is checked against the call's credentials on every request, as the unary call does.
class KeepAliveStream final : public grpc::ServerBidiReactor<v1::HeartbeatRequest, v1::HeartbeatResponse> {
 public:
  KeepAliveStream(Coordinator* c, const Auth& auth, CallCredentials creds) : c_(c), auth_(auth), creds_(std::move(creds)) {
    if (auto id = auth_.WorkerIdentity(creds_); !id.ok()) {
      Finish(ToGrpc(id.status()));
      return;
    }
    StartRead(&request_);
  }
  void OnReadDone(bool ok) override {
    if (!ok) {  // the worker closed its side
      Finish(grpc::Status::OK);
      return;
    }
    if (Status st = auth_.CheckWorker(creds_, request_.worker_id()); !st.ok()) {
      Finish(ToGrpc(st));
      return;
    }
    auto r = c_->Heartbeat(request_);
    if (!r.ok()) {
      Finish(ToGrpc(r.status()));
      return;
    }
    response_ = *std::move(r);
    StartWrite(&response_);
  }
  void OnWriteDone(bool ok) override {
    if (!ok) {
      Finish(grpc::Status(grpc::StatusCode::UNAVAILABLE, "the heartbeat answer could not be written"));
      return;
    }
    StartRead(&request_);
  }
  void OnDone() override { delete this; }

 private:
  Coordinator* const c_;
  const Auth& auth_;
  const CallCredentials creds_;
  v1::HeartbeatRequest request_;
  v1::HeartbeatResponse response_;
};

class TelemetryStream;

}  // namespace

// One thread that ingests every telemetry stream's batches, in the order they were read. gRPC's
// threads only queue a stream here: they never wait for the core lock (they did, and at 4,096
// ranks heartbeats and command streams waited behind a step's telemetry on the same threads).
// A stream has at most one batch queued: it reads its next once this one is ingested.
class TelemetryIngest {
 public:
  static constexpr size_t kRound = 128;  // batches per round at most
  explicit TelemetryIngest(Coordinator* c) : c_(c), thread_([this] { Run(); }) {}
  ~TelemetryIngest();
  void Push(TelemetryStream* stream);
  bool idle() const { return queued_ == 0; }  // nothing queued or being ingested
  Coordinator* coordinator() const { return c_; }

 private:
  void Run();

  Coordinator* const c_;
  std::mutex mu_;
  std::condition_variable ready_;
  std::deque<TelemetryStream*> queue_;
  std::atomic<int> queued_{0};  // streams pushed and not yet answered
  bool stop_ = false;
  std::thread thread_;  // last: started once the rest exists
};

namespace {

// A worker's telemetry stream: one batch read at a time, ingested (inline or by TelemetryIngest)
// before the next is read; the ack answered when the worker closes the stream.
class TelemetryStream final : public grpc::ServerReadReactor<v1::TelemetryBatch> {
 public:
  TelemetryStream(TelemetryIngest* ingest, const Auth& auth, CallCredentials creds, v1::TelemetryAck* ack)
      : ingest_(ingest), auth_(auth), creds_(std::move(creds)), ack_(ack) {
    if (auto id = auth_.WorkerIdentity(creds_); !id.ok()) {
      Finish(ToGrpc(id.status()));
      return;
    }
    StartRead(&batch_);
  }
  void OnReadDone(bool ok) override {
    if (!ok) {  // the worker closed its side: all read
      Finish(grpc::Status::OK);
      return;
    }
    if (Status st = auth_.CheckWorker(creds_, batch_.worker_id()); !st.ok()) {
      Finish(ToGrpc(st));
      return;
    }
    // Inline while nothing waits and no round runs and the core is free (a small job: no thread
    // handoff per batch, which cost its ranks' step times on 2 shared cores); else to the ingest
    // thread. Begun inline, the round may wait briefly for the core lock to count the batch.
    if (Status st; ingest_->idle() && ingest_->coordinator()->TryIngestTelemetry(batch_, ack_, &st)) {
      Ingested(st);
      return;
    }
    ingest_->Push(this);  // Ingested follows, on the ingest thread
  }
  const v1::TelemetryBatch* batch() const { return &batch_; }
  v1::TelemetryAck* ack() const { return ack_; }
  // The ingest thread's verdict on the batch read last.
  void Ingested(const Status& st) {
    if (!st.ok()) {
      Finish(ToGrpc(st));
      return;
    }
    StartRead(&batch_);
  }
  void Abandon() { Finish(grpc::Status(grpc::StatusCode::UNAVAILABLE, "the coordinator is shutting down")); }
  void OnDone() override { delete this; }

 private:
  TelemetryIngest* const ingest_;
  const Auth& auth_;
  const CallCredentials creds_;
  v1::TelemetryAck* const ack_;
  v1::TelemetryBatch batch_;
};

}  // namespace

void SetBeforeStreamWriteForTest(std::function<void()> hook) {
  before_stream_write_set.store(false, std::memory_order_release);
  BeforeStreamWrite() = std::move(hook);
  before_stream_write_set.store(static_cast<bool>(BeforeStreamWrite()), std::memory_order_release);
}

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

grpc::ServerWriteReactor<v1::JobUpdate>* JobServiceImpl::WatchJob(grpc::CallbackServerContext*, const v1::WatchJobRequest* req) {
  return new WatchStream(c_, req->job_id());
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

grpc::ServerBidiReactor<v1::HeartbeatRequest, v1::HeartbeatResponse>* WorkerServiceImpl::KeepAlive(
    grpc::CallbackServerContext* ctx) {
  return new KeepAliveStream(c_, OrOpen(auth_), CallCredentialsOf(*ctx));
}

grpc::ServerWriteReactor<v1::WorkerCommand>* WorkerServiceImpl::Commands(grpc::CallbackServerContext* ctx,
                                                                       const v1::CommandsRequest* req) {
  if (Status st = OrOpen(auth_).CheckWorker(CallCredentialsOf(*ctx), req->worker_id()); !st.ok()) {
    return new RefusedStream<v1::WorkerCommand>(ToGrpc(st));
  }
  return new CommandStream(c_, req->worker_id());
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

grpc::ServerUnaryReactor* WorkerServiceImpl::Rendezvous(grpc::CallbackServerContext* ctx, const v1::RendezvousRequest* req,
                                                        v1::RendezvousResponse* out) {
  grpc::ServerUnaryReactor* reactor = ctx->DefaultReactor();
  // The worker id travels in metadata so the request message stays a plain key-value.
  const CallCredentials creds = CallCredentialsOf(*ctx);
  if (auto id = OrOpen(auth_).WorkerIdentity(creds); !id.ok()) {
    reactor->Finish(ToGrpc(id.status()));
    return reactor;
  }
  auto it = ctx->client_metadata().find("worker-id");
  if (it == ctx->client_metadata().end()) {
    reactor->Finish({grpc::StatusCode::INVALID_ARGUMENT, "metadata worker-id: required"});
    return reactor;
  }
  const std::string worker_id(it->second.data(), it->second.size());
  if (Status st = OrOpen(auth_).CheckWorker(creds, worker_id); !st.ok()) {
    reactor->Finish(ToGrpc(st));
    return reactor;
  }
  // Answered when the last worker of the key arrives (or after 60 s, or when the job ends): no
  // thread waits meanwhile. `out` and the reactor live until Finish's OnDone.
  c_->RendezvousAsync(worker_id, *req, Clock::now() + std::chrono::seconds(60),
                      [reactor, out](Result<v1::RendezvousResponse> r) {
                        if (r.ok()) *out = *std::move(r);
                        reactor->Finish(ToGrpc(r.status()));
                      });
  return reactor;
}

grpc::ServerReadReactor<v1::TelemetryBatch>* WorkerServiceImpl::Telemetry(grpc::CallbackServerContext* ctx, v1::TelemetryAck* ack) {
  return new TelemetryStream(ingest_.get(), OrOpen(auth_), CallCredentialsOf(*ctx), ack);
}

grpc::Status WorkerServiceImpl::Deregister(grpc::ServerContext* ctx, const v1::DeregisterRequest* req,
                                           v1::DeregisterResponse*) {
  if (Status st = OrOpen(auth_).CheckWorker(CallCredentialsOf(*ctx), req->worker_id()); !st.ok()) return ToGrpc(st);
  return ToGrpc(c_->Deregister(req->worker_id()));
}

TelemetryIngest::~TelemetryIngest() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  ready_.notify_all();
  thread_.join();
}

void TelemetryIngest::Push(TelemetryStream* stream) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!stop_) {
      ++queued_;
      queue_.push_back(stream);
      ready_.notify_one();
      return;
    }
  }
  stream->Abandon();
}

void TelemetryIngest::Run() {
  std::deque<TelemetryStream*> taken, deferred;
  std::vector<Coordinator::TelemetryIn> round;
  for (;;) {
    {
      std::unique_lock<std::mutex> lock(mu_);
      ready_.wait(lock, [&] { return stop_ || !queue_.empty() || !deferred.empty(); });
      // What waited a round goes first, then the batches queued since, up to kRound: a round
      // holds the core lock while it counts, and 4,096 batches took seconds of it (Tick and every
      // RPC waited).
      taken.swap(deferred);
      while (!queue_.empty() && taken.size() < kRound) {
        taken.push_back(queue_.front());
        queue_.pop_front();
      }
      if (stop_ && taken.empty()) return;
    }
    round.assign(taken.size(), {});
    for (size_t i = 0; i < taken.size(); ++i) {
      round[i].batch = taken[i]->batch();
      round[i].ack = taken[i]->ack();
    }
    c_->IngestTelemetryRound(&round);  // one write for its rows
    for (size_t i = 0; i < taken.size(); ++i) {
      if (round[i].deferred) {
        deferred.push_back(taken[i]);
      } else {
        --queued_;
        taken[i]->Ingested(round[i].status);  // it may read its next batch now
      }
    }
    taken.clear();
  }
}

WorkerServiceImpl::WorkerServiceImpl(Coordinator* c, const Auth* auth)
    : c_(c), auth_(auth), ingest_(std::make_unique<TelemetryIngest>(c)) {}

WorkerServiceImpl::~WorkerServiceImpl() = default;

}  // namespace pipecoord::coordinator
