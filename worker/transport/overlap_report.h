// The figures of gpu_transport_bench's overlap measurement (issue 15 section 3: "sends/receives
// overlap compute (measured)") and their printed form. Pure arithmetic and formatting, no CUDA,
// so the formula and the output format are tested without a GPU (overlap_report_test).
//
// Three wall-clock times of one run, each the best of a few rounds:
//   compute   (a) the compute workload alone on the sender's compute stream
//   transfer  (b) the transfer alone: one tensor from the sender's device to the receiver's
//   together  (c) both, issued as the worker issues them: the tensor is produced, sent, and
//                 the compute stream goes on with the next work while the send is in flight
// The named baseline is serial = compute + transfer (what (c) would cost with no overlap).
//   overlap = (compute + transfer - together) / min(compute, transfer)
// 1 means the shorter of the two is fully hidden behind the longer, 0 means they ran one after
// the other; below 0 they slowed each other down, slightly above 1 is noise between rounds.
#ifndef PIPECOORD_WORKER_TRANSPORT_OVERLAP_REPORT_H_
#define PIPECOORD_WORKER_TRANSPORT_OVERLAP_REPORT_H_

#include <string>

#include "common/status.h"

namespace pipecoord::worker {

struct OverlapTimes {
  double compute_ms = 0;   // (a)
  double transfer_ms = 0;  // (b)
  double together_ms = 0;  // (c)
};

struct OverlapFigures {
  OverlapTimes times;
  double serial_ms = 0;         // compute + transfer: the baseline
  double overlap = 0;           // (serial - together) / min(compute, transfer)
  double together_over_serial = 0;  // together / serial: 1 serial, max/serial fully hidden
};

// INVALID_ARGUMENT naming the field unless every time is a positive finite number.
Result<OverlapFigures> ComputeOverlap(const OverlapTimes& times);

// How many calls of `per_call_ms` each take about `target_ms`: rounded to nearest, at least 1,
// at most `max_calls` (the bench sizes its compute loop to its transfer's time with it).
// INVALID_ARGUMENT naming the argument unless both times are positive and finite and
// max_calls >= 1.
Result<int> CallsToMatch(double target_ms, double per_call_ms, int max_calls);

// Two lines, each ending in '\n': the column names and the figures, e.g.
//   "  compute_ms  transfer_ms  together_ms   serial_ms  overlap  together/serial\n"
//   "      66.123       67.031       70.112     133.154    0.953           0.5265\n"
std::string FormatOverlapTable(const OverlapFigures& figures);

}  // namespace pipecoord::worker

#endif  // PIPECOORD_WORKER_TRANSPORT_OVERLAP_REPORT_H_
