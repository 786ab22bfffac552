// The embedding kernels (device code) behind embedding.h; embedding.cu launches them: the
// gather with one block of kThreads per token row; for the weight gradient, PrepareSortKernel
// (grid-stride), then a stable sort of (key, row) pairs by key (CUB's, in embedding.cu), then
// AccumulateRunsKernel on a grid of (n / kPositionsPerBlock) x (dim / kThreads) blocks.
//
// nvcc builds it through embedding.cu; g++ builds it under cuda_emulation.h for
// embedding_emulated_test, which runs these very kernels on the CPU.
#ifndef PIPECOORD_KERNELS_CUDA_EMBEDDING_KERNELS_H_
#define PIPECOORD_KERNELS_CUDA_EMBEDDING_KERNELS_H_

#include <cmath>
#include <cstdint>

#include "kernels/cuda/device_math.h"

namespace pipecoord::kernels::cuda::embedding {

using device::FromFloat;
using device::GlobalThread;
using device::GridThreads;
using device::ToFloat;

constexpr int kThreads = 256;
// Sorted positions per block of the accumulation kernel (its threads cover columns).
constexpr int kPositionsPerBlock = 32;

template <typename T>
__global__ void EmbeddingForwardKernel(const T* __restrict__ table, const int32_t* __restrict__ ids,
                                       T* __restrict__ out, int64_t dim, int64_t vocab) {
  const int64_t r = blockIdx.x;
  const int32_t id = ids[r];
  T* dst = out + r * dim;
  if (id < 0 || id >= vocab) {  // -1: kOtherRankId (embedding.h), a row of zeros
    const float fill = id == -1 ? 0.f : NAN;
    for (int64_t c = threadIdx.x; c < dim; c += blockDim.x) dst[c] = FromFloat<T>(fill);
    return;
  }
  const T* src = table + static_cast<int64_t>(id) * dim;
  for (int64_t c = threadIdx.x; c < dim; c += blockDim.x) dst[c] = src[c];
}

// keys[r] = ids[r], or `vocab` (sorted last, then skipped) for an id outside [0, vocab);
// rows[r] = r.
__global__ void PrepareSortKernel(const int32_t* __restrict__ ids, uint32_t* __restrict__ keys,
                                  uint32_t* __restrict__ rows, int64_t n, int64_t vocab) {
  for (int64_t r = GlobalThread(); r < n; r += GridThreads()) {
    const int32_t id = ids[r];
    keys[r] = (id >= 0 && id < vocab) ? static_cast<uint32_t>(id) : static_cast<uint32_t>(vocab);
    rows[r] = static_cast<uint32_t>(r);
  }
}

// keys sorted ascending, rows ascending within equal keys. A run of equal keys belongs to the
// block holding its first position; that block's thread for column `col` adds the run's dout
// rows to dtable[key][col] in order (continuing past the block's last position if the run
// does). Every (key, column) is written by exactly one thread.
template <typename T>
__global__ void AccumulateRunsKernel(const T* __restrict__ dout, const uint32_t* __restrict__ keys,
                                     const uint32_t* __restrict__ rows, float* __restrict__ dtable,
                                     int64_t n, int64_t dim, uint32_t skip_key) {
  const int64_t col = static_cast<int64_t>(blockIdx.y) * blockDim.x + threadIdx.x;
  if (col >= dim) return;
  const int64_t end = min(static_cast<int64_t>(blockIdx.x + 1) * kPositionsPerBlock, n);
  int64_t k = static_cast<int64_t>(blockIdx.x) * kPositionsPerBlock;
  if (k > 0) {  // a run that began in an earlier block is that block's
    const uint32_t earlier = keys[k - 1];
    while (k < end && keys[k] == earlier) ++k;
  }
  while (k < end) {
    const uint32_t key = keys[k];
    if (key == skip_key) return;  // bad ids sort last: nothing valid follows
    float* dst = dtable + static_cast<int64_t>(key) * dim + col;
    float acc = *dst;
    do {
      acc += ToFloat(dout[static_cast<int64_t>(rows[k]) * dim + col]);
      ++k;
    } while (k < n && keys[k] == key);
    *dst = acc;
  }
}

}  // namespace pipecoord::kernels::cuda::embedding

#endif  // PIPECOORD_KERNELS_CUDA_EMBEDDING_KERNELS_H_
