// GemmContext's F, B and W against kernels/cpu/linear (run in double on the very values the GPU
// reads: bf16 inputs are rounded first), outputs NaN-poisoned before each call. Metric:
// max|gpu - cpu| / max|cpu| (normwise_error.h) below 1e-4 for float outputs, 2e-2 for bf16.
// Sizes include odd n, in and out (no multiple of 8), n = 1 and in = 1. Skips without a GPU.
#include "kernels/cuda/gemm.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "kernels/cpu/linear.h"
#include "kernels/cuda/gpu_test.h"
#include "kernels/cuda/normwise_error.h"

namespace pipecoord::kernels::cuda {
namespace {

const cpu::LinearDims kShapes[] = {
    {64, 96, 80}, {37, 53, 29}, {1, 17, 5}, {130, 257, 63}, {9, 1, 3}, {200, 24, 8},
};

std::string Name(const cpu::LinearDims& d) {
  return "n=" + std::to_string(d.n) + " in=" + std::to_string(d.in) +
         " out=" + std::to_string(d.out);
}

std::vector<double> ToDoubles(const std::vector<float>& v) { return {v.begin(), v.end()}; }

// p + count elements (__nv_bfloat16 is an incomplete type in g++-built code: step by its bits).
template <typename T>
T* Offset(T* p, size_t count) {
  return reinterpret_cast<T*>(reinterpret_cast<HostStorageT<T>*>(p) + count);
}

template <typename Case>
class GemmTest : public GpuTest {
 protected:
  using T = typename Case::type;

  void SetUp() override {
    GpuTest::SetUp();
    if (IsSkipped() || HasFatalFailure()) return;
    auto context = GemmContext::Create(GemmOptions{.stream = stream_});
    ASSERT_TRUE(context.ok()) << context.status().ToString();
    context_ = std::move(context).value();
  }
  void TearDown() override {
    context_.reset();  // before the fixture destroys the stream the context runs on
    GpuTest::TearDown();
  }

  // Inputs as T holds them, seeded per tensor so a failure can be replayed.
  static std::vector<float> Input(uint64_t seed, int64_t count) {
    return RoundedTo<T>(RandomFloats(seed, count, -1.0, 1.0));
  }

