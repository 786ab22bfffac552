#include "data/job_data_spec.h"

#include <cstdio>

namespace pipecoord::data {

Status ValidateJobDataFields(const JobDataSpec& spec) {
  if (spec.path.empty()) return InvalidArgument("spec.data.path: required (a dataset PREFIX or a prepared folder)");
  if (!spec.format.empty() && spec.format != "flat" && spec.format != "megatron") {
    return InvalidArgument("spec.data.format: must be \"flat\", \"megatron\" or empty, got \"" + spec.format + "\"");
  }
  if (!(spec.val_fraction >= 0 && spec.val_fraction < 1)) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%g", spec.val_fraction);
    return InvalidArgument(std::string("spec.data.valFraction: must be in [0, 1), got ") + buf);
  }
  if (!spec.val_path.empty() && spec.val_fraction > 0) {
    return InvalidArgument("spec.data.valPath: give valPath or valFraction, not both");
  }
  return Status::Ok();
}

}  // namespace pipecoord::data
