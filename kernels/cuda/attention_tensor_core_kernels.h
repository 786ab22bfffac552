// The flash-attention kernels for bf16 storage, on tensor cores: the same algorithm, tiles and
// thread roles for the softmax as attention_kernels.h, with every matrix product done by WMMA
// (16 x 16 x 16 bf16 x bf16 products summed in fp32).
//
// Each tile's products go through shared memory: a warp computes its 16 x 16 blocks of the
// scores (or of P V, dS K, ...) into fp32 fragments and stores them; the 16 x 16 thread grid of
// attention_kernels.h then reads them with the same row/column ownership as the float kernels
// (running max and sum per row, masks, exp, rescaling: all fp32). The second operand of each
// pair of products, P or dS, is rounded to bf16 for the tensor cores, as in FlashAttention; the
// forward's row sums use the unrounded P. Accumulators that need no rescaling (the backward's
// dk, dv, dq) stay in fragments across tiles; the forward's output, rescaled whenever the
// running max grows, stays in registers with the float kernel's layout.
//
// WMMA's rules, kept by the layouts below: every fragment pointer 32-byte aligned (regions start
// at multiples of 128 bytes, 16-row and 16-column offsets are multiples of 32 bytes), ldm a
// multiple of 8 elements for bf16 and of 4 for float. The CPU emulation checks both.
#ifndef PIPECOORD_KERNELS_CUDA_ATTENTION_TENSOR_CORE_KERNELS_H_
#define PIPECOORD_KERNELS_CUDA_ATTENTION_TENSOR_CORE_KERNELS_H_

#include "kernels/cuda/attention_kernels.h"

#ifdef __CUDACC__
#include <mma.h>

namespace pipecoord::kernels::cuda::device {
// The block's dynamic shared memory as bytes, 128-byte aligned.
__device__ __forceinline__ unsigned char* SharedBytes() {
  extern __shared__ __align__(128) unsigned char shared_bytes[];
  return shared_bytes;
}
}  // namespace pipecoord::kernels::cuda::device
#endif

