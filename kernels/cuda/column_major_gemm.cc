#include "kernels/cuda/column_major_gemm.h"

namespace pipecoord::kernels::cuda {

const char* LinearStepName(LinearStep step) {
  switch (step) {
    case LinearStep::kForward:
      return "F y = x w^T";
    case LinearStep::kBackwardInput:
      return "B dx = dy w";
    case LinearStep::kBackwardWeight:
      return "W dw += dy^T x";
  }
  return "?";
}

ColumnMajorGemm PlanColumnMajorGemm(LinearStep step, const cpu::LinearDims& d) {
  // Column-major views of the row-major buffers: x is [in, n], w is [in, out], y and dy are
  // [out, n], dx is [in, n], dw is [in, out]; each leading dimension is the row-major width.
  const StoredMatrix x{d.in, d.n, d.in};
  const StoredMatrix w{d.in, d.out, d.in};
  const StoredMatrix dy{d.out, d.n, d.out};
  ColumnMajorGemm g;
  switch (step) {
    case LinearStep::kForward:  // y^T [out, n] = (w^T)^T [out, in] * x^T [in, n]
      g.transpose_a = true;
      g.a = w;
      g.b = x;
      g.c = dy;  // y has dy's shape
      g.m = d.out;
      g.n = d.n;
      g.k = d.in;
      break;
    case LinearStep::kBackwardInput:  // dx^T [in, n] = w^T [in, out] * dy^T [out, n]
      g.a = w;
      g.b = dy;
      g.c = x;  // dx has x's shape
      g.m = d.in;
      g.n = d.n;
      g.k = d.out;
      break;
    case LinearStep::kBackwardWeight:  // dw^T [in, out] = x^T [in, n] * (dy^T)^T [n, out]
      g.transpose_b = true;
      g.a = x;
      g.b = dy;
      g.c = w;  // dw has w's shape
      g.m = d.in;
      g.n = d.out;
      g.k = d.n;
      break;
  }
  return g;
}

}  // namespace pipecoord::kernels::cuda
