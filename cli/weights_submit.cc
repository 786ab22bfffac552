#include "cli/weights_submit.h"

#include <filesystem>

#include "cli/cli_io.h"
#include "data/hf_llama_weights.h"
#include "jobplan/hf_config.h"
#include "jobplan/spec_validation.h"

namespace pipecoord::cli {

Status ResolveWeightFields(const std::string& spec_file, v1::JobSpec* spec) {
  const std::string& hf = spec->model().hf_config();
  const size_t first = hf.find_first_not_of(" \t\r\n");
  if (first != std::string::npos && hf[first] != '{') {
    std::filesystem::path path = hf;
    if (path.is_relative()) path = std::filesystem::path(spec_file).parent_path() / path;
    auto text = ReadInputFile("spec.model.hfConfig", path.string(), 1 << 20);
    if (!text.ok()) return InvalidArgument("spec.model.hfConfig: " + text.status().message());
    spec->mutable_model()->set_hf_config(*text);
  }
  if (spec->init().empty() || !std::filesystem::exists(spec->init())) return Status::Ok();  // the workers' path only
  Status valid = jobplan::ValidateJobSpec(*spec);
  if (!valid.ok()) return valid;  // the coordinator would refuse it the same way
  const v1::ModelSpec m = jobplan::WithDefaults(*spec).model();
  auto weights = data::HfLlamaWeights::Open(spec->init(), jobplan::LlamaShapeOf(m));
  if (!weights.ok()) return InvalidArgument("spec.init: " + weights.status().message());
  return Status::Ok();
}

}  // namespace pipecoord::cli
