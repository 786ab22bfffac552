// The cross-entropy kernels themselves (cross_entropy_kernels.h, the code nvcc builds) run on the
// CPU under cuda_emulation.h, launched as cross_entropy.cu launches them, against the CPU twin
// (kernels/cpu/cross_entropy.h).
//
// Metric (compare.h): max over elements of |gpu - cpu| / max(|cpu|, 1e-6 + 1e-3 max|cpu|);
// thresholds 1e-4 for the losses (float and double for both dtypes) and float dlogits, 2e-2 for
// bf16 dlogits; logits rounded to bf16 for the CPU twin in the bf16 case. Outputs start as NaN.
// One case is confident (p_target near 1), one runs in place, one has a bad target.
#include "kernels/cuda/cuda_emulation.h"
// The emulation first, then the kernels it runs.
#include "kernels/cuda/cross_entropy_kernels.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <vector>

#include "kernels/cpu/cross_entropy.h"
#include "kernels/cpu/rng.h"
#include "kernels/cuda/compare.h"

namespace pipecoord::kernels::cuda {
namespace {

using emulation::Floats;
using emulation::Launch;
using emulation::Poisoned;
using emulation::Random;
using emulation::RoundedTo;
using emulation::Stored;
using namespace cross_entropy;  // NOLINT: the kernels under test

constexpr double kDloss = 0.37;

template <typename T>
class CrossEntropyEmulatedTest : public ::testing::Test {};
using StorageTypes = ::testing::Types<float, __nv_bfloat16>;
TYPED_TEST_SUITE(CrossEntropyEmulatedTest, StorageTypes);

TYPED_TEST(CrossEntropyEmulatedTest, LossesAndGradientMatchTheCpuTwin) {
  using T = TypeParam;
  struct Case {
    int64_t n, vocab;
    bool confident, in_place;
  };
  for (const Case k : {Case{1, 1, false, false}, Case{3, 7, false, false},
                       Case{5, 1000, false, true}, Case{4, 3001, false, false},
                       Case{6, 999, true, false}}) {
    SCOPED_TRACE(testing::Message() << "n " << k.n << " vocab " << k.vocab
                                    << (k.confident ? " confident" : "")
                                    << (k.in_place ? " in place" : ""));
    const int64_t count = k.n * k.vocab;
    std::vector<float> raw = Random(61 + count, count, -8, 8);
    cpu::Rng rng(62 + count);
    std::vector<int32_t> targets(static_cast<size_t>(k.n));
    for (int64_t r = 0; r < k.n; ++r) {
      targets[r] = static_cast<int32_t>(rng.Below(static_cast<uint32_t>(k.vocab)));
      if (k.confident) raw[r * k.vocab + targets[r]] += 20.0f;
    }
    const std::vector<float> logits = RoundedTo<T>(raw);
    const double mean_cpu = cpu::CrossEntropyForward(logits.data(), targets.data(), k.n, k.vocab);
    std::vector<double> loss_cpu(k.n);
    for (int64_t r = 0; r < k.n; ++r) {
      loss_cpu[r] =
          cpu::CrossEntropyForward(logits.data() + r * k.vocab, targets.data() + r, 1, k.vocab);
    }
    std::vector<float> dlogits_cpu(count);
    cpu::CrossEntropyBackward(logits.data(), targets.data(), k.n, k.vocab, kDloss,
                              dlogits_cpu.data());

    std::vector<T> x = Stored<T>(logits), dx = Poisoned<T>(count);
    T* grad = k.in_place ? x.data() : dx.data();
    std::vector<float> loss(k.n, NAN);
    std::vector<double> row_loss(k.n, NAN);
    double mean = NAN;
    const double scale = kDloss / static_cast<double>(k.n);
    Launch(dim3{static_cast<unsigned>(k.n), 1, 1}, dim3{kRowThreads, 1, 1}, [&] {
      CrossEntropyRowKernel<T>(x.data(), targets.data(), k.vocab, scale, loss.data(),
                               row_loss.data(), grad);
    });
    Launch(dim3{1, 1, 1}, dim3{kMeanThreads, 1, 1},
           [&] { MeanKernel(row_loss.data(), k.n, &mean); });

    const Comparison cl = CompareToCpu(loss, loss_cpu);
    EXPECT_LT(cl.error, kFloatTolerance) << "loss per token: " << cl.Describe();
    const Comparison cm = CompareToCpu(std::vector<double>{mean}, std::vector<double>{mean_cpu});
    EXPECT_LT(cm.error, kFloatTolerance) << "mean: " << cm.Describe();
    const Comparison cd = CompareToCpu(Floats(k.in_place ? x : dx), dlogits_cpu);
    EXPECT_LT(cd.error, emulation::ToleranceFor<T>()) << "dlogits: " << cd.Describe();
  }
}

TEST(CrossEntropyEmulatedBadTargetTest, BadTargetPoisonsOnlyItsRow) {
  const int64_t n = 3, vocab = 5;
  const std::vector<float> logits = Random(71, n * vocab, -2, 2);
  const std::vector<int32_t> targets = {2, -1, 0};
  std::vector<float> loss(n, 0.0f), dlogits(n * vocab, 0.0f);
  Launch(dim3{static_cast<unsigned>(n), 1, 1}, dim3{kRowThreads, 1, 1}, [&] {
    CrossEntropyRowKernel<float>(logits.data(), targets.data(), vocab, 1.0 / n, loss.data(),
                                 nullptr, dlogits.data());
  });
  EXPECT_TRUE(std::isfinite(loss[0]));
  EXPECT_TRUE(std::isnan(loss[1]));
  EXPECT_TRUE(std::isfinite(loss[2]));
  for (int64_t c = 0; c < vocab; ++c) {
    EXPECT_TRUE(std::isfinite(dlogits[c]));
    EXPECT_TRUE(std::isnan(dlogits[vocab + c]));
    EXPECT_TRUE(std::isfinite(dlogits[2 * vocab + c]));
  }
}

}  // namespace
}  // namespace pipecoord::kernels::cuda
