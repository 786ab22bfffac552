// The SwiGLU kernels themselves (swiglu_kernels.h, the code nvcc builds) run on the CPU under
// cuda_emulation.h, launched as swiglu.cu launches them (grid-stride, here on at most 3 blocks
// so each thread loops), against the CPU twin (kernels/cpu/swiglu.h).
//
// Metric (compare.h): max over elements of |gpu - cpu| / max(|cpu|, 1e-6 + 1e-3 max|cpu|);
// thresholds 1e-4 (float), 2e-2 (bf16, inputs rounded to bf16 for the CPU twin). Outputs start
// as NaN. gate spans [-12, 12]: both sigmoid branches, the tails and silu'(u)'s zero.
#include "kernels/cuda/cuda_emulation.h"
// The emulation first, then the kernels it runs.
#include "kernels/cuda/swiglu_kernels.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "kernels/cpu/swiglu.h"
#include "kernels/cuda/compare.h"

namespace pipecoord::kernels::cuda {
namespace {

using emulation::Floats;
using emulation::Launch;
using emulation::Poisoned;
using emulation::Random;
using emulation::RoundedTo;
using emulation::Stored;
using namespace swiglu;  // NOLINT: the kernels under test

template <typename T>
class SwiGluEmulatedTest : public ::testing::Test {};
using StorageTypes = ::testing::Types<float, __nv_bfloat16>;
TYPED_TEST_SUITE(SwiGluEmulatedTest, StorageTypes);

TYPED_TEST(SwiGluEmulatedTest, ForwardAndBackwardMatchTheCpuTwin) {
  using T = TypeParam;
  for (const int64_t n : {int64_t{1}, int64_t{7}, int64_t{1000}, int64_t{20001}}) {
    SCOPED_TRACE(testing::Message() << "n " << n);
    const std::vector<float> gate = RoundedTo<T>(Random(11 + n, n, -12, 12));
    const std::vector<float> up = RoundedTo<T>(Random(12 + n, n, -2, 2));
    const std::vector<float> dz = RoundedTo<T>(Random(13 + n, n, -1, 1));
    std::vector<float> z_cpu(n), dgate_cpu(n), dup_cpu(n);
    cpu::SwiGluForward(gate.data(), up.data(), z_cpu.data(), n);
    cpu::SwiGluBackward(dz.data(), gate.data(), up.data(), dgate_cpu.data(), dup_cpu.data(), n);

    const std::vector<T> gs = Stored<T>(gate), us = Stored<T>(up), dzs = Stored<T>(dz);
    std::vector<T> z = Poisoned<T>(n), dgate = Poisoned<T>(n), dup = Poisoned<T>(n);
    const dim3 grid{device::GridBlocks(n, kThreads, 3), 1, 1};
    Launch(grid, dim3{kThreads, 1, 1},
           [&] { SwiGluForwardKernel<T>(gs.data(), us.data(), z.data(), n); });
    Launch(grid, dim3{kThreads, 1, 1}, [&] {
      SwiGluBackwardKernel<T>(dzs.data(), gs.data(), us.data(), dgate.data(), dup.data(), n);
    });
    const double tolerance = emulation::ToleranceFor<T>();
    const Comparison cz = CompareToCpu(Floats(z), z_cpu);
    EXPECT_LT(cz.error, tolerance) << "z: " << cz.Describe();
    const Comparison cg = CompareToCpu(Floats(dgate), dgate_cpu);
    EXPECT_LT(cg.error, tolerance) << "dgate: " << cg.Describe();
    const Comparison cu = CompareToCpu(Floats(dup), dup_cpu);
    EXPECT_LT(cu.error, tolerance) << "dup: " << cu.Describe();
  }
}

}  // namespace
}  // namespace pipecoord::kernels::cuda
