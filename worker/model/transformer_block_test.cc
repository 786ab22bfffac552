#include "worker/model/transformer_block.h"

#include <gtest/gtest.h>

#include <array>
#include <memory>
#include <string>
#include <vector>

#include "kernels/cpu/gradient_check.h"
#include "kernels/cpu/rotary.h"

namespace pipecoord::model {
namespace {

using kernels::cpu::testing::Inner;
using kernels::cpu::testing::NumericGradient;
using kernels::cpu::testing::RandomVector;
using kernels::cpu::testing::RelativeError;
using kernels::cpu::testing::ReportError;

constexpr int kTensors = 9;
const char* const kNames[kTensors] = {"attention_norm", "wq",       "wk", "wv", "wo",
                                      "ffn_norm",       "w1 (gate)", "w2", "w3 (up)"};

// A block's weights and gradients in plain vectors, in kNames order.
template <typename T>
struct Weights {
  std::array<kernels::HostBuffer<T>, kTensors> value, grad;

  Weights(const BlockDims& d, uint64_t seed) {
    const int64_t h = d.hidden, f = d.ffn, kv = d.kv() * d.head_dim();
    const int64_t sizes[kTensors] = {h, h * h, kv * h, kv * h, h * h, h, f * h, h * f, f * h};
    for (int i = 0; i < kTensors; ++i) {
      std::vector<double> r = RandomVector(sizes[i], seed + i);
      value[i].resize(r.size());
      for (size_t j = 0; j < r.size(); ++j) {
        // Gains near 1, matrices near 1/sqrt(fan_in): activations stay O(1).
        value[i][j] = static_cast<T>(sizes[i] == h ? 1.0 + 0.3 * r[j] : r[j] * 0.5);
      }
      grad[i].assign(r.size(), T(0));
    }
  }
  BlockTensors<const T> W() const {
    return {value[0].data(), value[1].data(), value[2].data(), value[3].data(), value[4].data(),
            value[5].data(), value[6].data(), value[7].data(), value[8].data()};
  }
  BlockTensors<T> G() {
    return {grad[0].data(), grad[1].data(), grad[2].data(), grad[3].data(), grad[4].data(),
            grad[5].data(), grad[6].data(), grad[7].data(), grad[8].data()};
  }
};

const BlockDims kDims{2, 5, 8, 2, 12};  // b, s, h, heads, ffn
// Grouped-query attention: 4 query heads of 4 features share 2 key/value heads.
const BlockDims kGqaDims{.batch = 2, .seq = 5, .hidden = 16, .heads = 4, .ffn = 12, .kv_heads = 2};

std::shared_ptr<const kernels::cpu::RopeTable> Rope(const BlockDims& d) {
  return std::make_shared<const kernels::cpu::RopeTable>(
      kernels::cpu::MakeRopeTable(d.seq, d.hidden / d.heads));
}

template <typename T>
kernels::HostBuffer<T> Input(const BlockDims& d, uint64_t seed) {
  const std::vector<double> r = RandomVector(d.tokens() * d.hidden, seed);
  return kernels::HostBuffer<T>(r.begin(), r.end());
}

class TransformerBlockDimsTest : public ::testing::TestWithParam<BlockDims> {};

TEST_P(TransformerBlockDimsTest, SplitBackwardMatchesFiniteDifferencesInDouble) {
  const BlockDims kDims = GetParam();
  Weights<double> w(kDims, 100);
  TransformerBlock<double> block(kDims, w.W(), w.G(), Rope(kDims));
  kernels::HostBuffer<double> x = Input<double>(kDims, 200);
  const kernels::HostBuffer<double> r = kernels::ToHostBuffer(RandomVector(kDims.tokens() * kDims.hidden, 300));
  auto objective = [&] {
    BlockSaved<double> s;
    return Inner(block.Forward(x, &s), r);
  };
  BlockSaved<double> saved;
  block.Forward(x, &saved);
  const kernels::HostBuffer<double> dx = block.BackwardInput(r, &saved);
  block.BackwardWeight(&saved);
  const double ex = RelativeError(dx, NumericGradient(objective, &x, 1e-6));
  ReportError("block dx (B)", ex);
  EXPECT_LT(ex, 1e-6);
  for (int i = 0; i < kTensors; ++i) {
    kernels::HostBuffer<double> param = w.value[i];
    // The block reads weights through pointers: perturb the live buffer.
    auto through = [&] {
      w.value[i] = param;
      return objective();
    };
    const std::vector<double> numeric = NumericGradient(through, &param, 1e-6);
    w.value[i] = param;
    const double e = RelativeError(w.grad[i], numeric);
    ReportError(("block d" + std::string(kNames[i]) + " (W)").c_str(), e);
    EXPECT_LT(e, 1e-6) << kNames[i];
  }
}

TEST_P(TransformerBlockDimsTest, InputAndWeightPartsEqualTheFusedBackwardBitForBit) {
  const BlockDims kDims = GetParam();
  Weights<float> split(kDims, 7), fused(kDims, 7);
  const auto rope = Rope(kDims);
  TransformerBlock<float> a(kDims, split.W(), split.G(), rope);
  TransformerBlock<float> b(kDims, fused.W(), fused.G(), rope);
  const kernels::HostBuffer<float> dy = Input<float>(kDims, 9);
  // Two micro-batches, gradients accumulating; the split one interleaves F/B/W like ZB does.
  BlockSaved<float> s0, s1, t0, t1;
  const kernels::HostBuffer<float> y0 = a.Forward(Input<float>(kDims, 1), &s0);
  const kernels::HostBuffer<float> y1 = a.Forward(Input<float>(kDims, 2), &s1);
  const kernels::HostBuffer<float> dx0 = a.BackwardInput(dy, &s0);
  const kernels::HostBuffer<float> dx1 = a.BackwardInput(y0, &s1);
  EXPECT_TRUE(s0.q.empty() && s0.probs.empty() && s0.gate.empty()) << "B frees what only B needs";
  EXPECT_FALSE(s0.a.empty() || s0.dq.empty() || s0.dy.empty()) << "B keeps what W needs";
  a.BackwardWeight(&s0);
  a.BackwardWeight(&s1);
  EXPECT_EQ(s0.Bytes(), 0);
  EXPECT_EQ(s1.Bytes(), 0);

  EXPECT_EQ(b.Forward(Input<float>(kDims, 1), &t0), y0);
  EXPECT_EQ(b.BackwardFused(dy, &t0), dx0);
  EXPECT_EQ(b.Forward(Input<float>(kDims, 2), &t1), y1);
  EXPECT_EQ(b.BackwardFused(y0, &t1), dx1);
  EXPECT_EQ(t0.Bytes(), 0);
  for (int i = 0; i < kTensors; ++i) EXPECT_EQ(split.grad[i], fused.grad[i]) << kNames[i];
}

INSTANTIATE_TEST_SUITE_P(MultiHeadAndGroupedQuery, TransformerBlockDimsTest, ::testing::Values(kDims, kGqaDims),
                         [](const ::testing::TestParamInfo<BlockDims>& p) {
                           return p.param.kv() == p.param.heads ? std::string("MultiHead") : std::string("GroupedQuery");
                         });

// Grouped-query attention is multi-head attention whose key/value heads are repeated over each
// group (transformers' repeat_kv): the GQA block and a multi-head block holding each wk, wv head
// `group` times give the same y and dx, and every weight gradient but dwk, dwv, which are the
// sums of the multi-head block's over each group's copies.
TEST(TransformerBlockTest, GroupedQueryIsMultiHeadWithRepeatedKeyValueHeads) {
  const BlockDims gqa = kGqaDims;
  BlockDims mha = gqa;
  mha.kv_heads = 0;
  const int64_t h = gqa.hidden, d = gqa.head_dim(), group = gqa.heads / gqa.kv();
  Weights<double> g(gqa, 500), m(mha, 500);
  for (int i : {2, 3}) {  // wk, wv: MHA row block (head j) = GQA head j / group
    for (int64_t j = 0; j < mha.heads; ++j) {
      for (int64_t r = 0; r < d * h; ++r) m.value[i][j * d * h + r] = g.value[i][(j / group) * d * h + r];
    }
  }
  for (int i : {0, 1, 4, 5, 6, 7, 8}) m.value[i] = g.value[i];
  TransformerBlock<double> a(gqa, g.W(), g.G(), Rope(gqa)), b(mha, m.W(), m.G(), Rope(mha));
  const kernels::HostBuffer<double> x = Input<double>(gqa, 501), dy = Input<double>(gqa, 502);
  BlockSaved<double> sa, sb;
  const kernels::HostBuffer<double> ya = a.Forward(x, &sa), yb = b.Forward(x, &sb);
  EXPECT_LT(RelativeError(ya, yb), 1e-12);
  EXPECT_EQ(sa.k.size() * group, sb.k.size()) << "the GQA block keeps 1/group of the keys";
  EXPECT_LT(RelativeError(a.BackwardFused(dy, &sa), b.BackwardFused(dy, &sb)), 1e-12);
  for (int i : {0, 1, 4, 5, 6, 7, 8}) EXPECT_LT(RelativeError(g.grad[i], m.grad[i]), 1e-12) << kNames[i];
  for (int i : {2, 3}) {
    std::vector<double> summed(g.grad[i].size(), 0.0);
    for (int64_t j = 0; j < mha.heads; ++j) {
      for (int64_t r = 0; r < d * h; ++r) summed[(j / group) * d * h + r] += m.grad[i][j * d * h + r];
    }
    EXPECT_LT(RelativeError(g.grad[i], summed), 1e-12) << kNames[i];
  }
}

TEST(TransformerBlockTest, ForwardIsCausal) {
  // Changing the last token of sample 0 changes no earlier output and nothing in sample 1.
  Weights<double> w(kDims, 40);
  TransformerBlock<double> block(kDims, w.W(), w.G(), Rope(kDims));
  kernels::HostBuffer<double> x = Input<double>(kDims, 41);
  BlockSaved<double> s1, s2;
  const kernels::HostBuffer<double> y1 = block.Forward(x, &s1);
  const int64_t h = kDims.hidden, last = (kDims.seq - 1) * h;
  for (int64_t c = 0; c < h; ++c) x[last + c] += 0.5;
  const kernels::HostBuffer<double> y2 = block.Forward(x, &s2);
  for (int64_t i = 0; i < static_cast<int64_t>(y1.size()); ++i) {
    if (i >= last && i < last + h) {
      EXPECT_NE(y1[i], y2[i]) << i;
    } else {
      EXPECT_EQ(y1[i], y2[i]) << i;
    }
  }
}

// Activation recompute: after F a selective block holds everything but the probabilities and a
// full block only its input x; B then W (and the fused BW) give dx and every weight gradient bit
// for bit as without recompute, and the rebuild's time is counted.
TEST(TransformerBlockTest, RecomputeDropsWhatItShouldAndChangesNoBit) {
  const BlockDims base{2, 5, 8, 2, 12};
  const int64_t n = base.tokens() * base.hidden;
  const std::vector<double> xd = RandomVector(n, 70), dyd = RandomVector(n, 71);
  const kernels::HostBuffer<float> x(xd.begin(), xd.end()), dy(dyd.begin(), dyd.end());
  struct Out {
    kernels::HostBuffer<float> y, dx, dx_fused;
    std::array<kernels::HostBuffer<float>, kTensors> grad, grad_fused;
    int64_t bytes_after_f = 0, recompute_ns = 0;
    size_t probs_after_f = 0, a_after_f = 0, x_after_f = 0;
  };
  auto run = [&](Recompute r) {
    BlockDims d = base;
    d.recompute = r;
    Out out;
    Weights<float> w(d, 80), wf(d, 80);
    TransformerBlock<float> block(d, w.W(), w.G(), Rope(d)), fused(d, wf.W(), wf.G(), Rope(d));
    BlockSaved<float> s, sf;
    out.y = block.Forward(x, &s);
    out.bytes_after_f = s.Bytes();
    out.probs_after_f = s.probs.size();
    out.a_after_f = s.a.size();
    out.x_after_f = s.x.size();
    out.dx = block.BackwardInput(dy, &s);
    block.BackwardWeight(&s);
    EXPECT_EQ(s.Bytes(), 0);
    (void)fused.Forward(x, &sf);
    out.dx_fused = fused.BackwardFused(dy, &sf);
    out.grad = w.grad;
    out.grad_fused = wf.grad;
    out.recompute_ns = block.recompute_ns() + fused.recompute_ns();
    return out;
  };
  const Out none = run(Recompute::kNone);
  EXPECT_EQ(none.recompute_ns, 0);
  const int64_t probs_bytes = static_cast<int64_t>(none.probs_after_f * sizeof(float));
  for (Recompute r : {Recompute::kSelective, Recompute::kFull}) {
    const Out got = run(r);
    const char* name = r == Recompute::kSelective ? "selective" : "full";
    EXPECT_EQ(got.y, none.y) << name;
    EXPECT_EQ(got.dx, none.dx) << name;
    EXPECT_EQ(got.dx_fused, none.dx_fused) << name;
    for (int i = 0; i < kTensors; ++i) {
      EXPECT_EQ(got.grad[i], none.grad[i]) << name << " " << kNames[i];
      EXPECT_EQ(got.grad_fused[i], none.grad_fused[i]) << name << " " << kNames[i];
    }
    EXPECT_EQ(got.probs_after_f, 0u) << name;
    EXPECT_GT(got.recompute_ns, 0) << name;
    if (r == Recompute::kSelective) {
      EXPECT_EQ(got.bytes_after_f, none.bytes_after_f - probs_bytes);
      EXPECT_EQ(got.a_after_f, none.a_after_f);
    } else {
      EXPECT_EQ(got.bytes_after_f, n * static_cast<int64_t>(sizeof(float)));  // x alone
      EXPECT_EQ(got.x_after_f, static_cast<size_t>(n));
      EXPECT_EQ(got.a_after_f, 0u);
    }
  }
}

}  // namespace
}  // namespace pipecoord::model
