// Probe placement: one PROBE action per rank and step, inside the rank's longest predicted
// bubble, so the numerical probe runs while the rank would be idle anyway.
//
// Windows come from the closed forms of schedules/bubble_prediction.h for fthenb, 1f1b and
// interleaved (equal stages, no communication cost), and from the simulator's idle windows for
// every other schedule. A window ending at a compute action puts the probe just before that
// action (after the sends of the one before it); the trailing window puts it at the end of the
// list (before OPT, which comes last).
#ifndef PIPECOORD_JOBPLAN_PROBE_PLACEMENT_H_
#define PIPECOORD_JOBPLAN_PROBE_PLACEMENT_H_

#include <vector>

#include "common/status.h"
#include "proto/job.pb.h"
#include "schedules/schedule.h"
#include "schedules/simulator.h"

namespace pipecoord::jobplan {

struct ProbeWindow {
  int rank = 0;
  schedules::Interval window;  // cost units
  bool closed_form = false;    // from bubble_prediction.h rather than the simulator
  int position = -1;           // index in the rank's list where the PROBE goes; -1: none
  // The F the probe replays (the replay probe, docs/monitoring.md): the earliest F before the
  // position whose backward comes after it (its input is still held there), when the window is at
  // least kReplayFit times that F's duration (the replay and the known-answer GEMM fit in it);
  // else -1 (the known-answer GEMM only). The PROBE action carries it as its stage and micro-batch.
  // With dp > 1 and no such F (the probe sits before the rank's first F, or after its last B),
  // the seeded forward instead when the window holds kReplayFit of the stage's F: replay_mb
  // kSeededReplay, and every replica runs its stage on the same seeded input, so the replicas
  // must agree bit for bit.
  int replay_stage = -1;
  int replay_mb = -1;
};
inline constexpr int kSeededReplay = -2;
inline constexpr double kReplayFit = 1.25;

// The window and position chosen for each rank of `schedule` (its compute and communication
// actions, no PROBE or OPT) from its simulation `sim`. `equal_stages`: every stage holds as many
// layers (the closed forms assume it).
std::vector<ProbeWindow> ChooseProbeWindows(const v1::JobSpec& spec, const schedules::Schedule& schedule,
                                            const schedules::Simulation& sim, bool equal_stages);

// The same for a planned job, simulating its lists (PROBE and OPT left out; positions refer to
// the lists without them).
Result<std::vector<ProbeWindow>> ChooseProbeWindows(const v1::JobSpec& spec, const v1::Plan& plan);

// What a rank's PROBE computes (kernels/cpu/known_answer_gemm.h): Y [m, n] = X [m, k] W [n, k]^T
// on seeded integer inputs, through the kernel the rank trains with. The stage's largest GEMM:
// m the micro-batch's tokens (micro_batch_size x seq_len: the column-parallel GEMMs see them all,
// with sequence parallelism once gathered), k = hidden, n the widest output a tensor-parallel
// rank computes: w1 and w3's ffn / tp, or vocab / tp on the rank holding the LM head when wider.
// m and n are cut to at most kProbeMaxElements / k each (whole rows and columns of the same GEMM:
// the same kernel at the model's inner dimension), so a probe's inputs stay within 16 MiB each
// and the coordinator checks it in O((m + n) k). health.probeSize n > 0 asks for an n x n x n
// GEMM instead; torch workers, whose modules' shapes are their own, run kDefaultProbeSize's cube.
struct ProbeGemm {
  int64_t m = 0, k = 0, n = 0;
};
inline constexpr int64_t kProbeMaxElements = int64_t{1} << 22;
inline constexpr int kTorchProbeSize = 32;
ProbeGemm ProbeGemmFor(const v1::JobSpec& spec, bool holds_head);
// Whether pipeline rank `rank` of `plan` holds the stage with the LM head.
bool HoldsHead(const v1::Plan& plan, int rank);

// Inserts a PROBE at each window's position (none when spec.health turns probes off).
void PlaceProbes(const v1::JobSpec& spec, const std::vector<ProbeWindow>& windows, schedules::Schedule* schedule);

}  // namespace pipecoord::jobplan

#endif  // PIPECOORD_JOBPLAN_PROBE_PLACEMENT_H_
