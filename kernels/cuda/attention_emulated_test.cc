// The flash-attention kernels themselves (attention_kernels.h for float storage and
// attention_tensor_core_kernels.h for bf16, the code nvcc builds) run on the CPU: each CUDA
// thread of a block is a std::thread, __syncthreads and __syncwarp are barriers over the block
// and the warp, __shfl_xor_sync exchanges through a per-warp array, WMMA fragments hold a whole
// 16 x 16 tile per thread (loads and stores check WMMA's alignment and ldm rules), and blocks run
// one after another, each starting with its shared memory full of NaN. The launches mirror
// attention.cu (kernels per dtype, grids, shared memory sizes, scales, tile widths).
//
// This checks the tiling, the masks, the online softmax, the backward's recomputation and the
// index arithmetic on any machine, without a GPU; it cannot see GPU-only faults (a missing
// barrier that the emulation's scheduling happens to hide, shared-memory limits, launch
// errors): attention_test does, on a GPU. Metric as attention_test: max|got - cpu| / max|cpu|
// below 1e-4 (float storage) and 2e-2 (bf16 storage) against kernels/cpu/attention in double.
#include <gtest/gtest.h>
#include <math.h>

#include <algorithm>
#include <atomic>
#include <barrier>
#include <cmath>
#include <cstdint>
#include <limits>
#include <memory>
#include <string>
#include <thread>
#include <type_traits>
#include <vector>

#include "kernels/cpu/attention.h"
#include "kernels/cpu/rng.h"
#include "kernels/cuda/bf16.h"
#include "kernels/cuda/normwise_error.h"

// ---- the CUDA built-ins the kernels use, emulated ----

struct uint3 {
  unsigned x = 0, y = 0, z = 0;
};
using dim3 = uint3;
struct alignas(16) float4 {
  float x, y, z, w;
};

thread_local uint3 threadIdx, blockIdx;
uint3 gridDim, blockDim;  // one launch at a time: the same for every thread

namespace emulation {

// One block's synchronisation: a barrier over all its threads, one per warp, shuffle slots.
struct Block {
  explicit Block(int threads) : all(threads), lanes(static_cast<size_t>(threads)) {
    for (int w = 0; w < threads / 32; ++w) warps.push_back(std::make_unique<std::barrier<>>(32));
  }
  std::barrier<> all;
  std::vector<std::unique_ptr<std::barrier<>>> warps;
  std::vector<float> lanes;
};

thread_local Block* current_block = nullptr;

// The block's shared memory, 128-byte aligned like the GPU's dynamic shared memory.
struct alignas(128) SharedChunk {
  float values[32];
};
std::vector<SharedChunk> shared_memory;

// WMMA loads and stores that broke WMMA's rules (pointer not 32-byte aligned, bad ldm).
std::atomic<int> wmma_rule_violations{0};

// Runs body() as every thread of every block of `grid`, blocks in order.
template <typename Body>
void Launch(dim3 grid, int threads, size_t shared_bytes, Body body) {
  gridDim = grid;
  blockDim = uint3{static_cast<unsigned>(threads), 1, 1};
  const float nan = std::numeric_limits<float>::quiet_NaN();
  for (unsigned z = 0; z < grid.z; ++z) {
    for (unsigned y = 0; y < grid.y; ++y) {
      for (unsigned x = 0; x < grid.x; ++x) {
        SharedChunk poisoned;
        std::fill(std::begin(poisoned.values), std::end(poisoned.values), nan);
        shared_memory.assign(shared_bytes / sizeof(SharedChunk) + 1, poisoned);
        Block block(threads);
        std::vector<std::thread> pool;
        for (int t = 0; t < threads; ++t) {
          pool.emplace_back([&, t] {
            threadIdx = uint3{static_cast<unsigned>(t), 0, 0};
            blockIdx = uint3{x, y, z};
            current_block = &block;
            body();
          });
        }
        for (std::thread& th : pool) th.join();
      }
    }
  }
}

}  // namespace emulation

inline void pipecoord_emulation_wmma_violation() { ++emulation::wmma_rule_violations; }

