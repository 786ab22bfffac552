// A LivenessResult for people (op by op) and programs (JSON), and the side-by-side comparison
// of the two estimators on one block.
//
// LivenessJson: {"persistable_bytes", "input_bytes", "peak_bytes", "peak_op", "peak_op_name",
//                "program_end": [...], "ops": [{"name", "before", "during", "after"}]}
// BlockComparisonJson: {"analytic": {"forward_keeps", "b_keeps_for_w", "peak"},
//                       "liveness": {"forward_keeps", "b_keeps_for_w", "peak", "peak_op"}}
// (bytes of one block and micro-batch beyond the weights and the tensors handed between blocks)
#ifndef PIPECOORD_MEMORY_LIVENESS_REPORT_H_
#define PIPECOORD_MEMORY_LIVENESS_REPORT_H_

#include <string>

#include "common/status.h"
#include "memory/activations.h"
#include "memory/liveness.h"

namespace pipecoord::memory {

std::string LivenessText(const LivenessResult& result);
std::string LivenessJson(const LivenessResult& result);  // one object, no trailing newline

// The block's programs (TransformerBlockProgram) replayed, next to the analytic numbers.
struct BlockComparison {
  int64_t analytic_forward = 0, analytic_w = 0, analytic_peak = 0;
  int64_t live_forward = 0, live_w = 0, live_peak = 0;
  std::string live_peak_op;
};

// Errors: those of TransformerBlockProgram and SimulateLiveness.
Result<BlockComparison> CompareBlock(const ModelSpec& model, const TrainingSpec& training);
std::string BlockComparisonText(const BlockComparison& c);
std::string BlockComparisonJson(const BlockComparison& c);  // one object, no trailing newline

}  // namespace pipecoord::memory

#endif  // PIPECOORD_MEMORY_LIVENESS_REPORT_H_
