// Embedding launchers: argument checks, the sort buffers, then the kernels of
// embedding_kernels.h around CUB's stable radix sort.
#include "kernels/cuda/embedding.h"

#include <cub/device/device_radix_sort.cuh>
#include <cuda_runtime.h>

#include <cmath>
#include <string>

#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/device_math.h"
#include "kernels/cuda/embedding_kernels.h"
#include "kernels/cuda/stream_scratch.h"

namespace pipecoord::kernels::cuda {
namespace {

using device::GridBlocks;
using embedding::AccumulateRunsKernel;
using embedding::EmbeddingForwardKernel;
using embedding::kPositionsPerBlock;
using embedding::kThreads;
using embedding::PrepareSortKernel;

Status CheckShape(const char* fn, int64_t n, int64_t dim, int64_t vocab) {
  PIPECOORD_RETURN_IF_ERROR(CheckSize(fn, "n", n));
  PIPECOORD_RETURN_IF_ERROR(CheckSize(fn, "dim", dim, int64_t{1} << 22));
  if (vocab < 1 || vocab >= std::numeric_limits<int32_t>::max()) {
    return InvalidArgument(std::string(fn) + ": vocab must be in [1, 2^31 - 1), got " +
                           std::to_string(vocab));
  }
  return Status::Ok();
}

template <typename T>
Status Forward(const T* table, const int32_t* ids, T* out, int64_t n, int64_t dim, int64_t vocab,
               cudaStream_t stream) {
  constexpr const char* kFn = "EmbeddingForward";
  PIPECOORD_RETURN_IF_ERROR(CheckShape(kFn, n, dim, vocab));
  if (n == 0 || dim == 0) return Status::Ok();
  PIPECOORD_RETURN_IF_ERROR(CheckPointer(kFn, "table", table));
  PIPECOORD_RETURN_IF_ERROR(CheckPointer(kFn, "ids", ids));
  PIPECOORD_RETURN_IF_ERROR(CheckPointer(kFn, "out", out));
  EmbeddingForwardKernel<T>
      <<<static_cast<unsigned>(n), kThreads, 0, stream>>>(table, ids, out, dim, vocab);
  return LaunchStatus("EmbeddingForwardKernel");
}

template <typename T>
Status BackwardWeight(const T* dout, const int32_t* ids, float* dtable, int64_t n, int64_t dim,
                      int64_t vocab, cudaStream_t stream) {
  constexpr const char* kFn = "EmbeddingBackwardWeight";
  PIPECOORD_RETURN_IF_ERROR(CheckShape(kFn, n, dim, vocab));
  if (n == 0 || dim == 0) return Status::Ok();
  PIPECOORD_RETURN_IF_ERROR(CheckPointer(kFn, "dout", dout));
  PIPECOORD_RETURN_IF_ERROR(CheckPointer(kFn, "ids", ids));
  PIPECOORD_RETURN_IF_ERROR(CheckPointer(kFn, "dtable", dtable));

  // Sort on the bits that hold every key up to `vocab` (the bad-id key) and no more.
  int end_bit = 1;
  while ((int64_t{1} << end_bit) <= vocab) ++end_bit;
  const int items = static_cast<int>(n);
  size_t sort_bytes = 0;
  PIPECOORD_CUDA_RETURN_IF_ERROR(cub::DeviceRadixSort::SortPairs(
      nullptr, sort_bytes, static_cast<const uint32_t*>(nullptr), static_cast<uint32_t*>(nullptr),
      static_cast<const uint32_t*>(nullptr), static_cast<uint32_t*>(nullptr), items, 0, end_bit,
      stream));
  const size_t array_bytes = StreamScratch::Aligned(static_cast<size_t>(n) * sizeof(uint32_t));
  StreamScratch scratch(stream);
  PIPECOORD_RETURN_IF_ERROR(scratch.Allocate(4 * array_bytes + sort_bytes));
  uint32_t* keys_in = reinterpret_cast<uint32_t*>(scratch.get());
  uint32_t* rows_in = reinterpret_cast<uint32_t*>(scratch.get() + array_bytes);
  uint32_t* keys = reinterpret_cast<uint32_t*>(scratch.get() + 2 * array_bytes);
  uint32_t* rows = reinterpret_cast<uint32_t*>(scratch.get() + 3 * array_bytes);
  void* sort_temp = scratch.get() + 4 * array_bytes;

  PrepareSortKernel<<<GridBlocks(n, kThreads), kThreads, 0, stream>>>(ids, keys_in, rows_in, n,
                                                                       vocab);
  PIPECOORD_RETURN_IF_ERROR(LaunchStatus("PrepareSortKernel"));
  PIPECOORD_CUDA_RETURN_IF_ERROR(cub::DeviceRadixSort::SortPairs(
      sort_temp, sort_bytes, keys_in, keys, rows_in, rows, items, 0, end_bit, stream));
  const dim3 grid(static_cast<unsigned>((n + kPositionsPerBlock - 1) / kPositionsPerBlock),
                  static_cast<unsigned>((dim + kThreads - 1) / kThreads));
  AccumulateRunsKernel<T><<<grid, kThreads, 0, stream>>>(dout, keys, rows, dtable, n, dim,
                                                         static_cast<uint32_t>(vocab));
  PIPECOORD_RETURN_IF_ERROR(LaunchStatus("AccumulateRunsKernel"));
  return scratch.Free();
}

}  // namespace

Status EmbeddingForward(const float* table, const int32_t* ids, float* out, int64_t n,
                        int64_t dim, int64_t vocab, cudaStream_t stream) {
  return Forward(table, ids, out, n, dim, vocab, stream);
}
Status EmbeddingForward(const __nv_bfloat16* table, const int32_t* ids, __nv_bfloat16* out,
                        int64_t n, int64_t dim, int64_t vocab, cudaStream_t stream) {
  return Forward(table, ids, out, n, dim, vocab, stream);
}

Status EmbeddingBackwardWeight(const float* dout, const int32_t* ids, float* dtable, int64_t n,
                               int64_t dim, int64_t vocab, cudaStream_t stream) {
  return BackwardWeight(dout, ids, dtable, n, dim, vocab, stream);
}
Status EmbeddingBackwardWeight(const __nv_bfloat16* dout, const int32_t* ids, float* dtable,
                               int64_t n, int64_t dim, int64_t vocab, cudaStream_t stream) {
  return BackwardWeight(dout, ids, dtable, n, dim, vocab, stream);
}

}  // namespace pipecoord::kernels::cuda
