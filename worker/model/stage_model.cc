#include "worker/model/stage_model.h"

#include <algorithm>
#include <cmath>
#include <string>
#include <utility>

#include "kernels/cpu/embedding.h"
#include "kernels/cpu/rng.h"
#include "worker/model/weight_init.h"

namespace pipecoord::model {
namespace {

std::string Mb(int mb) { return "micro-batch " + std::to_string(mb); }

Status CheckIds(const char* field, const kernels::HostBuffer<int32_t>& ids, int64_t want, int vocab) {
  if (static_cast<int64_t>(ids.size()) != want) {
    return InvalidArgument(std::string(field) + ": expected " + std::to_string(want) +
                           " ids (micro_batch_size x seq_len), got " + std::to_string(ids.size()));
  }
  for (size_t i = 0; i < ids.size(); ++i) {
    if (ids[i] < 0 || ids[i] >= vocab) {
      return InvalidArgument(std::string(field) + "[" + std::to_string(i) + "]: must be in [0, " +
                             std::to_string(vocab) + "), got " + std::to_string(ids[i]));
    }
  }
  return Status::Ok();
}

}  // namespace

int64_t StageModel::MicroBatch::Bytes() const {
  int64_t n = static_cast<int64_t>(tokens.size() * sizeof(int32_t) +
                                   embed_grad.size() * sizeof(float)) +
              head.Bytes();
  for (const auto& b : blocks) n += b.Bytes();
  return n;
}

Result<std::unique_ptr<StageModel>> StageModel::Create(const ModelConfig& config,
                                                       const StageShard& shard,
                                                       const BatchShape& batch,
                                                       worker::parallel::TensorParallel* tp,
                                                       bool sequence_parallel) {
  PIPECOORD_RETURN_IF_ERROR(config.Validate());
  PIPECOORD_RETURN_IF_ERROR(ValidateShard(config, shard));
  PIPECOORD_RETURN_IF_ERROR(batch.Validate());
  const int t = tp != nullptr ? tp->size() : 1;
  PIPECOORD_RETURN_IF_ERROR(CheckTensorParallel(config, t));
  if (sequence_parallel && (t < 2 || (batch.micro_batch_size * config.seq_len) % t != 0)) {
    return InvalidArgument("sequence_parallel: needs tp > 1 dividing micro_batch_size x seq_len (" +
                           std::to_string(batch.micro_batch_size * config.seq_len) + "), tp is " + std::to_string(t));
  }
  std::unique_ptr<StageModel> m(new StageModel(config, shard, batch, t > 1 ? tp : nullptr));
  m->dims_.sp = sequence_parallel;
  m->Build();
  return m;
}

StageModel::StageModel(const ModelConfig& config, const StageShard& shard,
                       const BatchShape& batch, worker::parallel::TensorParallel* tp)
    : config_(config), shard_(shard), batch_(batch), tp_(tp) {
  dims_.batch = batch.micro_batch_size;
  dims_.seq = config.seq_len;
  dims_.hidden = config.hidden;
  dims_.heads = config.heads;
  dims_.kv_heads = config.KvHeads();
  dims_.window = config.sliding_window;
  dims_.explicit_head_dim = config.head_dim;
  dims_.ffn = config.FfnHidden();
  dims_.norm_eps = config.rms_norm_eps;
  dims_.tp = tp != nullptr ? tp->size() : 1;
}

Status StageModel::TensorParallelStatus() const { return tp_ != nullptr ? tp_->status() : Status::Ok(); }

void StageModel::Build() {
  const int64_t h = dims_.hidden, f = dims_.ffn, V = config_.vocab, kv = config_.KvWidth(), q = config_.QWidth();
  const int tp = static_cast<int>(dims_.tp), rank = tp_ != nullptr ? tp_->rank() : 0;
  const double depth = std::sqrt(2.0 * config_.layers);
  // The whole [rows, cols] tensor from (seed, name), then this rank's slice of it.
  // init_name: the tensor whose initial values it takes (a tied head's copy: the embedding's).
  auto add = [&](const std::string& name, std::vector<int64_t> shape, double std, bool decay,
                 const std::string& init_name = "") {
    const TpSplit split = TpSplitOf(name);
    const auto [rows, cols] = RowsCols(shape);
    kernels::HostBuffer<float> whole(static_cast<size_t>(rows * cols));
    if (std == -2) {
      std::fill(whole.begin(), whole.end(), 0.0f);  // bias
    } else if (std < 0) {
      std::fill(whole.begin(), whole.end(), 1.0f);  // norm gain
    } else {
      InitUniform(whole, config_.seed, init_name.empty() ? name : init_name, std);
    }
    if (tp > 1 && split == TpSplit::kRows) shape[0] /= tp;
    if (tp > 1 && split == TpSplit::kColumns) shape[1] /= tp;
    Parameter* p = params_.Add(name, std::move(shape), decay);
    const std::vector<float> mine = TensorParallelSlice(whole, rows, cols, split, tp, rank);
    p->value.assign(mine.begin(), mine.end());
    return p;
  };
  const double kOnes = -1;
  // Tied, the embedding is the head too: the head's scale, so the first logits are as an untied
  // model's (GPT-2 and Megatron start both at 0.02 for the same reason).
  const double kEmbeddingStd = config_.tied_embeddings ? 1.0 / std::sqrt(static_cast<double>(h)) : 1.0;
  if (shard_.has_embedding) embedding_ = add("tok_embeddings.weight", {V, h}, kEmbeddingStd, true);
  auto rope = std::make_shared<const kernels::cpu::RopeTable>(
      kernels::cpu::MakeRopeTable(dims_.seq, config_.HeadDim(), config_.rope_theta, config_.rope_scaling));
  blocks_.reserve(static_cast<size_t>(shard_.num_layers));
  for (int l = shard_.first_layer; l < shard_.first_layer + shard_.num_layers; ++l) {
    const std::string p = "layers." + std::to_string(l) + ".";
    BlockTensors<const float> w;
    BlockTensors<float> g;
    std::array<Parameter*, 12>& held = block_params_.emplace_back();
    held.fill(nullptr);
    int next = 0;  // BlockTensors' order: attention_norm, wq, wk, wv, wo, ffn_norm, w1, w2, w3, bq, bk, bv
    auto bind = [&](Parameter* param, const float** wp, float** gp) {
      held[next++] = param;
      *wp = param->value.data();
      *gp = param->grad.data();
    };
    const double in_std = 1.0 / std::sqrt(static_cast<double>(h));
    bind(add(p + "attention_norm.weight", {h}, kOnes, false), &w.attention_norm,
         &g.attention_norm);
    bind(add(p + "attention.wq.weight", {q, h}, in_std, true), &w.wq, &g.wq);
    bind(add(p + "attention.wk.weight", {kv, h}, in_std, true), &w.wk, &g.wk);
    bind(add(p + "attention.wv.weight", {kv, h}, in_std, true), &w.wv, &g.wv);
    bind(add(p + "attention.wo.weight", {h, q}, 1.0 / std::sqrt(static_cast<double>(q)) / depth, true), &w.wo, &g.wo);
    bind(add(p + "ffn_norm.weight", {h}, kOnes, false), &w.ffn_norm, &g.ffn_norm);
    bind(add(p + "feed_forward.w1.weight", {f, h}, in_std, true), &w.w1, &g.w1);
    bind(add(p + "feed_forward.w2.weight", {h, f}, 1.0 / std::sqrt(static_cast<double>(f)) / depth,
             true),
         &w.w2, &g.w2);
    bind(add(p + "feed_forward.w3.weight", {f, h}, in_std, true), &w.w3, &g.w3);
    if (config_.qkv_bias) {  // zero at start (Megatron's and transformers' init), never decayed
      const double kZeros = -2;
      bind(add(p + "attention.wq.bias", {q}, kZeros, false), &w.bq, &g.bq);
      bind(add(p + "attention.wk.bias", {kv}, kZeros, false), &w.bk, &g.bk);
      bind(add(p + "attention.wv.bias", {kv}, kZeros, false), &w.bv, &g.bv);
    }
    blocks_.emplace_back(dims_, w, g, rope, tp_);
  }
  if (shard_.has_head) {
    Parameter* norm = add("norm.weight", {h}, kOnes, false);
    // Tied: the embedding itself where this stage holds it (both paths add to its gradient), else
    // a copy started from the embedding's values (the same rows under tp: both split by rows).
    Parameter* out = !config_.tied_embeddings ? add("output.weight", {V, h}, 1.0 / std::sqrt(static_cast<double>(h)), true)
                     : embedding_ != nullptr  ? embedding_
                                              : add("output.weight", {V, h}, kEmbeddingStd, true, "tok_embeddings.weight");
    head_params_ = {norm, out};
    head_.emplace(HeadDims{dims_.tokens(), h, V, config_.rms_norm_eps, dims_.tp, dims_.sp},
                  HeadTensors<const float>{norm->value.data(), out->value.data()},
                  HeadTensors<float>{norm->grad.data(), out->grad.data()}, tp_);
  }
  params_.ShardMoments(1, 0);
}

Status StageModel::CheckInput(int mb, const StageInput& in) const {
  if (mb < 0) return InvalidArgument(Mb(mb) + ": ids must be >= 0");
  if (in_flight_.count(mb)) {
    return FailedPrecondition(Mb(mb) + ": forward already ran and its backward is pending");
  }
  const int64_t n = dims_.tokens();
  if (shard_.has_embedding) {
    PIPECOORD_RETURN_IF_ERROR(CheckIds("tokens", in.tokens, n, config_.vocab));
    if (!in.activations.empty()) {
      return InvalidArgument("activations: the embedding stage reads tokens, got " +
                             std::to_string(in.activations.size()) + " floats");
    }
  } else {
    if (static_cast<int64_t>(in.activations.size()) != activation_size()) {
      return InvalidArgument("activations: expected " + std::to_string(activation_size()) +
                             " floats (micro_batch_size x seq_len x hidden), got " +
                             std::to_string(in.activations.size()));
    }
    if (!in.tokens.empty()) {
      return InvalidArgument("tokens: only the embedding stage reads tokens, got " +
                             std::to_string(in.tokens.size()));
    }
  }
  if (shard_.has_head) {
    PIPECOORD_RETURN_IF_ERROR(CheckIds("targets", in.targets, n, config_.vocab));
  } else if (!in.targets.empty()) {
    return InvalidArgument("targets: only the head stage reads targets, got " +
                           std::to_string(in.targets.size()));
  }
  return Status::Ok();
}

Result<StageOutput> StageModel::Forward(int mb, StageInput input) {
  PIPECOORD_RETURN_IF_ERROR(CheckInput(mb, input));
  StageOutput out = ForwardInto(std::move(input), &in_flight_[mb]);
  PIPECOORD_RETURN_IF_ERROR(TensorParallelStatus());
  return out;
}

StageOutput StageModel::ForwardInto(StageInput input, MicroBatch* keep) {
  kernels::HostBuffer<float> x;
  if (shard_.has_embedding) {
    x.resize(dims_.tokens() * dims_.hidden);
    if (tp_ == nullptr) {
      kernels::cpu::EmbeddingForward(embedding_->value.data(), input.tokens.data(), x.data(),
                                     dims_.tokens(), dims_.hidden);
    } else {
      // Vocabulary-parallel: this rank's rows, zeros for the others' tokens, summed over the group
      // (one rank adds each token's row to zeros, so the sum is that row exactly).
      const int64_t rows = config_.vocab / dims_.tp, first = rows * tp_->rank(), h = dims_.hidden;
      for (int64_t r = 0; r < dims_.tokens(); ++r) {
        const int64_t id = input.tokens[r] - first;
        if (id >= 0 && id < rows) std::copy_n(embedding_->value.data() + id * h, h, x.data() + r * h);
      }
      if (dims_.sp) {  // this rank's tokens of the sum
        x = worker::parallel::ScatterSequence(*tp_, std::move(x));
      } else {
        (void)tp_->ReduceFromTensorParallel(x);
      }
    }
    if (keep != nullptr) keep->tokens = std::move(input.tokens);
  } else {
    x = std::move(input.activations);
  }
  // Nothing kept: each block's saved state is dropped as soon as the block is done, so the call
  // holds one block's worth at most (the same arithmetic, so the same bits).
  if (keep != nullptr) keep->blocks.resize(blocks_.size());
  for (size_t i = 0; i < blocks_.size(); ++i) {
    BlockSaved<float> dropped;
    x = blocks_[i].Forward(std::move(x), keep != nullptr ? &keep->blocks[i] : &dropped);
  }
  StageOutput out;
  if (head_) {
    HeadSaved<float> dropped;
    out.loss = head_->Forward(std::move(x), input.targets, keep != nullptr ? &keep->head : &dropped);
  } else {
    out.activations = std::move(x);
  }
  return out;
}

Result<std::span<const float>> StageModel::Logits(int mb) const {
  if (!shard_.has_head) return FailedPrecondition("logits: only the head stage has them");
  if (dims_.tp > 1) return FailedPrecondition("logits: under tp no rank holds a whole row of them");
  auto it = in_flight_.find(mb);
  if (it == in_flight_.end() || it->second.head.logits.empty()) {
    return FailedPrecondition("logits: micro-batch " + std::to_string(mb) + " has no forward whose backward is still to run");
  }
  return std::span<const float>(it->second.head.logits.data(), it->second.head.logits.size());
}

Result<StageOutput> StageModel::ForwardOnly(StageInput input) {
  PIPECOORD_RETURN_IF_ERROR(CheckInput(0x7fffffff, input));  // an id no schedule uses
  StageOutput out = ForwardInto(std::move(input), nullptr);
  PIPECOORD_RETURN_IF_ERROR(TensorParallelStatus());
  return out;
}

Result<StageOutput> StageModel::ReplayForward(int mb) {
  auto it = in_flight_.find(mb);
  if (it == in_flight_.end()) return FailedPrecondition(Mb(mb) + ": replay needs its forward first");
  if (it->second.phase != Phase::kForwardDone) {
    return FailedPrecondition(Mb(mb) + ": replay needs the input its F read, released by its B");
  }
  const MicroBatch& state = it->second;
  StageInput in;  // copies of what F read, from what it kept for the backward
  if (shard_.has_embedding) {
    in.tokens.assign(state.tokens.begin(), state.tokens.end());
  } else if (!state.blocks.empty()) {
    in.activations.assign(state.blocks[0].x.begin(), state.blocks[0].x.end());
  } else {
    in.activations.assign(state.head.x.begin(), state.head.x.end());
  }
  if (shard_.has_head) in.targets.assign(state.head.targets.begin(), state.head.targets.end());
  return ForwardOnly(std::move(in));
}

Result<StageOutput> StageModel::SeededForward(uint64_t seed) {
  kernels::cpu::Rng rng(seed);
  StageInput in;
  const int64_t n = dims_.tokens();
  if (shard_.has_embedding) {
    in.tokens.resize(n);
    for (int32_t& t : in.tokens) t = static_cast<int32_t>(rng.Below(static_cast<uint32_t>(config_.vocab)));
  } else {
    in.activations.resize(activation_size());
    kernels::cpu::Rng own(dims_.sp && tp_ != nullptr ? kernels::cpu::CombineSeeds(seed, tp_->rank()) : seed);
    own.FillUniform(in.activations.data(), static_cast<int64_t>(in.activations.size()), -1, 1);
  }
  if (shard_.has_head) {
    kernels::cpu::Rng targets(kernels::cpu::CombineSeeds(seed, 0x74617267ULL));  // "targ"
    in.targets.resize(n);
    for (int32_t& t : in.targets) t = static_cast<int32_t>(targets.Below(static_cast<uint32_t>(config_.vocab)));
  }
  return ForwardOnly(std::move(in));
}

bool StageModel::Replayable(int mb) const {
  auto it = in_flight_.find(mb);
  return it != in_flight_.end() && it->second.phase == Phase::kForwardDone;
}

Result<StageModel::MicroBatch*> StageModel::Find(int mb, Phase phase, const char* what) {
  auto it = in_flight_.find(mb);
  if (it == in_flight_.end()) {
    return FailedPrecondition(Mb(mb) + ": " + what + " needs its forward first");
  }
  if (it->second.phase != phase) {
    return FailedPrecondition(Mb(mb) + ": " + what +
                              (phase == Phase::kForwardDone
                                   ? " already ran; its weight gradient (W) is pending"
                                   : " needs its input gradient (B) first"));
  }
  return &it->second;
}

Result<kernels::HostBuffer<float>> StageModel::Backward(int mb, kernels::HostBuffer<float> grad_output,
                                                bool fused) {
  auto found = Find(mb, Phase::kForwardDone, fused ? "fused backward" : "input gradient (B)");
  if (!found.ok()) return found.status();
  MicroBatch* state = *found;
  const int64_t size = activation_size();
  if (head_ && !grad_output.empty()) {
    return InvalidArgument("grad_output: the head stage starts from its loss; pass none, got " +
                           std::to_string(grad_output.size()) + " floats");
  }
  if (!head_ && static_cast<int64_t>(grad_output.size()) != size) {
    return InvalidArgument("grad_output: expected " + std::to_string(size) +
                           " floats (micro_batch_size x seq_len x hidden), got " +
                           std::to_string(grad_output.size()));
  }
  if (fused) EnsureGradients();
  kernels::HostBuffer<float> g = std::move(grad_output);
  if (head_) {
    const double dloss = 1.0 / batch_.microbatches;
    g = fused ? head_->BackwardFused(dloss, &state->head)
              : head_->BackwardInput(dloss, &state->head);
  }
  for (size_t i = blocks_.size(); i-- > 0;) {
    g = fused ? blocks_[i].BackwardFused(std::move(g), &state->blocks[i])
              : blocks_[i].BackwardInput(std::move(g), &state->blocks[i]);
  }
  kernels::HostBuffer<float> dx;
  if (shard_.has_embedding) {
    state->embed_grad = std::move(g);  // token ids take no gradient: B ends here
  } else {
    dx = std::move(g);
  }
  if (fused) {
    if (shard_.has_embedding) EmbeddingWeightGrad(state);  // all that is left of W
    in_flight_.erase(mb);
  } else {
    state->phase = Phase::kInputGradDone;
  }
  PIPECOORD_RETURN_IF_ERROR(TensorParallelStatus());
  return dx;
}

Result<kernels::HostBuffer<float>> StageModel::BackwardInput(int mb, kernels::HostBuffer<float> grad_output) {
  return Backward(mb, std::move(grad_output), /*fused=*/false);
}

Result<kernels::HostBuffer<float>> StageModel::BackwardFused(int mb, kernels::HostBuffer<float> grad_output) {
  return Backward(mb, std::move(grad_output), /*fused=*/true);
}

void StageModel::EmbeddingWeightGrad(MicroBatch* state) {
  if (dims_.sp) {  // B kept this rank's tokens' rows; the rows of every token, again
    state->embed_grad = worker::parallel::GatherSequence(*tp_, state->embed_grad);
  }
  if (tp_ == nullptr) {
    kernels::cpu::EmbeddingBackwardWeight(state->embed_grad.data(), state->tokens.data(),
                                          embedding_->grad.data(), dims_.tokens(), dims_.hidden);
    return;
  }
  // This rank's rows only, in token order as the kernel adds them.
  const int64_t rows = config_.vocab / dims_.tp, first = rows * tp_->rank(), h = dims_.hidden;
  for (int64_t r = 0; r < dims_.tokens(); ++r) {
    const int64_t id = state->tokens[r] - first;
    if (id < 0 || id >= rows) continue;
    float* dst = embedding_->grad.data() + id * h;
    const float* src = state->embed_grad.data() + r * h;
    for (int64_t k = 0; k < h; ++k) dst[k] += src[k];
  }
}

Status StageModel::BackwardWeight(int mb) {
  auto found = Find(mb, Phase::kInputGradDone, "weight gradient (W)");
  if (!found.ok()) return found.status();
  EnsureGradients();
  MicroBatch* state = *found;
  if (head_) head_->BackwardWeight(&state->head);
  for (size_t i = blocks_.size(); i-- > 0;) blocks_[i].BackwardWeight(&state->blocks[i]);
  if (shard_.has_embedding) EmbeddingWeightGrad(state);
  in_flight_.erase(mb);
  return Status::Ok();
}

Result<kernels::HostBuffer<float>> StageModel::BackwardFull(int mb, kernels::HostBuffer<float> grad_output) {
  auto dx = BackwardInput(mb, std::move(grad_output));
  if (!dx.ok()) return dx;
  PIPECOORD_RETURN_IF_ERROR(BackwardWeight(mb));  // dx, on its way out, is held meanwhile
  return dx;
}

void StageModel::ZeroGrad() { params_.ZeroGrad(); }

Status StageModel::OptimizerStep(const kernels::cpu::AdamWOptions& options) {
  auto in_range = [](const char* field, double v, double lo, double hi) {
    if (v >= lo && v < hi) return Status::Ok();
    return InvalidArgument(std::string(field) + ": must be in [" + std::to_string(lo) + ", " +
                           std::to_string(hi) + "), got " + std::to_string(v));
  };
  PIPECOORD_RETURN_IF_ERROR(in_range("lr", options.lr, 0.0, 1e30));
  PIPECOORD_RETURN_IF_ERROR(in_range("beta1", options.beta1, 0.0, 1.0));
  PIPECOORD_RETURN_IF_ERROR(in_range("beta2", options.beta2, 0.0, 1.0));
  PIPECOORD_RETURN_IF_ERROR(in_range("eps", options.eps, 0.0, 1e30));
  PIPECOORD_RETURN_IF_ERROR(in_range("weight_decay", options.weight_decay, 0.0, 1e30));
  if (!in_flight_.empty()) {
    return FailedPrecondition(std::to_string(in_flight_.size()) +
                              " micro-batch(es) still in flight (first: " +
                              Mb(in_flight_.begin()->first) +
                              "); run their backward passes before the optimizer step");
  }
  ++optimizer_steps_;
  // The elements whose moments this rank holds (all, or its ZeRO shard), element by element the
  // same arithmetic either way.
  for (const auto& p : params_.all()) {
    if (p->adam_m.empty()) continue;
    kernels::cpu::AdamWOptions o = options;
    if (!p->weight_decay) o.weight_decay = 0.0;
    const int64_t at = p->moment_begin;
    kernels::cpu::AdamWStep(p->value.data() + at, params_.OptimizerGrad(*p).data(), p->adam_m.data(), p->adam_v.data(),
                            static_cast<int64_t>(p->adam_m.size()), o, optimizer_steps_);
  }
  return Status::Ok();
}

void StageModel::SetRecompute(Recompute recompute) {
  dims_.recompute = recompute;
  for (TransformerBlock<float>& b : blocks_) b.set_recompute(recompute);
}

int64_t StageModel::recompute_ns() const {
  int64_t ns = 0;
  for (const TransformerBlock<float>& b : blocks_) ns += b.recompute_ns();
  return ns;
}

Status StageModel::FinalizeGradients() {
  if (!dims_.sp) return Status::Ok();
  // The norm gains' gradients cover this rank's tokens: summed over the group, in model order.
  for (const auto& p : params_.all()) {
    if (TpSplitOf(p->name) == TpSplit::kWhole) (void)tp_->ReduceFromTensorParallel(p->grad);
  }
  return TensorParallelStatus();
}

std::span<float> StageModel::TiedEmbeddingGradient() {
  if (!config_.tied_embeddings) return {};
  if (embedding_ != nullptr) return embedding_->grad;
  return head_params_[1] != nullptr ? std::span<float>(head_params_[1]->grad) : std::span<float>();
}

double StageModel::GradientSquareSum(bool count_replicated) const {
  double sum = 0;
  for (const auto& p : params_.all()) {
    if (p.get() == head_params_[1] && TiedHeadCopy()) continue;  // the embedding's stage counts it
    if (tp_ != nullptr && tp_->size() > 1 && !count_replicated && TpSplitOf(p->name) == TpSplit::kWhole) continue;
    for (float g : params_.OptimizerGrad(*p)) sum += static_cast<double>(g) * g;
  }
  return sum;
}

void StageModel::ScaleGradients(float factor) {
  for (const auto& p : params_.all()) {
    for (float& g : params_.gradients_released() ? params_.OptimizerGrad(*p) : std::span<float>(p->grad)) g *= factor;
  }
}

void StageModel::ReleaseGradients() { params_.ReleaseGradients(); }

void StageModel::EnsureGradients() {
  if (!params_.RestoreGradients()) return;
  // The tensors' gradients moved: every block and the head take their new addresses.
  for (size_t i = 0; i < blocks_.size(); ++i) {
    const std::array<Parameter*, 12>& p = block_params_[i];
    auto grad = [&](int k) { return p[k] != nullptr ? p[k]->grad.data() : nullptr; };
    blocks_[i].set_grads({grad(0), grad(1), grad(2), grad(3), grad(4), grad(5), grad(6), grad(7), grad(8), grad(9),
                          grad(10), grad(11)});
  }
  if (head_) head_->set_grads({head_params_[0]->grad.data(), head_params_[1]->grad.data()});
}

Status StageModel::ShardOptimizerStates(int shards, int index, bool shard_gradients) {
  PIPECOORD_RETURN_IF_ERROR(CheckOptimizerShard(shards, index, optimizer_steps_));
  params_.ShardMoments(shards, index);
  if (shard_gradients) {  // ZeRO-2: the gradients live only from a step's first W to its OPT
    params_.KeepShardGradients();
    params_.ReleaseGradients();
  }
  return Status::Ok();
}

Result<ParameterRef> StageModel::FindParameter(std::string_view name) {
  for (const ParameterRef& r : params_.Refs()) {
    if (r.name == name) return r;
  }
  return NotFound("parameter \"" + std::string(name) + "\": not held by stage " +
                  std::to_string(shard_.stage));
}

int64_t StageModel::ActivationBytes() const {
  int64_t n = 0;
  for (const auto& [mb, state] : in_flight_) n += state.Bytes();
  return n;
}

}  // namespace pipecoord::model
