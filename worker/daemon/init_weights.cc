#include "worker/daemon/init_weights.h"

#include <string>
#include <string_view>

#include "data/hf_llama_weights.h"
#include "worker/daemon/assignment_model.h"

namespace pipecoord::worker {

Status LoadInitialWeights(const v1::Assignment& a, ComputeBackend* backend) {
  const model::ModelConfig config = ModelConfigOf(a.spec().model());
  const data::LlamaShape shape{config.layers, config.hidden, config.heads, config.FfnHidden(), config.vocab};
  auto weights = data::HfLlamaWeights::Open(a.spec().init(), shape);
  if (!weights.ok()) return Status(weights.status().code(), "spec.init: " + weights.status().message());
  constexpr std::string_view kValue = "/value";
  for (const StateTensor& t : backend->CheckpointState()) {
    // "stageK/NAME/value": the weight NAME of virtual stage K; the moments stay 0.
    const std::string_view name = t.name;
    if (name.size() <= kValue.size() || name.substr(name.size() - kValue.size()) != kValue) continue;
    const size_t slash = name.find('/');
    const std::string_view ours = name.substr(slash + 1, name.size() - kValue.size() - slash - 1);
    Status st = weights->Read(ours, t.data);
    if (!st.ok()) return Status(st.code(), "spec.init: " + st.message());
  }
  backend->set_optimizer_steps(0);  // a device backend uploads the views now
  return Status::Ok();
}

}  // namespace pipecoord::worker
