// kernels/cuda/swiglu against its CPU twin (kernels/cpu/swiglu.h), f32 and bf16.
//
// Metric (compare.h): max over elements of |gpu - cpu| / max(|cpu|, 1e-6 + 1e-3 max|cpu|);
// thresholds 1e-4 for float outputs, 2e-2 for bf16 outputs. For bf16, the inputs are rounded to
// bf16 first and the CPU twin runs in fp32 on the rounded values. Outputs are poisoned with NaN
// before the kernel. gate spans [-12, 12], past silu'(u)'s zero at u = -1.28 and into the
// saturated tails; the sizes are not multiples of the block size.
#include "kernels/cuda/swiglu.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "kernels/cpu/swiglu.h"
#include "kernels/cuda/compare.h"
#include "kernels/cuda/gpu_test.h"

namespace pipecoord::kernels::cuda {
namespace {

constexpr int64_t kSizes[] = {1, 7, 1000, 65537, 300001};

template <typename Case>
class SwiGluTest : public GpuTest {};
TYPED_TEST_SUITE(SwiGluTest, ActivationTypes, DTypeNames);

TYPED_TEST(SwiGluTest, ForwardMatchesCpuTwin) {
  using T = typename TypeParam::type;
  for (const int64_t n : kSizes) {
    SCOPED_TRACE(testing::Message() << DTypeLabel<T>() << " n " << n);
    const std::vector<float> gate = RoundedTo<T>(RandomFloats(51 + n, n, -12, 12));
    const std::vector<float> up = RoundedTo<T>(RandomFloats(52 + n, n, -2, 2));
    std::vector<float> z_cpu(n);
    cpu::SwiGluForward(gate.data(), up.data(), z_cpu.data(), n);

    DeviceBuffer<T> dgate(n), dup(n), dz(n);
    for (const Status* st : {&dgate.status(), &dup.status(), &dz.status()}) {
      PIPECOORD_ASSERT_OK(*st);
    }
    PIPECOORD_ASSERT_OK(UploadFloats(dgate, gate));
    PIPECOORD_ASSERT_OK(UploadFloats(dup, up));
    PIPECOORD_ASSERT_OK(dz.Poison());
    PIPECOORD_ASSERT_OK(SwiGluForward(dgate.get(), dup.get(), dz.get(), n, this->stream_));
    PIPECOORD_ASSERT_OK(this->Sync());
    std::vector<float> z_gpu;
    PIPECOORD_ASSERT_OK(DownloadFloats(dz, &z_gpu));
    const Comparison c = CompareToCpu(z_gpu, z_cpu);
    EXPECT_LT(c.error, ToleranceFor<T>()) << "z: " << c.Describe();
  }
}

TYPED_TEST(SwiGluTest, BackwardMatchesCpuTwin) {
  using T = typename TypeParam::type;
  for (const int64_t n : kSizes) {
    SCOPED_TRACE(testing::Message() << DTypeLabel<T>() << " n " << n);
    const std::vector<float> gate = RoundedTo<T>(RandomFloats(61 + n, n, -12, 12));
    const std::vector<float> up = RoundedTo<T>(RandomFloats(62 + n, n, -2, 2));
    const std::vector<float> dz = RoundedTo<T>(RandomFloats(63 + n, n, -1, 1));
    std::vector<float> dgate_cpu(n), dup_cpu(n);
    cpu::SwiGluBackward(dz.data(), gate.data(), up.data(), dgate_cpu.data(), dup_cpu.data(), n);

    DeviceBuffer<T> d_dz(n), d_gate(n), d_up(n), d_dgate(n), d_dup(n);
    for (const Status* st :
         {&d_dz.status(), &d_gate.status(), &d_up.status(), &d_dgate.status(), &d_dup.status()}) {
      PIPECOORD_ASSERT_OK(*st);
    }
    PIPECOORD_ASSERT_OK(UploadFloats(d_dz, dz));
    PIPECOORD_ASSERT_OK(UploadFloats(d_gate, gate));
    PIPECOORD_ASSERT_OK(UploadFloats(d_up, up));
    PIPECOORD_ASSERT_OK(d_dgate.Poison());
    PIPECOORD_ASSERT_OK(d_dup.Poison());
    PIPECOORD_ASSERT_OK(SwiGluBackward(d_dz.get(), d_gate.get(), d_up.get(), d_dgate.get(),
                                       d_dup.get(), n, this->stream_));
    PIPECOORD_ASSERT_OK(this->Sync());
    std::vector<float> dgate_gpu, dup_gpu;
    PIPECOORD_ASSERT_OK(DownloadFloats(d_dgate, &dgate_gpu));
    PIPECOORD_ASSERT_OK(DownloadFloats(d_dup, &dup_gpu));
    const Comparison cg = CompareToCpu(dgate_gpu, dgate_cpu);
    EXPECT_LT(cg.error, ToleranceFor<T>()) << "dgate: " << cg.Describe();
    const Comparison cu = CompareToCpu(dup_gpu, dup_cpu);
    EXPECT_LT(cu.error, ToleranceFor<T>()) << "dup: " << cu.Describe();
  }
}

TEST(SwiGluArgumentsTest, RejectsNullBuffersWithoutAGpu) {
  float* none = nullptr;
  EXPECT_EQ(SwiGluForward(none, none, none, 3, nullptr).code(), Code::kInvalidArgument);
  EXPECT_EQ(SwiGluBackward(none, none, none, none, none, -1, nullptr).code(),
            Code::kInvalidArgument);
  EXPECT_TRUE(SwiGluForward(none, none, none, 0, nullptr).ok());
}

}  // namespace
}  // namespace pipecoord::kernels::cuda
