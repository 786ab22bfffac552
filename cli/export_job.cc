#include "cli/export_job.h"

#include <filesystem>
#include <map>
#include <vector>

#include "data/hf_llama_weights.h"
#include "data/rank_checkpoint.h"
#include "data/safetensors_file.h"
#include "jobplan/hf_config.h"

namespace pipecoord::cli {

Result<ExportSummary> ExportJob(const v1::JobSpec& spec, const ExportOptions& o) {
  if (spec.tp() > 1) {
    return FailedPrecondition("spec.tp is " + std::to_string(spec.tp()) + ": exporting a tensor-parallel job is not "
                              "implemented yet (each rank's checkpoint holds its slices; they are not put back together)");
  }
  const v1::ModelSpec& m = spec.model();
  const int ffn = m.ffn_hidden() != 0 ? m.ffn_hidden() : ((8 * m.hidden() / 3) + 63) / 64 * 64;
  const data::LlamaShape shape{m.layers(), m.hidden(), m.heads(), ffn, m.vocab()};
  std::map<std::string, std::vector<float>> weights;  // our name -> values
  std::map<std::string, std::string> source;          // our name -> the file it came from
  for (int rank = 0; rank < spec.pp(); ++rank) {
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
    for (const data::SafetensorsTensor& t : file->layout().tensors) {
      const std::string_view name = t.name;
      if (name.size() <= kValue.size() || name.substr(name.size() - kValue.size()) != kValue) continue;
      const size_t slash = name.find('/');
      if (slash == std::string_view::npos) return InvalidArgument(path + ": tensor \"" + t.name + "\": not stageK/NAME/value");
      const std::string ours(name.substr(slash + 1, name.size() - kValue.size() - slash - 1));
      if (!source.emplace(ours, path).second) {
        return InvalidArgument(path + ": tensor \"" + t.name + "\": " + ours + " is also in " + source[ours]);
      }
      auto view = file->Tensor(t.name);
      if (!view.ok()) return view.status();
      std::vector<float>& v = weights[ours];
      v.resize(t.elements());
      Status st = view->CopyToFloat(v);
      if (!st.ok()) return InvalidArgument(path + ": " + st.message());
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
