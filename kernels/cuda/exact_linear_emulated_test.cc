// The exact linear kernel itself (exact_linear_kernels.h, the code nvcc builds) runs on the CPU
// under cuda_emulation.h, on exact_linear.cu's grid of 16 x 16 tiles, against cpu::LinearForwardReference.
// Metric: exact (every output's bits). Shapes are not multiples of the tile; outputs start NaN.
#include "kernels/cuda/cuda_emulation.h"
// The emulation first, then the kernels it runs.
#include "kernels/cuda/exact_linear_kernels.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <vector>

#include "kernels/cpu/linear_reference.h"

namespace pipecoord::kernels::cuda {
namespace {

using emulation::Launch;
using emulation::Random;
using exact_linear::ExactLinearKernel;
using exact_linear::kTile;

TEST(ExactLinearEmulatedTest, EqualsCpuLinearForwardBitForBit) {
  for (const cpu::LinearDims d : {cpu::LinearDims{1, 1, 1}, cpu::LinearDims{3, 5, 7},
                                  cpu::LinearDims{17, 33, 20}}) {
    SCOPED_TRACE(testing::Message() << "n " << d.n << " in " << d.in << " out " << d.out);
    const std::vector<float> x = Random(21 + d.in, d.n * d.in, -3, 3);
    const std::vector<float> w = Random(22 + d.in, d.out * d.in, -1, 1);
    std::vector<float> want(d.n * d.out), got(d.n * d.out, NAN);
    cpu::LinearForwardReference(x.data(), w.data(), want.data(), d);
    const dim3 grid{static_cast<unsigned>((d.out + kTile - 1) / kTile),
                    static_cast<unsigned>((d.n + kTile - 1) / kTile), 1};
    Launch(grid, dim3{kTile, kTile, 1},
           [&] { ExactLinearKernel(x.data(), w.data(), got.data(), d.n, d.in, d.out); });
    EXPECT_EQ(std::memcmp(got.data(), want.data(), want.size() * sizeof(float)), 0);
  }
}

}  // namespace
}  // namespace pipecoord::kernels::cuda