inline void __syncthreads() { emulation::current_block->all.arrive_and_wait(); }
inline void __syncwarp(unsigned = 0xffffffffu) {
  emulation::current_block->warps[threadIdx.x / 32]->arrive_and_wait();
}
inline float __shfl_xor_sync(unsigned, float value, int lane_mask) {
  emulation::Block& b = *emulation::current_block;
  const unsigned warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  b.lanes[threadIdx.x] = value;
  b.warps[warp]->arrive_and_wait();
  const float other = b.lanes[warp * 32 + (lane ^ static_cast<unsigned>(lane_mask))];
  b.warps[warp]->arrive_and_wait();  // nobody overwrites a slot before every lane has read
  return other;
}
inline int min(int a, int b) { return a < b ? a : b; }

// bf16 storage for the emulated kernels: the bits, converted as the GPU converts them.
struct __nv_bfloat16 {
  uint16_t bits;
};

// WMMA (nvcuda::wmma) for bf16 x bf16 -> fp32 16 x 16 x 16 products: every thread of the warp
// holds the whole tile (the real fragments spread it over the lanes; the kernels never look
// inside a fragment). Lane 0 alone stores, so the warp writes each element once.
namespace nvcuda::wmma {
struct matrix_a {};
struct matrix_b {};
struct accumulator {};
struct row_major {};
struct col_major {};
enum layout_t { mem_row_major, mem_col_major };

template <typename Use, int M, int N, int K, typename T, typename Layout = void>
struct fragment {
  float v[16][16];
};

template <typename F>
void fill_fragment(F& f, float value) {
  for (auto& row : f.v) std::fill(std::begin(row), std::end(row), value);
}

inline void CheckRules(const void* ptr, unsigned ldm, size_t element_bytes) {
  if (reinterpret_cast<uintptr_t>(ptr) % 32 != 0 || (ldm * element_bytes) % 16 != 0) {
    pipecoord_emulation_wmma_violation();
  }
}

// a: element (i, k); b: element (k, j). row_major: (r, c) at ptr[r * ldm + c]; col_major: at
// ptr[r + c * ldm].
template <typename Use, typename Layout>
void load_matrix_sync(fragment<Use, 16, 16, 16, __nv_bfloat16, Layout>& f, const __nv_bfloat16* p,
                      unsigned ldm) {
  CheckRules(p, ldm, sizeof(__nv_bfloat16));
  for (int r = 0; r < 16; ++r) {
    for (int c = 0; c < 16; ++c) {
      const __nv_bfloat16 e = std::is_same_v<Layout, row_major> ? p[r * ldm + c] : p[r + c * ldm];
      f.v[r][c] = pipecoord::kernels::cuda::Bf16BitsToFloat(e.bits);
    }
  }
}

template <typename LayoutA, typename LayoutB>
void mma_sync(fragment<accumulator, 16, 16, 16, float>& d,
              const fragment<matrix_a, 16, 16, 16, __nv_bfloat16, LayoutA>& a,
              const fragment<matrix_b, 16, 16, 16, __nv_bfloat16, LayoutB>& b,
              const fragment<accumulator, 16, 16, 16, float>& c) {
  fragment<accumulator, 16, 16, 16, float> out;
  for (int i = 0; i < 16; ++i) {
    for (int j = 0; j < 16; ++j) {
      float sum = c.v[i][j];
      for (int k = 0; k < 16; ++k) sum += a.v[i][k] * b.v[k][j];
      out.v[i][j] = sum;
    }
  }
  d = out;
}

inline void store_matrix_sync(float* p, const fragment<accumulator, 16, 16, 16, float>& f,
                              unsigned ldm, layout_t layout) {
  CheckRules(p, ldm, sizeof(float));
  if (threadIdx.x % 32 != 0) return;
  for (int r = 0; r < 16; ++r) {
    for (int c = 0; c < 16; ++c)
      (layout == mem_row_major ? p[r * ldm + c] : p[r + c * ldm]) = f.v[r][c];
  }
}
}  // namespace nvcuda::wmma

