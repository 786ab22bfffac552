// kernels/cuda/adamw (multi-tensor) against its CPU twin (kernels/cpu/adamw.h), tensor by tensor.
//
// Metric (compare.h): max over elements of |gpu - cpu| / max(|cpu|, 1e-6 + 1e-3 max|cpu|);
// threshold 1e-4 for the fp32 param, m and v, 2e-2 for the bf16 copy (compared with the CPU's
// fp32 param). param, m and v are updated in place, so they start from random values (with
// lr 1e-2 every element moves by far more than the threshold, so a skipped one fails); the bf16
// copy is output only and is poisoned with NaN. Three steps check the bias correction; sizes
// are not multiples of the block or chunk; one list is longer than a launch carries.
#include "kernels/cuda/adamw.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <memory>
#include <vector>

#include "kernels/cpu/adamw.h"
#include "kernels/cuda/compare.h"
#include "kernels/cuda/gpu_test.h"

namespace pipecoord::kernels::cuda {
namespace {

// One tensor's buffers on both sides.
struct TensorCase {
  int64_t n;
  bool weight_decay;
  bool with_bf16;
  std::vector<float> param, grad, m, v;  // the CPU twin's copies
  std::unique_ptr<DeviceBuffer<float>> d_param, d_grad, d_m, d_v;
  std::unique_ptr<DeviceBuffer<__nv_bfloat16>> d_bf16;
};

class AdamWTest : public GpuTest {
 protected:
  // Steps the tensors of `sizes` `steps` times on both sides and compares after each step.
  void Check(const std::vector<int64_t>& sizes, int steps) {
    cpu::AdamWOptions cpu_options;
    cpu_options.lr = 1e-2;
    cpu_options.beta1 = 0.9;
    cpu_options.beta2 = 0.95;
    cpu_options.eps = 1e-8;
    cpu_options.weight_decay = 0.1;
    const AdamWOptions options{cpu_options.lr, cpu_options.beta1, cpu_options.beta2,
                               cpu_options.eps, cpu_options.weight_decay};

    std::vector<TensorCase> cases(sizes.size());
    for (size_t k = 0; k < sizes.size(); ++k) {
      TensorCase& c = cases[k];
      c.n = sizes[k];
      c.weight_decay = k % 3 != 1;
      c.with_bf16 = k % 2 == 0;
      c.param = RandomFloats(201 + k, c.n, -1, 1);
      c.m = RandomFloats(202 + k, c.n, -0.1, 0.1);
      c.v = RandomFloats(203 + k, c.n, 0, 0.01);
      c.d_param = std::make_unique<DeviceBuffer<float>>(c.n);
      c.d_grad = std::make_unique<DeviceBuffer<float>>(c.n);
      c.d_m = std::make_unique<DeviceBuffer<float>>(c.n);
      c.d_v = std::make_unique<DeviceBuffer<float>>(c.n);
      c.d_bf16 = std::make_unique<DeviceBuffer<__nv_bfloat16>>(c.with_bf16 ? c.n : 0);
      for (const Status* st : {&c.d_param->status(), &c.d_grad->status(), &c.d_m->status(),
                               &c.d_v->status(), &c.d_bf16->status()}) {
        PIPECOORD_ASSERT_OK(*st);
      }
      PIPECOORD_ASSERT_OK(c.d_param->Upload(c.param));
      PIPECOORD_ASSERT_OK(c.d_m->Upload(c.m));
      PIPECOORD_ASSERT_OK(c.d_v->Upload(c.v));
    }

    for (int step = 1; step <= steps; ++step) {
      std::vector<AdamWTensor> list;
      for (size_t k = 0; k < cases.size(); ++k) {
        TensorCase& c = cases[k];
        c.grad = RandomFloats(300 + 17 * step + k, c.n, -1, 1);
        PIPECOORD_ASSERT_OK(c.d_grad->Upload(c.grad));
        if (c.with_bf16) PIPECOORD_ASSERT_OK(c.d_bf16->Poison());
        cpu::AdamWOptions o = cpu_options;
        if (!c.weight_decay) o.weight_decay = 0.0;
        cpu::AdamWStep(c.param.data(), c.grad.data(), c.m.data(), c.v.data(), c.n, o, step);
        list.push_back(AdamWTensor{c.d_param->get(), c.d_grad->get(), c.d_m->get(), c.d_v->get(),
                                   c.with_bf16 ? c.d_bf16->get() : nullptr, c.n,
                                   c.weight_decay});
      }
      PIPECOORD_ASSERT_OK(MultiTensorAdamWStep(list, options, step, stream_));
      PIPECOORD_ASSERT_OK(Sync());

      for (size_t k = 0; k < cases.size(); ++k) {
        TensorCase& c = cases[k];
        SCOPED_TRACE(testing::Message() << "step " << step << " tensor " << k << " of "
                                        << cases.size() << " n " << c.n
                                        << (c.weight_decay ? " decay" : " no decay"));
        std::vector<float> param, m, v;
        PIPECOORD_ASSERT_OK(c.d_param->Download(&param));
        PIPECOORD_ASSERT_OK(c.d_m->Download(&m));
        PIPECOORD_ASSERT_OK(c.d_v->Download(&v));
        const Comparison cp = CompareToCpu(param, c.param);
        EXPECT_LT(cp.error, kFloatTolerance) << "param: " << cp.Describe();
        const Comparison cm = CompareToCpu(m, c.m);
        EXPECT_LT(cm.error, kFloatTolerance) << "m: " << cm.Describe();
        const Comparison cv = CompareToCpu(v, c.v);
        EXPECT_LT(cv.error, kFloatTolerance) << "v: " << cv.Describe();
        if (c.with_bf16) {
          std::vector<float> bf16;
          PIPECOORD_ASSERT_OK(DownloadFloats(*c.d_bf16, &bf16));
          const Comparison cb = CompareToCpu(bf16, c.param);
          EXPECT_LT(cb.error, kBf16Tolerance) << "bf16 param copy: " << cb.Describe();
        }
      }
    }
  }
};

TEST_F(AdamWTest, SeveralTensorsOneLaunchMatchCpuTwin) {
  Check({1, 7, 257, 8193, 100003, 0, 31}, 3);
}

TEST_F(AdamWTest, MoreTensorsThanOneLaunchCarriesMatchCpuTwin) {
  std::vector<int64_t> sizes;
  for (int k = 0; k < 2 * kMaxAdamWTensorsPerLaunch + 5; ++k) sizes.push_back(1 + 37 * k);
  Check(sizes, 2);
}

TEST(AdamWArgumentsTest, RejectsBadArgumentsWithoutAGpu) {
  const std::vector<AdamWTensor> none;
  EXPECT_EQ(MultiTensorAdamWStep(none, AdamWOptions{}, 0, nullptr).code(),
            Code::kInvalidArgument);  // step counts from 1
  EXPECT_TRUE(MultiTensorAdamWStep(none, AdamWOptions{}, 1, nullptr).ok());  // nothing to do
  AdamWTensor missing_grad;
  missing_grad.n = 4;
  const std::vector<AdamWTensor> bad = {missing_grad};
  EXPECT_EQ(MultiTensorAdamWStep(bad, AdamWOptions{}, 1, nullptr).code(),
            Code::kInvalidArgument);
}

}  // namespace
}  // namespace pipecoord::kernels::cuda
