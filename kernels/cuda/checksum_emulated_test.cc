// The checksum kernels themselves (checksum_kernels.h, the code nvcc builds) run on the CPU
// under cuda_emulation.h, launched as checksum.cu launches them (the hash on a capped
// grid-stride grid, OrderedSum's stages until one value is left), against the CPU twin
// (kernels/cpu/checksum.h). Metric: exact (the hash, and the double's 64 bits). The values span
// 2^-30 to 2^30, so a different summation order would change the bits; sizes cover partial
// element blocks and two tree stages.
#include "kernels/cuda/cuda_emulation.h"
// The emulation first, then the kernels it runs.
#include "kernels/cuda/checksum_kernels.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

#include "kernels/cpu/checksum.h"
#include "kernels/cpu/rng.h"

namespace pipecoord::kernels::cuda {
namespace {

using emulation::Launch;
using namespace checksum;  // NOLINT: the kernels under test

std::vector<float> WideRangeFloats(uint64_t seed, int64_t n) {
  cpu::Rng rng(seed);
  std::vector<float> v(static_cast<size_t>(n));
  for (float& x : v) {
    x = static_cast<float>(std::ldexp(2.0 * rng.UniformDouble() - 1.0,
                                      static_cast<int>(rng.Below(61)) - 30));
  }
  return v;
}

int64_t CeilDiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

// checksum.cu's OrderedSum: stage 0 into the first buffer (or the result), then tree stages.
double EmulatedOrderedSum(const std::vector<float>& x) {
  const int64_t n = static_cast<int64_t>(x.size());
  const int64_t element_blocks = CeilDiv(n, kSumBlock);
  int64_t count = CeilDiv(element_blocks, kFanIn);
  double result = NAN;
  std::vector<double> buffers[2] = {std::vector<double>(count, NAN),
                                    std::vector<double>(CeilDiv(count, kFanIn), NAN)};
  double* out0 = count == 1 ? &result : buffers[0].data();
  Launch(dim3{static_cast<unsigned>(count), 1, 1}, dim3{kFanIn, 1, 1},
         [&] { BlockSumsKernel(x.data(), n, element_blocks, out0); });
  int stage = 0;
  while (count > 1) {
    const int64_t next = CeilDiv(count, kFanIn);
    double* out = next == 1 ? &result : buffers[(stage + 1) % 2].data();
    const double* in = buffers[stage % 2].data();
    Launch(dim3{static_cast<unsigned>(next), 1, 1}, dim3{kFanIn, 1, 1},
           [&] { TreeStageKernel(in, count, out); });
    count = next;
    ++stage;
  }
  return result;
}

uint64_t Bits(double d) {
  uint64_t b;
  std::memcpy(&b, &d, sizeof b);
  return b;
}

TEST(ChecksumEmulatedTest, HashAndOrderedSumEqualTheCpuBitForBit) {
  for (const int64_t n : {int64_t{1}, int64_t{255}, int64_t{257}, int64_t{1000}, int64_t{65536},
                          int64_t{65536 * 2 + 17}}) {
    SCOPED_TRACE(testing::Message() << "n " << n);
    const std::vector<float> x = WideRangeFloats(31 + n, n);
    unsigned long long hash = 0;
    Launch(dim3{device::GridBlocks(n, kHashThreads, 3), 1, 1}, dim3{kHashThreads, 1, 1},
           [&] { HashFloatsKernel(x.data(), n, &hash); });
    EXPECT_EQ(hash, cpu::HashFloats(x.data(), n));
    const double sum = EmulatedOrderedSum(x);
    const double want = cpu::OrderedSum(x.data(), n);
    EXPECT_EQ(Bits(sum), Bits(want)) << "emulated " << sum << ", cpu " << want;
  }
}

}  // namespace
}  // namespace pipecoord::kernels::cuda
