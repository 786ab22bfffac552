// Tensor parallelism in the block (Megatron's split) against the whole block: tp 2 and 4 ranks,
// each on its own thread with its own slices and a real TCP ring between them, give the whole
// block's output, input gradient and weight gradients (their slices) within 1e-5, bit-identical
// on every rank; B then W equals the fused backward bit for bit; the bytes each rank sends are
// Megatron's 4 all-reduces of tokens x hidden per block and micro-batch (2 in F, 2 in B, none in
// W), exactly; and a negative control (the partial sums never added up) is far off.
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <memory>
#include <thread>
#include <vector>

#include "kernels/cpu/gradient_check.h"
#include "kernels/cpu/rotary.h"
#include "worker/model/lm_head.h"
#include "worker/model/transformer_block.h"
#include "worker/model/weight_init.h"
#include "worker/parallel/tensor_parallel.h"
#include "worker/transport/test_util.h"

namespace pipecoord::model {
namespace {

// TensorParallelSlice as the model's buffer type.
template <typename... A>
kernels::HostBuffer<float> BufferSlice(A&&... args) {
  return kernels::ToHostBuffer(TensorParallelSlice(std::forward<A>(args)...));
}

using kernels::cpu::testing::RandomVector;
using worker::parallel::Group;
using worker::parallel::RingTensorParallel;
using worker::parallel::TensorParallel;

constexpr int kTensors = 9;  // attention_norm, wq, wk, wv, wo, ffn_norm, w1, w2, w3
const TpSplit kSplit[kTensors] = {TpSplit::kWhole, TpSplit::kRows,  TpSplit::kRows,
                                  TpSplit::kRows,  TpSplit::kColumns, TpSplit::kWhole,
                                  TpSplit::kRows,  TpSplit::kColumns, TpSplit::kRows};
const BlockDims kDims{2, 6, 16, 4, 32};  // b, s, h, heads, ffn: tokens x hidden = 192

// [rows, cols] of each tensor.
std::array<std::pair<int64_t, int64_t>, kTensors> Shapes(const BlockDims& d) {
  const int64_t h = d.hidden, f = d.ffn, kv = d.kv() * d.head_dim();
  return {{{1, h}, {h, h}, {kv, h}, {kv, h}, {h, h}, {1, h}, {f, h}, {h, f}, {f, h}}};
}

struct Tensors {
  std::array<kernels::HostBuffer<float>, kTensors> value, grad;
  BlockTensors<const float> W() const {
    return {value[0].data(), value[1].data(), value[2].data(), value[3].data(), value[4].data(),
            value[5].data(), value[6].data(), value[7].data(), value[8].data()};
  }
  BlockTensors<float> G() {
    return {grad[0].data(), grad[1].data(), grad[2].data(), grad[3].data(), grad[4].data(),
            grad[5].data(), grad[6].data(), grad[7].data(), grad[8].data()};
  }
};

Tensors Whole(const BlockDims& d) {
  Tensors t;
  const auto shapes = Shapes(d);
  for (int i = 0; i < kTensors; ++i) {
    const int64_t n = shapes[i].first * shapes[i].second;
    std::vector<double> r = RandomVector(n, 100 + i);
    for (double x : r) t.value[i].push_back(static_cast<float>(shapes[i].first == 1 ? 1.0 + 0.3 * x : 0.5 * x));
    t.grad[i].assign(n, 0.f);
  }
  return t;
}

Tensors Slice(const Tensors& whole, const BlockDims& d, int tp, int rank) {
  Tensors t;
  const auto shapes = Shapes(d);
  for (int i = 0; i < kTensors; ++i) {
    t.value[i] = BufferSlice(whole.value[i], shapes[i].first, shapes[i].second, kSplit[i], tp, rank);
    t.grad[i].assign(t.value[i].size(), 0.f);
  }
  return t;
}

kernels::HostBuffer<float> Floats(int64_t n, uint64_t seed) {
  kernels::HostBuffer<float> out;
  for (double x : RandomVector(n, seed)) out.push_back(static_cast<float>(x));
  return out;
}

double RelMaxError(const kernels::HostBuffer<float>& got, const kernels::HostBuffer<float>& want) {
  double err = 0, scale = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    err = std::max(err, std::fabs(static_cast<double>(got[i]) - want[i]));
    scale = std::max(scale, std::fabs(static_cast<double>(want[i])));
  }
  return err / scale;
}

bool SameBits(const kernels::HostBuffer<float>& a, const kernels::HostBuffer<float>& b) {
  return a.size() == b.size() && (a.empty() || std::memcmp(a.data(), b.data(), a.size() * 4) == 0);
}

std::shared_ptr<const kernels::cpu::RopeTable> Rope(const BlockDims& d) {
  return std::make_shared<const kernels::cpu::RopeTable>(kernels::cpu::MakeRopeTable(d.seq, d.hidden / d.heads));
}

struct RankResult {
  kernels::HostBuffer<float> y, dx, dx_fused;
  Tensors split, fused;
  uint64_t bytes_after_f = 0, bytes_after_b = 0, bytes_after_w = 0;
  Status status;
};

// One tensor-parallel rank: F, B, W on one micro-batch, then F and the fused backward on the
// same input with fresh gradients.
RankResult RunRank(const Tensors& whole, BlockDims d, int tp, int rank, TensorParallel* group,
                   const kernels::HostBuffer<float>& x, const kernels::HostBuffer<float>& dy) {
  d.tp = tp;
  RankResult r;
  r.split = Slice(whole, d, tp, rank);
  r.fused = Slice(whole, d, tp, rank);
  TransformerBlock<float> block(d, r.split.W(), r.split.G(), Rope(d), group);
  BlockSaved<float> saved;
  r.y = block.Forward(x, &saved);
  r.bytes_after_f = group->bytes_sent();
  r.dx = block.BackwardInput(dy, &saved);
  r.bytes_after_b = group->bytes_sent();
  block.BackwardWeight(&saved);
  r.bytes_after_w = group->bytes_sent();
  TransformerBlock<float> fused(d, r.fused.W(), r.fused.G(), Rope(d), group);
  BlockSaved<float> saved2;
  (void)fused.Forward(x, &saved2);
  r.dx_fused = fused.BackwardFused(dy, &saved2);
  r.status = group->status();
  return r;
}

void CheckRanksTogetherAreTheWholeBlock(const BlockDims& kDims, const std::vector<int>& tps) {
  const Tensors whole = Whole(kDims);
  const int64_t n = kDims.tokens(), h = kDims.hidden;
  const kernels::HostBuffer<float> x = Floats(n * h, 7), dy = Floats(n * h, 8);
  Tensors ref = whole;
  TransformerBlock<float> one(kDims, ref.W(), ref.G(), Rope(kDims));
  BlockSaved<float> saved;
  const kernels::HostBuffer<float> y = one.Forward(x, &saved);
  const kernels::HostBuffer<float> dx = one.BackwardInput(dy, &saved);
  one.BackwardWeight(&saved);
  const auto shapes = Shapes(kDims);

  for (int tp : tps) {
    SCOPED_TRACE("tp " + std::to_string(tp));
    auto mesh = worker::testing::MakeMesh(tp);
    ASSERT_TRUE(mesh.ok()) << mesh.status().ToString();
    std::vector<int> ranks(tp);
    for (int i = 0; i < tp; ++i) ranks[i] = i;
    std::vector<RankResult> results(tp);
    std::vector<std::thread> threads;
    for (int r = 0; r < tp; ++r) {
      threads.emplace_back([&, r] {
        RingTensorParallel group((*mesh)[r].get(), Group{ranks, r}, std::chrono::seconds(20));
        results[r] = RunRank(whole, kDims, tp, r, &group, x, dy);
      });
    }
    for (auto& t : threads) t.join();
    // Megatron's closed form: a ring all-reduce sends 2 (tp - 1) / tp of the tensor.
    const uint64_t per_all_reduce = 2 * (tp - 1) * n * h * sizeof(float) / tp;
    for (int r = 0; r < tp; ++r) {
      const RankResult& got = results[r];
      ASSERT_TRUE(got.status.ok()) << got.status.ToString();
      EXPECT_LE(RelMaxError(got.y, y), 1e-5) << "rank " << r;
      EXPECT_LE(RelMaxError(got.dx, dx), 1e-5) << "rank " << r;
      EXPECT_TRUE(SameBits(got.y, results[0].y)) << "rank " << r;
      EXPECT_TRUE(SameBits(got.dx, results[0].dx)) << "rank " << r;
      EXPECT_TRUE(SameBits(got.dx_fused, got.dx)) << "rank " << r;
      for (int i = 0; i < kTensors; ++i) {
        const kernels::HostBuffer<float> want =
            BufferSlice(ref.grad[i], shapes[i].first, shapes[i].second, kSplit[i], tp, r);
        EXPECT_LE(RelMaxError(got.split.grad[i], want), 1e-5) << "rank " << r << " tensor " << i;
        EXPECT_TRUE(SameBits(got.fused.grad[i], got.split.grad[i])) << "rank " << r << " tensor " << i;
      }
      EXPECT_EQ(got.bytes_after_f, 2 * per_all_reduce);
      EXPECT_EQ(got.bytes_after_b, 4 * per_all_reduce);
      EXPECT_EQ(got.bytes_after_w, 4 * per_all_reduce) << "W needs no communication";
    }
  }
}

TEST(TransformerBlockTensorParallelTest, RanksTogetherAreTheWholeBlock) { CheckRanksTogetherAreTheWholeBlock(kDims, {2, 4}); }

// Grouped-query attention: each rank holds its query heads and the key/value heads they read
// (8 heads over 4 key/value heads: with tp 2, heads 0-3 and key/value heads 0-1 on rank 0).
TEST(TransformerBlockTensorParallelTest, GroupedQueryRanksTogetherAreTheWholeBlock) {
  CheckRanksTogetherAreTheWholeBlock({.batch = 2, .seq = 6, .hidden = 32, .heads = 8, .ffn = 32, .kv_heads = 4}, {2, 4});
}

// A group that never adds the partial sums up: what a block that forgot Megatron's g gives.
class NoReduce final : public TensorParallel {
 public:
  explicit NoReduce(int size, int rank) : size_(size), rank_(rank) {}
  int size() const override { return size_; }
  int rank() const override { return rank_; }
  Status ReduceFromTensorParallel(std::span<float>) override { return Status::Ok(); }
  Status GatherFromTensorParallel(std::span<const float>, std::span<float>) override { return Status::Ok(); }
  Status ReduceScatterToSequenceParallel(std::span<float>, std::span<float>) override { return Status::Ok(); }
  Status ReduceFromTensorParallel(worker::parallel::FloatBuffer&) override { return Status::Ok(); }
  Status GatherFromTensorParallel(worker::parallel::FloatBuffer&) override { return Status::Ok(); }
  Status ReduceScatterToSequenceParallel(worker::parallel::FloatBuffer&) override { return Status::Ok(); }
  uint64_t bytes_sent() const override { return 0; }
  int64_t comm_ns() const override { return 0; }
  Status status() const override { return Status::Ok(); }

