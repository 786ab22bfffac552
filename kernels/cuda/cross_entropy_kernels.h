// The cross-entropy kernels (device code) behind cross_entropy.h; cross_entropy.cu launches
// them: one block of kRowThreads per row, then one block of kMeanThreads for the mean.
//
// nvcc builds it through cross_entropy.cu; g++ builds it under cuda_emulation.h for
// cross_entropy_emulated_test, which runs these very kernels on the CPU.
#ifndef PIPECOORD_KERNELS_CUDA_CROSS_ENTROPY_KERNELS_H_
#define PIPECOORD_KERNELS_CUDA_CROSS_ENTROPY_KERNELS_H_

#include <cmath>
#include <cstdint>

#include "kernels/cuda/device_math.h"

namespace pipecoord::kernels::cuda::cross_entropy {

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

// The vocabulary-parallel steps (cross_entropy.h; kernels/cpu/cross_entropy.h's VocabParallel*
// are the arithmetic of record): one block of kRowThreads per row of this rank's [n, vl] slice;
// the row's sums in double, in a fixed tree order.
template <typename T>
__global__ void VocabParallelRowMaxKernel(const T* __restrict__ logits, int64_t vl, float* __restrict__ mine) {
  __shared__ float scratch[32];
  const T* x = logits + static_cast<int64_t>(blockIdx.x) * vl;
  float mx = -INFINITY;
  for (int64_t c = threadIdx.x; c < vl; c += blockDim.x) mx = fmaxf(mx, ToFloat(x[c]));
  mx = BlockMax(mx, scratch, -INFINITY);
  if (threadIdx.x == 0) mine[blockIdx.x] = mx;
}

template <typename T>
__global__ void VocabParallelSumsKernel(const T* __restrict__ logits, const int32_t* __restrict__ targets,
                                        int64_t n, int64_t vl, int64_t first,
                                        const float* __restrict__ gathered_max, int tp,
                                        float* __restrict__ row_max, float* __restrict__ sums) {
  __shared__ double scratch[32];
  const int64_t r = blockIdx.x;
  const T* x = logits + r * vl;
  float m = gathered_max[r];
  for (int k = 1; k < tp; ++k) m = fmaxf(m, gathered_max[k * n + r]);
  const int64_t t = static_cast<int64_t>(targets[r]) - first;
  double others = 0;
  for (int64_t c = threadIdx.x; c < vl; c += blockDim.x) {
    if (c != t) others += exp(static_cast<double>(ToFloat(x[c])) - m);
  }
  others = BlockSum(others, scratch);
  if (threadIdx.x == 0) {
    row_max[r] = m;
    sums[r] = __double2float_rn(others);
    sums[n + r] = t >= 0 && t < vl ? ToFloat(x[t]) : 0.f;
  }
}

// row_loss[r] = log1p(O / exp(z - M)); the row's logits become its probabilities in place, p - 1
// in the target's column (each element read, then written, by one thread).
template <typename T>
__global__ void VocabParallelLossAndProbsKernel(T* logits, int64_t n, int64_t vl, int64_t first,
                                                const int32_t* __restrict__ targets, const float* __restrict__ row_max,
                                                const float* __restrict__ sums, double* __restrict__ row_loss) {
  const int64_t r = blockIdx.x;
  const float m = row_max[r];
  const double others = sums[r], e_target = exp(static_cast<double>(sums[n + r]) - m), sum = e_target + others;
  const int64_t t = static_cast<int64_t>(targets[r]) - first;
  T* x = logits + r * vl;
  for (int64_t c = threadIdx.x; c < vl; c += blockDim.x) {
    const double p = c == t ? -others / sum : exp(static_cast<double>(ToFloat(x[c])) - m) / sum;
    x[c] = FromFloat<T>(__double2float_rn(p));
  }
  if (threadIdx.x == 0) row_loss[r] = log1p(others / e_target);
}

// dlogits = scale * what VocabParallelLossAndProbsKernel left (grid-stride over n vl elements).
template <typename T>
__global__ void VocabParallelDlogitsKernel(const T* probs, int64_t count, double scale, T* dlogits) {  // in place too
  for (int64_t i = device::GlobalThread(); i < count; i += device::GridThreads()) {
    dlogits[i] = FromFloat<T>(__double2float_rn(scale * static_cast<double>(ToFloat(probs[i]))));
  }
}

}  // namespace pipecoord::kernels::cuda::cross_entropy

#endif  // PIPECOORD_KERNELS_CUDA_CROSS_ENTROPY_KERNELS_H_