namespace pipecoord::kernels::cuda::flash {

namespace wmma = ::nvcuda::wmma;

using Bf16 = __nv_bfloat16;

constexpr int kBf16Pad = 8;  // keeps bf16 rows multiples of 16 bytes, spread over the banks
constexpr int kBf16ScoreStride = kKeyTile + kBf16Pad;  // a [rows][kKeyTile] bf16 tile

template <int kD>
constexpr int Bf16Stride() {
  return kD + kBf16Pad;
}

constexpr int AlignUp128(int bytes) { return (bytes + 127) / 128 * 128; }

template <int kD>
constexpr int Bf16TileBytes(int rows) {
  return AlignUp128(rows * Bf16Stride<kD>() * static_cast<int>(sizeof(Bf16)));
}
constexpr int ScoreTileBytes(int rows) {
  return AlignUp128(rows * kScoreStride * static_cast<int>(sizeof(float)));
}
constexpr int Bf16ScoreTileBytes(int rows) {
  return AlignUp128(rows * kBf16ScoreStride * static_cast<int>(sizeof(Bf16)));
}
template <int kD>
constexpr int FloatTileBytes(int rows) {
  return AlignUp128(rows * RowStride<kD>() * static_cast<int>(sizeof(float)));
}
constexpr int kStatsBytes = AlignUp128(2 * kBackwardRows * static_cast<int>(sizeof(float)));

// Byte offsets of each kernel's shared-memory regions.
template <int kD>
struct ForwardTensorCoreLayout {
  static constexpr int kQ = 0;                                       // bf16 [64][kD + 8]
  static constexpr int kK = kQ + Bf16TileBytes<kD>(kForwardRows);    // bf16 [64][kD + 8]
  static constexpr int kV = kK + Bf16TileBytes<kD>(kKeyTile);        // bf16 [64][kD + 8]
  static constexpr int kS = kV + Bf16TileBytes<kD>(kKeyTile);        // float [64][68]
  static constexpr int kP = kS + ScoreTileBytes(kForwardRows);       // bf16 [64][72]
  static constexpr int kPV = kP + Bf16ScoreTileBytes(kForwardRows);  // float [64][kD + 4]
  static constexpr int kBytes = kPV + FloatTileBytes<kD>(kForwardRows);
};

template <int kD>
struct KeyValueTensorCoreLayout {
  static constexpr int kK = 0;                                            // bf16 [64][kD + 8]
  static constexpr int kV = kK + Bf16TileBytes<kD>(kKeyTile);             // bf16 [64][kD + 8]
  static constexpr int kQ = kV + Bf16TileBytes<kD>(kKeyTile);             // bf16 [32][kD + 8]
  static constexpr int kDo = kQ + Bf16TileBytes<kD>(kBackwardRows);       // bf16 [32][kD + 8]
  static constexpr int kS = kDo + Bf16TileBytes<kD>(kBackwardRows);       // float [32][68]
  static constexpr int kDp = kS + ScoreTileBytes(kBackwardRows);          // float [32][68]
  static constexpr int kP = kDp + ScoreTileBytes(kBackwardRows);          // bf16 [32][72]
  static constexpr int kDs = kP + Bf16ScoreTileBytes(kBackwardRows);      // bf16 [32][72]
  static constexpr int kStats = kDs + Bf16ScoreTileBytes(kBackwardRows);  // lse, delta [32]
  static constexpr int kOut = kStats + kStatsBytes;                       // float [64][kD + 4]
  static constexpr int kBytes = kOut + FloatTileBytes<kD>(kKeyTile);
};

template <int kD>
struct QueryTensorCoreLayout {
  static constexpr int kQ = 0;                                            // bf16 [32][kD + 8]
  static constexpr int kDo = kQ + Bf16TileBytes<kD>(kBackwardRows);       // bf16 [32][kD + 8]
  static constexpr int kK = kDo + Bf16TileBytes<kD>(kBackwardRows);       // bf16 [64][kD + 8]
  static constexpr int kV = kK + Bf16TileBytes<kD>(kKeyTile);             // bf16 [64][kD + 8]
  static constexpr int kS = kV + Bf16TileBytes<kD>(kKeyTile);             // float [32][68]
  static constexpr int kDp = kS + ScoreTileBytes(kBackwardRows);          // float [32][68]
  static constexpr int kDs = kDp + ScoreTileBytes(kBackwardRows);         // bf16 [32][72]
  static constexpr int kStats = kDs + Bf16ScoreTileBytes(kBackwardRows);  // lse, delta [32]
  static constexpr int kOut = kStats + kStatsBytes;                       // float [32][kD + 4]
  static constexpr int kBytes = kOut + FloatTileBytes<kD>(kBackwardRows);
};

template <typename V>
__device__ __forceinline__ V* Region(unsigned char* smem, int offset) {
  return reinterpret_cast<V*>(smem + offset);
}

// tile[r][c] = src row (first_row + r), column c; zero past seq or past head_dim.
template <int kD>
__device__ void LoadBf16Rows(Bf16* tile, const Bf16* src, int64_t row_stride, int first_row,
                             int rows, int seq, int head_dim) {
  const Bf16 zero = device::FromFloat<Bf16>(0.0f);
  for (int i = threadIdx.x; i < rows * kD; i += kThreads) {
    const int r = i / kD;
    const int c = i % kD;
    const int row = first_row + r;
    tile[r * Bf16Stride<kD>() + c] =
        (row < seq && c < head_dim) ? src[static_cast<int64_t>(row) * row_stride + c] : zero;
  }
}

using FragmentF32 = wmma::fragment<wmma::accumulator, 16, 16, 16, float>;
using RowMajorA = wmma::fragment<wmma::matrix_a, 16, 16, 16, Bf16, wmma::row_major>;
using ColMajorA = wmma::fragment<wmma::matrix_a, 16, 16, 16, Bf16, wmma::col_major>;
using RowMajorB = wmma::fragment<wmma::matrix_b, 16, 16, 16, Bf16, wmma::row_major>;
using ColMajorB = wmma::fragment<wmma::matrix_b, 16, 16, 16, Bf16, wmma::col_major>;

// acc += a[16 rows from a_row][kD] * b[16 rows from b_row][kD]^T, both row-major bf16 tiles.
template <int kD>
__device__ __forceinline__ void AddRowDots(FragmentF32& acc, const Bf16* a, int a_row,
                                           const Bf16* b, int b_row) {
  constexpr int kLd = Bf16Stride<kD>();
#pragma unroll
  for (int kk = 0; kk < kD; kk += 16) {
    RowMajorA fa;
    ColMajorB fb;  // b's rows as the columns of the right-hand operand
    wmma::load_matrix_sync(fa, a + a_row * kLd + kk, kLd);
    wmma::load_matrix_sync(fb, b + b_row * kLd + kk, kLd);
    wmma::mma_sync(acc, fa, fb, acc);
  }
}

// ---- forward ----

// FlashForwardKernel's algorithm for bf16. Warp w computes score rows (w % 4) * 16 .. +15,
// columns (w / 4) * 32 .. +31, and the same rows of P V at columns (w / 4) * kD / 2 .. .
template <int kD>
__global__ void __launch_bounds__(kThreads)
    FlashForwardTensorCoreKernel(const Bf16* __restrict__ q, const Bf16* __restrict__ k,
                                 const Bf16* __restrict__ v, Bf16* __restrict__ o,
                                 float* __restrict__ lse, int seq, int heads, int kv_heads,
                                 int head_dim, int window, float scale_log2) {
  using Layout = ForwardTensorCoreLayout<kD>;
  constexpr int kLd = Bf16Stride<kD>();
  constexpr int kOutLd = RowStride<kD>();
  constexpr int kCols = kD / 16;
  constexpr int kRows = kForwardRows / 16;  // 4 rows per thread
  constexpr int kOutFragments = kD / 32;    // per warp
  unsigned char* smem = device::SharedBytes();
  Bf16* q_tile = Region<Bf16>(smem, Layout::kQ);
  Bf16* k_tile = Region<Bf16>(smem, Layout::kK);
  Bf16* v_tile = Region<Bf16>(smem, Layout::kV);
  float* s_tile = Region<float>(smem, Layout::kS);
  Bf16* p_tile = Region<Bf16>(smem, Layout::kP);
  float* pv_tile = Region<float>(smem, Layout::kPV);

  const int ty = threadIdx.x / 16;
  const int tx = threadIdx.x % 16;
  const int warp = threadIdx.x / 32;
  const int warp_row = (warp % 4) * 16;
  const int warp_score_col = (warp / 4) * 32;
  const int warp_out_col = (warp / 4) * (kD / 2);
  const int q0 = (gridDim.x - 1 - blockIdx.x) * kForwardRows;  // the longest rows first
  const HeadSlice head = SliceOf(blockIdx.z, blockIdx.y, seq, heads, kv_heads, head_dim);

  LoadBf16Rows<kD>(q_tile, q + head.base, head.row_stride, q0, kForwardRows, seq, head_dim);

  float row_max[kRows], row_sum[kRows], acc[kRows][kCols];
#pragma unroll
  for (int i = 0; i < kRows; ++i) {
    row_max[i] = -INFINITY;
    row_sum[i] = 0.0f;
#pragma unroll
    for (int c = 0; c < kCols; ++c) acc[i][c] = 0.0f;
  }

  const int last_row = min(q0 + kForwardRows, seq) - 1;
  for (int k0 = FirstKey(q0, window) / kKeyTile * kKeyTile; k0 <= last_row; k0 += kKeyTile) {
    __syncthreads();  // the previous tile's readers of every region are done
    LoadBf16Rows<kD>(k_tile, k + head.kv_base, head.kv_row_stride, k0, kKeyTile, seq, head_dim);
    LoadBf16Rows<kD>(v_tile, v + head.kv_base, head.kv_row_stride, k0, kKeyTile, seq, head_dim);
    __syncthreads();

#pragma unroll
    for (int f = 0; f < 2; ++f) {
      FragmentF32 scores;
      wmma::fill_fragment(scores, 0.0f);
      AddRowDots<kD>(scores, q_tile, warp_row, k_tile, warp_score_col + 16 * f);
      wmma::store_matrix_sync(s_tile + warp_row * kScoreStride + warp_score_col + 16 * f, scores,
                              kScoreStride, wmma::mem_row_major);
    }
    __syncthreads();

    float rescale[kRows];
#pragma unroll
    for (int i = 0; i < kRows; ++i) {
      const int r = ty * kRows + i;
      const int row = q0 + r;
      float s[4];
      float tile_max = -INFINITY;
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        const int col = k0 + tx + 16 * j;
        s[j] = (Visible(row, col, window) && col < seq) ? s_tile[r * kScoreStride + tx + 16 * j] * scale_log2
                                                         : -INFINITY;
        tile_max = fmaxf(tile_max, s[j]);
      }
      tile_max = HalfWarpMax(tile_max);
      const float new_max = fmaxf(row_max[i], tile_max);
      const float shift = new_max == -INFINITY ? 0.0f : new_max;  // as FlashForwardKernel
      rescale[i] = exp2f(row_max[i] - shift);
      float tile_sum = 0.0f;
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        const float p = exp2f(s[j] - shift);
        p_tile[r * kBf16ScoreStride + tx + 16 * j] = device::FromFloat<Bf16>(p);
        tile_sum += p;
      }
      tile_sum = HalfWarpSum(tile_sum);
      row_sum[i] = row_sum[i] * rescale[i] + tile_sum;
      row_max[i] = new_max;
    }
    __syncthreads();  // each warp's P V reads P rows that other threads wrote

#pragma unroll
    for (int f = 0; f < kOutFragments; ++f) {
      FragmentF32 pv;
      wmma::fill_fragment(pv, 0.0f);
#pragma unroll
      for (int kk = 0; kk < kKeyTile; kk += 16) {
        RowMajorA fp;
        RowMajorB fv;
        wmma::load_matrix_sync(fp, p_tile + warp_row * kBf16ScoreStride + kk, kBf16ScoreStride);
        wmma::load_matrix_sync(fv, v_tile + kk * kLd + warp_out_col + 16 * f, kLd);
        wmma::mma_sync(pv, fp, fv, pv);
      }
      wmma::store_matrix_sync(pv_tile + warp_row * kOutLd + warp_out_col + 16 * f, pv, kOutLd,
                              wmma::mem_row_major);
    }
    __syncthreads();

#pragma unroll
    for (int i = 0; i < kRows; ++i) {
#pragma unroll
      for (int c = 0; c < kCols; ++c) {
        acc[i][c] = fmaf(acc[i][c], rescale[i], pv_tile[(ty * kRows + i) * kOutLd + tx + 16 * c]);
      }
    }
  }

