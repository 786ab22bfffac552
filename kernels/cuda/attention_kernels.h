// The flash-attention kernels (device code) behind attention.h; attention.cu launches them.
//
// Every kernel runs kThreads = 256 threads as a 16 x 16 grid: ty = threadIdx.x / 16 picks a
// group of rows, tx = threadIdx.x % 16 a strided set of columns (tx, tx + 16, ...). The 16
// threads of one ty are one half-warp, so a row's max and sum are reduced with shuffles inside
// that half-warp. Tiles in shared memory are float, head_dim padded with zeros up to kD (32, 64
// or 128), each row kPad floats longer so float4 loads stay aligned and rows read together hit
// distinct banks.
//
// nvcc builds it with device_math.h. Without __CUDACC__ it is the CPU emulation's
// (attention_emulated_test.cc): the includer first defines the CUDA built-ins it uses
// (threadIdx, __syncthreads, __shfl_xor_sync, float4, ...) and device::ToFloat, FromFloat,
// GlobalThread, GridThreads and SharedFloats, so the tests run these very kernels on a CPU.
#ifndef PIPECOORD_KERNELS_CUDA_ATTENTION_KERNELS_H_
#define PIPECOORD_KERNELS_CUDA_ATTENTION_KERNELS_H_

#include <cstdint>

#ifdef __CUDACC__
#include "kernels/cuda/attention_heads.h"
#include "kernels/cuda/device_math.h"

namespace pipecoord::kernels::cuda::device {
// The block's dynamic shared memory (sized at launch), 16-byte aligned.
__device__ __forceinline__ float* SharedFloats() {
  extern __shared__ float4 shared_memory[];
  return reinterpret_cast<float*>(shared_memory);
}
}  // namespace pipecoord::kernels::cuda::device
#elif !defined(PIPECOORD_ATTENTION_KERNELS_EMULATED)
#error "attention_kernels.h is device code: nvcc, or the CPU emulation of attention_emulated_test"
#else
#include "kernels/cuda/attention_heads.h"
#endif

namespace pipecoord::kernels::cuda::flash {

using flash_heads::FirstKey;
using flash_heads::HeadSlice;
using flash_heads::RowsEnd;
using flash_heads::SliceOf;
using flash_heads::Visible;

constexpr int kThreads = 256;
constexpr int kKeyTile = 64;       // keys per tile (forward and backward)
constexpr int kForwardRows = 64;   // query rows per forward block
constexpr int kBackwardRows = 32;  // query rows per backward tile
constexpr int kPad = 4;
constexpr int kScoreStride = kKeyTile + kPad;  // a row of a [rows][kKeyTile] score tile
constexpr float kLog2e = 1.4426950408889634f;
constexpr float kLn2 = 0.6931471805599453f;

static_assert(kForwardRows == kKeyTile,
              "the forward relies on every key tile it reads starting at or before its first row");
static_assert(kKeyTile % kBackwardRows == 0,
              "the backward's first query tile of a key tile must start at that key tile");

// The tile width for a head_dim (at most 128): 32, 64 or 128.
constexpr int PaddedHeadDim(int64_t head_dim) {
  return head_dim <= 32 ? 32 : head_dim <= 64 ? 64 : 128;
}

// Tiles of `tile` rows covering seq rows: a grid's x dimension.
constexpr unsigned Tiles(int64_t seq, int tile) {
  return static_cast<unsigned>((seq + tile - 1) / tile);
}

template <int kD>
constexpr int RowStride() {
  return kD + kPad;
}

// Shared memory of each kernel, in floats.
template <int kD>
constexpr int ForwardSmemFloats() {
  return (kForwardRows + 2 * kKeyTile) * RowStride<kD>() + kForwardRows * kScoreStride;
}
template <int kD>
constexpr int KeyValueSmemFloats() {
  return (2 * kKeyTile + 2 * kBackwardRows) * RowStride<kD>() + 2 * kBackwardRows * kScoreStride +
         2 * kBackwardRows;
}
template <int kD>
constexpr int QuerySmemFloats() {
  return (2 * kKeyTile + 2 * kBackwardRows) * RowStride<kD>() + kBackwardRows * kScoreStride +
         2 * kBackwardRows;
}

// Max and sum over the 16 lanes of a half-warp (xor butterfly: every lane gets the same bits).
__device__ __forceinline__ float HalfWarpMax(float v) {
  for (int offset = 8; offset > 0; offset /= 2) {
    v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, offset));
  }
  return v;
}
__device__ __forceinline__ float HalfWarpSum(float v) {
  for (int offset = 8; offset > 0; offset /= 2) v += __shfl_xor_sync(0xffffffffu, v, offset);
  return v;
}

