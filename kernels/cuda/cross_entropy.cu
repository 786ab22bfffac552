// Cross-entropy launchers: argument checks, the per-row loss buffer, then the kernels of
// cross_entropy_kernels.h.
#include "kernels/cuda/cross_entropy.h"

#include <cuda_runtime.h>

#include <cmath>
#include <string>

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

}  // namespace pipecoord::kernels::cuda
