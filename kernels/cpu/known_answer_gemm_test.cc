#include "kernels/cpu/known_answer_gemm.h"

#include <gtest/gtest.h>

#include <cstring>
#include <thread>

#include "kernels/cpu/checksum.h"
#include "kernels/cpu/known_answers_for_tests.h"
#include "kernels/cpu/linear.h"
#include "kernels/cpu/rng.h"

namespace pipecoord::kernels::cpu {
namespace {

TEST(KnownAnswerGemm, OneByOneIsTheProductOfTheTwoIntegerDraws) {
  Rng rng(7);
  const int x = static_cast<int>(rng.Below(17)) - 8, w = static_cast<int>(rng.Below(17)) - 8;
  const std::vector<float> y = KnownAnswerGemm(7, 1);
  ASSERT_EQ(y.size(), 1u);
  EXPECT_EQ(y[0], static_cast<float>(x * w));
}

// The point of integer inputs: the training kernel (OpenBLAS's sgemm, its own blocking and
// order) gives the reference's bits exactly, at sizes where random fp32 inputs would not.
TEST(KnownAnswerGemm, TheTrainingGemmGivesTheKnownAnswerBitForBit) {
  for (const int n : {1, 7, 32, 100, 257}) {
    const ProbeInputs in = MakeProbeInputs(ProbeSeed(5, n), n);
    for (float v : in.x) ASSERT_TRUE(v == static_cast<int>(v) && v >= -8 && v <= 8) << v;
    std::vector<float> y(static_cast<size_t>(n) * n);
    LinearForward<float>(in.x.data(), in.w.data(), y.data(), LinearDims{n, n, n});
    EXPECT_EQ(HashFloats(y.data(), static_cast<int64_t>(y.size())), KnownAnswerChecksum(ProbeSeed(5, n), n)) << n;
  }
}

// The corrupt fault lives in the training GEMM: on this thread only, and every call while on.
TEST(KnownAnswerGemm, ACorruptedGemmMissesTheKnownAnswerOnItsThreadOnly) {
  const int n = 32;
  const ProbeInputs in = MakeProbeInputs(ProbeSeed(9, 1), n);
  auto run = [&] {
    std::vector<float> y(static_cast<size_t>(n) * n);
    LinearForward<float>(in.x.data(), in.w.data(), y.data(), LinearDims{n, n, n});
    return HashFloats(y.data(), static_cast<int64_t>(y.size()));
  };
  const uint64_t known = KnownAnswerChecksum(ProbeSeed(9, 1), n);
  SetGemmCorruption(true);
  EXPECT_NE(run(), known);
  EXPECT_NE(run(), known);  // every call
  uint64_t other = 0;
  std::thread([&] { other = run(); }).join();
  EXPECT_EQ(other, known);  // another thread's GEMM is sound
  SetGemmCorruption(false);
  EXPECT_EQ(run(), known);
}

// The coordinator's expected answer and a worker's report must agree on every machine, so the
// values are pinned to constants computed independently by known_answers.py.
TEST(KnownAnswerGemm, MatchesIndependentPythonReference) {
  EXPECT_EQ(ProbeSeed(3, 5), known_answers::kProbeSeed3Step5);
  EXPECT_EQ(ProbeSeed(3, 6), known_answers::kProbeSeed3Step6);
  EXPECT_EQ(ProbeSeed(0, 0), known_answers::kProbeSeed0Step0);
  const std::vector<float> y = KnownAnswerGemm(7, 3);
  ASSERT_EQ(y.size(), 9u);
  for (size_t i = 0; i < y.size(); ++i) {
    uint32_t bits;
    std::memcpy(&bits, &y[i], sizeof bits);
    EXPECT_EQ(bits, known_answers::kGemmSeed7N3Bits[i]) << i;
  }
  for (const known_answers::GemmChecksum& c : known_answers::kGemmChecksums) {
    EXPECT_EQ(KnownAnswerChecksum(c.seed, c.n), c.checksum) << "seed " << c.seed << " n " << c.n;
  }
}

TEST(KnownAnswerGemm, SameSeedSameBitsOtherSeedOtherBits) {
  EXPECT_EQ(KnownAnswerChecksum(ProbeSeed(3, 5), kDefaultProbeSize),
            KnownAnswerChecksum(known_answers::kProbeSeed3Step5, 32));
  EXPECT_NE(KnownAnswerChecksum(ProbeSeed(3, 5), 32), KnownAnswerChecksum(ProbeSeed(3, 6), 32));
  EXPECT_NE(ProbeSeed(3, 5), ProbeSeed(4, 5));
}

TEST(KnownAnswerGemm, OneFlippedBitChangesTheChecksum) {
  std::vector<float> y = KnownAnswerGemm(11, 16);
  const uint64_t clean = HashFloats(y.data(), static_cast<int64_t>(y.size()));
  EXPECT_EQ(clean, KnownAnswerChecksum(11, 16));
  uint32_t bits;
  std::memcpy(&bits, &y[100], 4);
  bits ^= 1u;  // the lowest mantissa bit: one ulp
  std::memcpy(&y[100], &bits, 4);
  EXPECT_NE(HashFloats(y.data(), static_cast<int64_t>(y.size())), clean);
}

}  // namespace
}  // namespace pipecoord::kernels::cpu