// tile[r][c] = src row (first_row + r), column c, as float; zero past seq or past head_dim.
// `src` points at row 0 of this (sample, head); rows are row_stride elements apart.
template <typename T, int kD>
__device__ void LoadRows(float* tile, const T* src, int64_t row_stride, int first_row, int rows,
                         int seq, int head_dim) {
  for (int i = threadIdx.x; i < rows * kD; i += kThreads) {
    const int r = i / kD;
    const int c = i % kD;
    const int row = first_row + r;
    float value = 0.0f;
    if (row < seq && c < head_dim) {
      value = device::ToFloat(src[static_cast<int64_t>(row) * row_stride + c]);
    }
    tile[r * RowStride<kD>() + c] = value;
  }
}

// acc[i][j] = sum over c < kD of a[a_row0 + i][c] * b[b_row0 + 16 j][c], for kR x kC outputs.
template <int kD, int kR, int kC>
__device__ __forceinline__ void TileDots(const float* a, int a_row0, const float* b, int b_row0,
                                         float (&acc)[kR][kC]) {
  constexpr int kStride = RowStride<kD>();
#pragma unroll
  for (int i = 0; i < kR; ++i) {
#pragma unroll
    for (int j = 0; j < kC; ++j) acc[i][j] = 0.0f;
  }
#pragma unroll 4
  for (int c = 0; c < kD; c += 4) {
    float4 av[kR], bv[kC];
#pragma unroll
    for (int i = 0; i < kR; ++i) {
      av[i] = *reinterpret_cast<const float4*>(a + (a_row0 + i) * kStride + c);
    }
#pragma unroll
    for (int j = 0; j < kC; ++j) {
      bv[j] = *reinterpret_cast<const float4*>(b + (b_row0 + 16 * j) * kStride + c);
    }
#pragma unroll
    for (int i = 0; i < kR; ++i) {
#pragma unroll
      for (int j = 0; j < kC; ++j) {
        float s = acc[i][j];
        s = fmaf(av[i].x, bv[j].x, s);
        s = fmaf(av[i].y, bv[j].y, s);
        s = fmaf(av[i].z, bv[j].z, s);
        s = fmaf(av[i].w, bv[j].w, s);
        acc[i][j] = s;
      }
    }
  }
}

// ---- forward ----

