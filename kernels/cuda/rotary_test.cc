// kernels/cuda/rotary against its CPU twin (kernels/cpu/rotary.h), f32 and bf16.
//
// Metric (compare.h): max over elements of |gpu - cpu| / max(|cpu|, 1e-6 + 1e-3 max|cpu|);
// thresholds 1e-4 for float outputs, 2e-2 for bf16 outputs; the device-built table against
// cpu::MakeRopeTable's below 1e-10 (both double). For bf16, the inputs are rounded to bf16 first
// and the CPU twin runs in fp32 on the rounded values. Out-of-place outputs are poisoned with
// NaN; the in-place case checks that y == x works. head_dim / 2 and the pair counts are odd.
#include "kernels/cuda/rotary.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "kernels/cpu/rotary.h"
#include "kernels/cuda/compare.h"
#include "kernels/cuda/gpu_test.h"

namespace pipecoord::kernels::cuda {
namespace {

constexpr double kBase = 10000.0;

struct Shape {
  int64_t batch, seq, heads, head_dim;
};
constexpr Shape kShapes[] = {{1, 1, 1, 2}, {2, 7, 3, 10}, {3, 33, 5, 66}, {2, 257, 3, 128}};

// The table for `s` built on the device, checked against cpu::MakeRopeTable.
class DeviceTable {
 public:
  explicit DeviceTable(const Shape& s)
      : cos_(s.seq * s.head_dim / 2), sin_(s.seq * s.head_dim / 2), seq_(s.seq),
        head_dim_(s.head_dim) {}

  Status Build(cudaStream_t stream) {
    PIPECOORD_RETURN_IF_ERROR(cos_.status());
    PIPECOORD_RETURN_IF_ERROR(sin_.status());
    PIPECOORD_RETURN_IF_ERROR(cos_.Poison());
    PIPECOORD_RETURN_IF_ERROR(sin_.Poison());
    return BuildRopeTable(cos_.get(), sin_.get(), seq_, head_dim_, kBase, stream);
  }
  DeviceRopeTable table() { return {cos_.get(), sin_.get(), seq_, head_dim_}; }
  DeviceBuffer<double>& cos() { return cos_; }
  DeviceBuffer<double>& sin() { return sin_; }

 private:
  DeviceBuffer<double> cos_, sin_;
  int64_t seq_, head_dim_;
};

class RopeTableTest : public GpuTest {};

TEST_F(RopeTableTest, MatchesCpuTable) {
  for (const Shape s : kShapes) {
    SCOPED_TRACE(testing::Message() << "seq " << s.seq << " head_dim " << s.head_dim);
    DeviceTable table(s);
    PIPECOORD_ASSERT_OK(table.Build(stream_));
    PIPECOORD_ASSERT_OK(Sync());
    std::vector<double> cos_gpu, sin_gpu;
    PIPECOORD_ASSERT_OK(table.cos().Download(&cos_gpu));
    PIPECOORD_ASSERT_OK(table.sin().Download(&sin_gpu));
    const cpu::RopeTable cpu_table = cpu::MakeRopeTable(s.seq, s.head_dim, kBase);
    const Comparison cc = CompareToCpu(cos_gpu, cpu_table.cos);
    EXPECT_LT(cc.error, 1e-10) << "cos: " << cc.Describe();
    const Comparison cs = CompareToCpu(sin_gpu, cpu_table.sin);
    EXPECT_LT(cs.error, 1e-10) << "sin: " << cs.Describe();
  }
}

template <typename Case>
class RopeTest : public GpuTest {
 protected:
  using T = typename Case::type;

  // Runs forward (or backward) on the GPU, out of place (or in place), against the CPU twin.
  void Check(bool backward, bool in_place) {
    for (const Shape s : kShapes) {
      SCOPED_TRACE(testing::Message()
                   << DTypeLabel<T>() << (backward ? " backward" : " forward")
                   << (in_place ? " in place" : " out of place") << " batch " << s.batch
                   << " seq " << s.seq << " heads " << s.heads << " head_dim " << s.head_dim);
      const int64_t count = s.batch * s.seq * s.heads * s.head_dim;
      const std::vector<float> x = RoundedTo<T>(RandomFloats(41 + count, count, -2, 2));
      std::vector<float> want = x;
      const cpu::RopeTable cpu_table = cpu::MakeRopeTable(s.seq, s.head_dim, kBase);
      if (backward) {
        cpu::RopeBackward(want.data(), cpu_table, s.batch, s.heads);
      } else {
        cpu::RopeForward(want.data(), cpu_table, s.batch, s.heads);
      }

      DeviceTable table(s);
      PIPECOORD_ASSERT_OK(table.Build(this->stream_));
      DeviceBuffer<T> dx(count), dy(count);
      PIPECOORD_ASSERT_OK(dx.status());
      PIPECOORD_ASSERT_OK(dy.status());
      PIPECOORD_ASSERT_OK(UploadFloats(dx, x));
      PIPECOORD_ASSERT_OK(dy.Poison());
      T* out = in_place ? dx.get() : dy.get();
      if (backward) {
        PIPECOORD_ASSERT_OK(
            RopeBackward(dx.get(), out, table.table(), s.batch, s.heads, this->stream_));
      } else {
        PIPECOORD_ASSERT_OK(
            RopeForward(dx.get(), out, table.table(), s.batch, s.heads, this->stream_));
      }
      PIPECOORD_ASSERT_OK(this->Sync());
      std::vector<float> got;
      PIPECOORD_ASSERT_OK(DownloadFloats(in_place ? dx : dy, &got));
      const Comparison c = CompareToCpu(got, want);
      EXPECT_LT(c.error, ToleranceFor<T>()) << c.Describe();
    }
  }
};
TYPED_TEST_SUITE(RopeTest, ActivationTypes, DTypeNames);

TYPED_TEST(RopeTest, ForwardMatchesCpuTwin) { this->Check(false, false); }
TYPED_TEST(RopeTest, ForwardInPlaceMatchesCpuTwin) { this->Check(false, true); }
TYPED_TEST(RopeTest, BackwardMatchesCpuTwin) { this->Check(true, false); }
TYPED_TEST(RopeTest, BackwardInPlaceMatchesCpuTwin) { this->Check(true, true); }

TEST(RopeArgumentsTest, RejectsAnOddHeadDimWithoutAGpu) {
  float* none = nullptr;
  const DeviceRopeTable odd{nullptr, nullptr, 4, 7};
  EXPECT_EQ(RopeForward(none, none, odd, 1, 1, nullptr).code(), Code::kInvalidArgument);
  EXPECT_EQ(BuildRopeTable(nullptr, nullptr, 4, 7, kBase, nullptr).code(),
            Code::kInvalidArgument);
  const DeviceRopeTable null_buffers{nullptr, nullptr, 4, 8};
  EXPECT_EQ(RopeBackward(none, none, null_buffers, 1, 1, nullptr).code(),
            Code::kInvalidArgument);
}

}  // namespace
}  // namespace pipecoord::kernels::cuda
