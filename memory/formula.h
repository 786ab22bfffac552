// Shape formulas: the integer expressions recipes use for tensor dimensions ("s", "2*f",
// "g*h/a"). Variables are single letters bound by ShapeVars; operators + - * / and
// parentheses; evaluation is exact (a division that leaves a remainder is an error, never
// rounded) and checked for overflow.
#ifndef PIPECOORD_MEMORY_FORMULA_H_
#define PIPECOORD_MEMORY_FORMULA_H_

#include <cstdint>
#include <string_view>

#include "common/status.h"

namespace pipecoord::memory {

// The letters a formula may use (the notation of Korthikanti et al. 2022).
struct ShapeVars {
  int64_t s = 0;  // sequence length
  int64_t b = 0;  // micro-batch size
  int64_t h = 0;  // hidden size
  int64_t f = 0;  // FFN (intermediate) size
  int64_t a = 0;  // attention heads
  int64_t g = 0;  // key/value heads (GQA groups; a when there is no GQA)
  int64_t v = 0;  // vocabulary size
  int64_t d = 0;  // features per attention head (h / a unless the model gives its own)
};

// INVALID_ARGUMENT naming the formula and the problem ("\"g*h/q\": unknown variable 'q'").
Result<int64_t> EvalFormula(std::string_view formula, const ShapeVars& vars);

}  // namespace pipecoord::memory

#endif  // PIPECOORD_MEMORY_FORMULA_H_
