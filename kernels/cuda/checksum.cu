// Checksum launchers: argument checks, the tree stages' buffers, then the kernels of
// checksum_kernels.h.
#include "kernels/cuda/checksum.h"

#include <cuda_runtime.h>

#include <string>
#include <utility>

#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/device_math.h"
#include "kernels/cuda/checksum_kernels.h"
#include "kernels/cuda/stream_scratch.h"

namespace pipecoord::kernels::cuda {
namespace {

using checksum::BlockSumsKernel;
using checksum::HashFloatsKernel;
using checksum::kFanIn;
using checksum::kHashThreads;
using checksum::kSumBlock;
using checksum::TreeStageKernel;
using device::GridBlocks;

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
