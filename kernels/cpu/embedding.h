// Token embedding: a table lookup forward, a scatter-add weight gradient backward. Token ids
// are not differentiable, so there is no B part: the first stage's B ends at the embedding.
//
// Layouts: table and dtable [vocab, dim] row-major; ids [n], each in [0, vocab) (the caller
// checks); out and dout [n, dim].
#ifndef PIPECOORD_KERNELS_CPU_EMBEDDING_H_
#define PIPECOORD_KERNELS_CPU_EMBEDDING_H_

#include <cstdint>

namespace pipecoord::kernels::cpu {

// F: out[r] = table[ids[r]]. Overwrites out.
template <typename T>
void EmbeddingForward(const T* table, const int32_t* ids, T* out, int64_t n, int64_t dim);

// W: dtable[ids[r]] += dout[r] for r = 0, 1, ..., n-1 in that order (repeated ids add up in
// token order, so the result is deterministic).
template <typename T>
void EmbeddingBackwardWeight(const T* dout, const int32_t* ids, T* dtable, int64_t n, int64_t dim);

}  // namespace pipecoord::kernels::cpu

#endif  // PIPECOORD_KERNELS_CPU_EMBEDDING_H_
