// kernels/cuda/cross_entropy against its CPU twin (kernels/cpu/cross_entropy.h), f32 and bf16.
//
// Metric (compare.h): max over elements of |gpu - cpu| / max(|cpu|, 1e-6 + 1e-3 max|cpu|);
// thresholds 1e-4 for float outputs (dlogits in f32, every loss for both dtypes: the loss is
// float or double whatever the logits' dtype), 2e-2 for bf16 dlogits. For bf16, the logits are
// rounded to bf16 first and the CPU twin runs in fp32 on the rounded values. The per-token CPU
// loss is the twin's forward on that row alone. Outputs are poisoned with NaN before the
// kernel. Vocabularies are odd (not multiples of the 256-thread row block); one case makes the
// softmax confident (p_target near 1: small loss, a target gradient far below 1).
#include "kernels/cuda/cross_entropy.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <vector>

#include "kernels/cpu/cross_entropy.h"
#include "kernels/cpu/rng.h"
#include "kernels/cuda/compare.h"
#include "kernels/cuda/gpu_test.h"

namespace pipecoord::kernels::cuda {
namespace {

struct Case {
  int64_t n, vocab;
  bool confident;  // the target's logit raised by 20: p_target near 1
};
constexpr Case kCases[] = {{1, 1, false},    {3, 7, false},      {17, 1000, false},
                           {64, 5003, false}, {5, 50257, false}, {33, 999, true}};
constexpr double kDloss = 0.37;

enum class Mode { kForward, kBackward, kFused, kFusedInPlace };

const char* ModeName(Mode m) {
  switch (m) {
    case Mode::kForward:
      return "forward";
    case Mode::kBackward:
      return "backward";
    case Mode::kFused:
      return "forward+backward";
    case Mode::kFusedInPlace:
      return "forward+backward in place";
  }
  return "?";
}

template <typename Param>
class CrossEntropyTest : public GpuTest {
 protected:
  using T = typename Param::type;

