// Cross-entropy launchers: argument checks, the per-row loss buffer, then the kernels of
// cross_entropy_kernels.h.
#include "kernels/cuda/cross_entropy.h"

#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <utility>

#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/device_math.h"
#include "kernels/cuda/cross_entropy_kernels.h"
#include "kernels/cuda/stream_scratch.h"

namespace pipecoord::kernels::cuda {
namespace {

using cross_entropy::CrossEntropyRowKernel;
using cross_entropy::kMeanThreads;
using cross_entropy::kRowThreads;
using cross_entropy::MeanKernel;

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

namespace {

using cross_entropy::VocabParallelDlogitsKernel;
using cross_entropy::VocabParallelLossAndProbsKernel;
using cross_entropy::VocabParallelRowMaxKernel;
using cross_entropy::VocabParallelSumsKernel;

Status CheckRows(const char* fn, int64_t n, int64_t vl) {
  PIPECOORD_RETURN_IF_ERROR(CheckSize(fn, "n", n));
  if (vl < 1 || vl > std::numeric_limits<int32_t>::max()) {
    return InvalidArgument(std::string(fn) + ": vl must be in [1, 2^31 - 1], got " + std::to_string(vl));
  }
  return Status::Ok();
}

template <typename T>
Status RowMax(const T* logits, int64_t n, int64_t vl, float* mine, cudaStream_t stream) {
  constexpr const char* kFn = "VocabParallelRowMax";
  PIPECOORD_RETURN_IF_ERROR(CheckRows(kFn, n, vl));
  if (n == 0) return Status::Ok();
  PIPECOORD_RETURN_IF_ERROR(CheckPointer(kFn, "logits", logits));
  PIPECOORD_RETURN_IF_ERROR(CheckPointer(kFn, "mine", mine));
  VocabParallelRowMaxKernel<T><<<static_cast<unsigned>(n), kRowThreads, 0, stream>>>(logits, vl, mine);
  return LaunchStatus("VocabParallelRowMaxKernel");
}

template <typename T>
Status Sums(const T* logits, const int32_t* targets, int64_t n, int64_t vl, int64_t first, const float* gathered_max,
            int tp, float* row_max, float* sums, cudaStream_t stream) {
  constexpr const char* kFn = "VocabParallelSums";
  PIPECOORD_RETURN_IF_ERROR(CheckRows(kFn, n, vl));
  if (tp < 1) return InvalidArgument(std::string(kFn) + ": tp must be >= 1, got " + std::to_string(tp));
  if (n == 0) return Status::Ok();
  for (const auto& [name, ptr] : {std::pair<const char*, const void*>{"logits", logits}, {"targets", targets},
                                  {"gathered_max", gathered_max}, {"row_max", row_max}, {"sums", sums}}) {
    PIPECOORD_RETURN_IF_ERROR(CheckPointer(kFn, name, ptr));
  }
  VocabParallelSumsKernel<T><<<static_cast<unsigned>(n), kRowThreads, 0, stream>>>(logits, targets, n, vl, first,
                                                                                  gathered_max, tp, row_max, sums);
  return LaunchStatus("VocabParallelSumsKernel");
}

template <typename T>
Status LossAndProbs(T* logits, int64_t n, int64_t vl, int64_t first, const int32_t* targets, const float* row_max,
                    const float* sums, double* mean_loss, cudaStream_t stream) {
  constexpr const char* kFn = "VocabParallelLossAndProbs";
  PIPECOORD_RETURN_IF_ERROR(CheckRows(kFn, n, vl));
  PIPECOORD_RETURN_IF_ERROR(CheckPointer(kFn, "mean_loss", mean_loss));
  if (n == 0) {
    return CudaStatus(cudaMemsetAsync(mean_loss, 0, sizeof(double), stream), std::string(kFn) + ": cudaMemsetAsync(mean_loss)");
  }
  for (const auto& [name, ptr] : {std::pair<const char*, const void*>{"logits", logits}, {"targets", targets},
                                  {"row_max", row_max}, {"sums", sums}}) {
    PIPECOORD_RETURN_IF_ERROR(CheckPointer(kFn, name, ptr));
  }
  StreamScratch scratch(stream);
  PIPECOORD_RETURN_IF_ERROR(scratch.Allocate(static_cast<size_t>(n) * sizeof(double)));
  auto* row_loss = reinterpret_cast<double*>(scratch.get());
  VocabParallelLossAndProbsKernel<T><<<static_cast<unsigned>(n), kRowThreads, 0, stream>>>(
      logits, n, vl, first, targets, row_max, sums, row_loss);
  PIPECOORD_RETURN_IF_ERROR(LaunchStatus("VocabParallelLossAndProbsKernel"));
  MeanKernel<<<1, kMeanThreads, 0, stream>>>(row_loss, n, mean_loss);
  PIPECOORD_RETURN_IF_ERROR(LaunchStatus("MeanKernel"));
  return scratch.Free();
}

template <typename T>
Status Dlogits(const T* probs, int64_t n, int64_t vl, double dloss, T* dlogits, cudaStream_t stream) {
  constexpr const char* kFn = "VocabParallelDlogits";
  PIPECOORD_RETURN_IF_ERROR(CheckRows(kFn, n, vl));
  if (n == 0) return Status::Ok();
  PIPECOORD_RETURN_IF_ERROR(CheckPointer(kFn, "probs", probs));
  PIPECOORD_RETURN_IF_ERROR(CheckPointer(kFn, "dlogits", dlogits));
  const int64_t count = n * vl;
  const auto blocks = static_cast<unsigned>(std::min<int64_t>((count + kRowThreads - 1) / kRowThreads, 65535));
  VocabParallelDlogitsKernel<T><<<blocks, kRowThreads, 0, stream>>>(probs, count, dloss / static_cast<double>(n), dlogits);
  return LaunchStatus("VocabParallelDlogitsKernel");
}

}  // namespace

Status VocabParallelRowMax(const float* logits, int64_t n, int64_t vl, float* mine, cudaStream_t stream) {
  return RowMax(logits, n, vl, mine, stream);
}
Status VocabParallelRowMax(const __nv_bfloat16* logits, int64_t n, int64_t vl, float* mine, cudaStream_t stream) {
  return RowMax(logits, n, vl, mine, stream);
}
Status VocabParallelSums(const float* logits, const int32_t* targets, int64_t n, int64_t vl, int64_t first,
                         const float* gathered_max, int tp, float* row_max, float* sums, cudaStream_t stream) {
  return Sums(logits, targets, n, vl, first, gathered_max, tp, row_max, sums, stream);
}
Status VocabParallelSums(const __nv_bfloat16* logits, const int32_t* targets, int64_t n, int64_t vl, int64_t first,
                         const float* gathered_max, int tp, float* row_max, float* sums, cudaStream_t stream) {
  return Sums(logits, targets, n, vl, first, gathered_max, tp, row_max, sums, stream);
}
Status VocabParallelLossAndProbs(float* logits, int64_t n, int64_t vl, int64_t first, const int32_t* targets,
                                 const float* row_max, const float* sums, double* mean_loss, cudaStream_t stream) {
  return LossAndProbs(logits, n, vl, first, targets, row_max, sums, mean_loss, stream);
}
Status VocabParallelLossAndProbs(__nv_bfloat16* logits, int64_t n, int64_t vl, int64_t first, const int32_t* targets,
                                 const float* row_max, const float* sums, double* mean_loss, cudaStream_t stream) {
  return LossAndProbs(logits, n, vl, first, targets, row_max, sums, mean_loss, stream);
}
Status VocabParallelDlogits(const float* probs, int64_t n, int64_t vl, double dloss, float* dlogits,
                            cudaStream_t stream) {
  return Dlogits(probs, n, vl, dloss, dlogits, stream);
}
Status VocabParallelDlogits(const __nv_bfloat16* probs, int64_t n, int64_t vl, double dloss, __nv_bfloat16* dlogits,
                            cudaStream_t stream) {
  return Dlogits(probs, n, vl, dloss, dlogits, stream);
}

}  // namespace pipecoord::kernels::cuda
