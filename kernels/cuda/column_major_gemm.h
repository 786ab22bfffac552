// How each step of the linear layer (kernels/cpu/linear.h: row-major X [n, in], W [out, in],
// Y [n, out]) becomes one column-major GEMM D = alpha op(A) op(B) + beta C, the only form
// cuBLAS(Lt) computes. A row-major [r, c] buffer is the same bytes as a column-major [c, r]
// matrix with leading dimension c, so no step copies or transposes any data.
//
// Pure arithmetic (no CUDA), so the mapping is tested on the CPU against the CPU twin.
#ifndef PIPECOORD_KERNELS_CUDA_COLUMN_MAJOR_GEMM_H_
#define PIPECOORD_KERNELS_CUDA_COLUMN_MAJOR_GEMM_H_

#include <cstdint>

#include "kernels/cpu/linear.h"

namespace pipecoord::kernels::cuda {

// The three steps, named by their inputs in argument order (first, second) and output:
//   F: y = x w^T        inputs (x, w),   output y [n, out]
//   B: dx = dy w        inputs (dy, w),  output dx [n, in]
//   W: dw += dy^T x     inputs (dy, x),  output dw [out, in]
enum class LinearStep { kForward, kBackwardInput, kBackwardWeight };

// "F y = x w^T", "B dx = dy w", "W dw += dy^T x": for error messages and benchmark lines.
const char* LinearStepName(LinearStep step);

// A matrix as it is stored, column-major, before any transpose is applied.
struct StoredMatrix {
  int64_t rows = 0;
  int64_t cols = 0;
  int64_t ld = 0;  // leading dimension: elements between consecutive columns
};

// In every step A is the step's second input and B its first; C (= D) is its output.
struct ColumnMajorGemm {
  bool transpose_a = false;
  bool transpose_b = false;
  int64_t m = 0;  // rows of op(A) and of C
  int64_t n = 0;  // columns of op(B) and of C
  int64_t k = 0;  // the summed dimension
  StoredMatrix a;
  StoredMatrix b;
  StoredMatrix c;
};

ColumnMajorGemm PlanColumnMajorGemm(LinearStep step, const cpu::LinearDims& d);

}  // namespace pipecoord::kernels::cuda

#endif  // PIPECOORD_KERNELS_CUDA_COLUMN_MAJOR_GEMM_H_
