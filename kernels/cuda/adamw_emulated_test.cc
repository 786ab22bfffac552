// The multi-tensor AdamW kernel itself (adamw_kernels.h, the code nvcc builds) runs on the CPU
// under cuda_emulation.h, on a LaunchArgs filled as adamw.cu fills it, against the CPU twin
// (kernels/cpu/adamw.h) tensor by tensor.
//
// Metric (compare.h): max over elements of |gpu - cpu| / max(|cpu|, 1e-6 + 1e-3 max|cpu|);
// threshold 1e-4 for param, m and v (updated in place from random values; lr 1e-2 moves every
// element by more than that), 2e-2 for the bf16 copy (starts as NaN). The emulation performs
// the same IEEE double operations as the CPU twin, so here the float results are also expected
// to be identical; that is checked too.
#include "kernels/cuda/cuda_emulation.h"
// The emulation first, then the kernels it runs.
#include "kernels/cuda/adamw_kernels.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <vector>

#include "kernels/cpu/adamw.h"
#include "kernels/cuda/compare.h"

namespace pipecoord::kernels::cuda {
namespace {

using emulation::Floats;
using emulation::Launch;
using emulation::Poisoned;
using emulation::Random;
using namespace adamw;  // NOLINT: the kernel under test

struct Tensor {
  int64_t n;
  bool decay, with_bf16;
  std::vector<float> param, grad, m, v;          // the kernel's
  std::vector<float> cpu_param, cpu_m, cpu_v;    // the CPU twin's
  std::vector<__nv_bfloat16> bf16;
};

TEST(AdamWEmulatedTest, OneLaunchOverSeveralTensorsMatchesTheCpuTwin) {
  cpu::AdamWOptions options;
  options.lr = 1e-2;
  options.weight_decay = 0.1;
  std::vector<Tensor> tensors;
  const int64_t sizes[] = {1, 300, 8192, 8193, 20000};
  for (size_t k = 0; k < std::size(sizes); ++k) {
    Tensor t{sizes[k], k % 2 == 0, k != 1, {}, {}, {}, {}, {}, {}, {}, {}};
    t.param = t.cpu_param = Random(81 + k, t.n, -1, 1);
    t.m = t.cpu_m = Random(82 + k, t.n, -0.1, 0.1);
    t.v = t.cpu_v = Random(83 + k, t.n, 0, 0.01);
    tensors.push_back(std::move(t));
  }
  for (int64_t step = 1; step <= 3; ++step) {
    SCOPED_TRACE(testing::Message() << "step " << step);
    // adamw.cu's scalars and tensor list.
    const double t = static_cast<double>(step);
    LaunchArgs args{};
    args.lr = options.lr;
    args.beta1 = options.beta1;
    args.one_minus_beta1 = 1.0 - options.beta1;
    args.beta2 = options.beta2;
    args.one_minus_beta2 = 1.0 - options.beta2;
    args.eps = options.eps;
    args.bias_correction1 = 1.0 - std::pow(options.beta1, t);
    args.bias_correction2 = 1.0 - std::pow(options.beta2, t);
    int64_t chunks = 0;
    for (Tensor& x : tensors) {
      x.grad = Random(90 + 7 * step + x.n, x.n, -1, 1);
      x.bf16 = Poisoned<__nv_bfloat16>(x.with_bf16 ? x.n : 0);
      const double decay = 1.0 - options.lr * (x.decay ? options.weight_decay : 0.0);
      args.tensors[args.count++] =
          LaunchTensor{x.param.data(), x.grad.data(), x.m.data(), x.v.data(),
                       x.with_bf16 ? x.bf16.data() : nullptr, x.n, decay, chunks};
      chunks += (x.n + kChunk - 1) / kChunk;

      cpu::AdamWOptions o = options;
      if (!x.decay) o.weight_decay = 0.0;
      cpu::AdamWStep(x.cpu_param.data(), x.grad.data(), x.cpu_m.data(), x.cpu_v.data(), x.n, o,
                     step);
    }
    Launch(dim3{static_cast<unsigned>(chunks), 1, 1}, dim3{kThreads, 1, 1},
           [&] { MultiTensorAdamWKernel(args); });

    for (const Tensor& x : tensors) {
      SCOPED_TRACE(testing::Message() << "n " << x.n);
      const Comparison cp = CompareToCpu(x.param, x.cpu_param);
      EXPECT_LT(cp.error, kFloatTolerance) << "param: " << cp.Describe();
      const Comparison cm = CompareToCpu(x.m, x.cpu_m);
      EXPECT_LT(cm.error, kFloatTolerance) << "m: " << cm.Describe();
      const Comparison cv = CompareToCpu(x.v, x.cpu_v);
      EXPECT_LT(cv.error, kFloatTolerance) << "v: " << cv.Describe();
      EXPECT_EQ(x.param, x.cpu_param) << "the same double operations: the same floats";
      EXPECT_EQ(x.m, x.cpu_m);
      EXPECT_EQ(x.v, x.cpu_v);
      if (x.with_bf16) {
        const Comparison cb = CompareToCpu(Floats(x.bf16), x.cpu_param);
        EXPECT_LT(cb.error, kBf16Tolerance) << "bf16 copy: " << cb.Describe();
      }
    }
  }
}

}  // namespace
}  // namespace pipecoord::kernels::cuda
