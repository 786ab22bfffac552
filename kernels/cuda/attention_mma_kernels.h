// Flash attention for bf16 storage on tensor cores, written at the register level (mma.h:
// ldmatrix, mma.sync m16n8k16, cp.async), the way FlashAttention-2 organises it (Dao, 2023,
// "FlashAttention-2: Faster Attention with Better Parallelism and Work Partitioning"): each warp
// owns 16 query rows, keeps its scores, probabilities and output accumulator in registers, and
// does the online softmax there, so the only shared-memory traffic is the q, k and v tiles
// themselves. attention_tensor_core_kernels.h (WMMA through shared memory) stays for the shapes
// these kernels do not take (head_dim not a multiple of 8, misaligned pointers).
//
// Forward: a block of 4 warps holds 128 query rows (two groups of 16 per warp: each k fragment
// read from shared memory feeds both, 0.171-0.174 ms against 0.186 ms for one group on an H200
// at b1 s2048 32 heads d128); it walks the key tiles (64 keys) up to the diagonal, the next tile's
// k and v loading (cp.async, double-buffered) while this one is multiplied. Scores S = q k^T (fp32
// accumulators), the causal mask on the diagonal tile, the running max and sum per row (reduced
// over the 4 lanes that share a row), P = exp2(S scale log2e
// - max) rounded to bf16 as the A operand of O += P v (registers reused in place: the C layout
// of two adjacent 8-key tiles is the A layout of one 16-key step), and at the end o = O / sum
// and lse = ln(sum) + max scale, as attention.h defines them. The row sums use the unrounded P.
//
// Shared memory rows are padded by 8 bf16 (16 bytes), so the 8 row addresses of every ldmatrix
// fall on distinct 16-byte bank groups.
#ifndef PIPECOORD_KERNELS_CUDA_ATTENTION_MMA_KERNELS_H_
#define PIPECOORD_KERNELS_CUDA_ATTENTION_MMA_KERNELS_H_

#include <cmath>
#include <cstdint>
#include <type_traits>

#include "kernels/cuda/attention_heads.h"
#include "kernels/cuda/mma.h"

