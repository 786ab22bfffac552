// RMSNorm launchers: argument checks, then the kernels of rms_norm_kernels.h.
#include "kernels/cuda/rms_norm.h"

#include <cuda_runtime.h>

#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/rms_norm_kernels.h"

namespace pipecoord::kernels::cuda {
namespace {

using rms_norm::kRowThreads;
using rms_norm::kStripColumns;
using rms_norm::kStripRows;
using rms_norm::RmsNormBackwardInputKernel;
using rms_norm::RmsNormBackwardWeightKernel;
using rms_norm::RmsNormForwardKernel;

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
