// The checksum kernels (device code) behind checksum.h; checksum.cu launches them: the hash on
// a grid-stride loop of kHashThreads per block; OrderedSum as BlockSumsKernel then
// TreeStageKernel stages, kFanIn threads per block, until one value is left.
//
// nvcc builds it through checksum.cu; g++ builds it under cuda_emulation.h for
// checksum_emulated_test, which runs these very kernels on the CPU.
#ifndef PIPECOORD_KERNELS_CUDA_CHECKSUM_KERNELS_H_
#define PIPECOORD_KERNELS_CUDA_CHECKSUM_KERNELS_H_

#include <cstdint>

#include "kernels/cuda/device_math.h"

namespace pipecoord::kernels::cuda::checksum {

using device::GlobalThread;
using device::GridThreads;
using device::WarpSum;

constexpr int kHashThreads = 256;
// OrderedSum's block of elements (cpu::kChecksumBlock); fixed by the definition.
constexpr int64_t kSumBlock = 256;
// Tree nodes combined per CUDA block (= its threads): 8 levels of the pairwise tree.
constexpr int kFanIn = 256;

// kernels/cpu/rng.cc's Mix64 (SplitMix64's finaliser).
__device__ __forceinline__ unsigned long long Mix64(unsigned long long z) {
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
  return z ^ (z >> 31);
}

__global__ void HashFloatsKernel(const float* __restrict__ x, int64_t n,
                                 unsigned long long* __restrict__ hash) {
  unsigned long long h = 0;
  for (int64_t i = GlobalThread(); i < n; i += GridThreads()) {
    const unsigned long long bits = __float_as_uint(x[i]);
    h += Mix64(bits + static_cast<unsigned long long>(i + 1) * 0x9E3779B97F4A7C15ULL);
  }
  h = WarpSum(h);
  if (threadIdx.x % 32 == 0) atomicAdd(hash, h);
}

// Combines level[0, count) (count <= kFanIn) by the pairwise rule until one value is left in
// level[0]: neighbours (2j, 2j+1) added left + right, an odd last one carried. Every thread of
// the block calls it.
__device__ void PairwiseInShared(double* level, int count) {
  __syncthreads();
  const int j = threadIdx.x;
  while (count > 1) {
    const int half = (count + 1) / 2;
    double v = 0;
    if (j < half) v = 2 * j + 1 < count ? level[2 * j] + level[2 * j + 1] : level[2 * j];
    __syncthreads();
    if (j < half) level[j] = v;
    __syncthreads();
    count = half;
  }
}

// Stage 0: CUDA block b handles element blocks [kFanIn b, kFanIn (b + 1)): thread t sums element
// block kFanIn b + t left to right in double; then the block's sums go up the tree.
__global__ void BlockSumsKernel(const float* __restrict__ x, int64_t n, int64_t element_blocks,
                                double* __restrict__ out) {
  __shared__ double level[kFanIn];
  const int64_t first = static_cast<int64_t>(blockIdx.x) * kFanIn;
  const int64_t mine = first + threadIdx.x;
  if (mine < element_blocks) {
    const int64_t begin = mine * kSumBlock;
    const int64_t end = min(begin + kSumBlock, n);
    double s = 0;
    for (int64_t i = begin; i < end; ++i) s += static_cast<double>(x[i]);
    level[threadIdx.x] = s;
  }
  PairwiseInShared(level, static_cast<int>(min(static_cast<int64_t>(kFanIn), element_blocks - first)));
  if (threadIdx.x == 0) out[blockIdx.x] = level[0];
}

// Later stages: CUDA block b combines nodes [kFanIn b, kFanIn (b + 1)) of the previous stage.
__global__ void TreeStageKernel(const double* __restrict__ in, int64_t count,
                                double* __restrict__ out) {
  __shared__ double level[kFanIn];
  const int64_t first = static_cast<int64_t>(blockIdx.x) * kFanIn;
  if (first + threadIdx.x < count) level[threadIdx.x] = in[first + threadIdx.x];
  PairwiseInShared(level, static_cast<int>(min(static_cast<int64_t>(kFanIn), count - first)));
  if (threadIdx.x == 0) out[blockIdx.x] = level[0];
}

}  // namespace pipecoord::kernels::cuda::checksum

#endif  // PIPECOORD_KERNELS_CUDA_CHECKSUM_KERNELS_H_
