// IdleBreakdown: where one measured step's idle time went, per global rank, in seconds.
//
// A rank's measured idle is the step time minus its compute busy time (the idle behind the
// measured bubble rate: summed over ranks it is bubble x ranks x step time). With the job's
// three simulations (calibration.h) it splits into
//   inherent   = idle(equal)                    the schedule's own bubble, every stage alike
//   imbalance  = idle(stages) - idle(equal)     unequal stages (layer placement, embedding, head)
//   comm       = idle(calibrated) - idle(stages)  transfers and the rank's in-line non-compute
//                + late transfers                actions (sends, receives, PROBE, OPT + all-reduce),
//                                                and what inputs that left their producer on time
//                                                but arrived later than calibrated added (a slow link)
//   variation  = measured - idle(calibrated)    a slow or noisy rank this step: negative when the
//                - late transfers                rank ran faster than its medians
// so the four add up to the measured idle. A part may be negative for one rank (a heavy stage
// idles less than an even one); summed over ranks, imbalance is the makespan it costs.
// The variation's cause: among the rank's compute actions that waited for a peer longer than
// the calibrated prediction, the one that waited the most names the peer; from the peer's action
// that produced the input the chain is followed while that action itself waited too long for
// its own peer; the rank at the end (late by itself: slow compute, descheduled) is the cause. A
// hop whose input left its producer on time but arrived late (the gap from the producer's end to
// the consumer's start, while the consumer waited, longer than calibrated by more than the
// minimum) ends the chain at that link: the cause is the producer's link to the consumer
// (cause_is_link), not the producer.
// (The wait-for chain as in Narayanan et al. 2021's 1F1B dependencies: F from the previous
// stage, B from the next.)
#ifndef PIPECOORD_JOBPLAN_IDLE_BREAKDOWN_H_
#define PIPECOORD_JOBPLAN_IDLE_BREAKDOWN_H_

#include <vector>

#include "common/rank_layout.h"
#include "jobplan/calibration.h"
#include "proto/job.pb.h"

namespace pipecoord::jobplan {

struct IdleBreakdown {
  std::vector<v1::RankIdle> ranks;  // by global rank
  v1::IdleSplit total;              // summed; cause_rank: the most frequent cause (lowest on a tie)
};

// `step` matches the plan (MatchesPlan); step_time_s as measured (StepRecord.step_time_s).
// A cause is named only for a variation above `min_variation_s`.
// `step` holds every global rank's actions, by global rank of `layout`.
IdleBreakdown SplitIdle(const CalibratedJob& job, const RankLayout& layout, const StepActions& step,
                        double step_time_s, double min_variation_s);

// Adds `part`'s four seconds to `sum` (its cause_rank is left alone).
void AddIdleSplit(const v1::IdleSplit& part, v1::IdleSplit* sum);

}  // namespace pipecoord::jobplan

#endif  // PIPECOORD_JOBPLAN_IDLE_BREAKDOWN_H_
