// Warp-level tensor-core primitives for sm_80 and later, the building blocks of the flash
// attention kernels in attention_mma_kernels.h: ldmatrix (shared memory to fragments), mma.sync
// m16n8k16 (bf16 x bf16 summed in fp32), cp.async (global to shared memory without registers),
// and the exp2 and bf16 packing the softmax uses.
//
// Fragment layouts of mma.sync.m16n8k16 (PTX ISA, "Matrix Fragments for mma.m16n8k16"), with
// lane = 4 g + t (g in [0, 8), t in [0, 4)); each 32-bit register holds two bf16, the lower
// column (or k) index in the low half:
//   A (16 x 16, row-major):  a[0] = A[g][2t, 2t+1]      a[1] = A[g+8][2t, 2t+1]
//                            a[2] = A[g][2t+8, 2t+9]    a[3] = A[g+8][2t+8, 2t+9]
//   B (16 x 8, k x n):       b[0] = B[2t, 2t+1][g]      b[1] = B[2t+8, 2t+9][g]
//   C, D (16 x 8, fp32):     c[0] = C[g][2t]  c[1] = C[g][2t+1]  c[2] = C[g+8][2t]  c[3] =
//   C[g+8][2t+1]
// ldmatrix.x4 reads four 8 x 8 bf16 matrices; lanes 8j .. 8j+7 give the addresses of matrix j's
// rows (16 bytes each), and register j of lane 4g + t receives matrix j's row g, columns 2t and
// 2t+1 (.trans: rows 2t and 2t+1 of column g).
//
// Built by nvcc, these are single PTX instructions. Built with cuda_emulation.h first (the CPU
// emulation, one std::thread per CUDA thread), each is computed from the whole warp's operands,
// exchanged between two warp barriers, with the same layouts: the emulated tests check the
// kernels' fragment arithmetic on any machine.
#ifndef PIPECOORD_KERNELS_CUDA_MMA_H_
#define PIPECOORD_KERNELS_CUDA_MMA_H_

#include <cstdint>

#include "kernels/cuda/bf16.h"

#ifdef __CUDACC__
#include <cuda_bf16.h>
#endif
#ifdef PIPECOORD_CUDA_EMULATION
#include <array>
#include <cmath>
#include <cstring>
#endif

namespace pipecoord::kernels::cuda::mma {

using Bf16 = __nv_bfloat16;

#ifndef PIPECOORD_CUDA_EMULATION

// Registers a[4] (A, 16 x 16), b0 b1 (B, 16 x 8): d += A B.
__device__ __forceinline__ void MmaBf16(float d[4], const uint32_t a[4], uint32_t b0, uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, "
      "{%8, %9}, {%0, %1, %2, %3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

// `row` is this lane's row address (shared memory, 16-byte aligned) as described above.
__device__ __forceinline__ void LdMatrixX4(uint32_t r[4], const Bf16* row) {
  const unsigned address = static_cast<unsigned>(__cvta_generic_to_shared(row));
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(address));
}
__device__ __forceinline__ void LdMatrixX4Trans(uint32_t r[4], const Bf16* row) {
  const unsigned address = static_cast<unsigned>(__cvta_generic_to_shared(row));
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(address));
}

// Copies 16 bytes from global `src` to shared `dst` asynchronously, or writes 16 zero bytes
// when !valid (src is then not read, but must still be a valid address).
__device__ __forceinline__ void CpAsync16(void* dst, const void* src, bool valid) {
  const unsigned address = static_cast<unsigned>(__cvta_generic_to_shared(dst));
  const int src_bytes = valid ? 16 : 0;
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(address), "l"(src),
               "r"(src_bytes));
}
__device__ __forceinline__ void CpAsyncCommit() { asm volatile("cp.async.commit_group;\n" ::); }
// Waits until at most `kPending` of this thread's committed groups are still in flight.
template <int kPending>
__device__ __forceinline__ void CpAsyncWait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(kPending));
}

__device__ __forceinline__ float Exp2(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;\n" : "=f"(y) : "f"(x));
  return y;
}

__device__ __forceinline__ float ShflXor(float v, int mask) {
  return __shfl_xor_sync(0xffffffffu, v, mask);
}

__device__ __forceinline__ void SyncWarp() { __syncwarp(); }

// Two floats rounded to bf16 (nearest even), lo in the low half.
__device__ __forceinline__ uint32_t PackBf16(float lo, float hi) {
  const __nv_bfloat162 pair = __floats2bfloat162_rn(lo, hi);
  return *reinterpret_cast<const uint32_t*>(&pair);
}