namespace pipecoord::kernels::cuda::flash_mma {

using Bf16 = __nv_bfloat16;

constexpr int kWarps = 4;
constexpr int kThreads = 32 * kWarps;
constexpr int kRows = 16 * kWarps;  // query rows per block of the backward's query kernel
constexpr int kForwardMTiles = 2;   // 16-row groups per warp in the forward (see its kernel)
constexpr int kKeys = 64;           // keys per tile
constexpr int kPad = 8;             // bf16 per shared-memory row beyond head_dim
constexpr float kLn2 = 0.6931471805599453f;

template <int kD>
constexpr int Stride() {
  return kD + kPad;
}

// Query rows per forward block: kMTiles groups of 16 rows per warp.
template <int kMTiles>
constexpr int ForwardRows() {
  return 16 * kWarps * kMTiles;
}
// q tile, then two k tiles and two v tiles.
template <int kD, int kMTiles>
constexpr int ForwardSharedBytes() {
  return (ForwardRows<kMTiles>() + 4 * kKeys) * Stride<kD>() * static_cast<int>(sizeof(Bf16));
}

// The block's dynamic shared memory.
#ifdef PIPECOORD_CUDA_EMULATION
inline Bf16* SharedTiles() {
  alignas(128) static unsigned char bytes[232448];  // the largest opt-in of sm_90
  return reinterpret_cast<Bf16*>(bytes);
}
#else
__device__ __forceinline__ Bf16* SharedTiles() {
  extern __shared__ __align__(128) unsigned char shared_bytes[];
  return reinterpret_cast<Bf16*>(shared_bytes);
}
#endif

// Queues the copy of rows [first_row, first_row + rows) of src (row_stride elements apart) into
// tile, 16 bytes per cp.async; rows past seq and columns past head_dim (a multiple of 8) are
// zero.
template <int kD>
__device__ __forceinline__ void LoadTileAsync(Bf16* tile, const Bf16* src, int64_t row_stride,
                                              int first_row, int rows, int seq, int head_dim) {
  constexpr int kChunks = kD / 8;
  for (int i = threadIdx.x; i < rows * kChunks; i += kThreads) {
    const int r = i / kChunks;
    const int c = (i % kChunks) * 8;
    const int row = first_row + r;
    const bool valid = row < seq && c < head_dim;
    const Bf16* from = valid ? src + static_cast<int64_t>(row) * row_stride + c : src;
    mma::CpAsync16(tile + r * Stride<kD>() + c, from, valid);
  }
}

using flash_heads::FirstKey;
using flash_heads::HeadSlice;
using flash_heads::RowsEnd;
using flash_heads::SliceOf;

// Where a block's (batch, query head) = (blockIdx.z, blockIdx.y) lives (attention_heads.h).
__device__ __forceinline__ HeadSlice BlockHead(int seq, int heads, int kv_heads, int head_dim) {
  return SliceOf(blockIdx.z, blockIdx.y, seq, heads, kv_heads, head_dim);
}

// Writes a warp's 16 x kD accumulator times `scale` as bf16 rows row0 .. row0 + 15 of dst
// (stopping at seq), through `staged` (16 rows of a shared tile no other warp reads).
template <int kD>
__device__ __forceinline__ void StoreRows(const float acc[kD / 8][4], float scale, Bf16* staged,
                                          Bf16* dst, int64_t row_stride, int row0, int seq,
                                          int head_dim, int lane) {
  constexpr int kS = Stride<kD>();
  const int g = lane / 4, t = lane % 4;
#pragma unroll
  for (int n = 0; n < kD / 8; ++n) {
    *reinterpret_cast<uint32_t*>(staged + g * kS + n * 8 + 2 * t) =
        mma::PackBf16(acc[n][0] * scale, acc[n][1] * scale);
    *reinterpret_cast<uint32_t*>(staged + (g + 8) * kS + n * 8 + 2 * t) =
        mma::PackBf16(acc[n][2] * scale, acc[n][3] * scale);
  }
  mma::SyncWarp();
  constexpr int kChunks = kD / 8;
  for (int i = lane; i < 16 * kChunks; i += 32) {
    const int r = i / kChunks;
    const int c = (i % kChunks) * 8;
    const int row = row0 + r;
    if (row < seq && c < head_dim) {
      *reinterpret_cast<uint4*>(dst + static_cast<int64_t>(row) * row_stride + c) =
          *reinterpret_cast<const uint4*>(staged + r * kS + c);
    }
  }
}

// Layouts as attention.h: q, o [batch, seq, heads, head_dim]; k, v [batch, seq, kv_heads,
// head_dim]; lse [batch, heads, seq].
// Grid: (query tiles of ForwardRows<kMTiles>(), heads, batch); kThreads threads;
// ForwardSharedBytes<kD, kMTiles>() bytes. Warp w owns rows m * 16 kWarps + 16 w .. + 15 of the
// block for m < kMTiles (interleaved, so every warp has the same share of the diagonal's masked
// work). With one m-tile q stays in registers; with two, every k fragment read from shared memory
// feeds both m-tiles (half the shared-memory reads per product) and q is read per step instead.
template <int kD, int kMTiles>
__global__ void __launch_bounds__(kThreads)
    FlashForwardMmaKernel(const Bf16* __restrict__ q, const Bf16* __restrict__ k,
                          const Bf16* __restrict__ v, Bf16* __restrict__ o, float* __restrict__ lse,
                          int seq, int heads, int kv_heads, int head_dim, int window, float scale_log2) {
  constexpr int kS = Stride<kD>();
  constexpr int kDimSteps = kD / 16;     // k-steps of S = q k^T
  constexpr int kKeySteps = kKeys / 16;  // k-steps of O += P v
  constexpr int kBlockRows = ForwardRows<kMTiles>();
  constexpr bool kQInRegisters = kMTiles == 1;
  Bf16* q_tile = SharedTiles();
  Bf16* k_tiles = q_tile + kBlockRows * kS;
  Bf16* v_tiles = k_tiles + 2 * kKeys * kS;

  const int warp = threadIdx.x / 32;
  const int lane = threadIdx.x % 32;
  const int g = lane / 4;
  const int t = lane % 4;
  const int q0 = (gridDim.x - 1 - blockIdx.x) * kBlockRows;  // the longest rows first
  const HeadSlice head = BlockHead(seq, heads, kv_heads, head_dim);
  const int last_row = min(q0 + kBlockRows, seq) - 1;
  const int tiles = last_row / kKeys + 1;
  const int first = FirstKey(q0, window) / kKeys;  // the first key tile the block's rows see

  LoadTileAsync<kD>(q_tile, q + head.base, head.row_stride, q0, kBlockRows, seq, head_dim);
  LoadTileAsync<kD>(k_tiles + (first % 2) * kKeys * kS, k + head.kv_base, head.kv_row_stride, first * kKeys, kKeys,
                    seq, head_dim);
  LoadTileAsync<kD>(v_tiles + (first % 2) * kKeys * kS, v + head.kv_base, head.kv_row_stride, first * kKeys, kKeys,
                    seq, head_dim);
  mma::CpAsyncCommit();

  // m-tile m: the block's rows tile_row(m) .. + 15; this lane's rows are + g and + g + 8.
  auto tile_row = [&](int m) { return m * 16 * kWarps + warp * 16; };
  uint32_t q_frag[kQInRegisters ? kDimSteps : 1][4];
  float out[kMTiles][kD / 8][4];
  float row_max[kMTiles][2], row_sum[kMTiles][2];  // max of raw scores; this lane's share of sums
#pragma unroll
  for (int m = 0; m < kMTiles; ++m) {
    row_max[m][0] = row_max[m][1] = -INFINITY;
    row_sum[m][0] = row_sum[m][1] = 0.0f;
#pragma unroll
    for (int n = 0; n < kD / 8; ++n)
      out[m][n][0] = out[m][n][1] = out[m][n][2] = out[m][n][3] = 0.0f;
  }

  for (int j = first; j < tiles; ++j) {
    if (j + 1 < tiles) {
      const int next = (j + 1) % 2;
      LoadTileAsync<kD>(k_tiles + next * kKeys * kS, k + head.kv_base, head.kv_row_stride,
                        (j + 1) * kKeys, kKeys, seq, head_dim);
      LoadTileAsync<kD>(v_tiles + next * kKeys * kS, v + head.kv_base, head.kv_row_stride,
                        (j + 1) * kKeys, kKeys, seq, head_dim);
    }
    mma::CpAsyncCommit();
    mma::CpAsyncWait<1>();  // every group but the one just queued: tile j (and q) are in place
    __syncthreads();
    if constexpr (kQInRegisters) {
      if (j == first) {
#pragma unroll
        for (int ks = 0; ks < kDimSteps; ++ks) {
          mma::LdMatrixX4(q_frag[ks], q_tile +
                                          (tile_row(0) + lane % 8 + 8 * ((lane / 8) % 2)) * kS +
                                          ks * 16 + 8 * (lane / 16));
        }
      }
    }
    const Bf16* k_tile = k_tiles + (j % 2) * kKeys * kS;
    const Bf16* v_tile = v_tiles + (j % 2) * kKeys * kS;
    const int k0 = j * kKeys;
    // One step over the tile for m-tiles kFirst ..: on the tile after the diagonal of m-tile 0
    // (k0 >= q0 + 16 kWarps) every key is past m-tile 0's rows, so it is skipped; otherwise all.
    auto step = [&](auto first) {
      constexpr int kFirst = decltype(first)::value;

      // S = q k^T for each m-tile's 16 rows and the tile's 64 keys (8 tiles of 8 keys).
      float s[kMTiles][kKeys / 8][4];
#pragma unroll
      for (int m = kFirst; m < kMTiles; ++m) {
#pragma unroll
        for (int n = 0; n < kKeys / 8; ++n)
          s[m][n][0] = s[m][n][1] = s[m][n][2] = s[m][n][3] = 0.0f;
      }
#pragma unroll
      for (int ks = 0; ks < kDimSteps; ++ks) {
        uint32_t a[kMTiles][4];
#pragma unroll
        for (int m = kFirst; m < kMTiles; ++m) {
          if constexpr (kQInRegisters) {
#pragma unroll
            for (int e = 0; e < 4; ++e) a[m][e] = q_frag[ks][e];
          } else {
            mma::LdMatrixX4(a[m], q_tile + (tile_row(m) + lane % 8 + 8 * ((lane / 8) % 2)) * kS +
                                      ks * 16 + 8 * (lane / 16));
          }
        }
#pragma unroll
        for (int nb = 0; nb < kKeys / 16; ++nb) {
          uint32_t kb[4];  // keys nb*16 .. +7 then +8 .. +15, dims ks*16 .. +15
          mma::LdMatrixX4(kb, k_tile + (nb * 16 + lane % 8 + 8 * (lane / 16)) * kS + ks * 16 +
                                  8 * ((lane / 8) % 2));
#pragma unroll
          for (int m = kFirst; m < kMTiles; ++m) {
            mma::MmaBf16(s[m][2 * nb], a[m], kb[0], kb[1]);
            mma::MmaBf16(s[m][2 * nb + 1], a[m], kb[2], kb[3]);
          }
        }
      }

#pragma unroll
      for (int m = kFirst; m < kMTiles; ++m) {
        const int row_lo = q0 + tile_row(m) + g;
        const int row_hi = row_lo + 8;
        if (k0 + kKeys - 1 >
            q0 + tile_row(m)) {  // the diagonal: key > row is masked (so are keys past seq)
#pragma unroll
          for (int n = 0; n < kKeys / 8; ++n) {
#pragma unroll
            for (int e = 0; e < 2; ++e) {
              const int key = k0 + n * 8 + 2 * t + e;
              if (key > row_lo) s[m][n][e] = -INFINITY;
              if (key > row_hi) s[m][n][2 + e] = -INFINITY;
            }
          }
        }
        if (window > 0 && k0 <= row_hi - window) {  // keys before a row's window are masked
#pragma unroll
          for (int n = 0; n < kKeys / 8; ++n) {
#pragma unroll
            for (int e = 0; e < 2; ++e) {
              const int key = k0 + n * 8 + 2 * t + e;
              if (row_lo - key >= window) s[m][n][e] = -INFINITY;
              if (row_hi - key >= window) s[m][n][2 + e] = -INFINITY;
            }
          }
        }

        // Online softmax: the new running max per row, the old sums and outputs rescaled.
        float tile_max[2] = {row_max[m][0], row_max[m][1]};
#pragma unroll
        for (int n = 0; n < kKeys / 8; ++n) {
          tile_max[0] = fmaxf(tile_max[0], fmaxf(s[m][n][0], s[m][n][1]));
          tile_max[1] = fmaxf(tile_max[1], fmaxf(s[m][n][2], s[m][n][3]));
        }
#pragma unroll
        for (int r = 0; r < 2; ++r) {
          tile_max[r] = fmaxf(tile_max[r], mma::ShflXor(tile_max[r], 1));
          tile_max[r] = fmaxf(tile_max[r], mma::ShflXor(tile_max[r], 2));
        }
        float offset[2], rescale[2];
#pragma unroll
        for (int r = 0; r < 2; ++r) {
          // A row with every score so far masked keeps max -inf: exp2(-inf - 0) = 0, no NaN.
          offset[r] = tile_max[r] == -INFINITY ? 0.0f : tile_max[r] * scale_log2;
          rescale[r] = mma::Exp2(row_max[m][r] * scale_log2 - offset[r]);
          row_max[m][r] = tile_max[r];
          row_sum[m][r] *= rescale[r];
        }
#pragma unroll
        for (int n = 0; n < kD / 8; ++n) {
          out[m][n][0] *= rescale[0];
          out[m][n][1] *= rescale[0];
          out[m][n][2] *= rescale[1];
          out[m][n][3] *= rescale[1];
        }
#pragma unroll
        for (int n = 0; n < kKeys / 8; ++n) {
#pragma unroll
          for (int e = 0; e < 4; ++e) {
            s[m][n][e] = mma::Exp2(s[m][n][e] * scale_log2 - offset[e / 2]);
            row_sum[m][e / 2] += s[m][n][e];
          }
        }
      }

      // O += P v: P's C fragments become A fragments, 16 keys per step.
#pragma unroll
      for (int ks = 0; ks < kKeySteps; ++ks) {
        uint32_t p[kMTiles][4];
#pragma unroll
        for (int m = kFirst; m < kMTiles; ++m) {
          p[m][0] = mma::PackBf16(s[m][2 * ks][0], s[m][2 * ks][1]);
          p[m][1] = mma::PackBf16(s[m][2 * ks][2], s[m][2 * ks][3]);
          p[m][2] = mma::PackBf16(s[m][2 * ks + 1][0], s[m][2 * ks + 1][1]);
          p[m][3] = mma::PackBf16(s[m][2 * ks + 1][2], s[m][2 * ks + 1][3]);
        }
#pragma unroll
        for (int db = 0; db < kD / 16; ++db) {
          uint32_t vb[4];  // keys ks*16 .. +15, dims db*16 .. +7 then +8 .. +15
          mma::LdMatrixX4Trans(vb, v_tile + (ks * 16 + lane % 8 + 8 * ((lane / 8) % 2)) * kS +
                                       db * 16 + 8 * (lane / 16));
#pragma unroll
          for (int m = kFirst; m < kMTiles; ++m) {
            mma::MmaBf16(out[m][2 * db], p[m], vb[0], vb[1]);
            mma::MmaBf16(out[m][2 * db + 1], p[m], vb[2], vb[3]);
          }
        }
      }
    };
    if (kMTiles > 1 && k0 >= q0 + 16 * kWarps) {
      step(std::integral_constant<int, kMTiles - 1>{});
    } else {
      step(std::integral_constant<int, 0>{});
    }
    __syncthreads();  // tile j's buffers are refilled at step j + 1
  }

  // o = O / sum and lse, through this warp's rows of the q tile (each warp reads only its own
  // rows of q) so the stores to global memory are 16 bytes wide.
#pragma unroll
  for (int m = 0; m < kMTiles; ++m) {
    float inverse[2];
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      row_sum[m][r] += mma::ShflXor(row_sum[m][r], 1);
      row_sum[m][r] += mma::ShflXor(row_sum[m][r], 2);
      inverse[r] = 1.0f / row_sum[m][r];
    }
    const int row_lo = q0 + tile_row(m) + g;
    const int row_hi = row_lo + 8;
    if (t == 0) {
      if (row_lo < seq)
        lse[head.stats + row_lo] = (row_max[m][0] * scale_log2 + log2f(row_sum[m][0])) * kLn2;
      if (row_hi < seq)
        lse[head.stats + row_hi] = (row_max[m][1] * scale_log2 + log2f(row_sum[m][1])) * kLn2;
    }
    float scaled[kD / 8][4];
#pragma unroll
    for (int n = 0; n < kD / 8; ++n) {
      scaled[n][0] = out[m][n][0] * inverse[0];
      scaled[n][1] = out[m][n][1] * inverse[0];
      scaled[n][2] = out[m][n][2] * inverse[1];
      scaled[n][3] = out[m][n][3] * inverse[1];
    }
    StoreRows<kD>(scaled, 1.0f, q_tile + tile_row(m) * kS, o + head.base, head.row_stride,
                  q0 + tile_row(m), seq, head_dim, lane);
  }
}