namespace pipecoord::kernels::cuda::device {
inline float ToFloat(float v) { return v; }
inline float ToFloat(__nv_bfloat16 v) { return Bf16BitsToFloat(v.bits); }
template <typename T>
T FromFloat(float v);
template <>
inline float FromFloat<float>(float v) {
  return v;
}
template <>
inline __nv_bfloat16 FromFloat<__nv_bfloat16>(float v) {
  return __nv_bfloat16{FloatToBf16Bits(v)};
}
inline int64_t GlobalThread() {
  return static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
}
inline int64_t GridThreads() { return static_cast<int64_t>(gridDim.x) * blockDim.x; }
inline float* SharedFloats() { return emulation::shared_memory.data()->values; }
inline unsigned char* SharedBytes() {
  return reinterpret_cast<unsigned char*>(emulation::shared_memory.data());
}
}  // namespace pipecoord::kernels::cuda::device

#define __global__
#define __device__
#define __forceinline__ inline
#define __launch_bounds__(threads)
#define PIPECOORD_ATTENTION_KERNELS_EMULATED
#include "kernels/cuda/attention_kernels.h"
#include "kernels/cuda/attention_tensor_core_kernels.h"

namespace pipecoord::kernels::cuda {
namespace {

using namespace flash;  // NOLINT: the kernels under test

template <typename T>
T Store(float v) {
  return device::FromFloat<T>(v);
}
template <typename T>
std::vector<float> Load(const std::vector<T>& v) {
  std::vector<float> out(v.size());
  for (size_t i = 0; i < v.size(); ++i) out[i] = device::ToFloat(v[i]);
  return out;
}

template <typename T>
struct Run {
  std::vector<T> o, dq, dk, dv;
  std::vector<float> lse, delta;
};

// attention.cu's FlashAttentionForward then FlashAttentionBackward, on emulated launches.
template <typename T, int kD>
Run<T> Emulate(const std::vector<T>& q, const std::vector<T>& k, const std::vector<T>& v,
               const std::vector<T>& dout, const cpu::AttentionDims& d) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const size_t tokens = q.size(), kv_tokens = k.size();
  const size_t stats = static_cast<size_t>(d.batch * d.heads * d.seq);
  Run<T> r{std::vector<T>(tokens, Store<T>(nan)), std::vector<T>(tokens, Store<T>(nan)),
           std::vector<T>(kv_tokens, Store<T>(nan)), std::vector<T>(kv_tokens, Store<T>(nan)),
           std::vector<float>(stats, nan),        std::vector<float>(stats, nan)};
  const int seq = static_cast<int>(d.seq), heads = static_cast<int>(d.heads);
  const int kv_heads = static_cast<int>(d.kv());
  const int head_dim = static_cast<int>(d.head_dim);
  const int window = d.window > 0 && d.window < d.seq ? static_cast<int>(d.window) : 0;  // as attention.cu
  const float scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(d.head_dim)));
  const auto batch = static_cast<unsigned>(d.batch), h = static_cast<unsigned>(d.heads);

  const dim3 forward_grid{Tiles(d.seq, kForwardRows), h, batch};
  const dim3 key_grid{Tiles(d.seq, kKeyTile), static_cast<unsigned>(kv_heads), batch};
  const dim3 query_grid{Tiles(d.seq, kBackwardRows), h, batch};
  const int64_t rows = d.batch * d.seq * d.heads;
  const auto row_blocks = static_cast<unsigned>(std::min<int64_t>((rows * 32 + 255) / 256, 65536));
  constexpr bool kTensorCores = std::is_same_v<T, __nv_bfloat16>;  // as attention.cu

  if constexpr (kTensorCores) {
    emulation::Launch(forward_grid, kThreads, ForwardTensorCoreLayout<kD>::kBytes, [&] {
      FlashForwardTensorCoreKernel<kD>(q.data(), k.data(), v.data(), r.o.data(), r.lse.data(), seq,
                                       heads, kv_heads, head_dim, window, scale * kLog2e);
    });
  } else {
    emulation::Launch(forward_grid, kThreads, ForwardSmemFloats<kD>() * sizeof(float), [&] {
      FlashForwardKernel<T, kD>(q.data(), k.data(), v.data(), r.o.data(), r.lse.data(), seq, heads,
                                kv_heads, head_dim, window, scale * kLog2e);
    });
  }
  emulation::Launch(dim3{row_blocks, 1, 1}, kThreads, 0, [&] {
    RowDotKernel<T>(dout.data(), r.o.data(), r.delta.data(), rows, seq, heads, head_dim);
  });
  if constexpr (kTensorCores) {
    emulation::Launch(key_grid, kThreads, KeyValueTensorCoreLayout<kD>::kBytes, [&] {
      FlashBackwardKeyValueTensorCoreKernel<kD>(
          dout.data(), q.data(), k.data(), v.data(), r.lse.data(), r.delta.data(), r.dk.data(),
          r.dv.data(), seq, heads, kv_heads, head_dim, window, scale, scale * kLog2e);
    });
    emulation::Launch(query_grid, kThreads, QueryTensorCoreLayout<kD>::kBytes, [&] {
      FlashBackwardQueryTensorCoreKernel<kD>(dout.data(), q.data(), k.data(), v.data(),
                                             r.lse.data(), r.delta.data(), r.dq.data(), seq, heads,
                                             kv_heads, head_dim, window, scale, scale * kLog2e);
    });
  } else {
    emulation::Launch(key_grid, kThreads, KeyValueSmemFloats<kD>() * sizeof(float), [&] {
      FlashBackwardKeyValueKernel<T, kD>(dout.data(), q.data(), k.data(), v.data(), r.lse.data(),
                                         r.delta.data(), r.dk.data(), r.dv.data(), seq, heads,
                                         kv_heads, head_dim, window, scale, scale * kLog2e);
    });
    emulation::Launch(query_grid, kThreads, QuerySmemFloats<kD>() * sizeof(float), [&] {
      FlashBackwardQueryKernel<T, kD>(dout.data(), q.data(), k.data(), v.data(), r.lse.data(),
                                      r.delta.data(), r.dq.data(), seq, heads, kv_heads, head_dim,
                                      window, scale, scale * kLog2e);
    });
  }
  return r;
}

