// A CPU emulation of the CUDA built-ins that kernels/cuda's row-wise and element-wise kernels
// use, so their *_kernels.h headers (the very code nvcc builds) run in tests on a machine
// without a GPU: each CUDA thread of a block is a std::thread, __syncthreads is a barrier over
// the block, warp shuffles go through a per-warp array between two warp barriers, __shared__
// variables are function statics (one block runs at a time), blocks run one after another.
//
// It checks index arithmetic, ownership of outputs, reduction trees and the arithmetic itself
// (CUDA's expf, log, ... differ from glibc's by an ulp or two). It cannot see GPU-only faults:
// a missing barrier the emulation's scheduling hides, races between blocks (they never run
// together here), launch limits, memory faults. The gpu-tagged tests check those on a GPU.
//
// Include it first, before any *_kernels.h; never in code nvcc builds.
#ifndef PIPECOORD_KERNELS_CUDA_CUDA_EMULATION_H_
#define PIPECOORD_KERNELS_CUDA_CUDA_EMULATION_H_

#ifdef __CUDACC__
#error "cuda_emulation.h emulates CUDA on the CPU: not for nvcc"
#endif

#define PIPECOORD_CUDA_EMULATION 1

#include <math.h>

#include <atomic>
#include <barrier>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <memory>
#include <stdexcept>
#include <thread>
#include <type_traits>
#include <vector>

#include "kernels/cpu/rng.h"
#include "kernels/cuda/bf16.h"
#include "kernels/cuda/compare.h"

#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __grid_constant__
#define __launch_bounds__(...)
// One block runs at a time, so a function's statics are its block's shared memory.
#define __shared__ static

// The bf16 storage type (declared in bf16.h), defined here as its bits.
struct __nv_bfloat16 {
  uint16_t bits;
};

struct uint3 {
  unsigned x = 0, y = 0, z = 0;
};
struct alignas(16) uint4 {
  unsigned x = 0, y = 0, z = 0, w = 0;
};
struct dim3 {
  unsigned x = 1, y = 1, z = 1;
};

inline thread_local uint3 threadIdx;
inline thread_local uint3 blockIdx;
inline dim3 gridDim;   // one launch at a time: the same for every thread
inline dim3 blockDim;

namespace pipecoord::kernels::cuda::emulation {

// One block's synchronisation: a barrier over its threads, one per warp, shuffle slots.
struct Block {
  explicit Block(int threads) : all(threads), slots(static_cast<size_t>(threads)) {
    for (int w = 0; w < threads / 32; ++w) warps.push_back(std::make_unique<std::barrier<>>(32));
  }
  std::barrier<> all;
  std::vector<std::unique_ptr<std::barrier<>>> warps;
  std::vector<uint64_t> slots;
};

inline thread_local Block* current_block = nullptr;
inline thread_local int linear_thread = 0;

// Runs body() as every thread of every block of grid x block, blocks one after another. Blocks
// must hold a whole number of warps (every kernel here launches 256 or 1024 threads).
template <typename Body>
void Launch(dim3 grid, dim3 block, Body body) {
  const int threads = static_cast<int>(block.x * block.y * block.z);
  if (threads % 32 != 0) throw std::invalid_argument("emulated blocks hold whole warps");
  gridDim = grid;
  blockDim = block;
  for (unsigned z = 0; z < grid.z; ++z) {
    for (unsigned y = 0; y < grid.y; ++y) {
      for (unsigned x = 0; x < grid.x; ++x) {
        Block b(threads);
        std::vector<std::thread> pool;
        pool.reserve(static_cast<size_t>(threads));
        for (int t = 0; t < threads; ++t) {
          pool.emplace_back([&, t] {
            const unsigned u = static_cast<unsigned>(t);
            threadIdx = uint3{u % block.x, (u / block.x) % block.y, u / (block.x * block.y)};
            blockIdx = uint3{x, y, z};
            current_block = &b;
            linear_thread = t;
            body();
          });
        }
        for (std::thread& th : pool) th.join();
      }
    }
  }
}

// Host vectors in a kernel's storage type: float as is, bf16 rounded to nearest even.
template <typename T>
std::vector<T> Stored(const std::vector<float>& values) {
  std::vector<T> out(values.size());
  for (size_t i = 0; i < values.size(); ++i) {
    if constexpr (std::is_same_v<T, float>) {
      out[i] = values[i];
    } else {
      out[i] = T{FloatToBf16Bits(values[i])};
    }
  }
  return out;
}

template <typename T>
std::vector<float> Floats(const std::vector<T>& values) {
  std::vector<float> out(values.size());
  for (size_t i = 0; i < values.size(); ++i) {
    if constexpr (std::is_same_v<T, float>) {
      out[i] = values[i];
    } else {
      out[i] = Bf16BitsToFloat(values[i].bits);
    }
  }
  return out;
}

// What the CPU twin must see for storage type T: the values rounded to T.
template <typename T>
std::vector<float> RoundedTo(const std::vector<float>& values) {
  return Floats(Stored<T>(values));
}

// Uniform values in [lo, hi) from the CPU twins' RNG.
inline std::vector<float> Random(uint64_t seed, int64_t n, double lo, double hi) {
  std::vector<float> v(static_cast<size_t>(n));
  cpu::Rng(seed).FillUniform(v.data(), n, lo, hi);
  return v;
}

// compare.h's threshold for outputs stored as T.
template <typename T>
constexpr double ToleranceFor() {
  return std::is_same_v<T, float> ? kFloatTolerance : kBf16Tolerance;
}

// A buffer of n NaNs in storage type T: what a kernel leaves unwritten stays NaN.
template <typename T>
std::vector<T> Poisoned(size_t n) {
  return Stored<T>(std::vector<float>(n, std::numeric_limits<float>::quiet_NaN()));
}

}  // namespace pipecoord::kernels::cuda::emulation

