// RMSNorm kernels: one block per row for F and B; column strips summed over rows for W.
#include "kernels/cuda/rms_norm.h"

#include <cuda_runtime.h>

#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/device_math.h"

namespace pipecoord::kernels::cuda {
namespace {

using device::BlockSum;
using device::FromDouble;
using device::ToFloat;

// Threads per row block. Fixed, so a row's sum order (and its bits) never depend on h or n.
constexpr int kRowThreads = 256;

// W: a block owns kStripColumns adjacent columns; its kStripRows thread rows walk the n rows.
constexpr int kStripColumns = 32;
constexpr int kStripRows = 32;

template <typename T>
__global__ void RmsNormForwardKernel(const T* __restrict__ x, const T* __restrict__ g,
                                     T* __restrict__ y, float* __restrict__ rstd, int64_t h,
                                     double eps) {
  __shared__ double scratch[32];
  const int64_t row = blockIdx.x;
  const T* xr = x + row * h;
  double ss = 0;
  for (int64_t i = threadIdx.x; i < h; i += blockDim.x) {
    const double v = ToFloat(xr[i]);
    ss += v * v;  // the square of a float is exact in double
  }
  ss = BlockSum(ss, scratch);
  const float r = __double2float_rn(1.0 / sqrt(ss / static_cast<double>(h) + eps));
  if (threadIdx.x == 0) rstd[row] = r;
  const double rd = r;
  T* yr = y + row * h;
  for (int64_t i = threadIdx.x; i < h; i += blockDim.x) {
    yr[i] = FromDouble<T>(static_cast<double>(ToFloat(xr[i])) * rd * ToFloat(g[i]));
  }
}

template <typename T>
__global__ void RmsNormBackwardInputKernel(const T* __restrict__ dy, const T* __restrict__ x,
                                           const T* __restrict__ g,
                                           const float* __restrict__ rstd, T* __restrict__ dx,
                                           int64_t h, bool accumulate) {
  __shared__ double scratch[32];
  const int64_t row = blockIdx.x;
  const T* xr = x + row * h;
  const T* dyr = dy + row * h;
  double dot = 0;  // sum_i g_i dy_i x_i
  for (int64_t i = threadIdx.x; i < h; i += blockDim.x) {
    dot += static_cast<double>(ToFloat(g[i])) * ToFloat(dyr[i]) * ToFloat(xr[i]);
  }
  dot = BlockSum(dot, scratch);
  const double r = rstd[row];
  const double c = r * r * r * dot / static_cast<double>(h);
  T* dxr = dx + row * h;
  for (int64_t i = threadIdx.x; i < h; i += blockDim.x) {
    const double v = r * ToFloat(g[i]) * ToFloat(dyr[i]) - c * ToFloat(xr[i]);
    dxr[i] = FromDouble<T>(accumulate ? ToFloat(dxr[i]) + v : v);
  }
}

// Block (kStripColumns, kStripRows): thread (tx, ty) sums rows ty, ty + kStripRows, ... of
// column 32 * blockIdx.x + tx; the kStripRows partial sums are then added in ty order.
template <typename T>
__global__ void RmsNormBackwardWeightKernel(const T* __restrict__ dy, const T* __restrict__ x,
                                            const float* __restrict__ rstd,
                                            float* __restrict__ dg, int64_t n, int64_t h) {
  __shared__ double partial[kStripRows][kStripColumns + 1];  // +1: no bank conflicts below
  const int tx = threadIdx.x;
  const int ty = threadIdx.y;
  const int64_t col = static_cast<int64_t>(blockIdx.x) * kStripColumns + tx;
  double acc = 0;
  if (col < h) {
    for (int64_t t = ty; t < n; t += kStripRows) {
      acc += static_cast<double>(ToFloat(dy[t * h + col])) * ToFloat(x[t * h + col]) *
             static_cast<double>(rstd[t]);
    }
  }
  partial[ty][tx] = acc;
  __syncthreads();
  if (ty == 0 && col < h) {
    double sum = dg[col];
    for (int k = 0; k < kStripRows; ++k) sum += partial[k][tx];
    dg[col] = __double2float_rn(sum);
  }
}

Status CheckRows(const char* function, int64_t n, int64_t h) {
  PIPECOORD_RETURN_IF_ERROR(CheckSize(function, "n", n));
  if (h < 1) {
    return InvalidArgument(std::string(function) + ": h must be >= 1, got " + std::to_string(h));
  }
  return Status::Ok();
}

template <typename T>
Status Forward(const T* x, const T* g, T* y, float* rstd, int64_t n, int64_t h, double eps,
               cudaStream_t stream) {
  constexpr const char* kFn = "RmsNormForward";
  PIPECOORD_RETURN_IF_ERROR(CheckRows(kFn, n, h));
  if (n == 0) return Status::Ok();
  PIPECOORD_RETURN_IF_ERROR(CheckPointer(kFn, "x", x));
  PIPECOORD_RETURN_IF_ERROR(CheckPointer(kFn, "g", g));
  PIPECOORD_RETURN_IF_ERROR(CheckPointer(kFn, "y", y));
  PIPECOORD_RETURN_IF_ERROR(CheckPointer(kFn, "rstd", rstd));
  RmsNormForwardKernel<T><<<static_cast<unsigned>(n), kRowThreads, 0, stream>>>(x, g, y, rstd, h,
                                                                                 eps);
  return LaunchStatus("RmsNormForwardKernel");
}

template <typename T>
Status BackwardInput(const T* dy, const T* x, const T* g, const float* rstd, T* dx, int64_t n,
                     int64_t h, bool accumulate, cudaStream_t stream) {
  constexpr const char* kFn = "RmsNormBackwardInput";
  PIPECOORD_RETURN_IF_ERROR(CheckRows(kFn, n, h));
  if (n == 0) return Status::Ok();
  PIPECOORD_RETURN_IF_ERROR(CheckPointer(kFn, "dy", dy));
  PIPECOORD_RETURN_IF_ERROR(CheckPointer(kFn, "x", x));
  PIPECOORD_RETURN_IF_ERROR(CheckPointer(kFn, "g", g));
  PIPECOORD_RETURN_IF_ERROR(CheckPointer(kFn, "rstd", rstd));
  PIPECOORD_RETURN_IF_ERROR(CheckPointer(kFn, "dx", dx));
  RmsNormBackwardInputKernel<T><<<static_cast<unsigned>(n), kRowThreads, 0, stream>>>(
      dy, x, g, rstd, dx, h, accumulate);
  return LaunchStatus("RmsNormBackwardInputKernel");
}

template <typename T>
Status BackwardWeight(const T* dy, const T* x, const float* rstd, float* dg, int64_t n, int64_t h,
                      cudaStream_t stream) {
  constexpr const char* kFn = "RmsNormBackwardWeight";
  PIPECOORD_RETURN_IF_ERROR(CheckRows(kFn, n, h));
  if (n == 0) return Status::Ok();  // dg += nothing
  PIPECOORD_RETURN_IF_ERROR(CheckSize(kFn, "h", h));
  PIPECOORD_RETURN_IF_ERROR(CheckPointer(kFn, "dy", dy));
  PIPECOORD_RETURN_IF_ERROR(CheckPointer(kFn, "x", x));
  PIPECOORD_RETURN_IF_ERROR(CheckPointer(kFn, "rstd", rstd));
  PIPECOORD_RETURN_IF_ERROR(CheckPointer(kFn, "dg", dg));
  const unsigned blocks = static_cast<unsigned>((h + kStripColumns - 1) / kStripColumns);
  RmsNormBackwardWeightKernel<T>
      <<<blocks, dim3(kStripColumns, kStripRows), 0, stream>>>(dy, x, rstd, dg, n, h);
  return LaunchStatus("RmsNormBackwardWeightKernel");
}

}  // namespace

Status RmsNormForward(const float* x, const float* g, float* y, float* rstd, int64_t n, int64_t h,
                      double eps, cudaStream_t stream) {
  return Forward(x, g, y, rstd, n, h, eps, stream);
}
Status RmsNormForward(const __nv_bfloat16* x, const __nv_bfloat16* g, __nv_bfloat16* y,
                      float* rstd, int64_t n, int64_t h, double eps, cudaStream_t stream) {
  return Forward(x, g, y, rstd, n, h, eps, stream);
}

Status RmsNormBackwardInput(const float* dy, const float* x, const float* g, const float* rstd,
                            float* dx, int64_t n, int64_t h, bool accumulate,
                            cudaStream_t stream) {
  return BackwardInput(dy, x, g, rstd, dx, n, h, accumulate, stream);
}
Status RmsNormBackwardInput(const __nv_bfloat16* dy, const __nv_bfloat16* x,
                            const __nv_bfloat16* g, const float* rstd, __nv_bfloat16* dx,
                            int64_t n, int64_t h, bool accumulate, cudaStream_t stream) {
  return BackwardInput(dy, x, g, rstd, dx, n, h, accumulate, stream);
}

Status RmsNormBackwardWeight(const float* dy, const float* x, const float* rstd, float* dg,
                             int64_t n, int64_t h, cudaStream_t stream) {
  return BackwardWeight(dy, x, rstd, dg, n, h, stream);
}
Status RmsNormBackwardWeight(const __nv_bfloat16* dy, const __nv_bfloat16* x, const float* rstd,
                             float* dg, int64_t n, int64_t h, cudaStream_t stream) {
  return BackwardWeight(dy, x, rstd, dg, n, h, stream);
}

}  // namespace pipecoord::kernels::cuda
