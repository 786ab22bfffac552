// Embedding kernels: a row gather; and for the weight gradient, a stable sort of the token rows
// by id followed by one ordered sum per (id, column).
#include "kernels/cuda/embedding.h"

#include <cub/device/device_radix_sort.cuh>
#include <cuda_runtime.h>

#include <cmath>
#include <string>

#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/device_math.h"
#include "kernels/cuda/stream_scratch.h"

namespace pipecoord::kernels::cuda {
namespace {

using device::FromFloat;
using device::GlobalThread;
using device::GridBlocks;
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
  if (id < 0 || id >= vocab) {
    for (int64_t c = threadIdx.x; c < dim; c += blockDim.x) dst[c] = FromFloat<T>(NAN);
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
