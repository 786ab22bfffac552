// Checksums of float buffers on the GPU: the twins of kernels/cpu/checksum.h, bit for bit.
//
// HashFloats: sum over i of Mix64(bits(x[i]) + (i + 1) * 0x9E3779B97F4A7C15) modulo 2^64. Integer
// addition is associative, so the GPU adds the per-element words in any order (64-bit atomics)
// and still equals the CPU's hash exactly.
// OrderedSum: blocks of 256 elements summed left to right in double, then the block sums combined
// by the fixed pairwise tree (level by level, neighbours (2j, 2j+1) added, an odd last one
// carried). The GPU follows that order exactly: one thread per block of 256, then the tree in
// stages of 256 nodes (8 of its levels per stage; the tree's nodes at every 8th level are
// exactly the stage's outputs), so the double equals the CPU's bit for bit.
#ifndef PIPECOORD_KERNELS_CUDA_CHECKSUM_H_
#define PIPECOORD_KERNELS_CUDA_CHECKSUM_H_

#include <cuda_runtime_api.h>

#include <cstdint>

#include "common/status.h"

namespace pipecoord::kernels::cuda {

// Writes HashFloats(x[0, n)) to *hash (device memory). n = 0: 0.
Status HashFloats(const float* x, int64_t n, uint64_t* hash, cudaStream_t stream);

// Writes OrderedSum(x[0, n)) to *sum (device memory). n = 0: +0.0. Takes scratch memory of
// about n / 32 KiB bytes, stream-ordered.
Status OrderedSum(const float* x, int64_t n, double* sum, cudaStream_t stream);

// The same values brought to the host: queues the work on `stream` and waits for the stream.
Result<uint64_t> HashFloatsOnHost(const float* x, int64_t n, cudaStream_t stream);
Result<double> OrderedSumOnHost(const float* x, int64_t n, cudaStream_t stream);

}  // namespace pipecoord::kernels::cuda

#endif  // PIPECOORD_KERNELS_CUDA_CHECKSUM_H_
