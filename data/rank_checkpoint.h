// One rank's training state at a step boundary, as the workers save it (worker/checkpoint) and
// pipectl export reads it: a safetensors file (safetensors_format.h)
//
//   DIR/JOB/rank-G/step-N.safetensors   (G: the global rank, dp_rank x pp + rank)
//   tensors  "stageK/NAME/value", "stageK/NAME/adam_m", "stageK/NAME/adam_v": F32, the
//            parameter's shape ([elements] where the backend gives none); NAME is the model's
//            parameter name with the global layer index (layers.3.attention.wq.weight)
//   __metadata__ {"format": "pipecoord-rank-checkpoint", "version": "1", "step": "N",
//                 "optimizer_steps": "S", "fnv1a64": 16 hex digits of FNV-1a over the data buffer}
//
// The hash catches what the format's own rules do not (a flipped bit in the data). Files of the
// format before it (step-N.ckpt, "PCCKPT01", worker/checkpoint/checkpoint.h) are still read.
#ifndef PIPECOORD_DATA_RANK_CHECKPOINT_H_
#define PIPECOORD_DATA_RANK_CHECKPOINT_H_

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "common/status.h"
#include "data/safetensors_format.h"

namespace pipecoord::data {

inline constexpr char kRankCheckpointFormat[] = "pipecoord-rank-checkpoint";

struct RankCheckpointInfo {
  int64_t step = 0;             // the last step included
  int64_t optimizer_steps = 0;  // AdamW's step count
};

// DIR/JOB/rank-G/step-N.safetensors, and the older format's DIR/JOB/rank-G/step-N.ckpt.
std::string RankCheckpointPath(const std::string& dir, const std::string& job_id, int global_rank, int64_t step);
std::string LegacyRankCheckpointPath(const std::string& dir, const std::string& job_id, int global_rank, int64_t step);

uint64_t Fnv1a64(std::span<const uint8_t> bytes, uint64_t hash = 0xcbf29ce484222325ull);

// The metadata for a file whose data buffer hashes to `fnv1a64`.
std::vector<std::pair<std::string, std::string>> RankCheckpointMetadata(const RankCheckpointInfo& info,
                                                                        uint64_t fnv1a64);

// Checks a parsed file (`file` its whole bytes) is a rank checkpoint whose data is intact and
// returns its step and optimizer steps. Errors: "not a pipecoord rank checkpoint (...)",
// "checksum mismatch: the file is corrupt".
Result<RankCheckpointInfo> CheckRankCheckpoint(const SafetensorsLayout& layout, std::span<const uint8_t> file);

// A tensor name's ZeRO piece: "stage0/x/adam_m@128" -> {"stage0/x/adam_m", 128} (elements
// [128, 128 + size) of the tensor, flattened); a name without '@' is the whole tensor, from 0.
// INVALID_ARGUMENT naming the tensor unless what follows the last '@' is 1 to 18 decimal digits.
Result<std::pair<std::string, int64_t>> SplitShardName(std::string_view name);

}  // namespace pipecoord::data

#endif  // PIPECOORD_DATA_RANK_CHECKPOINT_H_