  std::unique_ptr<GemmContext> context_;
};

TYPED_TEST_SUITE(GemmTest, ActivationTypes, DTypeNames);

TYPED_TEST(GemmTest, ForwardMatchesCpu) {
  using T = typename TypeParam::type;
  for (const cpu::LinearDims& d : kShapes) {
    SCOPED_TRACE(Name(d));
    const auto x = this->Input(1, d.n * d.in), w = this->Input(2, d.out * d.in);
    DeviceBuffer<T> x_dev(x.size()), w_dev(w.size()), y_dev(static_cast<size_t>(d.n * d.out));
    PIPECOORD_ASSERT_OK(y_dev.status());
    PIPECOORD_ASSERT_OK(UploadFloats(x_dev, x));
    PIPECOORD_ASSERT_OK(UploadFloats(w_dev, w));
    PIPECOORD_ASSERT_OK(y_dev.Poison());
    PIPECOORD_ASSERT_OK(this->context_->Forward(x_dev.get(), w_dev.get(), y_dev.get(), d));
    PIPECOORD_ASSERT_OK(this->Sync());
    std::vector<float> got;
    PIPECOORD_ASSERT_OK(DownloadFloats(y_dev, &got));

    std::vector<double> want(got.size());
    cpu::LinearForward(ToDoubles(x).data(), ToDoubles(w).data(), want.data(), d);
    const NormwiseError e = CompareNormwise(got, want);
    EXPECT_LT(e.error, ToleranceFor<T>()) << e.Describe();
  }
}

TYPED_TEST(GemmTest, BackwardInputOverwritesAndAccumulatesLikeCpu) {
  using T = typename TypeParam::type;
  for (const cpu::LinearDims& d : kShapes) {
    for (bool accumulate : {false, true}) {
      SCOPED_TRACE(Name(d) + (accumulate ? " accumulate" : " overwrite"));
      const auto dy = this->Input(3, d.n * d.out), w = this->Input(4, d.out * d.in);
      const auto dx_before = this->Input(5, d.n * d.in);
      DeviceBuffer<T> dy_dev(dy.size()), w_dev(w.size()), dx_dev(dx_before.size());
      PIPECOORD_ASSERT_OK(dx_dev.status());
      PIPECOORD_ASSERT_OK(UploadFloats(dy_dev, dy));
      PIPECOORD_ASSERT_OK(UploadFloats(w_dev, w));
      PIPECOORD_ASSERT_OK(accumulate ? UploadFloats(dx_dev, dx_before) : dx_dev.Poison());
      PIPECOORD_ASSERT_OK(
          this->context_->BackwardInput(dy_dev.get(), w_dev.get(), dx_dev.get(), d, accumulate));
      PIPECOORD_ASSERT_OK(this->Sync());
      std::vector<float> got;
      PIPECOORD_ASSERT_OK(DownloadFloats(dx_dev, &got));

      std::vector<double> want = ToDoubles(dx_before);
      cpu::LinearBackwardInput(ToDoubles(dy).data(), ToDoubles(w).data(), want.data(), d,
                               accumulate);
      const NormwiseError e = CompareNormwise(got, want);
      EXPECT_LT(e.error, ToleranceFor<T>()) << e.Describe();
    }
  }
}

// dw is fp32 for both input dtypes: the fp32 threshold applies to both.
TYPED_TEST(GemmTest, BackwardWeightAccumulatesInFloatLikeCpu) {
  using T = typename TypeParam::type;
  for (const cpu::LinearDims& d : kShapes) {
    SCOPED_TRACE(Name(d));
    const auto dy = this->Input(6, d.n * d.out), x = this->Input(7, d.n * d.in);
    const auto dw_before = RandomFloats(8, d.out * d.in, -1.0, 1.0);
    DeviceBuffer<T> dy_dev(dy.size()), x_dev(x.size());
    DeviceBuffer<float> dw_dev(dw_before.size());
    PIPECOORD_ASSERT_OK(dw_dev.status());
    PIPECOORD_ASSERT_OK(UploadFloats(dy_dev, dy));
    PIPECOORD_ASSERT_OK(UploadFloats(x_dev, x));
    PIPECOORD_ASSERT_OK(dw_dev.Upload(dw_before));
    PIPECOORD_ASSERT_OK(this->context_->BackwardWeight(dy_dev.get(), x_dev.get(), dw_dev.get(), d));
    PIPECOORD_ASSERT_OK(this->Sync());
    std::vector<float> got;
    PIPECOORD_ASSERT_OK(dw_dev.Download(&got));

    std::vector<double> want = ToDoubles(dw_before);
    cpu::LinearBackwardWeight(ToDoubles(dy).data(), ToDoubles(x).data(), want.data(), d);
    const NormwiseError e = CompareNormwise(got, want);
    EXPECT_LT(e.error, kFloatTolerance) << e.Describe();
  }
}

// Buffers one element past an allocation's start (2- or 4-byte aligned, not 256): the plan must
// be made for that alignment, not for cudaMalloc's.
TYPED_TEST(GemmTest, ForwardOnBuffersAlignedOnlyToTheirElement) {
  using T = typename TypeParam::type;
  const cpu::LinearDims d{33, 40, 24};
  const auto x = this->Input(9, d.n * d.in), w = this->Input(10, d.out * d.in);
  DeviceBuffer<T> x_dev(x.size() + 1), w_dev(w.size() + 1),
      y_dev(static_cast<size_t>(d.n * d.out) + 1);
  PIPECOORD_ASSERT_OK(y_dev.status());
  std::vector<float> x_shifted = x, w_shifted = w;
  x_shifted.insert(x_shifted.begin(), 0.0f);
  w_shifted.insert(w_shifted.begin(), 0.0f);
  PIPECOORD_ASSERT_OK(UploadFloats(x_dev, x_shifted));
  PIPECOORD_ASSERT_OK(UploadFloats(w_dev, w_shifted));
  PIPECOORD_ASSERT_OK(y_dev.Poison());
  PIPECOORD_ASSERT_OK(this->context_->Forward(Offset(x_dev.get(), 1), Offset(w_dev.get(), 1),
                                              Offset(y_dev.get(), 1), d));
  PIPECOORD_ASSERT_OK(this->Sync());
  std::vector<float> got;
  PIPECOORD_ASSERT_OK(DownloadFloats(y_dev, &got));
  got.erase(got.begin());  // the element before y, never written

  std::vector<double> want(got.size());
  cpu::LinearForward(ToDoubles(x).data(), ToDoubles(w).data(), want.data(), d);
  const NormwiseError e = CompareNormwise(got, want);
  EXPECT_LT(e.error, ToleranceFor<T>()) << e.Describe();
}

// A repeated shape reuses its descriptors; a new shape or step adds one plan.
TYPED_TEST(GemmTest, RepeatedShapesReuseTheirPlan) {
  using T = typename TypeParam::type;
  const cpu::LinearDims d{16, 24, 8};
  DeviceBuffer<T> x_dev(static_cast<size_t>(d.n * d.in)), w_dev(static_cast<size_t>(d.out * d.in)),
      y_dev(static_cast<size_t>(d.n * d.out));
  PIPECOORD_ASSERT_OK(y_dev.status());
  PIPECOORD_ASSERT_OK(UploadFloats(x_dev, this->Input(11, d.n * d.in)));
  PIPECOORD_ASSERT_OK(UploadFloats(w_dev, this->Input(12, d.out * d.in)));
  EXPECT_EQ(this->context_->cached_plans(), 0u);
  for (int i = 0; i < 3; ++i) {
    PIPECOORD_ASSERT_OK(this->context_->Forward(x_dev.get(), w_dev.get(), y_dev.get(), d));
  }
  EXPECT_EQ(this->context_->cached_plans(), 1u);
  PIPECOORD_ASSERT_OK(
      this->context_->BackwardInput(y_dev.get(), w_dev.get(), x_dev.get(), d, false));
  EXPECT_EQ(this->context_->cached_plans(), 2u);
  PIPECOORD_ASSERT_OK(this->Sync());
}

TYPED_TEST(GemmTest, RefusesEmptyDimensionsAndNullBuffers) {
  using T = typename TypeParam::type;
  DeviceBuffer<T> buf(64);
  PIPECOORD_ASSERT_OK(buf.status());
  const Status zero = this->context_->Forward(buf.get(), Offset(buf.get(), 16),
                                              Offset(buf.get(), 32), cpu::LinearDims{0, 4, 4});
  EXPECT_EQ(zero.code(), Code::kInvalidArgument) << zero.ToString();
  const Status null = this->context_->Forward(static_cast<const T*>(nullptr), buf.get(),
                                              Offset(buf.get(), 32), cpu::LinearDims{2, 4, 4});
  EXPECT_EQ(null.code(), Code::kInvalidArgument) << null.ToString();
  EXPECT_EQ(this->context_->cached_plans(), 0u);
}

}  // namespace
}  // namespace pipecoord::kernels::cuda
