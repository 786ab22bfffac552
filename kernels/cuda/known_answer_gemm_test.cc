// kernels/cuda/known_answer_gemm against the CPU probe (kernels/cpu/known_answer_gemm.h) and the
// independent Python reference's constants (kernels/cpu/known_answers_for_tests.h): bit-exact.
//
// Metric: exact; every output's bits and every checksum must equal the CPU's. Sizes include the
// default probe size and odd ones (not multiples of the 16 x 16 tile); outputs are poisoned
// with NaN before the kernel.
#include "kernels/cuda/known_answer_gemm.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <vector>

#include "kernels/cpu/checksum.h"
#include "kernels/cpu/known_answer_gemm.h"
#include "kernels/cpu/known_answers_for_tests.h"
#include "kernels/cuda/gpu_test.h"

namespace pipecoord::kernels::cuda {
namespace {

class KnownAnswerGemmTest : public GpuTest {};

TEST_F(KnownAnswerGemmTest, OutputBitsEqualTheCpuProbe) {
  struct Probe {
    uint64_t seed;
    int n;
  };
  const Probe probes[] = {{7, 1}, {7, 3}, {11, 16}, {cpu::ProbeSeed(3, 5), cpu::kDefaultProbeSize},
                          {5, 33}, {9, 100}};
  for (const Probe p : probes) {
    SCOPED_TRACE(testing::Message() << "seed " << p.seed << " n " << p.n);
    DeviceBuffer<float> d_y(static_cast<size_t>(p.n) * p.n);
    PIPECOORD_ASSERT_OK(d_y.status());
    PIPECOORD_ASSERT_OK(d_y.Poison());
    PIPECOORD_ASSERT_OK(KnownAnswerGemm(p.seed, p.n, d_y.get(), stream_));
    PIPECOORD_ASSERT_OK(Sync());
    std::vector<float> got;
    PIPECOORD_ASSERT_OK(d_y.Download(&got));
    const std::vector<float> want = cpu::KnownAnswerGemm(p.seed, cpu::ProbeShape{p.n, p.n, p.n});
    ASSERT_EQ(got.size(), want.size());
    EXPECT_EQ(std::memcmp(got.data(), want.data(), want.size() * sizeof(float)), 0);

    const Result<uint64_t> hash = KnownAnswerChecksum(p.seed, p.n, stream_);
    ASSERT_TRUE(hash.ok()) << hash.status().ToString();
    EXPECT_EQ(*hash, cpu::HashFloats(want.data(), static_cast<int64_t>(want.size())));
  }
}

TEST_F(KnownAnswerGemmTest, MatchesIndependentPythonReference) {
  DeviceBuffer<float> d_y(9);
  PIPECOORD_ASSERT_OK(d_y.status());
  PIPECOORD_ASSERT_OK(d_y.Poison());
  PIPECOORD_ASSERT_OK(KnownAnswerGemm(7, 3, d_y.get(), stream_));
  PIPECOORD_ASSERT_OK(Sync());
  std::vector<float> y;
  PIPECOORD_ASSERT_OK(d_y.Download(&y));
  for (size_t i = 0; i < y.size(); ++i) {
    uint32_t bits;
    std::memcpy(&bits, &y[i], sizeof bits);
    EXPECT_EQ(bits, cpu::known_answers::kGemmSeed7N3Bits[i]) << i;
  }
  // The probe's sketch of the device's product (square shapes) against the Python reference's.
  for (const cpu::known_answers::GemmChecksum& c : cpu::known_answers::kGemmChecksums) {
    if (c.m != c.k || c.k != c.n) continue;
    const int n = static_cast<int>(c.n);
    DeviceBuffer<float> d_p(static_cast<size_t>(n) * n);
    PIPECOORD_ASSERT_OK(d_p.status());
    PIPECOORD_ASSERT_OK(KnownAnswerGemm(c.seed, n, d_p.get(), stream_));
    PIPECOORD_ASSERT_OK(Sync());
    std::vector<float> p;
    PIPECOORD_ASSERT_OK(d_p.Download(&p));
    EXPECT_EQ(cpu::ProbeChecksum(p.data(), cpu::ProbeShape{n, n, n}, c.seed), c.checksum) << "seed " << c.seed << " n " << n;
  }
}

TEST(KnownAnswerGemmArgumentsTest, RejectsBadSizesWithoutAGpu) {
  EXPECT_EQ(KnownAnswerChecksum(1, 0, nullptr).status().code(), Code::kInvalidArgument);
  EXPECT_EQ(KnownAnswerGemm(1, 8, nullptr, nullptr).code(), Code::kInvalidArgument);
}

}  // namespace
}  // namespace pipecoord::kernels::cuda
