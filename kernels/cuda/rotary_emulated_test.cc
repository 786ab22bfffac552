// The RoPE kernels themselves (rotary_kernels.h, the code nvcc builds) run on the CPU under
// cuda_emulation.h, launched as rotary.cu launches them (grid-stride loops, here on a grid of at
// most 3 blocks so each thread loops), against the CPU twin (kernels/cpu/rotary.h).
//
// Metric (compare.h): max over elements of |gpu - cpu| / max(|cpu|, 1e-6 + 1e-3 max|cpu|);
// the table below 1e-10 (double), rotations below 1e-4 (float) and 2e-2 (bf16, inputs rounded
// to bf16 for the CPU twin). Outputs start as NaN; in place (y == x) is checked too.
#include "kernels/cuda/cuda_emulation.h"
// The emulation first, then the kernels it runs.
#include "kernels/cuda/rotary_kernels.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "kernels/cpu/rotary.h"
#include "kernels/cuda/compare.h"

namespace pipecoord::kernels::cuda {
namespace {

using emulation::Floats;
using emulation::Launch;
using emulation::Poisoned;
using emulation::Random;
using emulation::RoundedTo;
using emulation::Stored;
using namespace rotary;  // NOLINT: the kernels under test

constexpr double kBase = 10000.0;
constexpr int64_t kMaxBlocks = 3;  // fewer blocks than items: every thread loops

struct Shape {
  int64_t batch, seq, heads, head_dim;
};
constexpr Shape kShapes[] = {{1, 1, 1, 2}, {2, 7, 3, 10}, {2, 19, 3, 66}};

struct Table {
  std::vector<double> cos, sin;
};

Table BuildTable(const Shape& s) {
  const int64_t entries = s.seq * s.head_dim / 2;
  Table t{std::vector<double>(entries, NAN), std::vector<double>(entries, NAN)};
  Launch(dim3{device::GridBlocks(entries, kThreads, kMaxBlocks), 1, 1}, dim3{kThreads, 1, 1},
         [&] { BuildRopeTableKernel(t.cos.data(), t.sin.data(), s.seq, s.head_dim, kBase); });
  return t;
}

TEST(RopeEmulatedTest, TableMatchesCpuTable) {
  for (const Shape s : kShapes) {
    SCOPED_TRACE(testing::Message() << "seq " << s.seq << " head_dim " << s.head_dim);
    const Table t = BuildTable(s);
    const cpu::RopeTable want = cpu::MakeRopeTable(s.seq, s.head_dim, kBase);
    const Comparison cc = CompareToCpu(t.cos, want.cos);
    EXPECT_LT(cc.error, 1e-10) << "cos: " << cc.Describe();
    const Comparison cs = CompareToCpu(t.sin, want.sin);
    EXPECT_LT(cs.error, 1e-10) << "sin: " << cs.Describe();
  }
}

template <typename T>
class RopeEmulatedTest : public ::testing::Test {};
using StorageTypes = ::testing::Types<float, __nv_bfloat16>;
TYPED_TEST_SUITE(RopeEmulatedTest, StorageTypes);

TYPED_TEST(RopeEmulatedTest, ForwardAndBackwardMatchTheCpuTwin) {
  using T = TypeParam;
  for (const Shape s : kShapes) {
    for (const bool backward : {false, true}) {
      for (const bool in_place : {false, true}) {
        SCOPED_TRACE(testing::Message() << (backward ? "backward" : "forward")
                                        << (in_place ? " in place" : "") << " batch " << s.batch
                                        << " seq " << s.seq << " heads " << s.heads
                                        << " head_dim " << s.head_dim);
        const int64_t count = s.batch * s.seq * s.heads * s.head_dim;
        const std::vector<float> x = RoundedTo<T>(Random(7 + count, count, -2, 2));
        std::vector<float> want = x;
        const cpu::RopeTable cpu_table = cpu::MakeRopeTable(s.seq, s.head_dim, kBase);
        if (backward) {
          cpu::RopeBackward(want.data(), cpu_table, s.batch, s.heads);
        } else {
          cpu::RopeForward(want.data(), cpu_table, s.batch, s.heads);
        }
        const Table t = BuildTable(s);
        std::vector<T> xs = Stored<T>(x), y = Poisoned<T>(count);
        T* out = in_place ? xs.data() : y.data();
        const int64_t half = s.head_dim / 2, pairs = count / 2;
        Launch(dim3{device::GridBlocks(pairs, kThreads, kMaxBlocks), 1, 1}, dim3{kThreads, 1, 1},
               [&] {
                 RotateKernel<T>(xs.data(), out, t.cos.data(), t.sin.data(), pairs, half, s.heads,
                                 s.seq, backward ? -1.0 : 1.0);
               });
        const Comparison c = CompareToCpu(Floats(in_place ? xs : y), want);
        EXPECT_LT(c.error, emulation::ToleranceFor<T>()) << c.Describe();
      }
    }
  }
}

}  // namespace
}  // namespace pipecoord::kernels::cuda
