// The exact linear kernel: a 2-D grid of 16 x 16 output tiles, one thread per output.
#include "kernels/cuda/exact_linear.h"

#include <cuda_runtime.h>

#include "kernels/cuda/cuda_check.h"

namespace pipecoord::kernels::cuda {
namespace {

constexpr int kTile = 16;

__global__ void ExactLinearKernel(const float* __restrict__ x, const float* __restrict__ w,
                                  float* __restrict__ y, int64_t n, int64_t in, int64_t out) {
  const int64_t o = static_cast<int64_t>(blockIdx.x) * kTile + threadIdx.x;
  const int64_t t = static_cast<int64_t>(blockIdx.y) * kTile + threadIdx.y;
  if (o >= out || t >= n) return;
  const float* xr = x + t * in;
  const float* wr = w + o * in;
  double acc = 0.0;
  for (int64_t i = 0; i < in; ++i) acc += static_cast<double>(xr[i]) * static_cast<double>(wr[i]);
  y[t * out + o] = __double2float_rn(acc);
}

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