// ---- backward ----
//
// Two kernels, as attention_tensor_core_kernels.h, so that no output is summed with atomics and
// every run gives the same bits. Both recompute P = exp2(S scale log2e - lse log2e) from the
// forward's lse and use delta = rowsum(dout * o) (computed before them), dS = P (dP - delta):
//   key-value kernel: a block of 4 warps holds 64 keys (16 per warp) and walks the query tiles
//     (32 rows) that can see them; per warp S^T = k q^T, dP^T = v dout^T (16 x 32, keys by rows),
//     then dv += P^T dout and dk += dS^T q, accumulated in registers; dk is scaled at the end.
//   query kernel: a block of 4 warps holds 64 query rows (16 per warp, q and dout in registers)
//     and walks the key tiles (32 keys) up to the diagonal; per warp S = q k^T, dP = dout v^T,
//     then dq += dS k in registers, scaled at the end.
// The walked tiles are double-buffered with cp.async, as the forward's.
constexpr int kWalk = 32;  // rows (key-value kernel) or keys (query kernel) per walked tile

// k and v tiles (64 rows each), then two q and two dout tiles (32 rows each), then lse and delta
// for each of the two buffered query tiles.
template <int kD>
constexpr int KeyValueSharedBytes() {
  return (2 * kKeys + 4 * kWalk) * Stride<kD>() * static_cast<int>(sizeof(Bf16)) +
         4 * kWalk * static_cast<int>(sizeof(float));
}
// q and dout tiles (64 rows each), then two k and two v tiles (32 rows each).
template <int kD>
constexpr int QuerySharedBytes() {
  return (2 * kRows + 4 * kWalk) * Stride<kD>() * static_cast<int>(sizeof(Bf16));
}

