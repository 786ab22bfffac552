#include "cli/export_job.h"

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
  const int ffn = m.ffn_hidden() != 0 ? m.ffn_hidden() : ((8 * m.hidden() / 3) + 63) / 64 * 64;
  const data::LlamaShape shape{m.layers(), m.hidden(), m.heads(), ffn, m.vocab()};
  // our name -> each tensor-parallel rank's slice (the whole tensor with tp 1); the files store
  // them flat, so the whole shapes come from the model's table
  std::map<std::string, std::vector<std::vector<float>>> slices;
  std::map<std::string, std::vector<uint64_t>> whole_shape;
  for (const data::HfTensorInfo& info : data::HfLlamaTensors(shape)) whole_shape[info.our_name] = info.shape;
  std::map<std::pair<std::string, int>, std::string> source;  // (name, tp rank) -> the file
  // Names outside the built-in model (a PyTorch module of the user's own): every one (the first
  // 8 named, with their files), so the user sees at once what cannot be mapped to Hugging Face's.
  std::string unknown;
  int unknown_count = 0;
  for (int g = 0; g < layout.world(); ++g) {
    if (layout.DataRank(g) != 0) continue;  // every replica holds the same weights (ZeRO too)
    const int rank = g, t = layout.TensorRank(g);
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
      const std::string_view name = tensor.name;
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
      if (!source.emplace(std::pair{ours, t}, path).second) {
        return InvalidArgument(path + ": tensor \"" + std::string(name) + "\": " + ours + " is also in " +
                               source[{ours, t}]);
      }
      auto view = file->Tensor(std::string(name));
      if (!view.ok()) return view.status();
      auto& per_rank = slices[ours];
      per_rank.resize(tp);
      std::vector<float>& v = per_rank[t];
      v.resize(tensor.elements());
      Status st = view->CopyToFloat(v);
      if (!st.ok()) return InvalidArgument(path + ": " + st.message());
    }
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
    const int64_t rows = dims.size() == 2 ? static_cast<int64_t>(dims[0]) : 1;
    const int64_t cols = dims.empty() ? 1 : static_cast<int64_t>(dims.back());
    for (int t = 0; t < tp; ++t) {
      if (per_rank[t].empty() && rows * cols > 0) {
        return InvalidArgument(name + ": no tensor-parallel rank " + std::to_string(t) + " slice in the step's files");
      }
    }
    auto whole = TensorParallelJoin(per_rank, rows, cols, split);
    if (!whole.ok()) return InvalidArgument(name + ": " + whole.status().message());
    weights[name] = std::move(whole).value();
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