// Block (query tile, head, sample); k and v of the head's key/value head (attention_heads.h).
// Thread (ty, tx) owns query rows ty*4 .. ty*4+3 of the tile: score columns tx + 16 j of each key
// tile, and output columns tx + 16 c.
template <typename T, int kD>
__global__ void __launch_bounds__(kThreads)
    FlashForwardKernel(const T* __restrict__ q, const T* __restrict__ k, const T* __restrict__ v,
                       T* __restrict__ o, float* __restrict__ lse, int seq, int heads, int kv_heads,
                       int head_dim, int window, float scale_log2) {
  constexpr int kStride = RowStride<kD>();
  constexpr int kCols = kD / 16;
  constexpr int kRows = kForwardRows / 16;          // 4 rows per thread
  float* q_tile = device::SharedFloats();           // [kForwardRows][kStride]
  float* k_tile = q_tile + kForwardRows * kStride;  // [kKeyTile][kStride]
  float* v_tile = k_tile + kKeyTile * kStride;      // [kKeyTile][kStride]
  float* p_tile = v_tile + kKeyTile * kStride;      // [kForwardRows][kScoreStride]

  const int ty = threadIdx.x / 16;
  const int tx = threadIdx.x % 16;
  // The last query tiles read the most key tiles: start them first.
  const int q0 = (gridDim.x - 1 - blockIdx.x) * kForwardRows;
  const HeadSlice head = SliceOf(blockIdx.z, blockIdx.y, seq, heads, kv_heads, head_dim);

  LoadRows<T, kD>(q_tile, q + head.base, head.row_stride, q0, kForwardRows, seq, head_dim);

  // Per row: the running max of the scores seen so far (in log2 units: score * log2(e)) and the
  // running sum of exp2(score - max); acc is the unnormalised output at that max.
  float row_max[kRows], row_sum[kRows], acc[kRows][kCols];
#pragma unroll
  for (int i = 0; i < kRows; ++i) {
    row_max[i] = -INFINITY;
    row_sum[i] = 0.0f;
#pragma unroll
    for (int c = 0; c < kCols; ++c) acc[i][c] = 0.0f;
  }

  const int last_row = min(q0 + kForwardRows, seq) - 1;
  // From the first key tile the block's first row sees (every earlier key is out of its window).
  for (int k0 = FirstKey(q0, window) / kKeyTile * kKeyTile; k0 <= last_row; k0 += kKeyTile) {
    __syncthreads();  // the previous tile's readers of k_tile, v_tile and p_tile are done
    LoadRows<T, kD>(k_tile, k + head.kv_base, head.kv_row_stride, k0, kKeyTile, seq, head_dim);
    LoadRows<T, kD>(v_tile, v + head.kv_base, head.kv_row_stride, k0, kKeyTile, seq, head_dim);
    __syncthreads();

    float s[kRows][4];
    TileDots<kD, kRows, 4>(q_tile, ty * kRows, k_tile, tx, s);
#pragma unroll
    for (int i = 0; i < kRows; ++i) {
      const int row = q0 + ty * kRows + i;
      float tile_max = -INFINITY;
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        const int col = k0 + tx + 16 * j;
        s[i][j] = (Visible(row, col, window) && col < seq) ? s[i][j] * scale_log2 : -INFINITY;
        tile_max = fmaxf(tile_max, s[i][j]);
      }
      tile_max = HalfWarpMax(tile_max);
      const float new_max = fmaxf(row_max[i], tile_max);
      // A row can see none of a tile's keys (before its window): new_max stays -inf and the guard
      // keeps it at zeros instead of NaN; its diagonal tile always has a key it sees.
      const float shift = new_max == -INFINITY ? 0.0f : new_max;
      const float rescale = exp2f(row_max[i] - shift);  // 0 on the first tile
      float tile_sum = 0.0f;
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        const float p = exp2f(s[i][j] - shift);  // 0 where masked
        p_tile[(ty * kRows + i) * kScoreStride + tx + 16 * j] = p;
        tile_sum += p;
      }
      tile_sum = HalfWarpSum(tile_sum);
      row_sum[i] = row_sum[i] * rescale + tile_sum;
      row_max[i] = new_max;
#pragma unroll
      for (int c = 0; c < kCols; ++c) acc[i][c] *= rescale;
    }
    // p_tile rows ty*kRows .. are written and read only by this half-warp.
    __syncwarp();
#pragma unroll 4
    for (int key = 0; key < kKeyTile; ++key) {
      float p[kRows];
#pragma unroll
      for (int i = 0; i < kRows; ++i) p[i] = p_tile[(ty * kRows + i) * kScoreStride + key];
#pragma unroll
      for (int c = 0; c < kCols; ++c) {
        const float value = v_tile[key * kStride + tx + 16 * c];
#pragma unroll
        for (int i = 0; i < kRows; ++i) acc[i][c] = fmaf(p[i], value, acc[i][c]);
      }
    }
  }

#pragma unroll
  for (int i = 0; i < kRows; ++i) {
    const int row = q0 + ty * kRows + i;
    if (row >= seq) continue;
    const float inv_sum = 1.0f / row_sum[i];
    T* out = o + head.base + static_cast<int64_t>(row) * head.row_stride;
#pragma unroll
    for (int c = 0; c < kCols; ++c) {
      const int col = tx + 16 * c;
      if (col < head_dim) out[col] = device::FromFloat<T>(acc[i][c] * inv_sum);
    }
    if (tx == 0) lse[head.stats + row] = (row_max[i] + log2f(row_sum[i])) * kLn2;
  }
}

// ---- backward ----

// delta[b, h, s] = sum over the head's columns of dout * o. One warp per (b, s, h) row.
template <typename T>
__global__ void __launch_bounds__(kThreads)
    RowDotKernel(const T* __restrict__ dout, const T* __restrict__ o, float* __restrict__ delta,
                 int64_t rows, int seq, int heads, int head_dim) {
  const int lane = threadIdx.x % 32;
  const int64_t first_warp = device::GlobalThread() / 32;
  const int64_t warps = device::GridThreads() / 32;
  for (int64_t r = first_warp; r < rows; r += warps) {  // r = (b * seq + s) * heads + h
    const T* dr = dout + r * head_dim;
    const T* orow = o + r * head_dim;
    float sum = 0.0f;
    for (int c = lane; c < head_dim; c += 32) {
      sum = fmaf(device::ToFloat(dr[c]), device::ToFloat(orow[c]), sum);
    }
    for (int offset = 16; offset > 0; offset /= 2) {
      sum += __shfl_xor_sync(0xffffffffu, sum, offset);
    }
    if (lane == 0) {
      const int64_t h = r % heads;
      const int64_t s = (r / heads) % seq;
      const int64_t b = r / (static_cast<int64_t>(heads) * seq);
      delta[(b * heads + h) * seq + s] = sum;
    }
  }
}

