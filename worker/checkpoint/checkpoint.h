// Checkpoints of one rank's training state at a step boundary: every tensor the rank holds
// (weights and AdamW moments, by name) and the optimizer's step count. Gradients are not
// saved: they are zero at a step boundary.
//
// File format: safetensors, DIR/JOB/rank-G/step-N.safetensors, one file per rank per step; the
// names, metadata (step, optimizer steps, an FNV-1a hash of the data, so truncation and bit flips
// are caught) and layout are data/rank_checkpoint.h's, which pipectl export reads too. The
// format before it (step-N.ckpt: "PCCKPT01", u64 step, u64 optimizer_steps, u32 count, per
// tensor u32 name length, name, u64 elements, f32 elements, then a u64 FNV-1a of it all) is
// still read: a job restarted by a newer worker resumes from an older worker's files, and saves
// safetensors from then on. Files are written to a temporary name, flushed to disk and renamed,
// so a reader sees a whole checkpoint or none.
#ifndef PIPECOORD_WORKER_CHECKPOINT_CHECKPOINT_H_
#define PIPECOORD_WORKER_CHECKPOINT_CHECKPOINT_H_

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"

namespace pipecoord::worker {

// A named view of a tensor a checkpoint saves from or restores into.
struct StateTensor {
  std::string name;  // unique within a rank, e.g. "stage1/layers.3.attention.wq/adam_m"
  std::span<float> data;
  std::vector<int64_t> shape = {};  // the tensor's shape in the file; empty: [elements]
};

// The header fields of a checkpoint.
struct CheckpointInfo {
  int64_t step = 0;             // the last step included
  int64_t optimizer_steps = 0;  // AdamW's step count (bias correction)
};

std::string EncodeCheckpoint(const CheckpointInfo& info, const std::vector<StateTensor>& tensors);

// Reads `bytes` into `tensors`: the checkpoint must hold exactly these names with these sizes
// (in any order). Errors name the rule broken and the tensor; on error `tensors` may be
// partially written.
Result<CheckpointInfo> DecodeCheckpointInto(std::string_view bytes, const std::vector<StateTensor>& tensors);

// DIR/JOB/rank-G/step-N.safetensors
std::string CheckpointPath(const std::string& dir, const std::string& job_id, int global_rank, int64_t step);

// Writes atomically (temporary file, fsync, rename), creating directories as needed, then deletes
// this rank's checkpoints older than the newest `keep`, except those of steps >= `keep_from`
// (the ones a restart may still resume from).
Status WriteCheckpointFile(const std::string& dir, const std::string& job_id, int global_rank,
                           const CheckpointInfo& info, const std::vector<StateTensor>& tensors, int keep = 2,
                           int64_t keep_from = INT64_MAX);

// Loads the checkpoint of `step` into `tensors`; NOT_FOUND names the path when there is none.
Result<CheckpointInfo> ReadCheckpointFile(const std::string& dir, const std::string& job_id, int global_rank,
                                          int64_t step, const std::vector<StateTensor>& tensors);

}  // namespace pipecoord::worker

#endif  // PIPECOORD_WORKER_CHECKPOINT_CHECKPOINT_H_