#pragma unroll
  for (int i = 0; i < kRows; ++i) {
    const int row = q0 + ty * kRows + i;
    if (row >= seq) continue;
    const float inv_sum = 1.0f / row_sum[i];
    Bf16* out = o + head.base + static_cast<int64_t>(row) * head.row_stride;
#pragma unroll
    for (int c = 0; c < kCols; ++c) {
      const int col = tx + 16 * c;
      if (col < head_dim) out[col] = device::FromFloat<Bf16>(acc[i][c] * inv_sum);
    }
    if (tx == 0) lse[head.stats + row] = (row_max[i] + log2f(row_sum[i])) * kLn2;
  }
}

// ---- backward ----

// Scores and dout . v of a 32-row query tile and a 64-key tile into s_tile and dp_tile (warp w:
// rows (w / 4) * 16, keys (w % 4) * 16), then, after a barrier, p = exp(score - lse) (0 where
// masked) and ds = p (dp - delta) as bf16 into p_tile (when not null) and ds_tile, with the
// float kernels' ownership: rows ty*2 + i, keys tx + 16 j. Ends with a barrier.
template <int kD>
__device__ __forceinline__ void TensorCoreScoreGradients(
    const Bf16* q_tile, const Bf16* do_tile, const Bf16* k_tile, const Bf16* v_tile,
    const float* lse_tile, const float* delta_tile, float* s_tile, float* dp_tile, Bf16* p_tile,
    Bf16* ds_tile, int q0, int k0, int seq, int window, float scale_log2) {
  const int warp = threadIdx.x / 32;
  const int warp_row = (warp / 4) * 16;
  const int warp_key = (warp % 4) * 16;
  FragmentF32 scores, dp;
  wmma::fill_fragment(scores, 0.0f);
  wmma::fill_fragment(dp, 0.0f);
  AddRowDots<kD>(scores, q_tile, warp_row, k_tile, warp_key);
  AddRowDots<kD>(dp, do_tile, warp_row, v_tile, warp_key);
  wmma::store_matrix_sync(s_tile + warp_row * kScoreStride + warp_key, scores, kScoreStride,
                          wmma::mem_row_major);
  wmma::store_matrix_sync(dp_tile + warp_row * kScoreStride + warp_key, dp, kScoreStride,
                          wmma::mem_row_major);
  __syncthreads();

  const int ty = threadIdx.x / 16;
  const int tx = threadIdx.x % 16;
#pragma unroll
  for (int i = 0; i < 2; ++i) {
    const int r = ty * 2 + i;
    const int row = q0 + r;
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      const int c = tx + 16 * j;
      const int col = k0 + c;
      const bool visible = row < seq && col < seq && Visible(row, col, window);
      const float p =
          visible ? exp2f(s_tile[r * kScoreStride + c] * scale_log2 - lse_tile[r]) : 0.0f;
      const float ds = p * (dp_tile[r * kScoreStride + c] - delta_tile[r]);
      if (p_tile != nullptr) p_tile[r * kBf16ScoreStride + c] = device::FromFloat<Bf16>(p);
      ds_tile[r * kBf16ScoreStride + c] = device::FromFloat<Bf16>(ds);
    }
  }
  __syncthreads();
}

