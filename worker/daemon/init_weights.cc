#include "worker/daemon/init_weights.h"

#include <algorithm>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "data/hf_llama_layout.h"
#include "data/hf_llama_weights.h"
#include "jobplan/hf_config.h"
#include "data/rank_checkpoint.h"
#include "worker/model/weight_init.h"
#include "worker/daemon/assignment_model.h"

namespace pipecoord::worker {

Status LoadInitialWeights(const v1::Assignment& a, ComputeBackend* backend) {
  const data::LlamaShape shape = jobplan::LlamaShapeOf(a.spec().model());
  auto weights = data::HfLlamaWeights::Open(a.spec().init(), shape);
  if (!weights.ok()) return Status(weights.status().code(), "spec.init: " + weights.status().message());
  // With tensor parallelism each rank holds its slice of a tensor: the whole tensor read, then
  // cut as the model cuts it (weight_init.h), so a tp job starts from the same model as tp 1.
  const int tp = std::max(1, a.spec().tp());
  std::map<std::string, std::pair<int64_t, int64_t>, std::less<>> dims;  // our name -> rows, cols
  for (const data::HfTensorInfo& info : data::HfLlamaTensors(shape)) {
    dims[info.our_name] = model::RowsCols(info.shape);
  }
  // A tied model's head stage holds a copy of the embedding, read from it.
  if (shape.tied_embeddings) dims["output.weight"] = dims.at("tok_embeddings.weight");
  constexpr std::string_view kValue = "/value";
  for (const StateTensor& t : backend->CheckpointState()) {
    // "stageK/NAME/value": the weight NAME of virtual stage K; the moments stay 0. Under ZeRO a
    // backend may hold a shard of it, "stageK/NAME/value@B": elements [B, B + size) of this
    // rank's tensor, flattened.
    auto shard = data::SplitShardName(t.name);
    if (!shard.ok()) return Status(shard.status().code(), "spec.init: " + shard.status().message());
    const std::string& base = shard->first;
    const std::string_view name = base;
    const int64_t first = t.name.find('@') == std::string::npos ? -1 : shard->second;  // -1: whole
    if (name.size() <= kValue.size() || name.substr(name.size() - kValue.size()) != kValue) continue;
    const size_t slash = name.find('/');
    const std::string_view ours = name.substr(slash + 1, name.size() - kValue.size() - slash - 1);
    const model::TpSplit split = model::TpSplitOf(ours);
    if (first < 0 && (tp == 1 || split == model::TpSplit::kWhole)) {
      Status st = weights->Read(ours, t.data);
      if (!st.ok()) return Status(st.code(), "spec.init: " + st.message());
      continue;
    }
    const auto d = dims.find(ours);
    if (d == dims.end()) return InvalidArgument("spec.init: " + std::string(ours) + " is not a tensor of the model");
    std::vector<float> whole(static_cast<size_t>(d->second.first * d->second.second));
    Status st = weights->Read(ours, whole);
    if (!st.ok()) return Status(st.code(), "spec.init: " + st.message());
    const std::vector<float> mine = model::TensorParallelSlice(whole, d->second.first, d->second.second, split, tp, a.tp_rank());
    const size_t from = first < 0 ? 0 : static_cast<size_t>(first);
    if (from > mine.size() || mine.size() - from < t.data.size() || (first < 0 && mine.size() != t.data.size())) {
      return Internal("spec.init: " + std::string(ours) + ": the slice holds " + std::to_string(mine.size()) +
                      " values, the rank's tensor " + std::to_string(t.data.size()) + " from element " +
                      std::to_string(from));
    }
    std::copy(mine.begin() + static_cast<std::ptrdiff_t>(from),
              mine.begin() + static_cast<std::ptrdiff_t>(from + t.data.size()), t.data.begin());
  }
  backend->set_optimizer_steps(0);  // a device backend uploads the views now
  return Status::Ok();
}

}  // namespace pipecoord::worker
