// A model's weights in safetensors as Hugging Face lays them out: one model.safetensors, or
// shards named by an index, model.safetensors.index.json:
//
//   {"metadata": {"total_size": 16060522496},
//    "weight_map": {"model.embed_tokens.weight": "model-00001-of-00004.safetensors", ...}}
//
// Shard names are plain file names in the index's folder (a path with '/' or a name "." or
// ".." is refused: an index must not reach outside its folder). Opening maps every shard and
// checks it (safetensors_format.h), and checks the index against the shards both ways: every
// tensor it lists is in the shard it names, and every tensor of a shard is listed there, so a
// stale index is refused rather than half-used. metadata.total_size is read, not checked (tools
// disagree on whether shared storage counts once).
#ifndef PIPECOORD_DATA_SAFETENSORS_CHECKPOINT_H_
#define PIPECOORD_DATA_SAFETENSORS_CHECKPOINT_H_

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "common/status.h"
#include "data/safetensors_file.h"

namespace pipecoord::data {

inline constexpr char kSingleFileName[] = "model.safetensors";
inline constexpr char kShardIndexName[] = "model.safetensors.index.json";

struct ShardIndex {
  std::vector<std::pair<std::string, std::string>> weight_map;  // tensor -> shard, in index order
  std::vector<std::string> shards;                               // distinct, first use first
  std::optional<uint64_t> total_size;
};

// Errors name the index file and the key: "d/model.safetensors.index.json: weight_map:
// \"w\": shard \"../x.safetensors\" is not a file name in the index's folder".
Result<ShardIndex> ParseShardIndex(std::string_view json, std::string_view index_name);
// The index as JSON (weight_map sorted by tensor name, as Hugging Face writes it), for writers
// of sharded checkpoints.
std::string ShardIndexJson(const ShardIndex& index);

class SafetensorsCheckpoint {
 public:
  // `path`: a .safetensors file, an index .json, or a folder holding model.safetensors or
  // model.safetensors.index.json (both there is refused as ambiguous).
  static Result<SafetensorsCheckpoint> Open(const std::string& path);

  // Every tensor, sorted by name.
  std::vector<std::string> TensorNames() const;
  // NOT_FOUND "PATH has no tensor \"w\"".
  Result<TensorView> Tensor(std::string_view name) const;
  const std::vector<SafetensorsFile>& files() const { return files_; }
  // The file or index opened.
  const std::string& path() const { return path_; }

 private:
  std::string path_;
  std::vector<SafetensorsFile> files_;
  std::unordered_map<std::string, size_t> file_of_;  // tensor -> index into files_
};

}  // namespace pipecoord::data

#endif  // PIPECOORD_DATA_SAFETENSORS_CHECKPOINT_H_
