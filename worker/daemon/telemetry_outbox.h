// TelemetryOutbox: one rank's telemetry on its way to the coordinator, which may be away (it
// crashed, restarts, or fails over) while the rank trains on.
//
// - Put never blocks on the coordinator: batches queue and a sender thread streams them
//   (WorkerService.Telemetry), one stream per burst of waiting batches (usually one step's), so
//   the stream's end says at once whether the coordinator stored or refused them.
// - A batch is kept until the coordinator says it is stored: a stream that ends OK, or a
//   heartbeat's next_telemetry_step (Confirm). After a break the sender sends again from the oldest
//   batch not confirmed; the coordinator acknowledges, without counting, a step it already has,
//   so every stored record is there once.
// - Bounded: past max_bytes of batches waiting, the oldest waiting batches lose their action
//   timings (the step summaries, which the coordinator needs to count steps, are always kept);
//   dropped_actions() says how many, and the sender logs it.
// - A refusal (INVALID_ARGUMENT, PERMISSION_DENIED, FAILED_PRECONDITION, UNAUTHENTICATED: the job is
//   over there, or this worker no longer holds the rank) is sticky: status() returns it, and the
//   rank stops. Everything else (UNAVAILABLE, NOT_FOUND before the worker registered again,
//   deadlines) is retried.
//
// Thread-safe. Batches are sent in Put order, each at most once per stream.
#ifndef PIPECOORD_WORKER_DAEMON_TELEMETRY_OUTBOX_H_
#define PIPECOORD_WORKER_DAEMON_TELEMETRY_OUTBOX_H_

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <mutex>
#include <thread>

#include "common/status.h"
#include "proto/worker.grpc.pb.h"

namespace pipecoord::worker {

class TelemetryOutbox {
 public:
  struct Options {
    size_t max_bytes = size_t{256} << 20;  // batches waiting, serialized
    std::chrono::milliseconds retry{200};  // between a broken stream and the next
  };

  // `stub` must outlive the outbox.
  TelemetryOutbox(v1::WorkerService::StubInterface* stub, Options options);
  TelemetryOutbox(v1::WorkerService::StubInterface* stub) : TelemetryOutbox(stub, Options{}) {}
  ~TelemetryOutbox();  // Close(now) if not closed
  TelemetryOutbox(const TelemetryOutbox&) = delete;
  TelemetryOutbox& operator=(const TelemetryOutbox&) = delete;

  // Queues one batch (its step: the summary's, else its actions'). The sticky refusal, if any.
  Status Put(v1::TelemetryBatch batch);
  // Every batch of a step before `next_step` is stored by the coordinator: forget them.
  void Confirm(int next_step);
  // Sends what is left and ends the stream, waiting until `deadline` for a coordinator to take
  // it: OK when every batch was stored, the refusal, or UNAVAILABLE naming how many batches were
  // not delivered. Stops the sender; Put after Close is refused.
  Status Close(std::chrono::steady_clock::time_point deadline);
  // Waits until `deadline` for every batch put so far to be stored (the stream carrying it ended
  // well): OK, the refusal, or UNAVAILABLE naming how many are left. Sending goes on.
  Status Flush(std::chrono::steady_clock::time_point deadline);
  // Ends a Close (or the sending) now, whatever is left: the worker is shutting down and no
  // coordinator took the rest (Close then returns UNAVAILABLE naming what was not delivered).
  void Abandon();

  Status status() const;
  int64_t dropped_actions() const;
  size_t waiting() const;  // batches not confirmed
  bool coordinator_away() const;  // the last stream broke and none has ended OK since

 private:
  struct Entry {
    v1::TelemetryBatch batch;
    int step = -1;
    size_t bytes = 0;
    uint64_t seq = 0;  // Put order: what a stream wrote is told by it, not by a position Confirm shifts
  };
  void Send();  // the sender thread
  static int StepOf(const v1::TelemetryBatch& b);

  v1::WorkerService::StubInterface* stub_;
  const Options options_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Entry> entries_;  // not confirmed, in Put order
  uint64_t next_seq_ = 1;
  size_t bytes_ = 0;
  int64_t dropped_actions_ = 0;
  Status refused_;
  bool closing_ = false;
  bool away_ = false;
  bool done_ = false;  // the sender has stopped
  std::chrono::steady_clock::time_point deadline_;
  grpc::ClientContext* ctx_ = nullptr;  // the open stream's
  std::thread sender_;
};

}  // namespace pipecoord::worker

#endif  // PIPECOORD_WORKER_DAEMON_TELEMETRY_OUTBOX_H_