// For query rows (q0 + ty*2 + i) and keys (k0 + tx + 16 j) of the tiles in shared memory:
// p = exp(score - lse) (0 where masked) and ds = p * (dout . v - delta).
template <int kD>
__device__ __forceinline__ void ProbabilitiesAndScoreGradients(
    const float* q_tile, const float* do_tile, const float* k_tile, const float* v_tile,
    const float* lse_tile, const float* delta_tile, int q0, int k0, int seq, int window,
    float scale_log2, float (&p)[2][4], float (&ds)[2][4]) {
  const int ty = threadIdx.x / 16;
  const int tx = threadIdx.x % 16;
  float dp[2][4];
  TileDots<kD, 2, 4>(q_tile, ty * 2, k_tile, tx, p);  // the scores, before the exp
  TileDots<kD, 2, 4>(do_tile, ty * 2, v_tile, tx, dp);
#pragma unroll
  for (int i = 0; i < 2; ++i) {
    const int r = ty * 2 + i;
    const int row = q0 + r;
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      const int col = k0 + tx + 16 * j;
      const bool visible = row < seq && col < seq && Visible(row, col, window);
      p[i][j] = visible ? exp2f(p[i][j] * scale_log2 - lse_tile[r]) : 0.0f;
      ds[i][j] = p[i][j] * (dp[i][j] - delta_tile[r]);
    }
  }
}

// lse (converted to log2 units) and delta of query rows q0 .. q0+kBackwardRows-1; 0 past seq.
__device__ __forceinline__ void LoadRowStats(float* lse_tile, float* delta_tile, const float* lse,
                                             const float* delta, int q0, int seq) {
  if (threadIdx.x < kBackwardRows) {
    const int row = q0 + threadIdx.x;
    lse_tile[threadIdx.x] = row < seq ? lse[row] * kLog2e : 0.0f;
    delta_tile[threadIdx.x] = row < seq ? delta[row] : 0.0f;
  }
}

