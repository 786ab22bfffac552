// The exact linear launcher: argument checks, then the kernel of exact_linear_kernels.h.
#include "kernels/cuda/exact_linear.h"

#include <cuda_runtime.h>

#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/exact_linear_kernels.h"

namespace pipecoord::kernels::cuda {
namespace {

using exact_linear::ExactLinearKernel;
using exact_linear::kTile;

}  // namespace

Status ExactLinearForward(const float* x, const float* w, float* y, int64_t n, int64_t in,
                          int64_t out, cudaStream_t stream) {
  constexpr const char* kFn = "ExactLinearForward";
  PIPECOORD_RETURN_IF_ERROR(CheckSize(kFn, "n", n, int64_t{65535} * kTile));
  PIPECOORD_RETURN_IF_ERROR(CheckSize(kFn, "in", in, int64_t{1} << 40));
  PIPECOORD_RETURN_IF_ERROR(CheckSize(kFn, "out", out, int64_t{1} << 30));
  if (n == 0 || out == 0) return Status::Ok();
  PIPECOORD_RETURN_IF_ERROR(CheckPointer(kFn, "y", y));
  if (in > 0) {
    PIPECOORD_RETURN_IF_ERROR(CheckPointer(kFn, "x", x));
    PIPECOORD_RETURN_IF_ERROR(CheckPointer(kFn, "w", w));
  }
  const dim3 grid(static_cast<unsigned>((out + kTile - 1) / kTile),
                  static_cast<unsigned>((n + kTile - 1) / kTile));
  ExactLinearKernel<<<grid, dim3(kTile, kTile), 0, stream>>>(x, w, y, n, in, out);
  return LaunchStatus("ExactLinearKernel");
}

}  // namespace pipecoord::kernels::cuda
