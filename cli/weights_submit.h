// What pipectl submit does with a spec's weight fields before sending it: model.hfConfig given
// as a path becomes the file's text (so the coordinator and workers need no copy), and the
// files of spec.init are checked against the model (names, shapes, dtypes) when they can be read
// from here, so a bad tensor is refused before any worker starts.
#ifndef PIPECOORD_CLI_WEIGHTS_SUBMIT_H_
#define PIPECOORD_CLI_WEIGHTS_SUBMIT_H_

#include <string>

#include "common/status.h"
#include "proto/job.pb.h"

namespace pipecoord::cli {

// `spec_file`: the JobSpec file's path (a relative hfConfig path is relative to its folder).
// hfConfig holding a JSON object's text ('{' first) is kept as it is. Errors name the field.
Status ResolveWeightFields(const std::string& spec_file, v1::JobSpec* spec);

}  // namespace pipecoord::cli

#endif  // PIPECOORD_CLI_WEIGHTS_SUBMIT_H_
