#include "kernels/cpu/known_answer_gemm.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <thread>

#include "kernels/cpu/known_answers_for_tests.h"
#include "kernels/cpu/linear.h"
#include "kernels/cpu/rng.h"

namespace pipecoord::kernels::cpu {
namespace {

std::vector<float> TrainingGemm(uint64_t seed, const ProbeShape& s) {
  const ProbeInputs in = MakeProbeInputs(seed, s);
  std::vector<float> y(s.m * s.n);
  LinearForward<float>(in.x.data(), in.w.data(), y.data(), LinearDims{s.m, s.k, s.n});
  return y;
}

TEST(KnownAnswerGemm, OneByOneIsTheProductOfTheTwoIntegerDraws) {
  Rng rng(7);
  const int x = static_cast<int>(rng.Below(17)) - 8, w = static_cast<int>(rng.Below(17)) - 8;
  const std::vector<float> y = KnownAnswerGemm(7, {1, 1, 1});
  ASSERT_EQ(y.size(), 1u);
  EXPECT_EQ(y[0], static_cast<float>(x * w));
}

// The point of integer inputs: the training kernel (OpenBLAS's sgemm, its own blocking and
// order) gives the reference's bits exactly, at the model's shapes, and the sketch the coordinator
// computes in O(mk + nk) equals the one taken of the whole product.
TEST(KnownAnswerGemm, TheTrainingGemmGivesTheKnownAnswerAtModelShapes) {
  for (const ProbeShape s : {ProbeShape{1, 1, 1}, ProbeShape{7, 7, 7}, ProbeShape{128, 64, 192},
                             ProbeShape{128, 64, 128}, ProbeShape{257, 100, 33}, ProbeShape{4, 2048, 8}}) {
    const uint64_t seed = ProbeSeed(5, static_cast<int>(s.m));
    const ProbeInputs in = MakeProbeInputs(seed, s);
    for (float v : in.x) ASSERT_TRUE(v == static_cast<int>(v) && v >= -8 && v <= 8) << v;
    const std::vector<float> y = TrainingGemm(seed, s);
    const std::vector<float> ref = KnownAnswerGemm(seed, s);
    ASSERT_EQ(0, std::memcmp(y.data(), ref.data(), y.size() * sizeof(float))) << s.ToString();
    EXPECT_EQ(ProbeChecksum(y.data(), s, seed), KnownAnswerChecksum(seed, s)) << s.ToString();
  }
}

// The corrupt fault lives in the training GEMM: on this thread only, and every call while on.
TEST(KnownAnswerGemm, ACorruptedGemmMissesTheKnownAnswerOnItsThreadOnly) {
  const ProbeShape s{64, 32, 96};
  const uint64_t seed = ProbeSeed(9, 1);
  auto run = [&] {
    const std::vector<float> y = TrainingGemm(seed, s);
    return ProbeChecksum(y.data(), s, seed);
  };
  const uint64_t known = KnownAnswerChecksum(seed, s);
  SetGemmCorruption(true);
  EXPECT_NE(run(), known);
  EXPECT_NE(run(), known);  // every call
  uint64_t other = 0;
  std::thread([&] { other = run(); }).join();
  EXPECT_EQ(other, known);  // another thread's GEMM is sound
  SetGemmCorruption(false);
  EXPECT_EQ(run(), known);
}

// The flip fault is a transient: the next GEMM on this thread only, once.
TEST(KnownAnswerGemm, AFlipCorruptsTheNextGemmOnly) {
  const ProbeShape s{16, 8, 24};
  const uint64_t seed = ProbeSeed(9, 2);
  auto run = [&] {
    const std::vector<float> y = TrainingGemm(seed, s);
    return ProbeChecksum(y.data(), s, seed);
  };
  const uint64_t known = KnownAnswerChecksum(seed, s);
  CorruptNextGemm();
  EXPECT_NE(run(), known);
  EXPECT_EQ(run(), known);
}

// The coordinator's expected answer and a worker's report must agree on every machine: the
// values come from known_answers.py, which sketches the whole product in Python integers.
TEST(KnownAnswerGemm, MatchesIndependentPythonReference) {
  EXPECT_EQ(ProbeSeed(3, 5), known_answers::kProbeSeed3Step5);
  EXPECT_EQ(ProbeSeed(3, 6), known_answers::kProbeSeed3Step6);
  EXPECT_EQ(ProbeSeed(0, 0), known_answers::kProbeSeed0Step0);
  const std::vector<float> y = KnownAnswerGemm(7, {3, 3, 3});
  ASSERT_EQ(y.size(), 9u);
  for (size_t i = 0; i < y.size(); ++i) {
    uint32_t bits;
    std::memcpy(&bits, &y[i], sizeof bits);
    EXPECT_EQ(bits, known_answers::kGemmSeed7N3Bits[i]) << i;
  }
  for (const known_answers::GemmChecksum& c : known_answers::kGemmChecksums) {
    const ProbeShape s{c.m, c.k, c.n};
    EXPECT_EQ(KnownAnswerChecksum(c.seed, s), c.checksum) << "seed " << c.seed << " " << s.ToString();
    const std::vector<float> full = KnownAnswerGemm(c.seed, s);
    EXPECT_EQ(ProbeChecksum(full.data(), s, c.seed), c.checksum) << "seed " << c.seed << " " << s.ToString();
  }
}

TEST(KnownAnswerGemm, SameSeedSameBitsOtherSeedOrShapeOtherBits) {
  const ProbeShape sq{32, 32, 32};
  EXPECT_EQ(KnownAnswerChecksum(ProbeSeed(3, 5), sq), KnownAnswerChecksum(known_answers::kProbeSeed3Step5, sq));
  EXPECT_NE(KnownAnswerChecksum(ProbeSeed(3, 5), sq), KnownAnswerChecksum(ProbeSeed(3, 6), sq));
  EXPECT_NE(KnownAnswerChecksum(ProbeSeed(3, 5), sq), KnownAnswerChecksum(ProbeSeed(3, 5), {32, 32, 31}));
  EXPECT_NE(ProbeSeed(3, 5), ProbeSeed(4, 5));
}

// Every single wrong element is caught: each changed by one ulp (an integer's next float), one
// bit 20 flip (the corrupt fault's), to a non-integer, to NaN and to infinity.
TEST(KnownAnswerGemm, EveryWrongElementChangesTheChecksum) {
  const ProbeShape s{12, 20, 9};
  const uint64_t seed = 11;
  const std::vector<float> clean = KnownAnswerGemm(seed, s);
  const uint64_t known = KnownAnswerChecksum(seed, s);
  ASSERT_EQ(ProbeChecksum(clean.data(), s, seed), known);
  for (size_t i = 0; i < clean.size(); ++i) {
    for (int how = 0; how < 5; ++how) {
      std::vector<float> y = clean;
      uint32_t bits;
      std::memcpy(&bits, &y[i], 4);
      switch (how) {
        case 0: y[i] = std::nextafter(y[i], 1e9f); break;
        case 1: bits ^= 1u << 20; std::memcpy(&y[i], &bits, 4); break;
        case 2: y[i] += 0.5f; break;
        case 3: y[i] = std::numeric_limits<float>::quiet_NaN(); break;
        case 4: y[i] = std::numeric_limits<float>::infinity(); break;
      }
      EXPECT_NE(ProbeChecksum(y.data(), s, seed), known) << "element " << i << " change " << how;
    }
  }
}

TEST(KnownAnswerGemm, ShapeLimits) {
  EXPECT_TRUE(ValidProbeShape({128, 64, 192}));
  EXPECT_TRUE(ValidProbeShape({1, kMaxProbeInner, 1}));
  EXPECT_FALSE(ValidProbeShape({1, kMaxProbeInner + 1, 1}));
  EXPECT_FALSE(ValidProbeShape({0, 1, 1}));
  EXPECT_FALSE(ValidProbeShape({int64_t{1} << 20, 1 << 10, 1}));  // X over the element limit
}

}  // namespace
}  // namespace pipecoord::kernels::cpu