  void Check(Mode mode) {
    const bool forward = mode != Mode::kBackward;
    const bool backward = mode != Mode::kForward;
    for (const Case k : kCases) {
      SCOPED_TRACE(testing::Message() << DTypeLabel<T>() << " " << ModeName(mode) << " n " << k.n
                                      << " vocab " << k.vocab
                                      << (k.confident ? " confident" : ""));
      const int64_t count = k.n * k.vocab;
      std::vector<float> raw = RandomFloats(101 + count, count, -8, 8);
      cpu::Rng rng(102 + count);
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

      DeviceBuffer<T> d_logits(count), d_dlogits(count);
      DeviceBuffer<int32_t> d_targets(k.n);
      DeviceBuffer<float> d_loss(k.n);
      DeviceBuffer<double> d_mean(1);
      for (const Status* st : {&d_logits.status(), &d_dlogits.status(), &d_targets.status(),
                               &d_loss.status(), &d_mean.status()}) {
        PIPECOORD_ASSERT_OK(*st);
      }
      PIPECOORD_ASSERT_OK(UploadFloats(d_logits, logits));
      PIPECOORD_ASSERT_OK(d_targets.Upload(targets));
      PIPECOORD_ASSERT_OK(d_dlogits.Poison());
      PIPECOORD_ASSERT_OK(d_loss.Poison());
      PIPECOORD_ASSERT_OK(d_mean.Poison());
      DeviceBuffer<T>& grad = mode == Mode::kFusedInPlace ? d_logits : d_dlogits;
      switch (mode) {
        case Mode::kForward:
          PIPECOORD_ASSERT_OK(CrossEntropyForward(d_logits.get(), d_targets.get(), k.n, k.vocab,
                                                  d_loss.get(), d_mean.get(), this->stream_));
          break;
        case Mode::kBackward:
          PIPECOORD_ASSERT_OK(CrossEntropyBackward(d_logits.get(), d_targets.get(), k.n, k.vocab,
                                                   kDloss, grad.get(), this->stream_));
          break;
        case Mode::kFused:
        case Mode::kFusedInPlace:
          PIPECOORD_ASSERT_OK(CrossEntropyForwardBackward(d_logits.get(), d_targets.get(), k.n,
                                                          k.vocab, kDloss, d_loss.get(),
                                                          d_mean.get(), grad.get(),
                                                          this->stream_));
          break;
      }
      PIPECOORD_ASSERT_OK(this->Sync());

      if (forward) {
        std::vector<float> loss_gpu;
        std::vector<double> mean_gpu;
        PIPECOORD_ASSERT_OK(d_loss.Download(&loss_gpu));
        PIPECOORD_ASSERT_OK(d_mean.Download(&mean_gpu));
        const Comparison cl = CompareToCpu(loss_gpu, loss_cpu);
        EXPECT_LT(cl.error, kFloatTolerance) << "loss per token: " << cl.Describe();
        const Comparison cm = CompareToCpu(mean_gpu, std::vector<double>{mean_cpu});
        EXPECT_LT(cm.error, kFloatTolerance) << "mean loss: " << cm.Describe();
      }
      if (backward) {
        std::vector<float> dlogits_gpu;
        PIPECOORD_ASSERT_OK(DownloadFloats(grad, &dlogits_gpu));
        const Comparison cd = CompareToCpu(dlogits_gpu, dlogits_cpu);
        EXPECT_LT(cd.error, ToleranceFor<T>()) << "dlogits: " << cd.Describe();
      }
    }
  }
};
TYPED_TEST_SUITE(CrossEntropyTest, ActivationTypes, DTypeNames);

TYPED_TEST(CrossEntropyTest, ForwardMatchesCpuTwin) { this->Check(Mode::kForward); }
TYPED_TEST(CrossEntropyTest, BackwardMatchesCpuTwin) { this->Check(Mode::kBackward); }
TYPED_TEST(CrossEntropyTest, FusedMatchesCpuTwin) { this->Check(Mode::kFused); }
TYPED_TEST(CrossEntropyTest, FusedInPlaceMatchesCpuTwin) { this->Check(Mode::kFusedInPlace); }

// A target outside [0, vocab) poisons only its own row; no token gives a mean of +0.0.
class CrossEntropyEdgeTest : public GpuTest {};

TEST_F(CrossEntropyEdgeTest, BadTargetGivesNanRowOnlyAndNoTokensGiveZeroMean) {
  const int64_t n = 3, vocab = 5;
  const std::vector<float> logits = RandomFloats(111, n * vocab, -2, 2);
  const std::vector<int32_t> targets = {2, 5, 0};
  DeviceBuffer<float> d_logits(n * vocab), d_dlogits(n * vocab), d_loss(n);
  DeviceBuffer<int32_t> d_targets(n);
  DeviceBuffer<double> d_mean(1);
  for (const Status* st : {&d_logits.status(), &d_dlogits.status(), &d_loss.status(),
                           &d_targets.status(), &d_mean.status()}) {
    PIPECOORD_ASSERT_OK(*st);
  }
  PIPECOORD_ASSERT_OK(d_logits.Upload(logits));
  PIPECOORD_ASSERT_OK(d_targets.Upload(targets));
  PIPECOORD_ASSERT_OK(d_dlogits.Poison());
  PIPECOORD_ASSERT_OK(d_loss.Poison());
  PIPECOORD_ASSERT_OK(CrossEntropyForwardBackward(d_logits.get(), d_targets.get(), n, vocab, 1.0,
                                                  d_loss.get(), nullptr, d_dlogits.get(),
                                                  stream_));
  PIPECOORD_ASSERT_OK(Sync());
  std::vector<float> loss, dlogits;
  PIPECOORD_ASSERT_OK(d_loss.Download(&loss));
  PIPECOORD_ASSERT_OK(d_dlogits.Download(&dlogits));
  for (const int64_t r : {0, 2}) {
    const double want =
        cpu::CrossEntropyForward(logits.data() + r * vocab, targets.data() + r, 1, vocab);
    EXPECT_NEAR(loss[r], want, 1e-5 * std::fabs(want) + 1e-6) << "row " << r;
    for (int64_t c = 0; c < vocab; ++c) EXPECT_TRUE(std::isfinite(dlogits[r * vocab + c]));
  }
  EXPECT_TRUE(std::isnan(loss[1]));
  for (int64_t c = 0; c < vocab; ++c) EXPECT_TRUE(std::isnan(dlogits[vocab + c])) << c;

  PIPECOORD_ASSERT_OK(d_mean.Poison());
  PIPECOORD_ASSERT_OK(
      CrossEntropyForward(d_logits.get(), d_targets.get(), 0, vocab, nullptr, d_mean.get(),
                          stream_));
  PIPECOORD_ASSERT_OK(Sync());
  std::vector<double> mean;
  PIPECOORD_ASSERT_OK(d_mean.Download(&mean));
  EXPECT_EQ(mean[0], 0.0);
  EXPECT_FALSE(std::signbit(mean[0]));
}

TEST(CrossEntropyArgumentsTest, RejectsBadShapesWithoutAGpu) {
  float* none = nullptr;
  const int32_t* no_targets = nullptr;
  EXPECT_EQ(CrossEntropyForward(none, no_targets, 2, 0, nullptr, nullptr, nullptr).code(),
            Code::kInvalidArgument);  // vocab 0
  EXPECT_EQ(CrossEntropyBackward(none, no_targets, 2, 8, 1.0, none, nullptr).code(),
            Code::kInvalidArgument);  // null buffers
  EXPECT_EQ(CrossEntropyForwardBackward(none, no_targets, -1, 8, 1.0, nullptr, nullptr, none,
                                        nullptr)
                .code(),
            Code::kInvalidArgument);
}

}  // namespace
}  // namespace pipecoord::kernels::cuda