// A fragments of a 16-row slice of a tile whose rows are the fragments' rows (ldmatrix, no
// transpose): ks-th 16-column step.
template <int kD>
__device__ __forceinline__ void LoadRowFragment(uint32_t frag[4], const Bf16* tile, int first_row,
                                                int ks, int lane) {
  mma::LdMatrixX4(frag, tile + (first_row + lane % 8 + 8 * ((lane / 8) % 2)) * Stride<kD>() +
                            ks * 16 + 8 * (lane / 16));
}
// B fragments of two 8-column tiles (tile rows first_row .. +15 as B's columns), dims ks*16 ..
// +15: b[0], b[1] for rows first_row .. +7, b[2], b[3] for +8 .. +15.
template <int kD>
__device__ __forceinline__ void LoadColumnFragments(uint32_t b[4], const Bf16* tile, int first_row,
                                                    int ks, int lane) {
  mma::LdMatrixX4(b, tile + (first_row + lane % 8 + 8 * (lane / 16)) * Stride<kD>() + ks * 16 +
                         8 * ((lane / 8) % 2));
}
// B fragments of a tile used as [k = its rows][n = its columns]: rows first_row .. +15, columns
// db*16 .. +7 (b[0], b[1]) and +8 .. +15 (b[2], b[3]).
template <int kD>
__device__ __forceinline__ void LoadTransposedFragments(uint32_t b[4], const Bf16* tile,
                                                        int first_row, int db, int lane) {
  mma::LdMatrixX4Trans(b, tile + (first_row + lane % 8 + 8 * ((lane / 8) % 2)) * Stride<kD>() +
                              db * 16 + 8 * (lane / 16));
}

