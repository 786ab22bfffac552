// Calibration: a job's own schedule re-simulated with what its steps measured, in seconds.
//
// From a few measured steps (each rank's actions in its job list's order) it takes, as medians
// over the steps of each step's mean:
//   per virtual stage, the time of one micro-batch's F, B, W (and fused BW) over micro-batches
//   and data-parallel replicas;
//   per pipeline rank and list position, the time of each non-compute action (sends, receives,
//   PROBE, OPT with its all-reduce): the executor runs them in line, so they hold their rank;
//   the transfer time: for each compute action that waited for a peer's input (wait_ns > 0),
//   its start minus the end of the peer's action that produced the input (the send and the
//   wire; a consumer that did not wait only bounds it, so it gives no sample), clamped at 0.
// Three simulations of the plan's lists come from these costs; the split of idle time
// (idle_breakdown.h) is their differences:
//   equal      every stage at the mean of the stages' costs, no comm, non-compute 0
//   stages     the measured per-stage costs, no comm, non-compute 0
//   calibrated the measured costs, non-compute actions and transfer time: the prediction
//              shown and checked once the job is calibrated
// Medians of per-step means, not of single actions: on a shared CPU a descheduled action makes
// the distribution of single durations skewed, and a step's makespan follows the mean.
#ifndef PIPECOORD_JOBPLAN_CALIBRATION_H_
#define PIPECOORD_JOBPLAN_CALIBRATION_H_

#include <vector>

#include "common/status.h"
#include "jobplan/plan_expectations.h"
#include "proto/job.pb.h"
#include "proto/telemetry.pb.h"
#include "schedules/schedule.h"
#include "schedules/simulator.h"

namespace pipecoord::jobplan {

// One measured step: each global rank's (dp_rank x pp + rank) actions, in list order.
using StepActions = std::vector<std::vector<v1::ActionTiming>>;

// True when every global rank reported exactly its plan list (PROBE and OPT included), in order.
bool MatchesPlan(const v1::JobSpec& spec, const v1::Plan& plan, const StepActions& step);

// Measured costs, seconds.
struct MeasuredCosts {
  std::vector<double> f, b, w, bw;  // per virtual stage (0 where the schedule has no such action)
  std::vector<std::vector<double>> other;  // per pipeline rank and list position; 0 at compute
  double comm = 0;
  int steps = 0;
};

// Medians over `steps`, each matching the plan (MatchesPlan). INVALID_ARGUMENT when empty or a
// step does not match.
Result<MeasuredCosts> MeasureCosts(const v1::JobSpec& spec, const v1::Plan& plan,
                                   const std::vector<StepActions>& steps);

struct CalibratedJob {
  schedules::Schedule schedule;  // the plan's lists, every action kept
  MeasuredCosts costs;
  schedules::Simulation equal, stages, calibrated;
  PlanExpectations expect;  // `calibrated` as the checks read it: compute slots, seconds
};

// The plan's lists as a schedule to simulate, every action kept (PROBE and OPT, which depend on
// nothing, get micro-batch 0 and a stage of their rank so the shape check accepts them).
schedules::Schedule ListsSchedule(const v1::JobSpec& spec, const v1::Plan& plan);

// Durations of the plan's actions for a simulation: compute from per-stage costs; non-compute
// from `other` (empty: 0).
schedules::ActionDurations Durations(const schedules::Schedule& schedule, const MeasuredCosts& costs,
                                     bool with_other_and_comm);

// The three simulations of the plan with `costs`; INVALID_ARGUMENT if they cannot be run.
Result<CalibratedJob> Calibrate(const v1::JobSpec& spec, const v1::Plan& plan, const MeasuredCosts& costs);

// The proto form (Job.calibration); plan_step_s: the plan's makespan in seconds as the job
// showed it before (makespan x the fastest rank's seconds per cost unit).
v1::Calibration ToProto(const CalibratedJob& job, double plan_step_s);

// A simulated rank's idle time: makespan - its compute busy time.
inline double SimIdle(const schedules::Simulation& sim, int rank) {
  return sim.makespan - sim.ranks[rank].busy;
}

}  // namespace pipecoord::jobplan

#endif  // PIPECOORD_JOBPLAN_CALIBRATION_H_
