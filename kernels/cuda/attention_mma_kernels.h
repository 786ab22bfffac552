// Flash attention for bf16 storage on tensor cores, written at the register level (mma.h:
// ldmatrix, mma.sync m16n8k16, cp.async), the way FlashAttention-2 organises it (Dao, 2023,
// "FlashAttention-2: Faster Attention with Better Parallelism and Work Partitioning"): each warp
// owns 16 query rows, keeps its scores, probabilities and output accumulator in registers, and
// does the online softmax there, so the only shared-memory traffic is the q, k and v tiles
// themselves. attention_tensor_core_kernels.h (WMMA through shared memory) stays for the shapes
// these kernels do not take (head_dim not a multiple of 8, misaligned pointers).
//
// Forward: a block of 4 warps holds 64 query rows; it walks the key tiles (64 keys) up to the
// diagonal, the next tile's k and v loading (cp.async, double-buffered) while this one is
// multiplied. Scores S = q k^T (fp32 accumulators), the causal mask on the diagonal tile, the
// running max and sum per row (reduced over the 4 lanes that share a row), P = exp2(S scale log2e
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

#include "kernels/cuda/mma.h"

namespace pipecoord::kernels::cuda::flash_mma {

using Bf16 = __nv_bfloat16;

constexpr int kWarps = 4;
constexpr int kThreads = 32 * kWarps;
constexpr int kRows = 16 * kWarps;  // query rows per forward block
constexpr int kKeys = 64;           // keys per tile
constexpr int kPad = 8;             // bf16 per shared-memory row beyond head_dim
constexpr float kLn2 = 0.6931471805599453f;

template <int kD>
constexpr int Stride() {
  return kD + kPad;
}

// q tile, then two k tiles and two v tiles.
template <int kD>
constexpr int ForwardSharedBytes() {
  return (kRows + 4 * kKeys) * Stride<kD>() * static_cast<int>(sizeof(Bf16));
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

// Layouts as attention.h: q, k, v, o [batch, seq, heads, head_dim]; lse [batch, heads, seq].
// Grid: (query tiles, heads, batch); kThreads threads; ForwardSharedBytes<kD>() bytes.
template <int kD>
__global__ void __launch_bounds__(kThreads)
    FlashForwardMmaKernel(const Bf16* __restrict__ q, const Bf16* __restrict__ k,
                          const Bf16* __restrict__ v, Bf16* __restrict__ o,
                          float* __restrict__ lse, int seq, int heads, int head_dim,
                          float scale_log2) {
  constexpr int kS = Stride<kD>();
  constexpr int kDimSteps = kD / 16;   // k-steps of S = q k^T
  constexpr int kKeySteps = kKeys / 16;  // k-steps of O += P v
  Bf16* q_tile = SharedTiles();
  Bf16* k_tiles = q_tile + kRows * kS;
  Bf16* v_tiles = k_tiles + 2 * kKeys * kS;

  const int warp = threadIdx.x / 32;
  const int lane = threadIdx.x % 32;
  const int g = lane / 4;
  const int t = lane % 4;
  const int q0 = (gridDim.x - 1 - blockIdx.x) * kRows;  // the longest rows first
  const int h = blockIdx.y;
  const int b = blockIdx.z;
  const int64_t row_stride = static_cast<int64_t>(heads) * head_dim;
  const int64_t base =
      static_cast<int64_t>(b) * seq * row_stride + static_cast<int64_t>(h) * head_dim;
  const int last_row = min(q0 + kRows, seq) - 1;
  const int tiles = last_row / kKeys + 1;

  LoadTileAsync<kD>(q_tile, q + base, row_stride, q0, kRows, seq, head_dim);
  LoadTileAsync<kD>(k_tiles, k + base, row_stride, 0, kKeys, seq, head_dim);
  LoadTileAsync<kD>(v_tiles, v + base, row_stride, 0, kKeys, seq, head_dim);
  mma::CpAsyncCommit();

  // This lane's rows of the warp's 16: g and g + 8.
  const int row_lo = q0 + warp * 16 + g;
  const int row_hi = row_lo + 8;
  uint32_t q_frag[kDimSteps][4];
  float out[kD / 8][4];
#pragma unroll
  for (int n = 0; n < kD / 8; ++n) out[n][0] = out[n][1] = out[n][2] = out[n][3] = 0.0f;
  float row_max[2] = {-INFINITY, -INFINITY};  // raw scores (before the scale)
  float row_sum[2] = {0.0f, 0.0f};            // this lane's share; the 4 lanes summed at the end

  for (int j = 0; j < tiles; ++j) {
    if (j + 1 < tiles) {
      const int next = (j + 1) % 2;
      LoadTileAsync<kD>(k_tiles + next * kKeys * kS, k + base, row_stride, (j + 1) * kKeys, kKeys,
                        seq, head_dim);
      LoadTileAsync<kD>(v_tiles + next * kKeys * kS, v + base, row_stride, (j + 1) * kKeys, kKeys,
                        seq, head_dim);
    }
    mma::CpAsyncCommit();
    mma::CpAsyncWait<1>();  // every group but the one just queued: tile j (and q) are in place
    __syncthreads();
    if (j == 0) {
#pragma unroll
      for (int ks = 0; ks < kDimSteps; ++ks) {
        mma::LdMatrixX4(q_frag[ks], q_tile + (warp * 16 + lane % 8 + 8 * ((lane / 8) % 2)) * kS +
                                        ks * 16 + 8 * (lane / 16));
      }
    }
    const Bf16* k_tile = k_tiles + (j % 2) * kKeys * kS;
    const Bf16* v_tile = v_tiles + (j % 2) * kKeys * kS;

    // S = q k^T for this warp's 16 rows and the tile's 64 keys (8 tiles of 8 keys).
    float s[kKeys / 8][4];
#pragma unroll
    for (int n = 0; n < kKeys / 8; ++n) s[n][0] = s[n][1] = s[n][2] = s[n][3] = 0.0f;
#pragma unroll
    for (int ks = 0; ks < kDimSteps; ++ks) {
#pragma unroll
      for (int nb = 0; nb < kKeys / 16; ++nb) {
        uint32_t kb[4];  // keys nb*16 .. +7 then +8 .. +15, dims ks*16 .. +15
        mma::LdMatrixX4(kb, k_tile + (nb * 16 + lane % 8 + 8 * (lane / 16)) * kS + ks * 16 +
                                8 * ((lane / 8) % 2));
        mma::MmaBf16(s[2 * nb], q_frag[ks], kb[0], kb[1]);
        mma::MmaBf16(s[2 * nb + 1], q_frag[ks], kb[2], kb[3]);
      }
    }
    const int k0 = j * kKeys;
    if (j == tiles - 1) {  // the diagonal tile: key > row is masked (so are keys past seq)
#pragma unroll
      for (int n = 0; n < kKeys / 8; ++n) {
#pragma unroll
        for (int e = 0; e < 2; ++e) {
          const int key = k0 + n * 8 + 2 * t + e;
          if (key > row_lo) s[n][e] = -INFINITY;
          if (key > row_hi) s[n][2 + e] = -INFINITY;
        }
      }
    }

    // Online softmax: the new running max per row, the old sums and outputs rescaled.
    float tile_max[2] = {row_max[0], row_max[1]};
#pragma unroll
    for (int n = 0; n < kKeys / 8; ++n) {
      tile_max[0] = fmaxf(tile_max[0], fmaxf(s[n][0], s[n][1]));
      tile_max[1] = fmaxf(tile_max[1], fmaxf(s[n][2], s[n][3]));
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
      rescale[r] = mma::Exp2(row_max[r] * scale_log2 - offset[r]);
      row_max[r] = tile_max[r];
      row_sum[r] *= rescale[r];
    }
#pragma unroll
    for (int n = 0; n < kD / 8; ++n) {
      out[n][0] *= rescale[0];
      out[n][1] *= rescale[0];
      out[n][2] *= rescale[1];
      out[n][3] *= rescale[1];
    }
#pragma unroll
    for (int n = 0; n < kKeys / 8; ++n) {
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        s[n][e] = mma::Exp2(s[n][e] * scale_log2 - offset[e / 2]);
        row_sum[e / 2] += s[n][e];
      }
    }

    // O += P v: P's C fragments become A fragments, 16 keys per step.
#pragma unroll
    for (int ks = 0; ks < kKeySteps; ++ks) {
      const uint32_t p[4] = {mma::PackBf16(s[2 * ks][0], s[2 * ks][1]),
                             mma::PackBf16(s[2 * ks][2], s[2 * ks][3]),
                             mma::PackBf16(s[2 * ks + 1][0], s[2 * ks + 1][1]),
                             mma::PackBf16(s[2 * ks + 1][2], s[2 * ks + 1][3])};
#pragma unroll
      for (int db = 0; db < kD / 16; ++db) {
        uint32_t vb[4];  // keys ks*16 .. +15, dims db*16 .. +7 then +8 .. +15
        mma::LdMatrixX4Trans(vb, v_tile + (ks * 16 + lane % 8 + 8 * ((lane / 8) % 2)) * kS +
                                     db * 16 + 8 * (lane / 16));
        mma::MmaBf16(out[2 * db], p, vb[0], vb[1]);
        mma::MmaBf16(out[2 * db + 1], p, vb[2], vb[3]);
      }
    }
    __syncthreads();  // tile j's buffers are refilled at step j + 1
  }

  // o = O / sum and lse, through this warp's rows of the q tile (each warp read only its own
  // rows of q, into registers, at step 0) so the stores to global memory are 16 bytes wide.
  float inverse[2];
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    row_sum[r] += mma::ShflXor(row_sum[r], 1);
    row_sum[r] += mma::ShflXor(row_sum[r], 2);
    inverse[r] = 1.0f / row_sum[r];
  }
  if (t == 0) {
    const int64_t stats = (static_cast<int64_t>(b) * heads + h) * seq;
    if (row_lo < seq) lse[stats + row_lo] = (row_max[0] * scale_log2 + log2f(row_sum[0])) * kLn2;
    if (row_hi < seq) lse[stats + row_hi] = (row_max[1] * scale_log2 + log2f(row_sum[1])) * kLn2;
  }
  Bf16* staged = q_tile + warp * 16 * kS;
#pragma unroll
  for (int n = 0; n < kD / 8; ++n) {
    uint32_t* lo = reinterpret_cast<uint32_t*>(staged + g * kS + n * 8 + 2 * t);
    uint32_t* hi = reinterpret_cast<uint32_t*>(staged + (g + 8) * kS + n * 8 + 2 * t);
    *lo = mma::PackBf16(out[n][0] * inverse[0], out[n][1] * inverse[0]);
    *hi = mma::PackBf16(out[n][2] * inverse[1], out[n][3] * inverse[1]);
  }
  mma::SyncWarp();
  constexpr int kChunks = kD / 8;
  for (int i = lane; i < 16 * kChunks; i += 32) {
    const int r = i / kChunks;
    const int c = (i % kChunks) * 8;
    const int row = q0 + warp * 16 + r;
    if (row < seq && c < head_dim) {
      *reinterpret_cast<uint4*>(o + base + static_cast<int64_t>(row) * row_stride + c) =
          *reinterpret_cast<const uint4*>(staged + r * kS + c);
    }
  }
}

}  // namespace pipecoord::kernels::cuda::flash_mma

#endif  // PIPECOORD_KERNELS_CUDA_ATTENTION_MMA_KERNELS_H_
