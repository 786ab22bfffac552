// Where one (sample, query head) of the flash-attention kernels lives in its tensors, and which
// keys a query row sees (causal, within a sliding window), with
// grouped-query attention (kernels/cpu/attention.h's layouts): q, o, dout, dq are [batch, seq,
// heads, head_dim]; k, v, dk, dv [batch, seq, kv_heads, head_dim], query head h reading key/value
// head h / (heads / kv_heads); lse, delta [batch, heads, seq]. Without GQA kv_heads == heads and
// the two layouts agree. Shared by attention_kernels.h, attention_tensor_core_kernels.h and
// attention_mma_kernels.h; device code (nvcc), or the CPU emulation's, whose includer defines
// __device__ and __forceinline__ first.
#ifndef PIPECOORD_KERNELS_CUDA_ATTENTION_HEADS_H_
#define PIPECOORD_KERNELS_CUDA_ATTENTION_HEADS_H_

#include <cstdint>

namespace pipecoord::kernels::cuda::flash_heads {

struct HeadSlice {
  int64_t row_stride;     // heads * head_dim: between rows of q, o, dout, dq
  int64_t base;           // row 0 of (b, h) in q, o, dout, dq
  int64_t kv_row_stride;  // kv_heads * head_dim: between rows of k, v, dk, dv
  int64_t kv_base;        // row 0 of (b, h / group) in k, v, dk, dv
  int64_t stats;          // (b, h, 0) in lse, delta
};

// kv_heads divides heads (the launchers check it).
__device__ __forceinline__ HeadSlice SliceOf(int64_t b, int64_t h, int seq, int heads, int kv_heads,
                                             int head_dim) {
  const int64_t row_stride = static_cast<int64_t>(heads) * head_dim;
  const int64_t kv_row_stride = static_cast<int64_t>(kv_heads) * head_dim;
  const int64_t kv_head = h / (heads / kv_heads);
  return {row_stride, b * seq * row_stride + h * head_dim, kv_row_stride,
          b * seq * kv_row_stride + kv_head * head_dim, (b * heads + h) * seq};
}

// Sliding-window attention (Mistral's): query `row` sees key `col` when col <= row and, with a
// window w > 0, row - col < w (kernels/cpu/attention.h's first_key). window 0: plain causal.
__device__ __forceinline__ bool Visible(int row, int col, int window) {
  return col <= row && (window == 0 || row - col < window);
}
// The first key query `row` sees.
__device__ __forceinline__ int FirstKey(int row, int window) {
  return window > 0 && row >= window ? row - window + 1 : 0;
}
// One past the last query row that sees `key` (at most seq).
__device__ __forceinline__ int RowsEnd(int key, int window, int seq) {
  return window > 0 && key + window < seq ? key + window : seq;
}

}  // namespace pipecoord::kernels::cuda::flash_heads

#endif  // PIPECOORD_KERNELS_CUDA_ATTENTION_HEADS_H_