// Block (key tile, key/value head, sample): dk and dv of 64 keys, summed over every query tile at
// or past the key tile of each query head of the group in head order (grouped-query attention:
// one block owns the sum, so it is deterministic). Thread (ty, tx) owns keys ty*4 .. ty*4+3 and
// columns tx + 16 c of dk and dv. Grid: (key tiles, kv_heads, batch).
template <typename T, int kD>
__global__ void __launch_bounds__(kThreads)
    FlashBackwardKeyValueKernel(const T* __restrict__ dout, const T* __restrict__ q,
                                const T* __restrict__ k, const T* __restrict__ v,
                                const float* __restrict__ lse, const float* __restrict__ delta,
                                T* __restrict__ dk, T* __restrict__ dv, int seq, int heads,
                                int kv_heads, int head_dim, int window, float scale, float scale_log2) {
  constexpr int kStride = RowStride<kD>();
  constexpr int kCols = kD / 16;
  constexpr int kKeys = kKeyTile / 16;                // 4 keys per thread
  float* k_tile = device::SharedFloats();             // [kKeyTile][kStride]
  float* v_tile = k_tile + kKeyTile * kStride;        // [kKeyTile][kStride]
  float* q_tile = v_tile + kKeyTile * kStride;        // [kBackwardRows][kStride]
  float* do_tile = q_tile + kBackwardRows * kStride;  // [kBackwardRows][kStride]
  float* p_tile = do_tile + kBackwardRows * kStride;  // [kBackwardRows][kScoreStride]
  float* ds_tile = p_tile + kBackwardRows * kScoreStride;
  float* lse_tile = ds_tile + kBackwardRows * kScoreStride;  // [kBackwardRows]
  float* delta_tile = lse_tile + kBackwardRows;              // [kBackwardRows]

  const int ty = threadIdx.x / 16;
  const int tx = threadIdx.x % 16;
  const int k0 = blockIdx.x * kKeyTile;  // the first key tiles see the most query tiles
  const int group = heads / kv_heads;
  const int first_head = blockIdx.y * group;
  const int b = blockIdx.z;
  const HeadSlice kv_head = SliceOf(b, first_head, seq, heads, kv_heads, head_dim);

  LoadRows<T, kD>(k_tile, k + kv_head.kv_base, kv_head.kv_row_stride, k0, kKeyTile, seq, head_dim);
  LoadRows<T, kD>(v_tile, v + kv_head.kv_base, kv_head.kv_row_stride, k0, kKeyTile, seq, head_dim);

  float dk_acc[kKeys][kCols], dv_acc[kKeys][kCols];
#pragma unroll
  for (int i = 0; i < kKeys; ++i) {
#pragma unroll
    for (int c = 0; c < kCols; ++c) dk_acc[i][c] = dv_acc[i][c] = 0.0f;
  }

  for (int h = first_head; h < first_head + group; ++h) {
    const HeadSlice head = SliceOf(b, h, seq, heads, kv_heads, head_dim);
    // Rows before k0 see none of these keys (causal), nor rows past the last key's window; k0 is
    // a multiple of kBackwardRows.
    const int rows_end = RowsEnd(k0 + kKeyTile - 1, window, seq);
    for (int q0 = k0; q0 < rows_end; q0 += kBackwardRows) {
      __syncthreads();  // the previous query tile's readers are done (and k/v tiles are loaded)
      LoadRows<T, kD>(q_tile, q + head.base, head.row_stride, q0, kBackwardRows, seq, head_dim);
      LoadRows<T, kD>(do_tile, dout + head.base, head.row_stride, q0, kBackwardRows, seq, head_dim);
      LoadRowStats(lse_tile, delta_tile, lse + head.stats, delta + head.stats, q0, seq);
      __syncthreads();

      float p[2][4], ds[2][4];
      ProbabilitiesAndScoreGradients<kD>(q_tile, do_tile, k_tile, v_tile, lse_tile, delta_tile, q0,
                                         k0, seq, window, scale_log2, p, ds);
#pragma unroll
      for (int i = 0; i < 2; ++i) {
#pragma unroll
        for (int j = 0; j < 4; ++j) {
          p_tile[(ty * 2 + i) * kScoreStride + tx + 16 * j] = p[i][j];
          ds_tile[(ty * 2 + i) * kScoreStride + tx + 16 * j] = ds[i][j];
        }
      }
      __syncthreads();  // the sums below read the columns other threads wrote

      // dv[key] += sum_r p[r][key] dout[r];  dk[key] += sum_r ds[r][key] q[r] (scaled at the end).
#pragma unroll 2
      for (int r = 0; r < kBackwardRows; ++r) {
        const float4 p4 = *reinterpret_cast<const float4*>(p_tile + r * kScoreStride + ty * kKeys);
        const float4 ds4 = *reinterpret_cast<const float4*>(ds_tile + r * kScoreStride + ty * kKeys);
        const float pk[kKeys] = {p4.x, p4.y, p4.z, p4.w};
        const float dsk[kKeys] = {ds4.x, ds4.y, ds4.z, ds4.w};
#pragma unroll
        for (int c = 0; c < kCols; ++c) {
          const float dov = do_tile[r * kStride + tx + 16 * c];
          const float qv = q_tile[r * kStride + tx + 16 * c];
#pragma unroll
          for (int i = 0; i < kKeys; ++i) {
            dv_acc[i][c] = fmaf(pk[i], dov, dv_acc[i][c]);
            dk_acc[i][c] = fmaf(dsk[i], qv, dk_acc[i][c]);
          }
        }
      }
    }
  }

#pragma unroll
  for (int i = 0; i < kKeys; ++i) {
    const int key = k0 + ty * kKeys + i;
    if (key >= seq) continue;
    const int64_t offset = kv_head.kv_base + static_cast<int64_t>(key) * kv_head.kv_row_stride;
#pragma unroll
    for (int c = 0; c < kCols; ++c) {
      const int col = tx + 16 * c;
      if (col < head_dim) {
        dk[offset + col] = device::FromFloat<T>(dk_acc[i][c] * scale);
        dv[offset + col] = device::FromFloat<T>(dv_acc[i][c]);
      }
    }
  }
}