inline void __syncthreads() { pipecoord::kernels::cuda::emulation::current_block->all.arrive_and_wait(); }

// Lane i gets lane i + offset's value (its own when that lane is past the warp), as on a GPU.
template <typename V>
V __shfl_down_sync(unsigned /*mask: every lane takes part here*/, V value, int offset) {
  static_assert(sizeof(V) <= sizeof(uint64_t));
  namespace em = pipecoord::kernels::cuda::emulation;
  em::Block& b = *em::current_block;
  const int t = em::linear_thread, warp = t / 32, lane = t % 32;
  std::memcpy(&b.slots[t], &value, sizeof value);
  b.warps[warp]->arrive_and_wait();
  V other = value;
  if (lane + offset < 32) std::memcpy(&other, &b.slots[warp * 32 + lane + offset], sizeof other);
  b.warps[warp]->arrive_and_wait();  // nobody overwrites a slot before every lane has read
  return other;
}

inline unsigned long long atomicAdd(unsigned long long* address, unsigned long long value) {
  return std::atomic_ref<unsigned long long>(*address).fetch_add(value);
}

inline unsigned __float_as_uint(float f) {
  unsigned u;
  std::memcpy(&u, &f, sizeof u);
  return u;
}

inline int64_t min(int64_t a, int64_t b) { return a < b ? a : b; }
inline float max(float a, float b) { return fmaxf(a, b); }
inline double max(double a, double b) { return fmax(a, b); }

// IEEE double operations, each rounded once (g++ for x86-64 fuses nothing without -mfma).
inline double __dadd_rn(double a, double b) { return a + b; }
inline double __dsub_rn(double a, double b) { return a - b; }
inline double __dmul_rn(double a, double b) { return a * b; }
inline double __ddiv_rn(double a, double b) { return a / b; }
inline double __dsqrt_rn(double a) { return std::sqrt(a); }
inline float __double2float_rn(double d) { return static_cast<float>(d); }

inline __nv_bfloat16 __float2bfloat16_rn(float f) {
  return __nv_bfloat16{pipecoord::kernels::cuda::FloatToBf16Bits(f)};
}
inline float __bfloat162float(__nv_bfloat16 b) {
  return pipecoord::kernels::cuda::Bf16BitsToFloat(b.bits);
}
// Rounded once, to nearest even: through a float rounded to odd (24 bits keep the sticky
// information the 8-bit result needs).
inline __nv_bfloat16 __double2bfloat16(double d) {
  float f = static_cast<float>(d);
  if (std::isfinite(f) && static_cast<double>(f) != d) {
    if (std::fabs(static_cast<double>(f)) > std::fabs(d)) f = std::nextafter(f, 0.0f);
    uint32_t bits;
    std::memcpy(&bits, &f, sizeof bits);
    bits |= 1u;
    std::memcpy(&f, &bits, sizeof bits);
  }
  return __float2bfloat16_rn(f);
}

#endif  // PIPECOORD_KERNELS_CUDA_CUDA_EMULATION_H_
