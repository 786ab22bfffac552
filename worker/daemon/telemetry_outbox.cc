#include "worker/daemon/telemetry_outbox.h"

#include <algorithm>
#include <cstdio>
#include <string>

namespace pipecoord::worker {
namespace {

bool Refusal(grpc::StatusCode code) {
  return code == grpc::StatusCode::INVALID_ARGUMENT || code == grpc::StatusCode::PERMISSION_DENIED ||
         code == grpc::StatusCode::FAILED_PRECONDITION || code == grpc::StatusCode::UNAUTHENTICATED;
}

}  // namespace

TelemetryOutbox::TelemetryOutbox(v1::WorkerService::StubInterface* stub, Options options)
    : stub_(stub), options_(options) {
  sender_ = std::thread([this] { Send(); });
}

TelemetryOutbox::~TelemetryOutbox() {
  if (sender_.joinable()) (void)Close(std::chrono::steady_clock::now());
}

int TelemetryOutbox::StepOf(const v1::TelemetryBatch& b) {
  if (b.steps_size() > 0) return b.steps(0).step();
  return b.actions_size() > 0 ? b.actions(0).step() : -1;
}

Status TelemetryOutbox::Put(v1::TelemetryBatch batch) {
  std::lock_guard<std::mutex> lock(mu_);
  if (!refused_.ok()) return refused_;
  if (closing_) return FailedPrecondition("telemetry: the outbox is closed");
  Entry e;
  e.step = StepOf(batch);
  e.bytes = batch.ByteSizeLong();
  e.seq = next_seq_++;
  e.batch = std::move(batch);
  bytes_ += e.bytes;
  entries_.push_back(std::move(e));
  // Over the bound: the oldest batches give up their action timings, never their summaries.
  for (size_t i = 0; bytes_ > options_.max_bytes && i + 1 < entries_.size(); ++i) {
    Entry& old = entries_[i];
    if (old.batch.actions_size() == 0) continue;
    dropped_actions_ += old.batch.actions_size();
    old.batch.clear_actions();
    const size_t now = old.batch.ByteSizeLong();
    bytes_ -= old.bytes - now;
    old.bytes = now;
  }
  cv_.notify_all();
  return Status::Ok();
}

void TelemetryOutbox::Confirm(int next_step) {
  std::lock_guard<std::mutex> lock(mu_);
  bool popped = false;
  while (!entries_.empty() && entries_.front().step >= 0 && entries_.front().step < next_step) {
    bytes_ -= entries_.front().bytes;
    entries_.pop_front();
    popped = true;
  }
  if (popped) cv_.notify_all();
}

void TelemetryOutbox::Send() {
  std::unique_lock<std::mutex> lock(mu_);
  bool outage_logged = false;
  while (true) {
    cv_.wait(lock, [&] { return closing_ || !entries_.empty(); });
    if (closing_ && entries_.empty()) break;
    grpc::ClientContext ctx;
    if (closing_) {
      ctx.set_deadline(std::chrono::system_clock::now() +
                       std::max<std::chrono::steady_clock::duration>(deadline_ - std::chrono::steady_clock::now(), {}));
    }
    ctx_ = &ctx;  // Close cancels it past its deadline (a coordinator that stopped answering)
    v1::TelemetryAck ack;
    lock.unlock();
    std::unique_ptr<grpc::ClientWriterInterface<v1::TelemetryBatch>> writer = stub_->Telemetry(&ctx, &ack);
    lock.lock();
    // One stream per burst (usually one step's batch): its end says the coordinator stored all
    // of it, or refused it, at once; a stream left open would tell neither until the next write.
    // A new stream: everything not confirmed is sent again, in order. Confirm may drop entries
    // (the written one too) while the lock is released for a write, so the next one to write is
    // the first past the last written, by sequence number.
    uint64_t written = 0;
    bool broken = false;
    while (true) {
      // Sequence numbers are consecutive and entries only leave from the front: O(1) to find.
      const size_t index = entries_.empty() || written < entries_.front().seq ? 0 : written - entries_.front().seq + 1;
      if (index >= entries_.size()) break;
      v1::TelemetryBatch copy = entries_[index].batch;
      const uint64_t seq = entries_[index].seq;
      lock.unlock();
      const bool ok = writer->Write(copy);
      lock.lock();
      if (!ok) {
        broken = true;
        break;
      }
      written = seq;
    }
    lock.unlock();
    if (!broken) writer->WritesDone();
    const grpc::Status st = writer->Finish();
    lock.lock();
    ctx_ = nullptr;
    if (st.ok()) {
      // The stream ended as the coordinator's success: all it carried is stored.
      while (!entries_.empty() && entries_.front().seq <= written) {
        bytes_ -= entries_.front().bytes;
        entries_.pop_front();
      }
      cv_.notify_all();  // a Flush may wait for it
      if (outage_logged) std::fprintf(stderr, "worker: telemetry: delivered again\n");
      outage_logged = false;
      away_ = false;
      if (closing_ && entries_.empty()) break;
      continue;
    }
    if (Refusal(st.error_code())) {
      refused_ = Status(st.error_code() == grpc::StatusCode::INVALID_ARGUMENT     ? Code::kInvalidArgument
                        : st.error_code() == grpc::StatusCode::PERMISSION_DENIED ? Code::kPermissionDenied
                        : st.error_code() == grpc::StatusCode::UNAUTHENTICATED   ? Code::kUnauthenticated
                                                                                 : Code::kFailedPrecondition,
                        "telemetry refused: " + st.error_message());
      break;
    }
    away_ = true;
    if (!outage_logged) {
      std::fprintf(stderr, "worker: telemetry: stream to the coordinator broke (%s); keeping %zu batch(es), retrying\n",
                   st.error_message().c_str(), entries_.size());
      outage_logged = true;
    }
    if (closing_ && std::chrono::steady_clock::now() >= deadline_) break;
    cv_.wait_for(lock, options_.retry, [&] { return closing_ && std::chrono::steady_clock::now() >= deadline_; });
    if (closing_ && std::chrono::steady_clock::now() >= deadline_) break;
  }
  if (dropped_actions_ > 0) {
    std::fprintf(stderr, "worker: telemetry: %lld action timing(s) dropped while the coordinator was away (bound %zu bytes)\n",
                 static_cast<long long>(dropped_actions_), options_.max_bytes);
  }
  done_ = true;
  cv_.notify_all();
}

Status TelemetryOutbox::Flush(std::chrono::steady_clock::time_point deadline) {
  std::unique_lock<std::mutex> lock(mu_);
  cv_.wait_until(lock, deadline, [&] { return entries_.empty() || !refused_.ok() || done_; });
  if (!refused_.ok()) return refused_;
  if (!entries_.empty()) return Unavailable("telemetry: " + std::to_string(entries_.size()) + " batch(es) not stored yet");
  return Status::Ok();
}

Status TelemetryOutbox::Close(std::chrono::steady_clock::time_point deadline) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    closing_ = true;
    deadline_ = deadline;
    cv_.notify_all();
  }
  {
    // deadline_, not `deadline`: Abandon may bring it forward.
    std::unique_lock<std::mutex> lock(mu_);
    while (!done_ && std::chrono::steady_clock::now() < deadline_) cv_.wait_until(lock, deadline_);
    if (!done_ && ctx_ != nullptr) ctx_->TryCancel();
  }
  if (sender_.joinable()) sender_.join();
  std::lock_guard<std::mutex> lock(mu_);
  if (!refused_.ok()) return refused_;
  if (!entries_.empty()) {
    return Unavailable("telemetry: " + std::to_string(entries_.size()) +
                       " batch(es) not delivered: no coordinator took them in time");
  }
  return Status::Ok();
}

void TelemetryOutbox::Abandon() {
  std::lock_guard<std::mutex> lock(mu_);
  closing_ = true;
  deadline_ = std::chrono::steady_clock::now();
  if (ctx_ != nullptr) ctx_->TryCancel();
  cv_.notify_all();
}

Status TelemetryOutbox::status() const {
  std::lock_guard<std::mutex> lock(mu_);
  return refused_;
}

int64_t TelemetryOutbox::dropped_actions() const {
  std::lock_guard<std::mutex> lock(mu_);
  return dropped_actions_;
}

bool TelemetryOutbox::coordinator_away() const {
  std::lock_guard<std::mutex> lock(mu_);
  return away_;
}

size_t TelemetryOutbox::waiting() const {
  std::lock_guard<std::mutex> lock(mu_);
  return entries_.size();
}

}  // namespace pipecoord::worker
