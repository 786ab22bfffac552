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
#include <functional>
#include <map>
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

// One checkpoint file read whole (safetensors only), its format and checksum checked, its
// tensors found by name: what a restart with another data-parallel degree reads several of.
class CheckpointFile {
 public:
  // NOT_FOUND naming the path when there is none; INVALID_ARGUMENT for a file that is not an
  // intact rank checkpoint.
  static Result<CheckpointFile> Read(const std::string& path);
  const std::string& path() const { return path_; }
  const CheckpointInfo& info() const { return info_; }
  // The F32 elements of tensor `name`; empty when the file holds no such tensor.
  std::span<const float> Find(std::string_view name) const;
  // Every tensor name, in the file's order.
  std::vector<std::string> Names() const;

 private:
  std::string path_;
  std::vector<float> data_;                              // the data buffer
  std::map<std::string, std::pair<size_t, size_t>, std::less<>> where_;  // name -> [begin, end) in data_
  CheckpointInfo info_;
};

// Fills `tensors` (a rank's CheckpointState: "stageK/NAME/value" and AdamW's "stageK/NAME/adam_m",
// "/adam_v", whole or, under ZeRO, "/adam_m@B": elements [B, B + size) of the flattened tensor)
// from `files`, the same stages' checkpoints of one step written by every replica of a layout with
// another data-parallel degree (the same pipeline and tensor-parallel split): a value from the
// files that hold it (every replica holds the same whole values), a moment assembled from the
// pieces the files hold ("adam_m" whole, or each replica's "adam_m@B'" shard). Padding past a
// tensor's end is never read. Errors: the files disagree on the step or the optimizer's step count,
// a tensor no file holds, a moment element no piece covers (naming the tensor and the element),
// sizes that disagree.
Result<CheckpointInfo> ReshardInto(const std::vector<CheckpointFile>& files, const std::vector<StateTensor>& tensors);

}  // namespace pipecoord::worker

#endif  // PIPECOORD_WORKER_CHECKPOINT_CHECKPOINT_H_