template <typename T>
Run<T> EmulateAnyHeadDim(const std::vector<T>& q, const std::vector<T>& k, const std::vector<T>& v,
                         const std::vector<T>& dout, const cpu::AttentionDims& d) {
  switch (PaddedHeadDim(d.head_dim)) {
    case 32:
      return Emulate<T, 32>(q, k, v, dout, d);
    case 64:
      return Emulate<T, 64>(q, k, v, dout, d);
    default:
      return Emulate<T, 128>(q, k, v, dout, d);
  }
}

struct Shape {
  cpu::AttentionDims d;
  double qk_range;
};

std::string Name(const cpu::AttentionDims& d) {
  return "batch " + std::to_string(d.batch) + " seq " + std::to_string(d.seq) + " heads " +
         std::to_string(d.heads) + " kv_heads " + std::to_string(d.kv()) + " head_dim " +
         std::to_string(d.head_dim) + " window " + std::to_string(d.window);
}

template <typename T>
void CheckAgainstCpu(const Shape& shape, double tolerance) {
  const cpu::AttentionDims& d = shape.d;
  SCOPED_TRACE(Name(d));
  const int64_t n = d.batch * d.seq * d.hidden(), kv_n = d.batch * d.seq * d.kv_hidden();
  auto make = [&](uint64_t seed, double range, int64_t n) {
    std::vector<float> f(static_cast<size_t>(n));
    cpu::Rng(seed).FillUniform(f.data(), n, -range, range);
    std::vector<T> stored(f.size());
    for (size_t i = 0; i < f.size(); ++i) stored[i] = Store<T>(f[i]);
    return stored;
  };
  const auto q = make(1 + d.seq, shape.qk_range, n), k = make(2 + d.seq, shape.qk_range, kv_n);
  const auto v = make(3 + d.seq, 1.0, kv_n), dout = make(4 + d.seq, 1.0, n);
  const Run<T> got = EmulateAnyHeadDim(q, k, v, dout, d);

  auto doubles = [](const std::vector<T>& x) {
    const std::vector<float> f = Load(x);
    return std::vector<double>(f.begin(), f.end());
  };
  const auto qd = doubles(q), kd = doubles(k), vd = doubles(v), dod = doubles(dout);
  std::vector<double> probs(static_cast<size_t>(d.probs_size())), o(qd.size());
  cpu::AttentionForward(qd.data(), kd.data(), vd.data(), probs.data(), o.data(), d);
  std::vector<double> dq(qd.size()), dk(kd.size()), dv(vd.size());
  cpu::AttentionBackward(dod.data(), qd.data(), kd.data(), vd.data(), probs.data(), dq.data(),
                         dk.data(), dv.data(), d);
  // lse from the probabilities of the first key row i sees, j0: p_ij0 = exp(score_ij0 - lse_i).
  std::vector<double> lse(got.lse.size());
  const double scale = 1.0 / std::sqrt(static_cast<double>(d.head_dim));
  for (int64_t b = 0; b < d.batch; ++b) {
    for (int64_t h = 0; h < d.heads; ++h) {
      for (int64_t i = 0; i < d.seq; ++i) {
        const int64_t qi = (b * d.seq + i) * d.hidden() + h * d.head_dim;
        const int64_t j0 = d.first_key(i);
        const int64_t k0 = (b * d.seq + j0) * d.kv_hidden() + (h / d.group()) * d.head_dim;
        double dot = 0;
        for (int64_t c = 0; c < d.head_dim; ++c) dot += qd[qi + c] * kd[k0 + c];
        const double p0 = probs[((b * d.heads + h) * d.seq + i) * d.seq + j0];
        lse[(b * d.heads + h) * d.seq + i] = scale * dot - std::log(p0);
      }
    }
  }

  const NormwiseError eo = CompareNormwise(Load(got.o), o);
  EXPECT_LT(eo.error, tolerance) << "o: " << eo.Describe();
  const NormwiseError el = CompareNormwise(got.lse, lse);
  EXPECT_LT(el.error, 1e-4) << "lse: " << el.Describe();
  const NormwiseError eq = CompareNormwise(Load(got.dq), dq);
  EXPECT_LT(eq.error, tolerance) << "dq: " << eq.Describe();
  const NormwiseError ek = CompareNormwise(Load(got.dk), dk);
  EXPECT_LT(ek.error, tolerance) << "dk: " << ek.Describe();
  const NormwiseError ev = CompareNormwise(Load(got.dv), dv);
  EXPECT_LT(ev.error, tolerance) << "dv: " << ev.Describe();
}

