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

#include <algorithm>
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

// The vocabulary-parallel steps, each of tp "ranks" running the kernels on its slice, the group's
// collectives done here by hand (the maxima side by side, the sums added in rank order): the loss
// against the whole-vocabulary CPU cross-entropy (an independent oracle: no slices) and against
// the CPU VocabParallel* (the arithmetic of record), the slices' gradients side by side against
// the whole-vocabulary CPU gradient.
TYPED_TEST(CrossEntropyEmulatedTest, VocabParallelMatchesTheWholeVocabulary) {
  using T = TypeParam;
  for (const int tp : {1, 2, 3}) {
    for (const bool confident : {false, true}) {
      SCOPED_TRACE(testing::Message() << "tp " << tp << (confident ? " confident" : ""));
      const int64_t n = 5, vl = 337, vocab = vl * tp, count = n * vocab;
      std::vector<float> raw = Random(81 + tp, count, -8, 8);
      cpu::Rng rng(82 + tp);
      std::vector<int32_t> targets(static_cast<size_t>(n));
      for (int64_t r = 0; r < n; ++r) {
        targets[r] = static_cast<int32_t>(rng.Below(static_cast<uint32_t>(vocab)));
        if (confident) raw[r * vocab + targets[r]] += 20.0f;
      }
      const std::vector<float> logits = RoundedTo<T>(raw);
      const double whole = cpu::CrossEntropyForward(logits.data(), targets.data(), n, vocab);
      std::vector<float> dwhole(count);
      cpu::CrossEntropyBackward(logits.data(), targets.data(), n, vocab, kDloss, dwhole.data());

      // Rank k's slice [n, vl] of the columns [k vl, (k+1) vl).
      std::vector<std::vector<T>> slice(tp);
      std::vector<std::vector<float>> cpu_slice(tp);
      for (int k = 0; k < tp; ++k) {
        for (int64_t r = 0; r < n; ++r) {
          cpu_slice[k].insert(cpu_slice[k].end(), logits.begin() + r * vocab + k * vl,
                              logits.begin() + r * vocab + (k + 1) * vl);
        }
        slice[k] = Stored<T>(cpu_slice[k]);
      }
      std::vector<float> gathered(n * tp, NAN), cpu_gathered(n * tp, NAN);
      for (int k = 0; k < tp; ++k) {
        Launch(dim3{static_cast<unsigned>(n), 1, 1}, dim3{kRowThreads, 1, 1},
               [&] { VocabParallelRowMaxKernel<T>(slice[k].data(), vl, gathered.data() + k * n); });
        cpu::VocabParallelRowMax(cpu_slice[k].data(), n, vl, cpu_gathered.data() + k * n);
      }
      EXPECT_EQ(gathered, cpu_gathered);
      std::vector<std::vector<float>> row_max(tp, std::vector<float>(n, NAN)), sums(tp, std::vector<float>(2 * n, NAN));
      std::vector<float> total(2 * n, 0.f), cpu_row_max(n), cpu_total(2 * n, 0.f);
      for (int k = 0; k < tp; ++k) {
        Launch(dim3{static_cast<unsigned>(n), 1, 1}, dim3{kRowThreads, 1, 1}, [&] {
          VocabParallelSumsKernel<T>(slice[k].data(), targets.data(), n, vl, k * vl, gathered.data(), tp,
                                     row_max[k].data(), sums[k].data());
        });
        std::vector<float> cpu_sums(2 * n);
        cpu::VocabParallelSums(cpu_slice[k].data(), targets.data(), n, vl, k * vl, cpu_gathered.data(), tp,
                               cpu_row_max.data(), cpu_sums.data());
        for (int64_t i = 0; i < 2 * n; ++i) {
          total[i] += sums[k][i];
          cpu_total[i] += cpu_sums[i];
        }
      }
      std::vector<double> losses(tp, NAN);
      std::vector<float> dlogits(count, NAN);
      for (int k = 0; k < tp; ++k) {
        std::vector<double> row_loss(n, NAN);
        Launch(dim3{static_cast<unsigned>(n), 1, 1}, dim3{kRowThreads, 1, 1}, [&] {
          VocabParallelLossAndProbsKernel<T>(slice[k].data(), n, vl, k * vl, targets.data(), row_max[k].data(),
                                             total.data(), row_loss.data());
        });
        Launch(dim3{1, 1, 1}, dim3{kMeanThreads, 1, 1}, [&] { MeanKernel(row_loss.data(), n, &losses[k]); });
        std::vector<T> d = Poisoned<T>(n * vl);
        const double scale = kDloss / static_cast<double>(n);
        Launch(dim3{4, 1, 1}, dim3{kRowThreads, 1, 1},
               [&] { VocabParallelDlogitsKernel<T>(slice[k].data(), n * vl, scale, d.data()); });
        const std::vector<float> df = Floats(d);
        for (int64_t r = 0; r < n; ++r) {
          std::copy(df.begin() + r * vl, df.begin() + (r + 1) * vl, dlogits.begin() + r * vocab + k * vl);
        }
      }
      std::vector<float> cpu_probs = cpu_slice[0];
      const double cpu_loss =
          cpu::VocabParallelLossAndProbs(cpu_probs.data(), n, vl, 0, targets.data(), cpu_row_max.data(), cpu_total.data());
      for (int k = 0; k < tp; ++k) {
        EXPECT_EQ(losses[k], losses[0]) << "every rank of the group computes the same loss";
        EXPECT_NEAR(losses[k], cpu_loss, 1e-6 * std::abs(cpu_loss)) << "rank " << k << " vs VocabParallelLossAndProbs";
        EXPECT_NEAR(losses[k], whole, 1e-5 * std::abs(whole)) << "rank " << k << " vs the whole vocabulary";
      }
      const Comparison cd = CompareToCpu(dlogits, dwhole);
      EXPECT_LT(cd.error, emulation::ToleranceFor<T>()) << "dlogits: " << cd.Describe();
    }
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