// Block (query tile, head, sample): dq of 32 query rows, summed over the key tiles (of the head's
// key/value head) up to the diagonal. Thread (ty, tx) owns rows ty*2, ty*2+1 and columns
// tx + 16 c of dq.
template <typename T, int kD>
__global__ void __launch_bounds__(kThreads)
    FlashBackwardQueryKernel(const T* __restrict__ dout, const T* __restrict__ q,
                             const T* __restrict__ k, const T* __restrict__ v,
                             const float* __restrict__ lse, const float* __restrict__ delta,
                             T* __restrict__ dq, int seq, int heads, int kv_heads, int head_dim,
                             int window, float scale, float scale_log2) {
  constexpr int kStride = RowStride<kD>();
  constexpr int kCols = kD / 16;
  float* q_tile = device::SharedFloats();                    // [kBackwardRows][kStride]
  float* do_tile = q_tile + kBackwardRows * kStride;         // [kBackwardRows][kStride]
  float* k_tile = do_tile + kBackwardRows * kStride;         // [kKeyTile][kStride]
  float* v_tile = k_tile + kKeyTile * kStride;               // [kKeyTile][kStride]
  float* ds_tile = v_tile + kKeyTile * kStride;              // [kBackwardRows][kScoreStride]
  float* lse_tile = ds_tile + kBackwardRows * kScoreStride;  // [kBackwardRows]
  float* delta_tile = lse_tile + kBackwardRows;              // [kBackwardRows]

  const int ty = threadIdx.x / 16;
  const int tx = threadIdx.x % 16;
  const int q0 = (gridDim.x - 1 - blockIdx.x) * kBackwardRows;  // the longest rows first
  const HeadSlice head = SliceOf(blockIdx.z, blockIdx.y, seq, heads, kv_heads, head_dim);

  LoadRows<T, kD>(q_tile, q + head.base, head.row_stride, q0, kBackwardRows, seq, head_dim);
  LoadRows<T, kD>(do_tile, dout + head.base, head.row_stride, q0, kBackwardRows, seq, head_dim);
  LoadRowStats(lse_tile, delta_tile, lse + head.stats, delta + head.stats, q0, seq);

  float dq_acc[2][kCols];
#pragma unroll
  for (int i = 0; i < 2; ++i) {
#pragma unroll
    for (int c = 0; c < kCols; ++c) dq_acc[i][c] = 0.0f;
  }

  const int last_row = min(q0 + kBackwardRows, seq) - 1;
  for (int k0 = FirstKey(q0, window) / kKeyTile * kKeyTile; k0 <= last_row; k0 += kKeyTile) {
    __syncthreads();  // the previous key tile's readers are done (and q/dout tiles are loaded)
    LoadRows<T, kD>(k_tile, k + head.kv_base, head.kv_row_stride, k0, kKeyTile, seq, head_dim);
    LoadRows<T, kD>(v_tile, v + head.kv_base, head.kv_row_stride, k0, kKeyTile, seq, head_dim);
    __syncthreads();

    float p[2][4], ds[2][4];
    ProbabilitiesAndScoreGradients<kD>(q_tile, do_tile, k_tile, v_tile, lse_tile, delta_tile, q0,
                                       k0, seq, window, scale_log2, p, ds);
#pragma unroll
    for (int i = 0; i < 2; ++i) {
#pragma unroll
      for (int j = 0; j < 4; ++j) ds_tile[(ty * 2 + i) * kScoreStride + tx + 16 * j] = ds[i][j];
    }
    // ds_tile rows ty*2, ty*2+1 are written and read only by this half-warp.
    __syncwarp();
#pragma unroll 4
    for (int key = 0; key < kKeyTile; ++key) {
      const float d0 = ds_tile[(ty * 2) * kScoreStride + key];
      const float d1 = ds_tile[(ty * 2 + 1) * kScoreStride + key];
#pragma unroll
      for (int c = 0; c < kCols; ++c) {
        const float kv = k_tile[key * kStride + tx + 16 * c];
        dq_acc[0][c] = fmaf(d0, kv, dq_acc[0][c]);
        dq_acc[1][c] = fmaf(d1, kv, dq_acc[1][c]);
      }
    }
  }

#pragma unroll
  for (int i = 0; i < 2; ++i) {
    const int row = q0 + ty * 2 + i;
    if (row >= seq) continue;
    T* out = dq + head.base + static_cast<int64_t>(row) * head.row_stride;
#pragma unroll
    for (int c = 0; c < kCols; ++c) {
      const int col = tx + 16 * c;
      if (col < head_dim) out[col] = device::FromFloat<T>(dq_acc[i][c] * scale);
    }
  }
}

}  // namespace pipecoord::kernels::cuda::flash

#endif  // PIPECOORD_KERNELS_CUDA_ATTENTION_KERNELS_H_