 private:
  int size_, rank_;
};

TEST(TransformerBlockTensorParallelTest, WithoutTheReductionTheOutputIsWrong) {
  const Tensors whole = Whole(kDims);
  const int64_t n = kDims.tokens(), h = kDims.hidden;
  const kernels::HostBuffer<float> x = Floats(n * h, 7);
  Tensors ref = whole;
  TransformerBlock<float> one(kDims, ref.W(), ref.G(), Rope(kDims));
  BlockSaved<float> saved;
  const kernels::HostBuffer<float> y = one.Forward(x, &saved);
  BlockDims d = kDims;
  d.tp = 2;
  Tensors part = Slice(whole, kDims, 2, 0);
  NoReduce broken(2, 0);
  TransformerBlock<float> half(d, part.W(), part.G(), Rope(d), &broken);
  BlockSaved<float> saved2;
  EXPECT_GT(RelMaxError(half.Forward(x, &saved2), y), 1e-2);
}

TEST(TensorParallelSliceTest, RowsAndColumnsPutBackTogetherAreTheWhole) {
  kernels::HostBuffer<float> whole(6 * 4);
  for (size_t i = 0; i < whole.size(); ++i) whole[i] = static_cast<float>(i);
  // kRows: rank 1 of 3 holds rows 2..3.
  EXPECT_EQ(BufferSlice(whole, 6, 4, TpSplit::kRows, 3, 1), kernels::HostBuffer<float>(whole.begin() + 8, whole.begin() + 16));
  // kColumns: rank 1 of 2 holds columns 2..3 of each row.
  EXPECT_EQ(BufferSlice(whole, 6, 4, TpSplit::kColumns, 2, 1),
            (kernels::HostBuffer<float>{2, 3, 6, 7, 10, 11, 14, 15, 18, 19, 22, 23}));
  EXPECT_EQ(BufferSlice(whole, 6, 4, TpSplit::kWhole, 2, 1), whole);
  // Megatron's split of the model's named tensors.
  for (const char* rows : {"layers.3.attention.wq.weight", "layers.0.attention.wk.weight", "layers.0.attention.wv.weight",
                           "layers.1.feed_forward.w1.weight", "layers.1.feed_forward.w3.weight", "output.weight",
                           "tok_embeddings.weight"}) {
    EXPECT_EQ(TpSplitOf(rows), TpSplit::kRows) << rows;
  }
  EXPECT_EQ(TpSplitOf("layers.2.attention.wo.weight"), TpSplit::kColumns);
  EXPECT_EQ(TpSplitOf("layers.2.feed_forward.w2.weight"), TpSplit::kColumns);
  for (const char* whole_name : {"layers.2.attention_norm.weight", "layers.2.ffn_norm.weight", "norm.weight"}) {
    EXPECT_EQ(TpSplitOf(whole_name), TpSplit::kWhole) << whole_name;
  }
}

// The vocabulary-parallel head and cross-entropy against the whole head: the same loss, input
// gradient and weight-gradient slices (1e-5), on every rank alike; B+W equal to the fused
// backward; bytes: the maxima gathered (tokens), S and z summed (2 tokens) in F, the input
// gradient summed (tokens x hidden) in B, nothing in W.
TEST(LmHeadTensorParallelTest, RanksTogetherAreTheWholeHead) {
  const HeadDims d{12, 16, 40, 1e-5};  // tokens, hidden, vocab
  const int64_t n = d.tokens, h = d.hidden, V = d.vocab;
  kernels::HostBuffer<float> norm, output;
  for (double x : RandomVector(h, 3)) norm.push_back(static_cast<float>(1.0 + 0.3 * x));
  for (double x : RandomVector(V * h, 4)) output.push_back(static_cast<float>(2.0 * x));  // logits of O(1-10)
  const kernels::HostBuffer<float> x = Floats(n * h, 5);
  kernels::HostBuffer<int32_t> targets(n);
  for (int64_t r = 0; r < n; ++r) targets[r] = static_cast<int32_t>((r * 7 + 3) % V);
  kernels::HostBuffer<float> gnorm(h, 0.f), goutput(V * h, 0.f);
  LmHead<float> whole(d, {norm.data(), output.data()}, {gnorm.data(), goutput.data()});
  HeadSaved<float> saved;
  const double loss = whole.Forward(x, targets, &saved);
  const kernels::HostBuffer<float> dx = whole.BackwardInput(0.25, &saved);
  whole.BackwardWeight(&saved);

  for (int tp : {2, 4}) {
    SCOPED_TRACE("tp " + std::to_string(tp));
    auto mesh = worker::testing::MakeMesh(tp);
    ASSERT_TRUE(mesh.ok()) << mesh.status().ToString();
    std::vector<int> ranks(tp);
    for (int i = 0; i < tp; ++i) ranks[i] = i;
    struct Got {
      double loss = 0, loss2 = 0;
      kernels::HostBuffer<float> dx, dx_fused, gnorm, goutput, gnorm_fused, goutput_fused;
      uint64_t after_f = 0, after_b = 0, after_w = 0;
      Status status;
    };
    std::vector<Got> got(tp);
    std::vector<std::thread> threads;
    for (int r = 0; r < tp; ++r) {
      threads.emplace_back([&, r] {
        RingTensorParallel group((*mesh)[r].get(), Group{ranks, r}, std::chrono::seconds(20));
        HeadDims dr = d;
        dr.tp = tp;
        const kernels::HostBuffer<float> mine = BufferSlice(output, V, h, TpSplit::kRows, tp, r);
        Got& g = got[r];
        g.gnorm.assign(h, 0.f);
        g.goutput.assign(mine.size(), 0.f);
        g.gnorm_fused = g.gnorm;
        g.goutput_fused = g.goutput;
        LmHead<float> head(dr, {norm.data(), mine.data()}, {g.gnorm.data(), g.goutput.data()}, &group);
        HeadSaved<float> s;
        g.loss = head.Forward(x, targets, &s);
        g.after_f = group.bytes_sent();
        g.dx = head.BackwardInput(0.25, &s);
        g.after_b = group.bytes_sent();
        head.BackwardWeight(&s);
        g.after_w = group.bytes_sent();
        LmHead<float> fused(dr, {norm.data(), mine.data()}, {g.gnorm_fused.data(), g.goutput_fused.data()}, &group);
        HeadSaved<float> s2;
        g.loss2 = fused.Forward(x, targets, &s2);
        g.dx_fused = fused.BackwardFused(0.25, &s2);
        g.status = group.status();
      });
    }
    for (auto& t : threads) t.join();
    const uint64_t gather = (tp - 1) * n * 4, sums = 2 * (tp - 1) * (2 * n) * 4 / tp,
                   grad = 2 * (tp - 1) * n * h * 4 / tp;
    for (int r = 0; r < tp; ++r) {
      const Got& g = got[r];
      ASSERT_TRUE(g.status.ok()) << g.status.ToString();
      EXPECT_NEAR(g.loss, loss, 1e-5 * std::fabs(loss)) << "rank " << r;
      EXPECT_EQ(g.loss, got[0].loss) << "every rank the same loss";
      EXPECT_EQ(g.loss2, g.loss);
      EXPECT_LE(RelMaxError(g.dx, dx), 1e-5) << "rank " << r;
      EXPECT_TRUE(SameBits(g.dx, got[0].dx));
      EXPECT_TRUE(SameBits(g.dx_fused, g.dx));
      EXPECT_LE(RelMaxError(g.gnorm, gnorm), 1e-5) << "rank " << r;
      EXPECT_LE(RelMaxError(g.goutput, BufferSlice(goutput, V, h, TpSplit::kRows, tp, r)), 1e-5);
      EXPECT_TRUE(SameBits(g.gnorm_fused, g.gnorm));
      EXPECT_TRUE(SameBits(g.goutput_fused, g.goutput));
      EXPECT_EQ(g.after_f, gather + sums);
      EXPECT_EQ(g.after_b, gather + sums + grad);
      EXPECT_EQ(g.after_w, g.after_b);
    }
  }
}

}  // namespace
}  // namespace pipecoord::model
