// The RMSNorm kernels themselves (rms_norm_kernels.h, the code nvcc builds) run on the CPU
// under cuda_emulation.h, launched with rms_norm.cu's shapes, against the CPU twin
// (kernels/cpu/rms_norm.h). Runs everywhere; rms_norm_test covers what only a GPU shows.
//
// Metric (compare.h): max over elements of |gpu - cpu| / max(|cpu|, 1e-6 + 1e-3 max|cpu|);
// thresholds 1e-4 for float outputs, 2e-2 for bf16 outputs, the inputs rounded to bf16 for the
// CPU twin in the bf16 case. Outputs start as NaN; dg (accumulated) from random values.
#include "kernels/cuda/cuda_emulation.h"
// The emulation first, then the kernels it runs.
#include "kernels/cuda/rms_norm_kernels.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "kernels/cpu/rms_norm.h"
#include "kernels/cuda/compare.h"

namespace pipecoord::kernels::cuda {
namespace {

using emulation::Floats;
using emulation::Launch;
using emulation::Poisoned;
using emulation::Random;
using emulation::RoundedTo;
using emulation::Stored;
using namespace rms_norm;  // NOLINT: the kernels under test

constexpr double kEps = 1e-5;

template <typename T>
class RmsNormEmulatedTest : public ::testing::Test {};
using StorageTypes = ::testing::Types<float, __nv_bfloat16>;
TYPED_TEST_SUITE(RmsNormEmulatedTest, StorageTypes);

TYPED_TEST(RmsNormEmulatedTest, ForwardBackwardInputAndWeightMatchTheCpuTwin) {
  using T = TypeParam;
  struct Shape {
    int64_t n, h;
  };
  for (const Shape s : {Shape{1, 1}, Shape{3, 37}, Shape{4, 300}, Shape{33, 70}}) {
    SCOPED_TRACE(testing::Message() << "n " << s.n << " h " << s.h);
    const int64_t nh = s.n * s.h;
    const std::vector<float> x = RoundedTo<T>(Random(1 + nh, nh, -2, 2));
    const std::vector<float> g = RoundedTo<T>(Random(2 + nh, s.h, 0.5, 1.5));
    const std::vector<float> dy = RoundedTo<T>(Random(3 + nh, nh, -1, 1));
    const std::vector<float> dx_start = RoundedTo<T>(Random(4 + nh, nh, -1, 1));
    const std::vector<float> dg_start = Random(5 + nh, s.h, -1, 1);

    std::vector<float> y_cpu(nh), rstd_cpu(s.n);
    cpu::RmsNormForward(x.data(), g.data(), y_cpu.data(), rstd_cpu.data(), s.n, s.h, kEps);
    std::vector<float> dx_cpu(nh), dx_acc_cpu = dx_start, dg_cpu = dg_start;
    cpu::RmsNormBackwardInput(dy.data(), x.data(), g.data(), rstd_cpu.data(), dx_cpu.data(), s.n,
                              s.h, false);
    cpu::RmsNormBackwardInput(dy.data(), x.data(), g.data(), rstd_cpu.data(), dx_acc_cpu.data(),
                              s.n, s.h, true);
    cpu::RmsNormBackwardWeight(dy.data(), x.data(), rstd_cpu.data(), dg_cpu.data(), s.n, s.h);

    const std::vector<T> xs = Stored<T>(x), gs = Stored<T>(g), dys = Stored<T>(dy);
    std::vector<T> y = Poisoned<T>(nh), dx = Poisoned<T>(nh), dx_acc = Stored<T>(dx_start);
    std::vector<float> rstd(s.n, NAN), dg = dg_start;
    const dim3 rows{static_cast<unsigned>(s.n), 1, 1};
    Launch(rows, dim3{kRowThreads, 1, 1}, [&] {
      RmsNormForwardKernel<T>(xs.data(), gs.data(), y.data(), rstd.data(), s.h, kEps);
    });
    Launch(rows, dim3{kRowThreads, 1, 1}, [&] {
      RmsNormBackwardInputKernel<T>(dys.data(), xs.data(), gs.data(), rstd.data(), dx.data(), s.h,
                                    false);
    });
    Launch(rows, dim3{kRowThreads, 1, 1}, [&] {
      RmsNormBackwardInputKernel<T>(dys.data(), xs.data(), gs.data(), rstd.data(), dx_acc.data(),
                                    s.h, true);
    });
    const dim3 strips{static_cast<unsigned>((s.h + kStripColumns - 1) / kStripColumns), 1, 1};
    Launch(strips, dim3{kStripColumns, kStripRows, 1}, [&] {
      RmsNormBackwardWeightKernel<T>(dys.data(), xs.data(), rstd.data(), dg.data(), s.n, s.h);
    });

    const Comparison cy = CompareToCpu(Floats(y), y_cpu);
    EXPECT_LT(cy.error, emulation::ToleranceFor<T>()) << "y: " << cy.Describe();
    const Comparison cr = CompareToCpu(rstd, rstd_cpu);
    EXPECT_LT(cr.error, kFloatTolerance) << "rstd: " << cr.Describe();
    const Comparison cdx = CompareToCpu(Floats(dx), dx_cpu);
    EXPECT_LT(cdx.error, emulation::ToleranceFor<T>()) << "dx: " << cdx.Describe();
    const Comparison cacc = CompareToCpu(Floats(dx_acc), dx_acc_cpu);
    EXPECT_LT(cacc.error, emulation::ToleranceFor<T>()) << "dx accumulated: " << cacc.Describe();
    const Comparison cdg = CompareToCpu(dg, dg_cpu);
    EXPECT_LT(cdg.error, kFloatTolerance) << "dg: " << cdg.Describe();
  }
}

}  // namespace
}  // namespace pipecoord::kernels::cuda
