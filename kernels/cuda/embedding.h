// Token embedding on the GPU: the twin of kernels/cpu/embedding.h, a table lookup forward and a
// scatter-add weight gradient backward (no B part: token ids are not differentiable).
//
// Layouts: table [vocab, dim] in T (float or bf16: the model's weight dtype); dtable [vocab, dim]
// float (it feeds the fp32 master weights); ids [n] int32; out and dout [n, dim] in T. Device
// pointers. Unlike the CPU twin these take vocab, so a bad id can never touch memory outside
// the table: forward writes a row of NaN for it (the loss then says so), backward skips it.
// Except kOtherRankId (-1): forward writes a row of zeros, backward skips it: the vocabulary-
// parallel embedding's token whose row another tensor-parallel rank holds (the group's sum then
// holds that rank's row exactly).
#ifndef PIPECOORD_KERNELS_CUDA_EMBEDDING_H_
#define PIPECOORD_KERNELS_CUDA_EMBEDDING_H_

#include <cuda_runtime_api.h>

#include <cstdint>

#include "common/status.h"
#include "kernels/cuda/bf16.h"

namespace pipecoord::kernels::cuda {

inline constexpr int32_t kOtherRankId = -1;

// F: out[r] = table[ids[r]]. Overwrites out.
Status EmbeddingForward(const float* table, const int32_t* ids, float* out, int64_t n,
                        int64_t dim, int64_t vocab, cudaStream_t stream);
Status EmbeddingForward(const __nv_bfloat16* table, const int32_t* ids, __nv_bfloat16* out,
                        int64_t n, int64_t dim, int64_t vocab, cudaStream_t stream);

// W: dtable[ids[r]] += dout[r] for r = 0, 1, ..., n-1 in that order, in float, as the CPU twin
// adds (same bits). Deterministic without float atomics: the (id, r) pairs are sorted by id
// (a stable radix sort keeps r ascending within an id), and each id's run of rows is summed by
// one thread per column. Allocates its sort buffers stream-ordered (cudaMallocAsync) and frees
// them the same way.
Status EmbeddingBackwardWeight(const float* dout, const int32_t* ids, float* dtable, int64_t n,
                               int64_t dim, int64_t vocab, cudaStream_t stream);
Status EmbeddingBackwardWeight(const __nv_bfloat16* dout, const int32_t* ids, float* dtable,
                               int64_t n, int64_t dim, int64_t vocab, cudaStream_t stream);

}  // namespace pipecoord::kernels::cuda

#endif  // PIPECOORD_KERNELS_CUDA_EMBEDDING_H_
