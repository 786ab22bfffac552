#include "cli/export_job.h"

#include <algorithm>
#include <filesystem>
#include <map>
#include <vector>

#include "data/hf_llama_layout.h"
#include "data/hf_llama_weights.h"
#include "data/rank_checkpoint.h"
#include "data/safetensors_file.h"
#include "common/rank_layout.h"
#include "common/tensor_parallel_split.h"
#include "jobplan/hf_config.h"
#include "jobplan/layout.h"

namespace pipecoord::cli {

Result<ExportSummary> ExportJob(const v1::JobSpec& spec, const ExportOptions& o) {
  const RankLayout layout = jobplan::LayoutOf(spec);
  const int tp = layout.tp();
  const v1::ModelSpec& m = spec.model();
  const data::LlamaShape shape = jobplan::LlamaShapeOf(m);
  // our name -> each tensor-parallel rank's slice (the whole tensor with tp 1); the files store
  // them flat, so the whole shapes come from the model's table
  std::map<std::string, std::vector<std::vector<float>>> slices;
  std::map<std::string, std::vector<uint64_t>> whole_shape;
  for (const data::HfTensorInfo& info : data::HfLlamaTensors(shape)) whole_shape[info.our_name] = info.shape;
  // A tied model's head stage holds a copy of the embedding: read, checked equal, not written.
  if (shape.tied_embeddings) whole_shape["output.weight"] = whole_shape.at("tok_embeddings.weight");
  // A slice's pieces: whole ("NAME/value", first element 0), or under ZeRO with sharded masters
  // (the CUDA backend in bf16) each replica's "NAME/value@B" (elements [B, B + n) of the slice).
  struct Piece {
    int64_t first;
    std::vector<float> values;
  };
  std::map<std::pair<std::string, int>, std::vector<Piece>> pieces;  // (name, tp rank) -> pieces
  std::map<std::pair<std::string, int>, std::pair<int, std::string>> source;  // -> (pipeline rank, a file)
  // Names outside the built-in model (a PyTorch module of the user's own): every one (the first
  // 8 named, with their files), so the user sees at once what cannot be mapped to Hugging Face's.
  std::string unknown;
  int unknown_count = 0;
  // Reads one rank's file; *sharded: it holds pieces of shards ("value@B").
  auto read_rank = [&](int rank, bool* sharded) -> Status {
    const int t = layout.TensorRank(rank);
    const std::string path = data::RankCheckpointPath(o.checkpoint_dir, o.job_id, rank, o.step);
    if (!std::filesystem::exists(path)) {
      const std::string legacy = data::LegacyRankCheckpointPath(o.checkpoint_dir, o.job_id, rank, o.step);
      return NotFound(path + ": not found" +
                      (std::filesystem::exists(legacy)
                           ? " (only " + legacy + ", the format before safetensors, which export does not read: "
                                                  "resume the job on a current worker for a step to export)"
                           : " (--checkpoint-dir must be the workers' folder, shared or copied here; spec.checkpointEvery "
                             "must be > 0)"));
    }
    auto file = data::SafetensorsFile::Open(path);
    if (!file.ok()) return file.status();
    auto info = data::CheckRankCheckpoint(file->layout(), file->bytes());
    if (!info.ok()) return InvalidArgument(path + ": " + info.status().message());
    if (info->step != o.step) {
      return InvalidArgument(path + ": holds step " + std::to_string(info->step) + ", expected " + std::to_string(o.step));
    }
    constexpr std::string_view kValue = "/value";
    for (const data::SafetensorsTensor& tensor : file->layout().tensors) {
      auto split = data::SplitShardName(tensor.name);
      if (!split.ok()) return InvalidArgument(path + ": " + split.status().message());
      const std::string& base = split->first;
      const std::string_view name = base;
      const int64_t first = split->second;
      const bool is_piece = base.size() != tensor.name.size();
      if (name.size() <= kValue.size() || name.substr(name.size() - kValue.size()) != kValue) continue;
      const size_t slash = name.find('/');
      if (slash == std::string_view::npos) {
        return InvalidArgument(path + ": tensor \"" + tensor.name + "\": not stageK/NAME/value");
      }
      const std::string ours(name.substr(slash + 1, name.size() - kValue.size() - slash - 1));
      if (whole_shape.count(ours) == 0) {  // a module's own name: listed below, with every other
        if (++unknown_count <= 8) unknown += (unknown.empty() ? "" : ", ") + ours + " (" + path + ")";
        continue;
      }
      if (is_piece) *sharded = true;
      const int pipe = layout.PipelineRank(rank);
      const auto [it, fresh] = source.emplace(std::pair{ours, t}, std::pair{pipe, path});
      if (!fresh && it->second.first != pipe) {
        return InvalidArgument(path + ": tensor \"" + tensor.name + "\": " + ours + " is also in " + it->second.second);
      }
      auto view = file->Tensor(tensor.name);
      if (!view.ok()) return view.status();
      Piece piece{first, std::vector<float>(tensor.elements())};
      Status st = view->CopyToFloat(piece.values);
      if (!st.ok()) return InvalidArgument(path + ": " + st.message());
      pieces[{ours, t}].push_back(std::move(piece));
    }
    return Status::Ok();
  };
  for (int g = 0; g < layout.world(); ++g) {
    if (layout.DataRank(g) != 0) continue;  // every replica holds the same weights, unless sharded:
    bool sharded = false;
    PIPECOORD_RETURN_IF_ERROR(read_rank(g, &sharded));
    for (int d = 1; sharded && d < layout.dp(); ++d) PIPECOORD_RETURN_IF_ERROR(read_rank(layout.AtDataRank(g, d), &sharded));
  }
  // Each slice from its pieces: every element covered (overlaps hold the same values).
  for (auto& [key, list] : pieces) {
    const auto& [name, t] = key;
    const std::vector<uint64_t>& dims = whole_shape.at(name);
    uint64_t elements = 1;
    for (uint64_t d : dims) elements *= d;
    if (TpSplitOf(name) != TpSplit::kWhole) elements /= static_cast<uint64_t>(tp);
    std::vector<float> slice(elements);
    std::vector<bool> covered(elements, false);
    for (const Piece& piece : list) {
      const auto first = static_cast<uint64_t>(piece.first);
      if (first > elements || elements - first < piece.values.size()) {
        return InvalidArgument(name + " (tensor-parallel rank " + std::to_string(t) + ", " + source.at(key).second +
                               "): elements [" + std::to_string(first) + ", " + std::to_string(first + piece.values.size()) +
                               ") are outside its " + std::to_string(elements));
      }
      std::copy(piece.values.begin(), piece.values.end(), slice.begin() + static_cast<std::ptrdiff_t>(first));
      std::fill(covered.begin() + static_cast<std::ptrdiff_t>(first),
                covered.begin() + static_cast<std::ptrdiff_t>(first + piece.values.size()), true);
    }
    if (auto gap = std::find(covered.begin(), covered.end(), false); gap != covered.end()) {
      return InvalidArgument(name + " (tensor-parallel rank " + std::to_string(t) + "): element " +
                             std::to_string(gap - covered.begin()) + " is in none of the step's files (" +
                             source.at(key).second + " and its replicas')");
    }
    auto& per_rank = slices[name];
    per_rank.resize(tp);
    per_rank[t] = std::move(slice);
  }
  if (unknown_count > 0) {
    return InvalidArgument(std::to_string(unknown_count) +
                           " tensor(s) are not the built-in Llama model's, whose names pipectl export maps to "
                           "Hugging Face's: " + unknown + (unknown_count > 8 ? ", ..." : "") +
                           " (a PyTorch module with names of its own cannot be exported this way; its checkpoint "
                           "files hold its state_dict)");
  }
  // Each tensor whole: the tensor-parallel ranks' slices put together as the model split them.
  std::map<std::string, std::vector<float>> weights;  // our name -> values
  for (const auto& [name, per_rank] : slices) {
    const TpSplit split = TpSplitOf(name);
    const auto known = whole_shape.find(name);
    const std::vector<uint64_t>& dims = known->second;
    const auto [rows, cols] = RowsCols(dims);
    for (int t = 0; t < tp; ++t) {
      if (per_rank[t].empty() && rows * cols > 0) {
        return InvalidArgument(name + ": no tensor-parallel rank " + std::to_string(t) + " slice in the step's files");
      }
    }
    auto whole = TensorParallelJoin(per_rank, rows, cols, split);
    if (!whole.ok()) return InvalidArgument(name + ": " + whole.status().message());
    weights[name] = std::move(whole).value();
  }
  if (shape.tied_embeddings) {
    if (auto copy = weights.find("output.weight"); copy != weights.end()) {
      const std::vector<float>& embedding = weights.at("tok_embeddings.weight");
      const auto diff = std::mismatch(copy->second.begin(), copy->second.end(), embedding.begin());
      if (diff.first != copy->second.end()) {
        return InvalidArgument("output.weight (the last stage's copy of the tied embedding, " +
                        source.at({"output.weight", 0}).second + ") differs from tok_embeddings.weight at element " +
                        std::to_string(diff.first - copy->second.begin()) +
                        ": the two are summed and stepped together, so the step's files are not of one step");
      }
      weights.erase(copy);
    }
  }
  std::vector<data::ModelTensor> tensors;
  ExportSummary summary;
  for (const auto& [name, values] : weights) {
    tensors.push_back({name, values});
    summary.bytes += values.size() * sizeof(float);
  }
  summary.tensors = static_cast<int>(tensors.size());
  Status st = data::WriteHfLlamaFolder(o.out_dir, jobplan::HfConfigJson(m), shape, tensors, o.max_shard_bytes);
  if (!st.ok()) return st;
  return summary;
}

}  // namespace pipecoord::cli
