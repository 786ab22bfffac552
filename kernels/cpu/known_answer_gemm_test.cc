#include "kernels/cpu/known_answer_gemm.h"

#include <gtest/gtest.h>

#include <cstring>

#include "kernels/cpu/checksum.h"
#include "kernels/cpu/known_answers_for_tests.h"
#include "kernels/cpu/rng.h"

namespace pipecoord::kernels::cpu {
namespace {

TEST(KnownAnswerGemm, OneByOneIsTheProductOfTheTwoDraws) {
  Rng rng(7);
  float xw[2];
  rng.FillUniform(xw, 2, -1.0, 1.0);
  const std::vector<float> y = KnownAnswerGemm(7, 1);
  ASSERT_EQ(y.size(), 1u);
  EXPECT_EQ(y[0], static_cast<float>(static_cast<double>(xw[0]) * xw[1]));
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
