// AsyncCheckpointWriter: one rank's checkpoints written in the background, so the step after a
// checkpoint computes while the file is written and synced (as PyTorch DCP's async_save and
// Megatron-LM's asynchronous checkpointing do).
//
// Save() copies the tensors into a staging buffer (the training loop may change them as soon as
// it returns) and starts the write; it waits only for a previous write still in flight, so at
// most one staged copy exists. A checkpoint counts once WriteCheckpointFile has renamed it into
// place: TakeDurable() hands out those steps, which is what a worker reports to the coordinator.
// Not thread-safe: one caller (the executor) drives it.
#ifndef PIPECOORD_WORKER_CHECKPOINT_ASYNC_WRITER_H_
#define PIPECOORD_WORKER_CHECKPOINT_ASYNC_WRITER_H_

#include <atomic>
#include <cstdint>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "common/status.h"
#include "worker/checkpoint/checkpoint.h"

namespace pipecoord::worker {

class AsyncCheckpointWriter {
 public:
  // Writes DIR/JOB/rank-G/step-N.safetensors files, keeping the newest `keep` (and, once KeepFrom was
  // called, every file of a step at or after the step it gave).
  AsyncCheckpointWriter(std::string dir, std::string job_id, int global_rank, int keep = 2);
  ~AsyncCheckpointWriter();  // waits for the write in flight
  AsyncCheckpointWriter(const AsyncCheckpointWriter&) = delete;
  AsyncCheckpointWriter& operator=(const AsyncCheckpointWriter&) = delete;

  // Waits for the previous write (returning its error, if it failed), stages `tensors` and
  // starts writing them in the background.
  Status Save(const CheckpointInfo& info, const std::vector<StateTensor>& tensors);
  // Waits for the write in flight; its error, if it failed.
  Status Wait();
  // The steps whose checkpoints reached the disk since the last call, oldest first; the error of
  // a write that failed instead.
  Result<std::vector<int64_t>> TakeDurable();

  // Files of steps >= `step` are never deleted: the oldest one a restart may resume from (the
  // coordinator's restart point, which lags the files by however long it was not told). The first
  // call sets it, later ones only raise it. Thread-safe (a heartbeat thread calls it).
  void KeepFrom(int64_t step);

 private:
  const std::string dir_, job_id_;
  const int global_rank_, keep_;
  std::atomic<int64_t> keep_from_{kNoFloor};
  static constexpr int64_t kNoFloor = INT64_MAX;
  std::vector<std::string> names_;        // staged copy of the last Save, read by the writer
  std::vector<std::vector<float>> data_;
  std::thread writer_;
  std::mutex mu_;
  std::vector<int64_t> durable_;  // guarded by mu_
  Status failed_;                 // guarded by mu_
};

}  // namespace pipecoord::worker

#endif  // PIPECOORD_WORKER_CHECKPOINT_ASYNC_WRITER_H_
