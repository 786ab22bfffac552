// A schedule "auto" job's AutoPlanReport as pipectl shows it (submit --dry-run, status).
#ifndef PIPECOORD_CLI_AUTO_PLAN_TEXT_H_
#define PIPECOORD_CLI_AUTO_PLAN_TEXT_H_

#include <string>

#include "proto/job.pb.h"

namespace pipecoord::cli {

// Lines under status's 10-character labels, each ending in a newline:
//   auto      zbh1, pp 4, vpp 1, dp 1, 8 micro-batches of 1, layers 1/1/1/1
//             predicted 1.2 ms per step, bubble 0.0400, peak 405.9 KiB (rank 3)
//   planned   for 4 free cpu worker(s), memory not reported
//   searched  368 strategies: 120 feasible, 0 pruned for memory
//   next best zbh2, pp 4, vpp 1, dp 1, 8 micro-batches of 1: 1.2 ms, bubble 0.0400, 430.2 KiB
//   pruned    248: layers < pp x vpp (a chunk without blocks) (4 layers, pp 2 x vpp 3)
std::string AutoPlanText(const v1::AutoPlanReport& report);

}  // namespace pipecoord::cli

#endif  // PIPECOORD_CLI_AUTO_PLAN_TEXT_H_
