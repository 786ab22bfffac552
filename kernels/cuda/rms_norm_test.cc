// kernels/cuda/rms_norm against its CPU twin (kernels/cpu/rms_norm.h), f32 and bf16.
//
// Metric (compare.h): max over elements of |gpu - cpu| / max(|cpu|, 1e-6 + 1e-3 max|cpu|);
// thresholds 1e-4 for float outputs, 2e-2 for bf16 outputs. For bf16, the inputs are rounded to
// bf16 first and the CPU twin runs in fp32 on the rounded values. Outputs are poisoned with NaN
// before each kernel; accumulated outputs start from random values instead (so an element left
// unwritten keeps a value that differs from the expected sum). Shapes are odd: no h is a
// multiple of the 256-thread row block or of the 32-column strips of W.
#include "kernels/cuda/rms_norm.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "kernels/cpu/rms_norm.h"
#include "kernels/cuda/compare.h"
#include "kernels/cuda/gpu_test.h"

namespace pipecoord::kernels::cuda {
namespace {

constexpr double kEps = 1e-5;

struct Shape {
  int64_t n, h;
};
constexpr Shape kShapes[] = {{1, 1}, {3, 37}, {17, 300}, {64, 1000}, {5, 4097}, {300, 96}};

template <typename T>
class RmsNormTest : public GpuTest {};
TYPED_TEST_SUITE(RmsNormTest, ActivationTypes, DTypeNames);

TYPED_TEST(RmsNormTest, ForwardMatchesCpuTwin) {
  using T = typename TypeParam::type;
  for (const Shape s : kShapes) {
    SCOPED_TRACE(testing::Message() << DTypeLabel<T>() << " n " << s.n << " h " << s.h);
    const int64_t nh = s.n * s.h;
    const std::vector<float> x = RoundedTo<T>(RandomFloats(11 + nh, nh, -2, 2));
    const std::vector<float> g = RoundedTo<T>(RandomFloats(12 + nh, s.h, 0.5, 1.5));
    std::vector<float> y_cpu(nh), rstd_cpu(s.n);
    cpu::RmsNormForward(x.data(), g.data(), y_cpu.data(), rstd_cpu.data(), s.n, s.h, kEps);

    DeviceBuffer<T> dx(nh), dg(s.h), dy(nh);
    DeviceBuffer<float> drstd(s.n);
    for (const Status* st : {&dx.status(), &dg.status(), &dy.status(), &drstd.status()}) {
      PIPECOORD_ASSERT_OK(*st);
    }
    PIPECOORD_ASSERT_OK(UploadFloats(dx, x));
    PIPECOORD_ASSERT_OK(UploadFloats(dg, g));
    PIPECOORD_ASSERT_OK(dy.Poison());
    PIPECOORD_ASSERT_OK(drstd.Poison());
    PIPECOORD_ASSERT_OK(RmsNormForward(dx.get(), dg.get(), dy.get(), drstd.get(), s.n, s.h, kEps,
                                       this->stream_));
    PIPECOORD_ASSERT_OK(this->Sync());
    std::vector<float> y_gpu, rstd_gpu;
    PIPECOORD_ASSERT_OK(DownloadFloats(dy, &y_gpu));
    PIPECOORD_ASSERT_OK(drstd.Download(&rstd_gpu));

    const Comparison cy = CompareToCpu(y_gpu, y_cpu);
    EXPECT_LT(cy.error, ToleranceFor<T>()) << "y: " << cy.Describe();
    const Comparison cr = CompareToCpu(rstd_gpu, rstd_cpu);
    EXPECT_LT(cr.error, kFloatTolerance) << "rstd: " << cr.Describe();
  }
}

TYPED_TEST(RmsNormTest, BackwardInputMatchesCpuTwin) {
  using T = typename TypeParam::type;
  for (const bool accumulate : {false, true}) {
    for (const Shape s : kShapes) {
      SCOPED_TRACE(testing::Message() << DTypeLabel<T>() << " n " << s.n << " h " << s.h
                                      << (accumulate ? " accumulate" : " overwrite"));
      const int64_t nh = s.n * s.h;
      const std::vector<float> x = RoundedTo<T>(RandomFloats(21 + nh, nh, -2, 2));
      const std::vector<float> g = RoundedTo<T>(RandomFloats(22 + nh, s.h, 0.5, 1.5));
      const std::vector<float> dy = RoundedTo<T>(RandomFloats(23 + nh, nh, -1, 1));
      const std::vector<float> dx_start = RoundedTo<T>(RandomFloats(24 + nh, nh, -1, 1));
      std::vector<float> y_unused(nh), rstd(s.n);
      cpu::RmsNormForward(x.data(), g.data(), y_unused.data(), rstd.data(), s.n, s.h, kEps);
      std::vector<float> dx_cpu = dx_start;
      cpu::RmsNormBackwardInput(dy.data(), x.data(), g.data(), rstd.data(), dx_cpu.data(), s.n,
                                s.h, accumulate);

      DeviceBuffer<T> ddy(nh), dx(nh), dg(s.h), ddx(nh);
      DeviceBuffer<float> drstd(s.n);
      for (const Status* st :
           {&ddy.status(), &dx.status(), &dg.status(), &ddx.status(), &drstd.status()}) {
        PIPECOORD_ASSERT_OK(*st);
      }
      PIPECOORD_ASSERT_OK(UploadFloats(ddy, dy));
      PIPECOORD_ASSERT_OK(UploadFloats(dx, x));
      PIPECOORD_ASSERT_OK(UploadFloats(dg, g));
      PIPECOORD_ASSERT_OK(drstd.Upload(rstd));
      if (accumulate) {
        PIPECOORD_ASSERT_OK(UploadFloats(ddx, dx_start));
      } else {
        PIPECOORD_ASSERT_OK(ddx.Poison());
      }
      PIPECOORD_ASSERT_OK(RmsNormBackwardInput(ddy.get(), dx.get(), dg.get(), drstd.get(),
                                               ddx.get(), s.n, s.h, accumulate, this->stream_));
      PIPECOORD_ASSERT_OK(this->Sync());
      std::vector<float> dx_gpu;
      PIPECOORD_ASSERT_OK(DownloadFloats(ddx, &dx_gpu));
      const Comparison c = CompareToCpu(dx_gpu, dx_cpu);
      EXPECT_LT(c.error, ToleranceFor<T>()) << "dx: " << c.Describe();
    }
  }
}

TYPED_TEST(RmsNormTest, BackwardWeightAccumulatesLikeCpuTwin) {
  using T = typename TypeParam::type;
  for (const Shape s : kShapes) {
    SCOPED_TRACE(testing::Message() << DTypeLabel<T>() << " n " << s.n << " h " << s.h);
    const int64_t nh = s.n * s.h;
    const std::vector<float> x = RoundedTo<T>(RandomFloats(31 + nh, nh, -2, 2));
    const std::vector<float> g = RoundedTo<T>(RandomFloats(32 + nh, s.h, 0.5, 1.5));
    const std::vector<float> dy = RoundedTo<T>(RandomFloats(33 + nh, nh, -1, 1));
    // dg accumulates: it starts from random values, not NaN (see the file comment).
    const std::vector<float> dg_start = RandomFloats(34 + nh, s.h, -1, 1);
    std::vector<float> y_unused(nh), rstd(s.n);
    cpu::RmsNormForward(x.data(), g.data(), y_unused.data(), rstd.data(), s.n, s.h, kEps);
    std::vector<float> dg_cpu = dg_start;
    cpu::RmsNormBackwardWeight(dy.data(), x.data(), rstd.data(), dg_cpu.data(), s.n, s.h);

    DeviceBuffer<T> ddy(nh), dx(nh);
    DeviceBuffer<float> drstd(s.n), ddg(s.h);
    for (const Status* st : {&ddy.status(), &dx.status(), &drstd.status(), &ddg.status()}) {
      PIPECOORD_ASSERT_OK(*st);
    }
    PIPECOORD_ASSERT_OK(UploadFloats(ddy, dy));
    PIPECOORD_ASSERT_OK(UploadFloats(dx, x));
    PIPECOORD_ASSERT_OK(drstd.Upload(rstd));
    PIPECOORD_ASSERT_OK(ddg.Upload(dg_start));
    PIPECOORD_ASSERT_OK(RmsNormBackwardWeight(ddy.get(), dx.get(), drstd.get(), ddg.get(), s.n,
                                              s.h, this->stream_));
    PIPECOORD_ASSERT_OK(this->Sync());
    std::vector<float> dg_gpu;
    PIPECOORD_ASSERT_OK(ddg.Download(&dg_gpu));
    const Comparison c = CompareToCpu(dg_gpu, dg_cpu);
    EXPECT_LT(c.error, kFloatTolerance) << "dg (float for both dtypes): " << c.Describe();
  }
}

TEST(RmsNormArgumentsTest, RejectsBadSizesWithoutAGpu) {
  float* none = nullptr;
  EXPECT_EQ(RmsNormForward(none, none, none, none, 2, 0, kEps, nullptr).code(),
            Code::kInvalidArgument);
  EXPECT_EQ(RmsNormForward(none, none, none, none, -1, 4, kEps, nullptr).code(),
            Code::kInvalidArgument);
  EXPECT_EQ(RmsNormForward(none, none, none, none, 2, 4, kEps, nullptr).code(),
            Code::kInvalidArgument);  // null buffers
  EXPECT_TRUE(RmsNormForward(none, none, none, none, 0, 4, kEps, nullptr).ok());  // no rows
}

}  // namespace
}  // namespace pipecoord::kernels::cuda