// acc (16 x kD) += a (16 x n, C fragments of n/8 tiles, rounded to bf16) times tile rows
// first_row .. first_row + n - 1 as [k][kD].
template <int kD, int kN>
__device__ __forceinline__ void AddProductWithTile(float acc[kD / 8][4], const float c[kN / 8][4],
                                                   const Bf16* tile, int first_row, int lane) {
#pragma unroll
  for (int ks = 0; ks < kN / 16; ++ks) {
    const uint32_t a[4] = {mma::PackBf16(c[2 * ks][0], c[2 * ks][1]),
                           mma::PackBf16(c[2 * ks][2], c[2 * ks][3]),
                           mma::PackBf16(c[2 * ks + 1][0], c[2 * ks + 1][1]),
                           mma::PackBf16(c[2 * ks + 1][2], c[2 * ks + 1][3])};
#pragma unroll
    for (int db = 0; db < kD / 16; ++db) {
      uint32_t b[4];
      LoadTransposedFragments<kD>(b, tile, first_row + ks * 16, db, lane);
      mma::MmaBf16(acc[2 * db], a, b[0], b[1]);
      mma::MmaBf16(acc[2 * db + 1], a, b[2], b[3]);
    }
  }
}

// Grid: (key tiles of kKeys, kv_heads, batch); kThreads threads; KeyValueSharedBytes<kD>() bytes.
// The walk goes over the query tiles of each query head of the key/value head's group in turn
// (head order, one pipeline across them), so dk and dv sum the group in one block, deterministically.
template <int kD>
__global__ void __launch_bounds__(kThreads)
    FlashBackwardKeyValueMmaKernel(const Bf16* __restrict__ dout, const Bf16* __restrict__ q,
                                   const Bf16* __restrict__ k, const Bf16* __restrict__ v,
                                   const float* __restrict__ lse, const float* __restrict__ delta,
                                   Bf16* __restrict__ dk, Bf16* __restrict__ dv, int seq, int heads,
                                   int kv_heads, int head_dim, int window, float scale, float scale_log2) {
  constexpr int kS = Stride<kD>();
  constexpr float kLog2e = 1.4426950408889634f;
  Bf16* k_tile = SharedTiles();
  Bf16* v_tile = k_tile + kKeys * kS;
  Bf16* q_tiles = v_tile + kKeys * kS;        // [2][kWalk][kS]
  Bf16* do_tiles = q_tiles + 2 * kWalk * kS;  // [2][kWalk][kS]
  float* stats =
      reinterpret_cast<float*>(do_tiles + 2 * kWalk * kS);  // [2][lse kWalk, delta kWalk]

  const int warp = threadIdx.x / 32;
  const int lane = threadIdx.x % 32;
  const int g = lane / 4;
  const int t = lane % 4;
  const int k0 = (gridDim.x - 1 - blockIdx.x) * kKeys;  // the shortest walks last
  const int group = heads / kv_heads;
  const int first_head = blockIdx.y * group;
  const HeadSlice kv_head = SliceOf(blockIdx.z, first_head, seq, heads, kv_heads, head_dim);
  const int first_tile = k0 / kWalk;  // the first query rows that see key k0
  // The rows that see one of the keys: k0 .. up to the last key's window (or seq).
  const int head_tiles = (RowsEnd(k0 + kKeys - 1, window, seq) - 1) / kWalk + 1 - first_tile;
  const int tiles = group * head_tiles;  // the walk: head_tiles query tiles of each query head

  // Queues step `i` of the walk (query tile i % head_tiles of the group's head i / head_tiles)
  // into buffer i % 2: q, dout, lse (+inf past seq, so P = 0 there) and delta.
  auto load_query_tile = [&](int i) {
    const HeadSlice head =
        SliceOf(blockIdx.z, first_head + i / head_tiles, seq, heads, kv_heads, head_dim);
    const int r0 = (first_tile + i % head_tiles) * kWalk;
    const int buffer = i % 2;
    LoadTileAsync<kD>(q_tiles + buffer * kWalk * kS, q + head.base, head.row_stride, r0, kWalk, seq,
                      head_dim);
    LoadTileAsync<kD>(do_tiles + buffer * kWalk * kS, dout + head.base, head.row_stride, r0, kWalk,
                      seq, head_dim);
    if (threadIdx.x < 2 * kWalk) {
      const int r = threadIdx.x % kWalk;
      const bool is_lse = threadIdx.x < kWalk;
      const int row = r0 + r;
      float value = is_lse ? INFINITY : 0.0f;
      if (row < seq) value = is_lse ? lse[head.stats + row] * kLog2e : delta[head.stats + row];
      stats[buffer * 2 * kWalk + threadIdx.x] = value;
    }
  };

  LoadTileAsync<kD>(k_tile, k + kv_head.kv_base, kv_head.kv_row_stride, k0, kKeys, seq, head_dim);
  LoadTileAsync<kD>(v_tile, v + kv_head.kv_base, kv_head.kv_row_stride, k0, kKeys, seq, head_dim);
  load_query_tile(0);
  mma::CpAsyncCommit();

  const int my_keys = warp * 16;  // this warp's rows of the k and v tiles
  const int key_lo = k0 + my_keys + g;
  const int key_hi = key_lo + 8;
  float dk_acc[kD / 8][4], dv_acc[kD / 8][4];
#pragma unroll
  for (int n = 0; n < kD / 8; ++n) {
#pragma unroll
    for (int e = 0; e < 4; ++e) dk_acc[n][e] = dv_acc[n][e] = 0.0f;
  }

  for (int i = 0; i < tiles; ++i) {
    if (i + 1 < tiles) load_query_tile(i + 1);
    mma::CpAsyncCommit();
    mma::CpAsyncWait<1>();
    __syncthreads();
    const int buffer = i % 2;
    const Bf16* q_tile = q_tiles + buffer * kWalk * kS;
    const Bf16* do_tile = do_tiles + buffer * kWalk * kS;
    const float* lse_log2 = stats + buffer * 2 * kWalk;
    const float* row_delta = lse_log2 + kWalk;
    const int r0 = (first_tile + i % head_tiles) * kWalk;

    // S^T = k q^T and dP^T = v dout^T: 16 keys x 32 rows (4 tiles of 8 rows).
    float st[kWalk / 8][4], dpt[kWalk / 8][4];
#pragma unroll
    for (int n = 0; n < kWalk / 8; ++n) {
#pragma unroll
      for (int e = 0; e < 4; ++e) st[n][e] = dpt[n][e] = 0.0f;
    }
#pragma unroll
    for (int ks = 0; ks < kD / 16; ++ks) {
      uint32_t ka[4], va[4];
      LoadRowFragment<kD>(ka, k_tile, my_keys, ks, lane);
      LoadRowFragment<kD>(va, v_tile, my_keys, ks, lane);
#pragma unroll
      for (int nb = 0; nb < kWalk / 16; ++nb) {
        uint32_t qb[4], dob[4];
        LoadColumnFragments<kD>(qb, q_tile, nb * 16, ks, lane);
        LoadColumnFragments<kD>(dob, do_tile, nb * 16, ks, lane);
        mma::MmaBf16(st[2 * nb], ka, qb[0], qb[1]);
        mma::MmaBf16(st[2 * nb + 1], ka, qb[2], qb[3]);
        mma::MmaBf16(dpt[2 * nb], va, dob[0], dob[1]);
        mma::MmaBf16(dpt[2 * nb + 1], va, dob[2], dob[3]);
      }
    }
    // P^T and dS^T in place of S^T and dP^T; a row before the key (row < key) is masked.
    const bool diagonal = r0 < k0 + kKeys;
#pragma unroll
    for (int n = 0; n < kWalk / 8; ++n) {
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int col = n * 8 + 2 * t + e % 2;  // the query row within the tile
        const int key = e < 2 ? key_lo : key_hi;
        float p = mma::Exp2(st[n][e] * scale_log2 - lse_log2[col]);
        if (diagonal && r0 + col < key) p = 0.0f;
        if (window > 0 && r0 + col - key >= window) p = 0.0f;  // the key is before the row's window
        st[n][e] = p;
        dpt[n][e] = p * (dpt[n][e] - row_delta[col]);
      }
    }
    AddProductWithTile<kD, kWalk>(dv_acc, st, do_tile, 0, lane);
    AddProductWithTile<kD, kWalk>(dk_acc, dpt, q_tile, 0, lane);
    __syncthreads();  // this buffer is refilled at step i + 1
  }

  // Each warp read only its own rows of the k and v tiles: they stage its dk and dv.
  StoreRows<kD>(dk_acc, scale, k_tile + my_keys * kS, dk + kv_head.kv_base, kv_head.kv_row_stride,
                k0 + my_keys, seq, head_dim, lane);
  StoreRows<kD>(dv_acc, 1.0f, v_tile + my_keys * kS, dv + kv_head.kv_base, kv_head.kv_row_stride,
                k0 + my_keys, seq, head_dim, lane);
}

