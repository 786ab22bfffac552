#include "worker/model/lm_head.h"

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "kernels/cpu/gradient_check.h"

namespace pipecoord::model {
namespace {

using kernels::cpu::testing::NumericGradient;
using kernels::cpu::testing::RandomVector;
using kernels::cpu::testing::RelativeError;
using kernels::cpu::testing::ReportError;

const HeadDims kDims{6, 8, 11};  // tokens, hidden, vocab
const kernels::HostBuffer<int32_t> kTargets = {0, 10, 3, 3, 7, 1};

TEST(LmHeadTest, BackwardMatchesFiniteDifferencesInDouble) {
  std::vector<double> norm = RandomVector(kDims.hidden, 1), out = RandomVector(11 * 8, 2);
  for (double& g : norm) g = 1 + 0.3 * g;
  kernels::HostBuffer<double> dnorm(norm.size(), 0.0), dout(out.size(), 0.0);
  LmHead<double> head(kDims, {norm.data(), out.data()}, {dnorm.data(), dout.data()});
  kernels::HostBuffer<double> x = kernels::ToHostBuffer(RandomVector(kDims.tokens * kDims.hidden, 3));
  const double dloss = 0.5;  // 1/m for m = 2
  auto objective = [&] {
    HeadSaved<double> s;
    return dloss * head.Forward(x, kTargets, &s);
  };
  HeadSaved<double> saved;
  const double loss = head.Forward(x, kTargets, &saved);
  EXPECT_GT(loss, 0.0);
  const kernels::HostBuffer<double> dx = head.BackwardInput(dloss, &saved);
  EXPECT_TRUE(saved.logits.empty());
  head.BackwardWeight(&saved);
  EXPECT_EQ(saved.Bytes(), 0);
  const double ex = RelativeError(dx, NumericGradient(objective, &x, 1e-6));
  std::vector<double> norm_copy = norm, out_copy = out;
  auto via_norm = [&] { norm = norm_copy; return objective(); };
  auto via_out = [&] { out = out_copy; return objective(); };
  const double en = RelativeError(dnorm, NumericGradient(via_norm, &norm_copy, 1e-6));
  norm = norm_copy;
  const double eo = RelativeError(dout, NumericGradient(via_out, &out_copy, 1e-6));
  out = out_copy;
  ReportError("head dx (B)", ex);
  ReportError("head dnorm (W)", en);
  ReportError("head doutput (W)", eo);
  EXPECT_LT(ex, 1e-7);
  EXPECT_LT(en, 1e-7);
  EXPECT_LT(eo, 1e-7);
}

TEST(LmHeadTest, InputAndWeightPartsEqualTheFusedBackwardBitForBit) {
  kernels::HostBuffer<float> norm(8, 1.0f), out(11 * 8);
  kernels::cpu::Rng(5).FillUniform(out.data(), 88, -0.3, 0.3);
  kernels::HostBuffer<float> g1n(8, 0.0f), g1o(88, 0.0f), g2n(8, 0.0f), g2o(88, 0.0f);
  LmHead<float> a(kDims, {norm.data(), out.data()}, {g1n.data(), g1o.data()});
  LmHead<float> b(kDims, {norm.data(), out.data()}, {g2n.data(), g2o.data()});
  kernels::HostBuffer<float> x(48);
  kernels::cpu::Rng(6).FillUniform(x.data(), 48, -1, 1);
  HeadSaved<float> sa, sb;
  EXPECT_EQ(a.Forward(x, kTargets, &sa), b.Forward(x, kTargets, &sb));
  const kernels::HostBuffer<float> dxa = a.BackwardInput(0.25, &sa);
  a.BackwardWeight(&sa);
  EXPECT_EQ(b.BackwardFused(0.25, &sb), dxa);
  EXPECT_EQ(g1n, g2n);
  EXPECT_EQ(g1o, g2o);
}

}  // namespace
}  // namespace pipecoord::model
