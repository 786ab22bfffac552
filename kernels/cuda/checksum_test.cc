// kernels/cuda/checksum against its CPU twin (kernels/cpu/checksum.h): bit-exact equality.
//
// Metric: exact. The hash must equal cpu::HashFloats; OrderedSum's double must have the same
// 64 bits as cpu::OrderedSum's. The values span 2^-30 to 2^30 in magnitude (with -0.0,
// subnormals and both signs), so double sums round often and a different summation order would
// show. Sizes cover n = 0, partial element blocks, partial tree stages and three tree stages
// (more than 256^3 elements); one case reads from an offset (unaligned) device pointer.
#include "kernels/cuda/checksum.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <vector>

#include "kernels/cpu/checksum.h"
#include "kernels/cpu/rng.h"
#include "kernels/cuda/gpu_test.h"

namespace pipecoord::kernels::cuda {
namespace {

constexpr int64_t kSizes[] = {0,     1,     255,   256,   257,    1000,
                              65535, 65536, 65537, 65536 * 3 + 17, 256LL * 256 * 256 + 1000};

std::vector<float> WideRangeFloats(uint64_t seed, int64_t n) {
  cpu::Rng rng(seed);
  std::vector<float> v(static_cast<size_t>(n));
  for (float& x : v) {
    const double mantissa = 2.0 * rng.UniformDouble() - 1.0;
    const int exponent = static_cast<int>(rng.Below(61)) - 30;
    x = static_cast<float>(std::ldexp(mantissa, exponent));
  }
  if (n > 3) {
    v[1] = -0.0f;
    v[2] = std::numeric_limits<float>::denorm_min();
    v[3] = -3.0f * std::numeric_limits<float>::denorm_min();
  }
  return v;
}

uint64_t Bits(double d) {
  uint64_t b;
  std::memcpy(&b, &d, sizeof b);
  return b;
}

class ChecksumTest : public GpuTest {};

TEST_F(ChecksumTest, HashAndOrderedSumEqualTheCpuBitForBit) {
  for (const int64_t n : kSizes) {
    SCOPED_TRACE(testing::Message() << "n " << n);
    const std::vector<float> x = WideRangeFloats(131 + n, n);
    DeviceBuffer<float> d_x(n);
    DeviceBuffer<uint64_t> d_hash(1);
    DeviceBuffer<double> d_sum(1);
    for (const Status* st : {&d_x.status(), &d_hash.status(), &d_sum.status()}) {
      PIPECOORD_ASSERT_OK(*st);
    }
    PIPECOORD_ASSERT_OK(d_x.Upload(x));
    PIPECOORD_ASSERT_OK(d_hash.Poison());
    PIPECOORD_ASSERT_OK(d_sum.Poison());
    PIPECOORD_ASSERT_OK(HashFloats(d_x.get(), n, d_hash.get(), stream_));
    PIPECOORD_ASSERT_OK(OrderedSum(d_x.get(), n, d_sum.get(), stream_));
    PIPECOORD_ASSERT_OK(Sync());
    std::vector<uint64_t> hash;
    std::vector<double> sum;
    PIPECOORD_ASSERT_OK(d_hash.Download(&hash));
    PIPECOORD_ASSERT_OK(d_sum.Download(&sum));
    const uint64_t want_hash = cpu::HashFloats(x.data(), n);
    const double want_sum = cpu::OrderedSum(x.data(), n);
    EXPECT_EQ(hash[0], want_hash) << "HashFloats: exact equality required";
    EXPECT_EQ(Bits(sum[0]), Bits(want_sum))
        << "OrderedSum: exact equality required; gpu " << sum[0] << ", cpu " << want_sum;
  }
}

TEST_F(ChecksumTest, OnHostVariantsAndOffsetPointersAgree) {
  const int64_t n = 70001;
  const std::vector<float> x = WideRangeFloats(141, n);
  DeviceBuffer<float> d_x(n);
  PIPECOORD_ASSERT_OK(d_x.status());
  PIPECOORD_ASSERT_OK(d_x.Upload(x));
  for (const int64_t offset : {0, 3}) {
    SCOPED_TRACE(testing::Message() << "offset " << offset);
    const Result<uint64_t> hash = HashFloatsOnHost(d_x.get() + offset, n - offset, stream_);
    ASSERT_TRUE(hash.ok()) << hash.status().ToString();
    EXPECT_EQ(*hash, cpu::HashFloats(x.data() + offset, n - offset));
    const Result<double> sum = OrderedSumOnHost(d_x.get() + offset, n - offset, stream_);
    ASSERT_TRUE(sum.ok()) << sum.status().ToString();
    EXPECT_EQ(Bits(*sum), Bits(cpu::OrderedSum(x.data() + offset, n - offset)));
  }
}

TEST(ChecksumArgumentsTest, RejectsNullOutputsWithoutAGpu) {
  EXPECT_EQ(HashFloats(nullptr, 4, nullptr, nullptr).code(), Code::kInvalidArgument);
  EXPECT_EQ(OrderedSum(nullptr, 4, nullptr, nullptr).code(), Code::kInvalidArgument);
  EXPECT_EQ(OrderedSum(nullptr, -1, nullptr, nullptr).code(), Code::kInvalidArgument);
}

}  // namespace
}  // namespace pipecoord::kernels::cuda
