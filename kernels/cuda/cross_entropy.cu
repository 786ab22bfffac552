// Cross-entropy kernels: one block per row (max, sum of exps, outputs), then one block for the
// mean over rows.
#include "kernels/cuda/cross_entropy.h"

#include <cuda_runtime.h>

#include <cmath>
#include <string>

#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/device_math.h"
#include "kernels/cuda/stream_scratch.h"

namespace pipecoord::kernels::cuda {
namespace {

using device::BlockMax;
using device::BlockSum;
using device::FromFloat;
using device::ToFloat;

constexpr int kRowThreads = 256;
constexpr int kMeanThreads = 1024;

// Any of loss_per_token, row_loss and dlogits may be null (that output is not wanted).
// logits and dlogits may be the same buffer: every thread reads the target's logit before the
// block's first barrier, and afterwards each element is read and then written by one thread.
template <typename T>
__global__ void CrossEntropyRowKernel(const T* logits, const int32_t* __restrict__ targets,
                                      int64_t vocab, double scale, float* loss_per_token,
                                      double* row_loss, T* dlogits) {
  __shared__ float max_scratch[32];
  __shared__ double sum_scratch[32];
  const int64_t row = blockIdx.x;
  const T* x = logits + row * vocab;
  const int32_t target = targets[row];
  const bool valid = target >= 0 && target < vocab;
  const float x_target = valid ? ToFloat(x[target]) : NAN;

  float mx = -INFINITY;
  for (int64_t c = threadIdx.x; c < vocab; c += blockDim.x) mx = fmaxf(mx, ToFloat(x[c]));
  mx = BlockMax(mx, max_scratch, -INFINITY);

  double sum = 0;
  for (int64_t c = threadIdx.x; c < vocab; c += blockDim.x) sum += expf(ToFloat(x[c]) - mx);
  sum = BlockSum(sum, sum_scratch);
  // The target's exp exactly as it entered the sum, so sum - e_target is the other exps' sum.
  const float e_target = expf(x_target - mx);

  if (threadIdx.x == 0) {
    // logsumexp - x_target = log(sum) - (x_target - max); the difference of two floats is
    // exact in double.
    const double loss = log(sum) - (static_cast<double>(x_target) - static_cast<double>(mx));
    if (loss_per_token != nullptr) loss_per_token[row] = __double2float_rn(loss);
    if (row_loss != nullptr) row_loss[row] = loss;
  }
  if (dlogits != nullptr) {
    const double inv_sum = 1.0 / sum;
    const float p_scale = __double2float_rn(scale * inv_sum);
    // scale * (p_target - 1) = -scale * (sum - e_target) / sum.
    const float target_grad =
        valid ? __double2float_rn(-scale * (sum - static_cast<double>(e_target)) * inv_sum) : NAN;
    T* d = dlogits + row * vocab;
    for (int64_t c = threadIdx.x; c < vocab; c += blockDim.x) {
      const float e = expf(ToFloat(x[c]) - mx);
      d[c] = FromFloat<T>(c == target ? target_grad : (valid ? e * p_scale : NAN));
    }
  }
}

__global__ void MeanKernel(const double* __restrict__ row_loss, int64_t n,
                           double* __restrict__ mean) {
  __shared__ double scratch[32];
  double s = 0;
  for (int64_t i = threadIdx.x; i < n; i += blockDim.x) s += row_loss[i];
  s = BlockSum(s, scratch);
  if (threadIdx.x == 0) *mean = s / static_cast<double>(n);
}

template <typename T>
Status Run(const char* fn, const T* logits, const int32_t* targets, int64_t n, int64_t vocab,
           double dloss, float* loss_per_token, double* mean_loss, T* dlogits,
           cudaStream_t stream) {
  PIPECOORD_RETURN_IF_ERROR(CheckSize(fn, "n", n));
  if (vocab < 1 || vocab > std::numeric_limits<int32_t>::max()) {
    return InvalidArgument(std::string(fn) + ": vocab must be in [1, 2^31 - 1], got " +
                           std::to_string(vocab));
  }
  if (n == 0) {
    if (mean_loss == nullptr) return Status::Ok();
    return CudaStatus(cudaMemsetAsync(mean_loss, 0, sizeof(double), stream),
                      std::string(fn) + ": cudaMemsetAsync(mean_loss)");  // +0.0, as the CPU
  }
  PIPECOORD_RETURN_IF_ERROR(CheckPointer(fn, "logits", logits));
  PIPECOORD_RETURN_IF_ERROR(CheckPointer(fn, "targets", targets));
  StreamScratch scratch(stream);
  double* row_loss = nullptr;
  if (mean_loss != nullptr) {
    PIPECOORD_RETURN_IF_ERROR(scratch.Allocate(static_cast<size_t>(n) * sizeof(double)));
    row_loss = reinterpret_cast<double*>(scratch.get());
  }
  const double scale = dloss / static_cast<double>(n);
  CrossEntropyRowKernel<T><<<static_cast<unsigned>(n), kRowThreads, 0, stream>>>(
      logits, targets, vocab, scale, loss_per_token, row_loss, dlogits);
  PIPECOORD_RETURN_IF_ERROR(LaunchStatus("CrossEntropyRowKernel"));
  if (mean_loss != nullptr) {
    MeanKernel<<<1, kMeanThreads, 0, stream>>>(row_loss, n, mean_loss);
    PIPECOORD_RETURN_IF_ERROR(LaunchStatus("MeanKernel"));
  }
  return scratch.Free();
}

template <typename T>
Status Forward(const T* logits, const int32_t* targets, int64_t n, int64_t vocab,
               float* loss_per_token, double* mean_loss, cudaStream_t stream) {
  return Run<T>("CrossEntropyForward", logits, targets, n, vocab, 0.0, loss_per_token, mean_loss,
                nullptr, stream);
}

template <typename T>
Status Backward(const T* logits, const int32_t* targets, int64_t n, int64_t vocab, double dloss,
                T* dlogits, cudaStream_t stream) {
  constexpr const char* kFn = "CrossEntropyBackward";
  if (n > 0) PIPECOORD_RETURN_IF_ERROR(CheckPointer(kFn, "dlogits", dlogits));
  return Run<T>(kFn, logits, targets, n, vocab, dloss, nullptr, nullptr, dlogits, stream);
}

template <typename T>
Status ForwardBackward(const T* logits, const int32_t* targets, int64_t n, int64_t vocab,
                       double dloss, float* loss_per_token, double* mean_loss, T* dlogits,
                       cudaStream_t stream) {
  constexpr const char* kFn = "CrossEntropyForwardBackward";
  if (n > 0) PIPECOORD_RETURN_IF_ERROR(CheckPointer(kFn, "dlogits", dlogits));
  return Run<T>(kFn, logits, targets, n, vocab, dloss, loss_per_token, mean_loss, dlogits,
                stream);
}

}  // namespace

Status CrossEntropyForward(const float* logits, const int32_t* targets, int64_t n, int64_t vocab,
                           float* loss_per_token, double* mean_loss, cudaStream_t stream) {
  return Forward(logits, targets, n, vocab, loss_per_token, mean_loss, stream);
}
Status CrossEntropyForward(const __nv_bfloat16* logits, const int32_t* targets, int64_t n,
                           int64_t vocab, float* loss_per_token, double* mean_loss,
                           cudaStream_t stream) {
  return Forward(logits, targets, n, vocab, loss_per_token, mean_loss, stream);
}

Status CrossEntropyBackward(const float* logits, const int32_t* targets, int64_t n, int64_t vocab,
                            double dloss, float* dlogits, cudaStream_t stream) {
  return Backward(logits, targets, n, vocab, dloss, dlogits, stream);
}
Status CrossEntropyBackward(const __nv_bfloat16* logits, const int32_t* targets, int64_t n,
                            int64_t vocab, double dloss, __nv_bfloat16* dlogits,
                            cudaStream_t stream) {
  return Backward(logits, targets, n, vocab, dloss, dlogits, stream);
}

Status CrossEntropyForwardBackward(const float* logits, const int32_t* targets, int64_t n,
                                   int64_t vocab, double dloss, float* loss_per_token,
                                   double* mean_loss, float* dlogits, cudaStream_t stream) {
  return ForwardBackward(logits, targets, n, vocab, dloss, loss_per_token, mean_loss, dlogits,
                         stream);
}
Status CrossEntropyForwardBackward(const __nv_bfloat16* logits, const int32_t* targets,
                                   int64_t n, int64_t vocab, double dloss, float* loss_per_token,
                                   double* mean_loss, __nv_bfloat16* dlogits,
                                   cudaStream_t stream) {
  return ForwardBackward(logits, targets, n, vocab, dloss, loss_per_token, mean_loss, dlogits,
                         stream);
}

}  // namespace pipecoord::kernels::cuda
