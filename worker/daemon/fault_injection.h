// Fault injection for tests and demos (worker --inject RULE[,RULE...]). RANK is the global rank
// (dp_rank * pp + rank; the pipeline rank when dp = 1):
//   slow:RANK:FACTOR[:STEP]  every compute action of RANK takes FACTOR times as long (sleeps
//                      after it, finishing with a yield loop so the factor is exact), from STEP
//                      on (default 0)
//   hang:RANK:STEP     RANK stops at its first compute action of STEP until the job is cancelled
//   corrupt:RANK:STEP  from STEP on, RANK's fp32 GEMM (kernels/cpu LinearForward, on the rank's
//                      thread) flips one bit of one output element in every call: its training
//                      and its numerical probe alike (a CUDA rank's training GEMMs run on the
//                      device and are not touched: only its probe, which runs on the host)
//   flip:RANK:STEP[:MB]  a transient fault: at STEP, RANK's first F of micro-batch MB (default
//                      0) has one bit of the last element of its first GEMM's output
//                      flipped, once (kernels/cpu CorruptNextGemm): that F's output and the
//                      losses after it are off, and nothing else; the replay probe is what can
//                      see it (docs/monitoring.md says when it does)
//   oom:RANK:BYTES[:STEP]  RANK allocates and holds BYTES more from STEP on (default 0)
//   slowlink:RANK:MS[:STEP]  every message RANK sends (activations, gradients, collectives) of
//                      STEP on (default 0) is handed to its link MS milliseconds after the send:
//                      a congested or degraded link (the sender goes on at once; the receiver
//                      waits). A delay, not a factor of the link's speed: loopback moves these
//                      tensors in microseconds, so a factor of it would be invisible here
#ifndef PIPECOORD_WORKER_DAEMON_FAULT_INJECTION_H_
#define PIPECOORD_WORKER_DAEMON_FAULT_INJECTION_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"

namespace pipecoord::worker {

struct FaultRule {
  enum class Kind { kSlow, kHang, kCorrupt, kFlip, kOom, kSlowLink };
  Kind kind = Kind::kSlow;
  int rank = 0;        // global rank
  double factor = 1;   // slow
  int step = 0;        // hang, corrupt; slow, oom, slowlink: the first step the fault applies to
  uint64_t bytes = 0;  // oom
  int delay_ms = 0;    // slowlink
  int microbatch = 0;  // flip
  std::string text;    // as given
};

// One rule; INVALID_ARGUMENT naming the rule and what is wrong, e.g.
// "--inject slow:1:0.5: FACTOR must be a number in [1, 1000], got \"0.5\"".
Result<FaultRule> ParseFaultRule(std::string_view text);
// Comma-separated rules ("" gives none).
Result<std::vector<FaultRule>> ParseFaultRules(std::string_view text);

// The rules that apply to one global rank.
std::vector<FaultRule> RulesFor(const std::vector<FaultRule>& rules, int global_rank);

}  // namespace pipecoord::worker

#endif  // PIPECOORD_WORKER_DAEMON_FAULT_INJECTION_H_