// Writes a [rows][kD + 4] float tile of rows first_row .. to dst (times `scale`, as bf16),
// skipping rows past seq and columns past head_dim.
template <int kD>
__device__ void StoreRows(Bf16* dst, const float* tile, int64_t row_stride, int first_row, int rows,
                          int seq, int head_dim, float scale) {
  for (int i = threadIdx.x; i < rows * kD; i += kThreads) {
    const int r = i / kD;
    const int c = i % kD;
    const int row = first_row + r;
    if (row < seq && c < head_dim) {
      dst[static_cast<int64_t>(row) * row_stride + c] =
          device::FromFloat<Bf16>(tile[r * RowStride<kD>() + c] * scale);
    }
  }
}

// FlashBackwardKeyValueKernel's algorithm for bf16 (grid (key tiles, kv_heads, batch), the
// group's query heads summed in head order). Warp w accumulates keys (w % 4) * 16 .. +15 of dk and
// dv at columns (w / 4) * kD / 2 .., in fragments kept across query tiles and heads.
template <int kD>
__global__ void __launch_bounds__(kThreads)
    FlashBackwardKeyValueTensorCoreKernel(const Bf16* __restrict__ dout, const Bf16* __restrict__ q,
                                          const Bf16* __restrict__ k, const Bf16* __restrict__ v,
                                          const float* __restrict__ lse,
                                          const float* __restrict__ delta, Bf16* __restrict__ dk,
                                          Bf16* __restrict__ dv, int seq, int heads, int kv_heads,
                                          int head_dim, int window, float scale, float scale_log2) {
  using Layout = KeyValueTensorCoreLayout<kD>;
  constexpr int kLd = Bf16Stride<kD>();
  constexpr int kOutLd = RowStride<kD>();
  constexpr int kFragments = kD / 32;  // per warp, for each of dk and dv
  unsigned char* smem = device::SharedBytes();
  Bf16* k_tile = Region<Bf16>(smem, Layout::kK);
  Bf16* v_tile = Region<Bf16>(smem, Layout::kV);
  Bf16* q_tile = Region<Bf16>(smem, Layout::kQ);
  Bf16* do_tile = Region<Bf16>(smem, Layout::kDo);
  float* s_tile = Region<float>(smem, Layout::kS);
  float* dp_tile = Region<float>(smem, Layout::kDp);
  Bf16* p_tile = Region<Bf16>(smem, Layout::kP);
  Bf16* ds_tile = Region<Bf16>(smem, Layout::kDs);
  float* lse_tile = Region<float>(smem, Layout::kStats);
  float* delta_tile = lse_tile + kBackwardRows;
  float* out_tile = Region<float>(smem, Layout::kOut);

  const int warp = threadIdx.x / 32;
  const int warp_key = (warp % 4) * 16;
  const int warp_col = (warp / 4) * (kD / 2);
  const int k0 = blockIdx.x * kKeyTile;  // the first key tiles see the most query tiles
  const int group = heads / kv_heads;
  const int first_head = blockIdx.y * group;
  const int b = blockIdx.z;
  const HeadSlice kv_head = SliceOf(b, first_head, seq, heads, kv_heads, head_dim);

  LoadBf16Rows<kD>(k_tile, k + kv_head.kv_base, kv_head.kv_row_stride, k0, kKeyTile, seq, head_dim);
  LoadBf16Rows<kD>(v_tile, v + kv_head.kv_base, kv_head.kv_row_stride, k0, kKeyTile, seq, head_dim);

  FragmentF32 dk_acc[kFragments], dv_acc[kFragments];
#pragma unroll
  for (int f = 0; f < kFragments; ++f) {
    wmma::fill_fragment(dk_acc[f], 0.0f);
    wmma::fill_fragment(dv_acc[f], 0.0f);
  }

  for (int h = first_head; h < first_head + group; ++h) {
    const HeadSlice head = SliceOf(b, h, seq, heads, kv_heads, head_dim);
    const int rows_end = RowsEnd(k0 + kKeyTile - 1, window, seq);  // past it no row sees these keys
    for (int q0 = k0; q0 < rows_end; q0 += kBackwardRows) {
      __syncthreads();  // the previous query tile's readers are done (and k/v tiles are loaded)
      LoadBf16Rows<kD>(q_tile, q + head.base, head.row_stride, q0, kBackwardRows, seq, head_dim);
      LoadBf16Rows<kD>(do_tile, dout + head.base, head.row_stride, q0, kBackwardRows, seq, head_dim);
      LoadRowStats(lse_tile, delta_tile, lse + head.stats, delta + head.stats, q0, seq);
      __syncthreads();
      TensorCoreScoreGradients<kD>(q_tile, do_tile, k_tile, v_tile, lse_tile, delta_tile, s_tile,
                                   dp_tile, p_tile, ds_tile, q0, k0, seq, window, scale_log2);

      // dv[key] += sum_r p[r][key] dout[r]; dk[key] += sum_r ds[r][key] q[r]: P^T and dS^T are
      // the column-major reading of the row-major P and dS tiles.
#pragma unroll
      for (int kk = 0; kk < kBackwardRows; kk += 16) {
        ColMajorA fp, fds;
        wmma::load_matrix_sync(fp, p_tile + kk * kBf16ScoreStride + warp_key, kBf16ScoreStride);
        wmma::load_matrix_sync(fds, ds_tile + kk * kBf16ScoreStride + warp_key, kBf16ScoreStride);
#pragma unroll
        for (int f = 0; f < kFragments; ++f) {
          RowMajorB fdo, fq;
          wmma::load_matrix_sync(fdo, do_tile + kk * kLd + warp_col + 16 * f, kLd);
          wmma::load_matrix_sync(fq, q_tile + kk * kLd + warp_col + 16 * f, kLd);
          wmma::mma_sync(dv_acc[f], fp, fdo, dv_acc[f]);
          wmma::mma_sync(dk_acc[f], fds, fq, dk_acc[f]);
        }
      }
    }
  }

#pragma unroll
  for (int f = 0; f < kFragments; ++f) {
    wmma::store_matrix_sync(out_tile + warp_key * kOutLd + warp_col + 16 * f, dk_acc[f], kOutLd,
                            wmma::mem_row_major);
  }
  __syncthreads();
  StoreRows<kD>(dk + kv_head.kv_base, out_tile, kv_head.kv_row_stride, k0, kKeyTile, seq, head_dim,
                scale);
  __syncthreads();
#pragma unroll
  for (int f = 0; f < kFragments; ++f) {
    wmma::store_matrix_sync(out_tile + warp_key * kOutLd + warp_col + 16 * f, dv_acc[f], kOutLd,
                            wmma::mem_row_major);
  }
  __syncthreads();
  StoreRows<kD>(dv + kv_head.kv_base, out_tile, kv_head.kv_row_stride, k0, kKeyTile, seq, head_dim,
                1.0f);
}

