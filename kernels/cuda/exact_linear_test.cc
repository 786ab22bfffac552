// kernels/cuda/exact_linear against cpu::LinearForwardReference (kernels/cpu/linear_reference.h): bit-exact.
//
// Metric: exact; every output's 32 bits must equal the CPU's. Shapes are rectangular and odd
// (not multiples of the 16 x 16 tile); outputs are poisoned with NaN before the kernel.
#include "kernels/cuda/exact_linear.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <vector>

#include "kernels/cpu/linear_reference.h"
#include "kernels/cuda/gpu_test.h"

namespace pipecoord::kernels::cuda {
namespace {

class ExactLinearTest : public GpuTest {};

TEST_F(ExactLinearTest, EqualsCpuLinearForwardBitForBit) {
  const cpu::LinearDims shapes[] = {{1, 1, 1}, {3, 5, 7}, {17, 33, 31}, {40, 300, 65}};
  for (const cpu::LinearDims d : shapes) {
    SCOPED_TRACE(testing::Message() << "n " << d.n << " in " << d.in << " out " << d.out);
    const std::vector<float> x = RandomFloats(151 + d.in, d.n * d.in, -3, 3);
    const std::vector<float> w = RandomFloats(152 + d.in, d.out * d.in, -1, 1);
    std::vector<float> want(d.n * d.out);
    cpu::LinearForwardReference(x.data(), w.data(), want.data(), d);

    DeviceBuffer<float> d_x(d.n * d.in), d_w(d.out * d.in), d_y(d.n * d.out);
    for (const Status* st : {&d_x.status(), &d_w.status(), &d_y.status()}) {
      PIPECOORD_ASSERT_OK(*st);
    }
    PIPECOORD_ASSERT_OK(d_x.Upload(x));
    PIPECOORD_ASSERT_OK(d_w.Upload(w));
    PIPECOORD_ASSERT_OK(d_y.Poison());
    PIPECOORD_ASSERT_OK(
        ExactLinearForward(d_x.get(), d_w.get(), d_y.get(), d.n, d.in, d.out, stream_));
    PIPECOORD_ASSERT_OK(Sync());
    std::vector<float> got;
    PIPECOORD_ASSERT_OK(d_y.Download(&got));
    ASSERT_EQ(got.size(), want.size());
    for (size_t i = 0; i < want.size(); ++i) {
      uint32_t a, b;
      std::memcpy(&a, &got[i], 4);
      std::memcpy(&b, &want[i], 4);
      ASSERT_EQ(a, b) << "element " << i << ": gpu " << got[i] << ", cpu " << want[i];
    }
  }
}

}  // namespace
}  // namespace pipecoord::kernels::cuda
