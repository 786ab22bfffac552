// Text for `pipectl status` and `pipectl rebalance`: a job's predictions (plan and calibrated)
// and where its measured idle time went (jobplan/idle_breakdown.h), as plain lines.
#ifndef PIPECOORD_CLI_IDLE_TEXT_H_
#define PIPECOORD_CLI_IDLE_TEXT_H_

#include <string>

#include "proto/job.pb.h"

namespace pipecoord::cli {

// "predicted ..." and "idle ..." lines (empty when the job has measured no step): the calibrated
// step time and bubble rate beside the plan's and the measured means since calibration, then
// the idle split per step summed over ranks and per rank, means over the steps that have it.
std::string PredictionAndIdleText(const v1::Job& job);

// A rebalance proposal: the placement, the predicted step times and gain, and why.
std::string RebalanceText(const v1::Job& job);

}  // namespace pipecoord::cli

#endif  // PIPECOORD_CLI_IDLE_TEXT_H_