// FlashBackwardQueryKernel's algorithm for bf16. The 32 x kD dq tile is 2 * kD / 16 fragments:
// warp w holds fragments w * kPerWarp .. (row-major over the tile's 16 x 16 blocks); with
// kD = 32 only warps 0-3 hold one.
template <int kD>
__global__ void __launch_bounds__(kThreads)
    FlashBackwardQueryTensorCoreKernel(const Bf16* __restrict__ dout, const Bf16* __restrict__ q,
                                       const Bf16* __restrict__ k, const Bf16* __restrict__ v,
                                       const float* __restrict__ lse,
                                       const float* __restrict__ delta, Bf16* __restrict__ dq,
                                       int seq, int heads, int kv_heads, int head_dim,
                                       int window, float scale, float scale_log2) {
  using Layout = QueryTensorCoreLayout<kD>;
  constexpr int kLd = Bf16Stride<kD>();
  constexpr int kOutLd = RowStride<kD>();
  constexpr int kBlockCols = kD / 16;
  constexpr int kBlocks = (kBackwardRows / 16) * kBlockCols;
  constexpr int kPerWarp = kBlocks >= kThreads / 32 ? kBlocks / (kThreads / 32) : 1;
  static_assert(kBlocks % kPerWarp == 0, "dq blocks spread evenly over the warps that hold them");
  unsigned char* smem = device::SharedBytes();
  Bf16* q_tile = Region<Bf16>(smem, Layout::kQ);
  Bf16* do_tile = Region<Bf16>(smem, Layout::kDo);
  Bf16* k_tile = Region<Bf16>(smem, Layout::kK);
  Bf16* v_tile = Region<Bf16>(smem, Layout::kV);
  float* s_tile = Region<float>(smem, Layout::kS);
  float* dp_tile = Region<float>(smem, Layout::kDp);
  Bf16* ds_tile = Region<Bf16>(smem, Layout::kDs);
  float* lse_tile = Region<float>(smem, Layout::kStats);
  float* delta_tile = lse_tile + kBackwardRows;
  float* out_tile = Region<float>(smem, Layout::kOut);

  const int warp = threadIdx.x / 32;
  const bool holds_dq = warp * kPerWarp < kBlocks;  // the same for every lane of the warp
  const int q0 = (gridDim.x - 1 - blockIdx.x) * kBackwardRows;  // the longest rows first
  const HeadSlice head = SliceOf(blockIdx.z, blockIdx.y, seq, heads, kv_heads, head_dim);

  LoadBf16Rows<kD>(q_tile, q + head.base, head.row_stride, q0, kBackwardRows, seq, head_dim);
  LoadBf16Rows<kD>(do_tile, dout + head.base, head.row_stride, q0, kBackwardRows, seq, head_dim);
  LoadRowStats(lse_tile, delta_tile, lse + head.stats, delta + head.stats, q0, seq);

  FragmentF32 dq_acc[kPerWarp];
#pragma unroll
  for (int f = 0; f < kPerWarp; ++f) wmma::fill_fragment(dq_acc[f], 0.0f);

  const int last_row = min(q0 + kBackwardRows, seq) - 1;
  for (int k0 = FirstKey(q0, window) / kKeyTile * kKeyTile; k0 <= last_row; k0 += kKeyTile) {
    __syncthreads();  // the previous key tile's readers are done (and q/dout tiles are loaded)
    LoadBf16Rows<kD>(k_tile, k + head.kv_base, head.kv_row_stride, k0, kKeyTile, seq, head_dim);
    LoadBf16Rows<kD>(v_tile, v + head.kv_base, head.kv_row_stride, k0, kKeyTile, seq, head_dim);
    __syncthreads();
    TensorCoreScoreGradients<kD>(q_tile, do_tile, k_tile, v_tile, lse_tile, delta_tile, s_tile,
                                 dp_tile, nullptr, ds_tile, q0, k0, seq, window, scale_log2);
    if (holds_dq) {
#pragma unroll
      for (int f = 0; f < kPerWarp; ++f) {
        const int block = warp * kPerWarp + f;
        const int row = (block / kBlockCols) * 16;
        const int col = (block % kBlockCols) * 16;
#pragma unroll
        for (int kk = 0; kk < kKeyTile; kk += 16) {
          RowMajorA fds;
          RowMajorB fk;
          wmma::load_matrix_sync(fds, ds_tile + row * kBf16ScoreStride + kk, kBf16ScoreStride);
          wmma::load_matrix_sync(fk, k_tile + kk * kLd + col, kLd);
          wmma::mma_sync(dq_acc[f], fds, fk, dq_acc[f]);
        }
      }
    }
  }

  if (holds_dq) {
#pragma unroll
    for (int f = 0; f < kPerWarp; ++f) {
      const int block = warp * kPerWarp + f;
      wmma::store_matrix_sync(
          out_tile + (block / kBlockCols) * 16 * kOutLd + (block % kBlockCols) * 16, dq_acc[f],
          kOutLd, wmma::mem_row_major);
    }
  }
  __syncthreads();
  StoreRows<kD>(dq + head.base, out_tile, head.row_stride, q0, kBackwardRows, seq, head_dim, scale);
}

}  // namespace pipecoord::kernels::cuda::flash

#endif  // PIPECOORD_KERNELS_CUDA_ATTENTION_TENSOR_CORE_KERNELS_H_
