// Checksum kernels: an order-free hash (64-bit atomics), and the fixed-order OrderedSum.
#include "kernels/cuda/checksum.h"

#include <cuda_runtime.h>

#include <string>
#include <utility>

#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/device_math.h"
#include "kernels/cuda/stream_scratch.h"

namespace pipecoord::kernels::cuda {
namespace {

using device::GlobalThread;
using device::GridBlocks;
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

int64_t CeilDiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

// Copies one value from device memory to the host and waits for the stream.
template <typename V>
Result<V> ToHost(const V* device_value, cudaStream_t stream) {
  V value{};
  Status st = CudaStatus(
      cudaMemcpyAsync(&value, device_value, sizeof(V), cudaMemcpyDeviceToHost, stream),
      "cudaMemcpyAsync (checksum to host)");
  if (!st.ok()) return st;
  st = CudaStatus(cudaStreamSynchronize(stream), "cudaStreamSynchronize (checksum)");
  if (!st.ok()) return st;
  return value;
}

}  // namespace

Status HashFloats(const float* x, int64_t n, uint64_t* hash, cudaStream_t stream) {
  constexpr const char* kFn = "HashFloats";
  PIPECOORD_RETURN_IF_ERROR(CheckSize(kFn, "n", n, int64_t{1} << 50));
  PIPECOORD_RETURN_IF_ERROR(CheckPointer(kFn, "hash", hash));
  PIPECOORD_CUDA_RETURN_IF_ERROR(cudaMemsetAsync(hash, 0, sizeof(uint64_t), stream));
  if (n == 0) return Status::Ok();
  PIPECOORD_RETURN_IF_ERROR(CheckPointer(kFn, "x", x));
  static_assert(sizeof(uint64_t) == sizeof(unsigned long long));
  HashFloatsKernel<<<GridBlocks(n, kHashThreads), kHashThreads, 0, stream>>>(
      x, n, reinterpret_cast<unsigned long long*>(hash));
  return LaunchStatus("HashFloatsKernel");
}

Status OrderedSum(const float* x, int64_t n, double* sum, cudaStream_t stream) {
  constexpr const char* kFn = "OrderedSum";
  PIPECOORD_RETURN_IF_ERROR(CheckSize(kFn, "n", n, int64_t{1} << 50));
  PIPECOORD_RETURN_IF_ERROR(CheckPointer(kFn, "sum", sum));
  if (n == 0) {
    return CudaStatus(cudaMemsetAsync(sum, 0, sizeof(double), stream),
                      "OrderedSum: cudaMemsetAsync(sum)");  // +0.0, as the CPU
  }
  PIPECOORD_RETURN_IF_ERROR(CheckPointer(kFn, "x", x));
  const int64_t element_blocks = CeilDiv(n, kSumBlock);
  int64_t count = CeilDiv(element_blocks, kFanIn);  // nodes left after stage 0
  // Two ping-pong buffers: stage k writes buffers[k % 2]; sizes only shrink.
  const size_t first_bytes = StreamScratch::Aligned(static_cast<size_t>(count) * sizeof(double));
  const size_t second_bytes =
      StreamScratch::Aligned(static_cast<size_t>(CeilDiv(count, kFanIn)) * sizeof(double));
  StreamScratch scratch(stream);
  double* buffers[2] = {nullptr, nullptr};
  if (count > 1) {
    PIPECOORD_RETURN_IF_ERROR(scratch.Allocate(first_bytes + second_bytes));
    buffers[0] = reinterpret_cast<double*>(scratch.get());
    buffers[1] = reinterpret_cast<double*>(scratch.get() + first_bytes);
  }
  BlockSumsKernel<<<static_cast<unsigned>(count), kFanIn, 0, stream>>>(
      x, n, element_blocks, count == 1 ? sum : buffers[0]);
  PIPECOORD_RETURN_IF_ERROR(LaunchStatus("BlockSumsKernel"));
  int stage = 0;
  while (count > 1) {
    const int64_t next = CeilDiv(count, kFanIn);
    double* out = next == 1 ? sum : buffers[(stage + 1) % 2];
    TreeStageKernel<<<static_cast<unsigned>(next), kFanIn, 0, stream>>>(buffers[stage % 2], count,
                                                                        out);
    PIPECOORD_RETURN_IF_ERROR(LaunchStatus("TreeStageKernel"));
    count = next;
    ++stage;
  }
  return scratch.Free();
}

Result<uint64_t> HashFloatsOnHost(const float* x, int64_t n, cudaStream_t stream) {
  StreamScratch scratch(stream);
  PIPECOORD_RETURN_IF_ERROR(scratch.Allocate(sizeof(uint64_t)));
  uint64_t* hash = reinterpret_cast<uint64_t*>(scratch.get());
  PIPECOORD_RETURN_IF_ERROR(HashFloats(x, n, hash, stream));
  Result<uint64_t> value = ToHost(hash, stream);
  PIPECOORD_RETURN_IF_ERROR(scratch.Free());
  return value;
}

Result<double> OrderedSumOnHost(const float* x, int64_t n, cudaStream_t stream) {
  StreamScratch scratch(stream);
  PIPECOORD_RETURN_IF_ERROR(scratch.Allocate(sizeof(double)));
  double* sum = reinterpret_cast<double*>(scratch.get());
  PIPECOORD_RETURN_IF_ERROR(OrderedSum(x, n, sum, stream));
  Result<double> value = ToHost(sum, stream);
  PIPECOORD_RETURN_IF_ERROR(scratch.Free());
  return value;
}

}  // namespace pipecoord::kernels::cuda