// Small shapes (the emulation runs 256 OS threads per block) that still cover: one token; seq
// past one tile and not a multiple of 32 or 64; batch and heads > 1; each tile width (32, 64,
// 128) with a head_dim below it; a peaky softmax whose running max grows across key tiles;
// grouped-query attention (groups of 2 and 3 query heads over 2 key/value heads, batch 2, so a
// head or sample index mixed up between the two layouts reads the wrong rows; one shared
// key/value head over seq past a key tile).
const Shape kShapes[] = {
    {{1, 1, 1, 8}, 2.0},
    {{2, 67, 2, 40}, 2.0},
    {{1, 70, 1, 128}, 2.0},
    {{1, 131, 1, 17}, 6.0},
    {{.batch = 2, .seq = 37, .heads = 4, .head_dim = 24, .kv_heads = 2}, 2.0},
    {{.batch = 1, .seq = 20, .heads = 6, .head_dim = 16, .kv_heads = 2}, 2.0},
    {{.batch = 1, .seq = 70, .heads = 3, .head_dim = 8, .kv_heads = 1}, 3.0},
    // Sliding windows (Mistral's): shorter than a tile (tiles wholly before some rows' windows are
    // skipped or masked), longer than one, over GQA; a window as long as seq is plain causal.
    {{.batch = 1, .seq = 150, .heads = 2, .head_dim = 16, .kv_heads = 1, .window = 20}, 2.0},
    {{.batch = 2, .seq = 131, .heads = 2, .head_dim = 40, .window = 70}, 3.0},
    {{.batch = 1, .seq = 33, .heads = 1, .head_dim = 8, .window = 33}, 2.0},
};

TEST(AttentionEmulatedTest, FloatKernelsMatchCpu) {
  for (const Shape& shape : kShapes) CheckAgainstCpu<float>(shape, 1e-4);
}

TEST(AttentionEmulatedTest, Bf16TensorCoreKernelsMatchCpuOnRoundedInputs) {
  emulation::wmma_rule_violations = 0;
  for (const Shape& shape : kShapes) CheckAgainstCpu<__nv_bfloat16>(shape, 2e-2);
  EXPECT_EQ(emulation::wmma_rule_violations.load(), 0)
      << "WMMA loads/stores with a pointer not 32-byte aligned or an ldm not a multiple of 16 "
         "bytes";
}

}  // namespace
}  // namespace pipecoord::kernels::cuda
