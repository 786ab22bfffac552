// Launchers of the elementwise kernels (elementwise_kernels.h).
#include "worker/cuda/elementwise.h"

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>

#include "kernels/cuda/cuda_check.h"
#include "worker/cuda/elementwise_kernels.h"

namespace pipecoord::worker::cuda {
namespace {

using kernels::cuda::CheckPointer;
using kernels::cuda::CheckSize;
using kernels::cuda::LaunchStatus;
using kernels::cuda::device::GridBlocks;
using namespace elementwise;  // NOLINT: the kernels this file launches

constexpr int64_t kMaxElements = int64_t{1} << 50;

template <typename T>
Status Add(T* acc, const T* x, int64_t n, cudaStream_t stream) {
  constexpr const char* kFn = "AddInPlace";
  PIPECOORD_RETURN_IF_ERROR(CheckSize(kFn, "n", n, kMaxElements));
  if (n == 0) return Status::Ok();
  PIPECOORD_RETURN_IF_ERROR(CheckPointer(kFn, "acc", acc));
  PIPECOORD_RETURN_IF_ERROR(CheckPointer(kFn, "x", x));
  AddInPlaceKernel<T><<<GridBlocks(n, kThreads), kThreads, 0, stream>>>(acc, x, n);
  return LaunchStatus("AddInPlaceKernel");
}

template <typename T>
Status Bias(T* y, const T* b, int64_t rows, int64_t cols, cudaStream_t stream) {
  constexpr const char* kFn = "AddBias";
  PIPECOORD_RETURN_IF_ERROR(CheckSize(kFn, "rows", rows, kMaxElements));
  PIPECOORD_RETURN_IF_ERROR(CheckSize(kFn, "cols", cols, kMaxElements));
  if (rows == 0 || cols == 0) return Status::Ok();
  PIPECOORD_RETURN_IF_ERROR(CheckSize(kFn, "rows * cols", rows * cols, kMaxElements));  // no overflow: both < 2^50
  PIPECOORD_RETURN_IF_ERROR(CheckPointer(kFn, "y", y));
  PIPECOORD_RETURN_IF_ERROR(CheckPointer(kFn, "b", b));
  AddBiasKernel<T><<<GridBlocks(rows * cols, kThreads), kThreads, 0, stream>>>(y, b, rows, cols);
  return LaunchStatus("AddBiasKernel");
}

template <typename T>
Status BiasGrad(const T* dy, float* db, int64_t rows, int64_t cols, cudaStream_t stream) {
  constexpr const char* kFn = "AddBiasGrad";
  PIPECOORD_RETURN_IF_ERROR(CheckSize(kFn, "rows", rows, kMaxElements));
  PIPECOORD_RETURN_IF_ERROR(CheckSize(kFn, "cols", cols, kMaxElements));
  if (rows == 0 || cols == 0) return Status::Ok();
  PIPECOORD_RETURN_IF_ERROR(CheckSize(kFn, "rows * cols", rows * cols, kMaxElements));
  PIPECOORD_RETURN_IF_ERROR(CheckPointer(kFn, "dy", dy));
  PIPECOORD_RETURN_IF_ERROR(CheckPointer(kFn, "db", db));
  AddBiasGradKernel<T><<<GridBlocks(cols, kThreads), kThreads, 0, stream>>>(dy, db, rows, cols);
  return LaunchStatus("AddBiasGradKernel");
}

template <typename V>
Status Accumulate(double* acc, const V* value, cudaStream_t stream) {
  PIPECOORD_RETURN_IF_ERROR(CheckPointer("AccumulateScalar", "acc", acc));
  PIPECOORD_RETURN_IF_ERROR(CheckPointer("AccumulateScalar", "value", value));
  AccumulateScalarKernel<V><<<1, kScalarThreads, 0, stream>>>(acc, value);
  return LaunchStatus("AccumulateScalarKernel");
}

}  // namespace

Status AddInPlace(float* acc, const float* x, int64_t n, cudaStream_t stream) {
  return Add(acc, x, n, stream);
}

Status AddInPlace(__nv_bfloat16* acc, const __nv_bfloat16* x, int64_t n, cudaStream_t stream) {
  return Add(acc, x, n, stream);
}

Status AddBias(float* y, const float* b, int64_t rows, int64_t cols, cudaStream_t stream) {
  return Bias(y, b, rows, cols, stream);
}

Status AddBias(__nv_bfloat16* y, const __nv_bfloat16* b, int64_t rows, int64_t cols, cudaStream_t stream) {
  return Bias(y, b, rows, cols, stream);
}

Status AddBiasGrad(const float* dy, float* db, int64_t rows, int64_t cols, cudaStream_t stream) {
  return BiasGrad(dy, db, rows, cols, stream);
}

Status AddBiasGrad(const __nv_bfloat16* dy, float* db, int64_t rows, int64_t cols, cudaStream_t stream) {
  return BiasGrad(dy, db, rows, cols, stream);
}

Status ScaleInPlace(float* x, float factor, int64_t n, cudaStream_t stream) {
  constexpr const char* kFn = "ScaleInPlace";
  PIPECOORD_RETURN_IF_ERROR(CheckSize(kFn, "n", n, kMaxElements));
  if (n == 0) return Status::Ok();
  PIPECOORD_RETURN_IF_ERROR(CheckPointer(kFn, "x", x));
  ScaleInPlaceKernel<<<GridBlocks(n, kThreads), kThreads, 0, stream>>>(x, factor, n);
  return LaunchStatus("ScaleInPlaceKernel");
}

Status CastToBf16(const float* in, __nv_bfloat16* out, int64_t n, cudaStream_t stream) {
  constexpr const char* kFn = "CastToBf16";
  PIPECOORD_RETURN_IF_ERROR(CheckSize(kFn, "n", n, kMaxElements));
  if (n == 0) return Status::Ok();
  PIPECOORD_RETURN_IF_ERROR(CheckPointer(kFn, "in", in));
  PIPECOORD_RETURN_IF_ERROR(CheckPointer(kFn, "out", out));
  CastToBf16Kernel<<<GridBlocks(n, kThreads), kThreads, 0, stream>>>(in, out, n);
  return LaunchStatus("CastToBf16Kernel");
}

Status CastToFloat(const __nv_bfloat16* in, float* out, int64_t n, cudaStream_t stream) {
  constexpr const char* kFn = "CastToFloat";
  PIPECOORD_RETURN_IF_ERROR(CheckSize(kFn, "n", n, kMaxElements));
  if (n == 0) return Status::Ok();
  PIPECOORD_RETURN_IF_ERROR(CheckPointer(kFn, "in", in));
  PIPECOORD_RETURN_IF_ERROR(CheckPointer(kFn, "out", out));
  CastToFloatKernel<<<GridBlocks(n, kThreads), kThreads, 0, stream>>>(in, out, n);
  return LaunchStatus("CastToFloatKernel");
}

static_assert(kSumOfSquaresScratch == kSumOfSquaresBlocks, "the scratch holds one partial sum per block");

Status AccumulateSumOfSquares(const float* x, int64_t n, double* acc, double* partials, cudaStream_t stream) {
  constexpr const char* kFn = "AccumulateSumOfSquares";
  PIPECOORD_RETURN_IF_ERROR(CheckSize(kFn, "n", n, kMaxElements));
  if (n == 0) return Status::Ok();
  PIPECOORD_RETURN_IF_ERROR(CheckPointer(kFn, "x", x));
  PIPECOORD_RETURN_IF_ERROR(CheckPointer(kFn, "acc", acc));
  PIPECOORD_RETURN_IF_ERROR(CheckPointer(kFn, "partials", partials));
  const int blocks = static_cast<int>(std::min<int64_t>(GridBlocks(n, kThreads), kSumOfSquaresBlocks));
  SumOfSquaresPartialKernel<<<blocks, kThreads, 0, stream>>>(x, n, partials);
  PIPECOORD_RETURN_IF_ERROR(LaunchStatus("SumOfSquaresPartialKernel"));
  AddPartialSumsKernel<<<1, kScalarThreads, 0, stream>>>(partials, blocks, acc);
  return LaunchStatus("AddPartialSumsKernel");
}

Status AccumulateScalar(double* acc, const double* value, cudaStream_t stream) {
  return Accumulate(acc, value, stream);
}

Status AccumulateScalar(double* acc, const float* value, cudaStream_t stream) {
  return Accumulate(acc, value, stream);
}

}  // namespace pipecoord::worker::cuda