// Grid: (query tiles of kRows, heads, batch); kThreads threads; QuerySharedBytes<kD>() bytes.
template <int kD>
__global__ void __launch_bounds__(kThreads)
    FlashBackwardQueryMmaKernel(const Bf16* __restrict__ dout, const Bf16* __restrict__ q,
                                const Bf16* __restrict__ k, const Bf16* __restrict__ v,
                                const float* __restrict__ lse, const float* __restrict__ delta,
                                Bf16* __restrict__ dq, int seq, int heads, int kv_heads,
                                int head_dim, int window, float scale, float scale_log2) {
  constexpr int kS = Stride<kD>();
  constexpr int kDimSteps = kD / 16;
  constexpr float kLog2e = 1.4426950408889634f;
  Bf16* q_tile = SharedTiles();
  Bf16* do_tile = q_tile + kRows * kS;
  Bf16* k_tiles = do_tile + kRows * kS;      // [2][kWalk][kS]
  Bf16* v_tiles = k_tiles + 2 * kWalk * kS;  // [2][kWalk][kS]

  const int warp = threadIdx.x / 32;
  const int lane = threadIdx.x % 32;
  const int g = lane / 4;
  const int t = lane % 4;
  const int q0 = (gridDim.x - 1 - blockIdx.x) * kRows;  // the longest rows first
  const HeadSlice head = BlockHead(seq, heads, kv_heads, head_dim);
  const int last_row = min(q0 + kRows, seq) - 1;
  const int tiles = last_row / kWalk + 1;
  const int first = FirstKey(q0, window) / kWalk;  // the first key tile the block's rows see

  LoadTileAsync<kD>(q_tile, q + head.base, head.row_stride, q0, kRows, seq, head_dim);
  LoadTileAsync<kD>(do_tile, dout + head.base, head.row_stride, q0, kRows, seq, head_dim);
  LoadTileAsync<kD>(k_tiles + (first % 2) * kWalk * kS, k + head.kv_base, head.kv_row_stride, first * kWalk, kWalk,
                    seq, head_dim);
  LoadTileAsync<kD>(v_tiles + (first % 2) * kWalk * kS, v + head.kv_base, head.kv_row_stride, first * kWalk, kWalk,
                    seq, head_dim);
  mma::CpAsyncCommit();

  const int my_rows = warp * 16;
  const int row_lo = q0 + my_rows + g;
  const int row_hi = row_lo + 8;
  // Rows past seq: lse +inf gives P = 0 (their dq is not stored anyway).
  const float lse_lo = row_lo < seq ? lse[head.stats + row_lo] * kLog2e : INFINITY;
  const float lse_hi = row_hi < seq ? lse[head.stats + row_hi] * kLog2e : INFINITY;
  const float delta_lo = row_lo < seq ? delta[head.stats + row_lo] : 0.0f;
  const float delta_hi = row_hi < seq ? delta[head.stats + row_hi] : 0.0f;
  uint32_t q_frag[kDimSteps][4], do_frag[kDimSteps][4];
  float dq_acc[kD / 8][4];
#pragma unroll
  for (int n = 0; n < kD / 8; ++n) dq_acc[n][0] = dq_acc[n][1] = dq_acc[n][2] = dq_acc[n][3] = 0.0f;

  for (int j = first; j < tiles; ++j) {
    if (j + 1 < tiles) {
      const int next = (j + 1) % 2;
      LoadTileAsync<kD>(k_tiles + next * kWalk * kS, k + head.kv_base, head.kv_row_stride,
                        (j + 1) * kWalk, kWalk, seq, head_dim);
      LoadTileAsync<kD>(v_tiles + next * kWalk * kS, v + head.kv_base, head.kv_row_stride,
                        (j + 1) * kWalk, kWalk, seq, head_dim);
    }
    mma::CpAsyncCommit();
    mma::CpAsyncWait<1>();
    __syncthreads();
    if (j == first) {
#pragma unroll
      for (int ks = 0; ks < kDimSteps; ++ks) {
        LoadRowFragment<kD>(q_frag[ks], q_tile, my_rows, ks, lane);
        LoadRowFragment<kD>(do_frag[ks], do_tile, my_rows, ks, lane);
      }
    }
    const Bf16* k_tile = k_tiles + (j % 2) * kWalk * kS;
    const Bf16* v_tile = v_tiles + (j % 2) * kWalk * kS;
    const int key0 = j * kWalk;

    // S = q k^T and dP = dout v^T: 16 rows x 32 keys.
    float s[kWalk / 8][4], dp[kWalk / 8][4];
#pragma unroll
    for (int n = 0; n < kWalk / 8; ++n) {
#pragma unroll
      for (int e = 0; e < 4; ++e) s[n][e] = dp[n][e] = 0.0f;
    }
#pragma unroll
    for (int ks = 0; ks < kDimSteps; ++ks) {
#pragma unroll
      for (int nb = 0; nb < kWalk / 16; ++nb) {
        uint32_t kb[4], vb[4];
        LoadColumnFragments<kD>(kb, k_tile, nb * 16, ks, lane);
        LoadColumnFragments<kD>(vb, v_tile, nb * 16, ks, lane);
        mma::MmaBf16(s[2 * nb], q_frag[ks], kb[0], kb[1]);
        mma::MmaBf16(s[2 * nb + 1], q_frag[ks], kb[2], kb[3]);
        mma::MmaBf16(dp[2 * nb], do_frag[ks], vb[0], vb[1]);
        mma::MmaBf16(dp[2 * nb + 1], do_frag[ks], vb[2], vb[3]);
      }
    }
    const bool diagonal = key0 + kWalk - 1 > q0 + my_rows;
#pragma unroll
    for (int n = 0; n < kWalk / 8; ++n) {
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int key = key0 + n * 8 + 2 * t + e % 2;
        const bool hi = e >= 2;
        float p = mma::Exp2(s[n][e] * scale_log2 - (hi ? lse_hi : lse_lo));
        if (diagonal && key > (hi ? row_hi : row_lo)) p = 0.0f;
        if (window > 0 && (hi ? row_hi : row_lo) - key >= window) p = 0.0f;  // before the row's window
        dp[n][e] = p * (dp[n][e] - (hi ? delta_hi : delta_lo));
      }
    }
    AddProductWithTile<kD, kWalk>(dq_acc, dp, k_tile, 0, lane);
    __syncthreads();
  }

  StoreRows<kD>(dq_acc, scale, q_tile + my_rows * kS, dq + head.base, head.row_stride, q0 + my_rows,
                seq, head_dim, lane);
}

}  // namespace pipecoord::kernels::cuda::flash_mma

#endif  // PIPECOORD_KERNELS_CUDA_ATTENTION_MMA_KERNELS_H_