#else  // PIPECOORD_CUDA_EMULATION: the same operations computed from the whole warp's operands

namespace emulated {
namespace em = ::pipecoord::kernels::cuda::emulation;

// Every lane's operands, visible to the whole warp between two warp barriers.
struct Operands {
  const Bf16* row = nullptr;
  std::array<uint32_t, 6> regs{};
  float value = 0;
};
inline std::array<Operands, 1024>& Exchange() {  // one block at a time, up to 1024 threads
  static std::array<Operands, 1024> lanes;
  return lanes;
}
inline int Lane() { return em::linear_thread % 32; }
inline int WarpBase() { return em::linear_thread / 32 * 32; }
inline void WarpBarrier() { em::current_block->warps[em::linear_thread / 32]->arrive_and_wait(); }
inline uint16_t Bits(Bf16 x) { return x.bits; }
inline float Half(uint32_t reg, int k) {
  return Bf16BitsToFloat(static_cast<uint16_t>(reg >> (16 * k)));
}
}  // namespace emulated

inline void MmaBf16(float d[4], const uint32_t a[4], uint32_t b0, uint32_t b1) {
  using namespace emulated;
  auto& x = Exchange();
  const int base = WarpBase(), lane = Lane(), g = lane / 4, t = lane % 4;
  x[base + lane].regs = {a[0], a[1], a[2], a[3], b0, b1};
  WarpBarrier();
  auto a_at = [&](int row, int k) {  // A[row][k] from its owner's register
    const auto& r = x[base + (row % 8) * 4 + (k % 8) / 2].regs;
    return Half(r[row / 8 + 2 * (k / 8)], k % 2);
  };
  auto b_at = [&](int k, int n) {
    return Half(x[base + n * 4 + (k % 8) / 2].regs[4 + k / 8], k % 2);
  };
  for (int i = 0; i < 4; ++i) {
    const int row = g + 8 * (i / 2), col = 2 * t + i % 2;
    float sum = d[i];
    for (int k = 0; k < 16; ++k) sum += a_at(row, k) * b_at(k, col);
    d[i] = sum;
  }
  WarpBarrier();
}

// Matrix j's element (row, column) lies at lane 8 j + row's address, plus column.
inline void LdMatrixX4Emulated(uint32_t r[4], const Bf16* row, bool transposed) {
  using namespace emulated;
  auto& x = Exchange();
  const int base = WarpBase(), lane = Lane(), g = lane / 4, t = lane % 4;
  x[base + lane].row = row;
  WarpBarrier();
  auto at = [&](int j, int row_in_matrix, int column) {
    return static_cast<uint32_t>(Bits(x[base + 8 * j + row_in_matrix].row[column]));
  };
  for (int j = 0; j < 4; ++j) {
    r[j] = transposed ? at(j, 2 * t, g) | at(j, 2 * t + 1, g) << 16
                      : at(j, g, 2 * t) | at(j, g, 2 * t + 1) << 16;
  }
  WarpBarrier();
}
inline void LdMatrixX4(uint32_t r[4], const Bf16* row) { LdMatrixX4Emulated(r, row, false); }
inline void LdMatrixX4Trans(uint32_t r[4], const Bf16* row) { LdMatrixX4Emulated(r, row, true); }

// Synchronous here: the data is in place when the call returns.
inline void CpAsync16(void* dst, const void* src, bool valid) {
  if (valid) {
    std::memcpy(dst, src, 16);
  } else {
    std::memset(dst, 0, 16);
  }
}
inline void CpAsyncCommit() {}
template <int kPending>
inline void CpAsyncWait() {}

inline float Exp2(float x) { return std::exp2(x); }

inline float ShflXor(float v, int mask) {
  using namespace emulated;
  auto& x = Exchange();
  const int base = WarpBase(), lane = Lane();
  x[base + lane].value = v;
  WarpBarrier();
  const float other = x[base + (lane ^ mask)].value;
  WarpBarrier();
  return other;
}

inline void SyncWarp() { emulated::WarpBarrier(); }

inline uint32_t PackBf16(float lo, float hi) {
  return FloatToBf16Bits(lo) | static_cast<uint32_t>(FloatToBf16Bits(hi)) << 16;
}

#endif  // PIPECOORD_CUDA_EMULATION

}  // namespace pipecoord::kernels::cuda::mma

#endif  // PIPECOORD_KERNELS_CUDA_MMA_H_
