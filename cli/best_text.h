// A schedule "best" job's ranking as pipectl shows it (status, submit --dry-run): that "best"
// chose the schedule that runs, and the runners-up the coordinator kept beside the job.
#ifndef PIPECOORD_CLI_BEST_TEXT_H_
#define PIPECOORD_CLI_BEST_TEXT_H_

#include <string>

#include "proto/job.pb.h"

namespace pipecoord::cli {

// Lines under status's 10-character labels, each ending in a newline; "" for an empty report:
//   best      chose zbv (vpp 2): makespan 25.5 cost units, bubble 0.1176, peak 4 micro-batches
//   runner-up zbh2 (vpp 1): makespan 26, bubble 0.1538, peak 7
//   refused   2 within memLimit 3: fthenb: peak activations 8 on rank 0, above ...; 1f1b: ...
// At most `runners_up` runners-up, then "... and N more" (the JSON has them all).
std::string BestScheduleText(const v1::BestScheduleReport& report, int runners_up = 3);

}  // namespace pipecoord::cli

#endif  // PIPECOORD_CLI_BEST_TEXT_H_
