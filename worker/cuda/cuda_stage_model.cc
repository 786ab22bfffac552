#include "worker/cuda/cuda_stage_model.h"

#include <algorithm>
#include <cmath>
#include <string>
#include <type_traits>
#include <utility>

#include "kernels/cpu/rotary.h"
#include "kernels/cuda/adamw.h"
#include "kernels/cuda/attention.h"
#include "kernels/cuda/cross_entropy.h"
#include "kernels/cuda/embedding.h"
#include "kernels/cuda/gemm.h"
#include "kernels/cuda/rms_norm.h"
#include "kernels/cuda/rotary.h"
#include "kernels/cuda/swiglu.h"
#include "worker/cuda/device_gradients.h"
#include "worker/cuda/elementwise.h"
#include "worker/model/parameter_store.h"
#include "worker/parallel/collectives.h"
#include "worker/model/weight_init.h"

namespace pipecoord::worker::cuda {

namespace kc = kernels::cuda;
using kernels::DType;
using kernels::Tensor;
using kernels::TensorSpec;

namespace {

std::string Mb(int mb) { return "micro-batch " + std::to_string(mb); }

// AddParameter's std for a tensor that starts at zero (a bias); -1 (any negative) starts at one.
constexpr double kZerosInit = -2;

// Typed views of a tensor's device storage.
template <typename T>
T* Ptr(Tensor& t) {
  return static_cast<T*>(t.data());
}
template <typename T>
const T* Ptr(const Tensor& t) {
  return static_cast<const T*>(t.data());
}

// Assigns a Result's value to `lhs` or returns its error from the enclosing function.
#define PIPECOORD_CUDA_STAGE_ASSIGN(lhs, expr) \
  do {                                          \
    auto _result = (expr);                      \
    if (!_result.ok()) return _result.status(); \
    lhs = std::move(_result).value();           \
  } while (0)

Status CheckIds(const char* field, const std::vector<int32_t>& ids, int64_t want, int vocab) {
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

// A double's bytes on the device (kernels::DType has no f64): the loss scalars, the RoPE table.
TensorSpec Doubles(int64_t count) {
  return {DType::kU8, {count * static_cast<int64_t>(sizeof(double))}};
}

}  // namespace

// What one block keeps for one micro-batch (TransformerBlock's BlockSaved, on the device; lse
// replaces probs: flash attention recomputes the probabilities from the log-sum-exps).
struct CudaStageModel::BlockState {
  // From F. x, rstd1, a, o, x1, rstd2, c, z live until W; q, k, v, lse, gate, up until B.
  Tensor x, rstd1, a, q, k, v, lse, o, x1, rstd2, c, gate, up, z;
  // From B for W: the output gradients of each weight-carrying op.
  Tensor dy, dgate, dup, dc, dx1, dq, dk, dv, da;
};

// LmHead's HeadSaved on the device: x, rstd, y live until W; logits and targets until B (B turns
// the logits into their gradient in place); dlogits and dy from B for W.
struct CudaStageModel::HeadState {
  Tensor x, rstd, y, logits, targets, dlogits, dy;
};

struct CudaStageModel::MicroBatch {
  Phase phase = Phase::kForwardDone;
  Tensor tokens;      // embedding ids (device i32), until W
  Tensor embed_grad;  // gradient of the embedding output, B to W
  std::vector<BlockState> blocks;
  HeadState head;
};

// Indices into params_ of one block's nine tensors (twelve with the q, k, v biases).
struct CudaStageModel::Layer {
  int attention_norm, wq, wk, wv, wo, ffn_norm, w1, w2, w3;
  int bq = -1, bk = -1, bv = -1;  // the q, k, v biases (qkv_bias), -1 without
};

Result<std::unique_ptr<CudaStageModel>> CudaStageModel::Create(const model::ModelConfig& config,
                                                               const model::StageShard& shard,
                                                               const model::BatchShape& batch,
                                                               Precision precision,
                                                               CudaDevice* device,
                                                               parallel::TensorParallel* tp,
                                                               bool sequence_parallel) {
  PIPECOORD_RETURN_IF_ERROR(config.Validate());
  PIPECOORD_RETURN_IF_ERROR(model::ValidateShard(config, shard));
  PIPECOORD_RETURN_IF_ERROR(batch.Validate());
  if (device == nullptr) return InvalidArgument("CudaStageModel: device is null");
  const int t = tp != nullptr ? tp->size() : 1;
  PIPECOORD_RETURN_IF_ERROR(model::CheckTensorParallel(config, t));
  if (sequence_parallel && (t < 2 || config.seq_len % t != 0)) {
    return InvalidArgument("sequence_parallel: needs tp > 1 dividing seq_len (" + std::to_string(config.seq_len) +
                           "), tp is " + std::to_string(t));
  }
  const kernels::cpu::AttentionDims ad{batch.micro_batch_size, config.seq_len, config.heads / t,
                                       config.HeadDim(), config.KvHeads() / t, config.sliding_window};
  if (shard.num_layers > 0) PIPECOORD_RETURN_IF_ERROR(kc::CheckFlashAttentionDims(ad));
  std::unique_ptr<CudaStageModel> m(
      new CudaStageModel(config, shard, batch, precision, device, t > 1 ? tp : nullptr, sequence_parallel));
  PIPECOORD_RETURN_IF_ERROR(device->MakeCurrent());
  PIPECOORD_RETURN_IF_ERROR(m->Build());
  return m;
}

CudaStageModel::CudaStageModel(const model::ModelConfig& config, const model::StageShard& shard,
                               const model::BatchShape& batch, Precision precision,
                               CudaDevice* device, parallel::TensorParallel* tp, bool sequence_parallel)
    : config_(config), shard_(shard), batch_(batch), precision_(precision), device_(device), tp_(tp),
      sp_(sequence_parallel && tp != nullptr) {
  const int t = tp != nullptr ? tp->size() : 1;
  tp_rank_ = tp != nullptr ? tp->rank() : 0;
  tokens_ = static_cast<int64_t>(batch.micro_batch_size) * config.seq_len;
  hidden_ = config.hidden;
  ffn_ = config.FfnHidden() / t;
  width_ = config.QWidth() / t;
  kv_width_ = config.KvWidth() / t;
  heads_ = config.heads / t;
  kv_heads_ = config.KvHeads() / t;
  vocab_ = config.vocab / t;
  local_tokens_ = sp_ ? tokens_ / t : tokens_;
}

CudaStageModel::~CudaStageModel() = default;

TensorSpec CudaStageModel::ActivationSpec() const {
  const int64_t seq = sp_ ? config_.seq_len / tp_->size() : config_.seq_len;
  return {ActivationDType(precision_), {batch_.micro_batch_size, seq, hidden_}};
}

Result<Tensor> CudaStageModel::Local(int64_t features) {
  return device_->Empty({ActivationDType(precision_), {local_tokens_, features}});
}

Status CudaStageModel::FinalizeGradients() {
  if (!sp_) return Status::Ok();
  PIPECOORD_RETURN_IF_ERROR(device_->MakeCurrent());
  // The norm gains' gradients cover this rank's tokens: summed over the group, in model order.
  for (DeviceParameter& p : params_) {
    if (model::TpSplitOf(p.name) != model::TpSplit::kWhole) continue;
    PIPECOORD_RETURN_IF_ERROR(ReduceFromTensorParallel<float>(p.grad));
  }
  return Status::Ok();
}

Result<Tensor> CudaStageModel::Activation(int64_t features) {
  return device_->Empty({ActivationDType(precision_), {tokens_, features}});
}

Result<Tensor> CudaStageModel::Floats(int64_t count) {
  return device_->Empty({DType::kF32, {count}});
}

Status CudaStageModel::AddParameter(const std::string& name, std::vector<int64_t> shape,
                                    double std, bool weight_decay, const std::string& init_name) {
  DeviceParameter p;
  p.name = name;
  p.weight_decay = weight_decay;
  // The CPU model's initial values, made on the host (the whole tensor, then this rank's slice)
  // and copied once.
  const int tp = tensor_parallel_size();
  const model::TpSplit split = model::TpSplitOf(name);
  const auto [rows, cols] = RowsCols(shape);
  std::vector<float> whole(static_cast<size_t>(rows * cols));
  if (std == kZerosInit) {
    std::fill(whole.begin(), whole.end(), 0.0f);  // bias
  } else if (std < 0) {
    std::fill(whole.begin(), whole.end(), 1.0f);  // norm gain
  } else {
    model::InitUniform(whole, config_.seed, init_name.empty() ? name : init_name, std);
  }
  if (tp > 1 && split == model::TpSplit::kRows) shape[0] /= tp;
  if (tp > 1 && split == model::TpSplit::kColumns) shape[1] /= tp;
  p.shape = std::move(shape);
  const TensorSpec spec{DType::kF32, p.shape};
  const std::vector<float> host = model::TensorParallelSlice(whole, rows, cols, split, tp, tp_rank_);
  PIPECOORD_CUDA_STAGE_ASSIGN(p.master, device_->Empty(spec));
  p.elements = p.master.numel();
  PIPECOORD_RETURN_IF_ERROR(device_->Upload(host.data(), p.master));
  PIPECOORD_CUDA_STAGE_ASSIGN(p.grad, device_->Zeros(spec));
  PIPECOORD_CUDA_STAGE_ASSIGN(p.adam_m, device_->Zeros(spec));
  PIPECOORD_CUDA_STAGE_ASSIGN(p.adam_v, device_->Zeros(spec));
  if (precision_ == Precision::kBf16) {
    PIPECOORD_CUDA_STAGE_ASSIGN(p.compute, device_->Empty({DType::kBF16, p.shape}));
    PIPECOORD_RETURN_IF_ERROR(CastToBf16(Ptr<float>(p.master), Ptr<__nv_bfloat16>(p.compute),
                                         p.numel(), device_->stream()));
  } else {
    p.compute = p.master;
  }
  params_.push_back(std::move(p));
  return Status::Ok();
}

Status CudaStageModel::Build() {
  // Whole shapes (AddParameter slices): q and o are heads x head_dim wide, k and v kv_heads x head_dim.
  const int64_t h = hidden_, f = config_.FfnHidden(), V = config_.vocab, q = config_.QWidth(), kv = config_.KvWidth();
  const double depth = std::sqrt(2.0 * config_.layers);
  const double in_std = 1.0 / std::sqrt(static_cast<double>(h));
  const double kOnes = -1;
  auto add = [&](const std::string& name, std::vector<int64_t> shape, double std, bool decay,
                 int* index, const std::string& init_name = "") {
    *index = static_cast<int>(params_.size());
    return AddParameter(name, std::move(shape), std, decay, init_name);
  };
  // The CPU model's order, names and standard deviations (stage_model.cc's Build). Tied, the
  // embedding is the head too: the head's scale, so the first logits are as an untied model's.
  const double embedding_std = config_.tied_embeddings ? in_std : 1.0;
  if (shard_.has_embedding) {
    PIPECOORD_RETURN_IF_ERROR(add("tok_embeddings.weight", {V, h}, embedding_std, true, &embedding_));
  }
  for (int l = shard_.first_layer; l < shard_.first_layer + shard_.num_layers; ++l) {
    const std::string p = "layers." + std::to_string(l) + ".";
    Layer L{};
    PIPECOORD_RETURN_IF_ERROR(add(p + "attention_norm.weight", {h}, kOnes, false, &L.attention_norm));
    PIPECOORD_RETURN_IF_ERROR(add(p + "attention.wq.weight", {q, h}, in_std, true, &L.wq));
    PIPECOORD_RETURN_IF_ERROR(add(p + "attention.wk.weight", {kv, h}, in_std, true, &L.wk));
    PIPECOORD_RETURN_IF_ERROR(add(p + "attention.wv.weight", {kv, h}, in_std, true, &L.wv));
    PIPECOORD_RETURN_IF_ERROR(add(p + "attention.wo.weight", {h, q}, 1.0 / std::sqrt(static_cast<double>(q)) / depth,
                                  true, &L.wo));
    PIPECOORD_RETURN_IF_ERROR(add(p + "ffn_norm.weight", {h}, kOnes, false, &L.ffn_norm));
    PIPECOORD_RETURN_IF_ERROR(add(p + "feed_forward.w1.weight", {f, h}, in_std, true, &L.w1));
    PIPECOORD_RETURN_IF_ERROR(add(p + "feed_forward.w2.weight", {h, f},
                                  1.0 / std::sqrt(static_cast<double>(f)) / depth, true, &L.w2));
    PIPECOORD_RETURN_IF_ERROR(add(p + "feed_forward.w3.weight", {f, h}, in_std, true, &L.w3));
    if (config_.qkv_bias) {  // zero at start, never decayed (the CPU model's)
      PIPECOORD_RETURN_IF_ERROR(add(p + "attention.wq.bias", {q}, kZerosInit, false, &L.bq));
      PIPECOORD_RETURN_IF_ERROR(add(p + "attention.wk.bias", {kv}, kZerosInit, false, &L.bk));
      PIPECOORD_RETURN_IF_ERROR(add(p + "attention.wv.bias", {kv}, kZerosInit, false, &L.bv));
    }
    layers_.push_back(L);
  }
  if (shard_.has_head) {
    PIPECOORD_RETURN_IF_ERROR(add("norm.weight", {h}, kOnes, false, &norm_));
    if (!config_.tied_embeddings) {
      PIPECOORD_RETURN_IF_ERROR(add("output.weight", {V, h}, in_std, true, &output_));
    } else if (embedding_ >= 0) {
      output_ = embedding_;  // one tensor: F, B and W of both paths read and add to it
    } else {
      PIPECOORD_RETURN_IF_ERROR(add("output.weight", {V, h}, embedding_std, true, &output_, "tok_embeddings.weight"));
    }
    PIPECOORD_CUDA_STAGE_ASSIGN(loss_sum_, device_->Zeros(Doubles(1)));
  }
  if (!layers_.empty()) {
    // The CPU model's own table (double cos and sin), so both rotate by the same bits.
    const kernels::cpu::RopeTable table =
        kernels::cpu::MakeRopeTable(config_.seq_len, config_.HeadDim(), config_.rope_theta, config_.rope_scaling);
    const auto count = static_cast<int64_t>(table.cos.size());
    PIPECOORD_CUDA_STAGE_ASSIGN(rope_cos_, device_->Empty(Doubles(count)));
    PIPECOORD_CUDA_STAGE_ASSIGN(rope_sin_, device_->Empty(Doubles(count)));
    PIPECOORD_RETURN_IF_ERROR(device_->Upload(table.cos.data(), rope_cos_));
    PIPECOORD_RETURN_IF_ERROR(device_->Upload(table.sin.data(), rope_sin_));
  }
  return Status::Ok();
}

Status CudaStageModel::SetRecompute(model::Recompute recompute) {
  if (!in_flight_.empty()) {
    return FailedPrecondition("recompute: set before the first micro-batch (" + std::to_string(in_flight_.size()) +
                              " in flight)");
  }
  recompute_ = recompute;
  return Status::Ok();
}

Status CudaStageModel::ShardOptimizerStates(int shards, int index, bool shard_gradients) {
  PIPECOORD_RETURN_IF_ERROR(model::CheckOptimizerShard(shards, index, optimizer_steps_));
  if (masters_sharded_) return FailedPrecondition("ShardOptimizerStates: the stage's masters are sharded already");
  PIPECOORD_RETURN_IF_ERROR(device_->MakeCurrent());
  int64_t n = 0;
  for (const DeviceParameter& p : params_) n += p.numel();
  // The reduce-scatter's chunk of this replica (collectives.h).
  const auto len = static_cast<size_t>(n);
  const auto begin = static_cast<int64_t>(parallel::ChunkBegin(len, shards, index));
  const auto end = static_cast<int64_t>(parallel::ChunkBegin(len, shards, index + 1));
  const int64_t padded = (n + shards - 1) / shards;
  // The whole moments go back to the pool before the shard's are allocated.
  for (DeviceParameter& p : params_) p.adam_m = p.adam_v = Tensor();
  shard_m_ = shard_v_ = Tensor();
  PIPECOORD_CUDA_STAGE_ASSIGN(shard_m_, device_->Zeros({DType::kF32, {padded}}));
  PIPECOORD_CUDA_STAGE_ASSIGN(shard_v_, device_->Zeros({DType::kF32, {padded}}));
  // In bf16 the kernels read the bf16 copies only: the fp32 masters keep the shard too.
  const bool shard_masters = precision_ == Precision::kBf16;
  if (shard_masters) PIPECOORD_CUDA_STAGE_ASSIGN(shard_master_, device_->Zeros({DType::kF32, {padded}}));
  std::unique_ptr<DeviceTensorFloats> masters;
  if (shard_masters) {
    auto made = DeviceTensorFloats::Create(device_, {shard_master_});
    if (!made.ok()) return made.status();
    masters = std::move(made).value();
  }
  int64_t offset = 0;  // of the tensor in the flat index space
  for (DeviceParameter& p : params_) {
    const int64_t lo = std::max(offset, begin), hi = std::min(offset + p.numel(), end);
    const int64_t count = lo < hi ? hi - lo : 0, at = lo < hi ? lo - begin : 0;
    p.moment_begin = lo < hi ? lo - offset : 0;
    p.shard_at = at;
    PIPECOORD_CUDA_STAGE_ASSIGN(p.adam_m, shard_m_.Slice(at, count));
    PIPECOORD_CUDA_STAGE_ASSIGN(p.adam_v, shard_v_.Slice(at, count));
    if (shard_masters) {
      Tensor piece;
      PIPECOORD_CUDA_STAGE_ASSIGN(piece, p.master.Slice(p.moment_begin, count));
      if (count > 0) PIPECOORD_RETURN_IF_ERROR(masters->Write(static_cast<size_t>(at), piece));
      PIPECOORD_CUDA_STAGE_ASSIGN(p.master, shard_master_.Slice(at, count));  // the whole one freed
    }
    offset += p.numel();
  }
  if (shard_masters) masters_sharded_ = true;
  if (shard_gradients) {  // ZeRO-2: the gradients live only from a step's first W to its OPT
    shard_gradients_ = true;
    PIPECOORD_RETURN_IF_ERROR(ReleaseGradients());
  }
  return Status::Ok();
}

Status CudaStageModel::ReleaseGradients() {
  if (released_ || !shard_gradients_) return Status::Ok();
  PIPECOORD_RETURN_IF_ERROR(device_->MakeCurrent());
  Tensor flat;
  PIPECOORD_CUDA_STAGE_ASSIGN(flat, device_->Zeros({DType::kF32, {shard_m_.numel()}}));
  auto buffer = DeviceTensorFloats::Create(device_, {flat});
  if (!buffer.ok()) return buffer.status();
  for (DeviceParameter& p : params_) {
    if (p.adam_m.numel() == 0) continue;
    Tensor piece;
    PIPECOORD_CUDA_STAGE_ASSIGN(piece, p.grad.Slice(p.moment_begin, p.adam_m.numel()));
    PIPECOORD_RETURN_IF_ERROR((*buffer)->Write(static_cast<size_t>(p.shard_at), piece));
  }
  shard_grad_ = std::move(flat);
  for (DeviceParameter& p : params_) p.grad = Tensor();  // back to the pool in stream order
  released_ = true;
  return Status::Ok();
}

Status CudaStageModel::EnsureGradients() {
  if (!released_) return Status::Ok();
  shard_grad_ = Tensor();  // zeroed by the last OPT: nothing to keep
  for (DeviceParameter& p : params_) {
    PIPECOORD_CUDA_STAGE_ASSIGN(p.grad, device_->Zeros({DType::kF32, p.shape}));
  }
  released_ = false;
  return Status::Ok();
}

float* CudaStageModel::OptimizerGrad(DeviceParameter& p) {
  return released_ ? Ptr<float>(shard_grad_) + p.shard_at : Ptr<float>(p.grad) + p.moment_begin;
}

Status CudaStageModel::AccumulateGradientSquares(double* acc, double* partials, bool count_replicated) {
  PIPECOORD_RETURN_IF_ERROR(device_->MakeCurrent());
  for (size_t i = 0; i < params_.size(); ++i) {
    DeviceParameter& p = params_[i];
    if (TiedHeadCopy() && static_cast<int>(i) == output_) continue;  // the embedding's stage counts it
    if (tp_ != nullptr && !count_replicated && model::TpSplitOf(p.name) == model::TpSplit::kWhole) continue;
    PIPECOORD_RETURN_IF_ERROR(AccumulateSumOfSquares(OptimizerGrad(p), p.adam_m.numel(), acc,
                                                     partials, device_->stream()));
  }
  return Status::Ok();
}

Status CudaStageModel::ScaleGradients(float factor) {
  PIPECOORD_RETURN_IF_ERROR(device_->MakeCurrent());
  if (released_) return ScaleInPlace(Ptr<float>(shard_grad_), factor, shard_grad_.numel(), device_->stream());
  for (DeviceParameter& p : params_) {
    PIPECOORD_RETURN_IF_ERROR(ScaleInPlace(Ptr<float>(p.grad), factor, p.numel(), device_->stream()));
  }
  return Status::Ok();
}

Tensor CudaStageModel::TiedEmbeddingGradient() {
  if (!config_.tied_embeddings) return Tensor();
  if (embedding_ >= 0) return params_[embedding_].grad;
  return output_ >= 0 ? params_[output_].grad : Tensor();
}

const DeviceParameter* CudaStageModel::FindParameter(std::string_view name) const {
  for (const DeviceParameter& p : params_) {
    if (p.name == name) return &p;
  }
  return nullptr;
}

// ---- checks ----

Status CudaStageModel::CheckInput(int mb, const CudaStageInput& in) const {
  if (mb < 0) return InvalidArgument(Mb(mb) + ": ids must be >= 0");
  if (in_flight_.count(mb)) {
    return FailedPrecondition(Mb(mb) + ": forward already ran and its backward is pending");
  }
  if (shard_.has_embedding) {
    PIPECOORD_RETURN_IF_ERROR(CheckIds("tokens", in.tokens, tokens_, config_.vocab));
    if (!in.activations.empty()) {
      return InvalidArgument("activations: the embedding stage reads tokens, got " +
                             kernels::ToString(in.activations.spec()));
    }
  } else {
    const TensorSpec want = ActivationSpec();
    if (in.activations.spec() != want) {
      return InvalidArgument("activations: expected " + kernels::ToString(want) + ", got " +
                             kernels::ToString(in.activations.spec()));
    }
    if (in.activations.memory() != kernels::MemoryKind::kCuda ||
        in.activations.device() != device_->index()) {
      return InvalidArgument("activations: must be in the memory of CUDA device " +
                             std::to_string(device_->index()));
    }
    if (!in.tokens.empty()) {
      return InvalidArgument("tokens: only the embedding stage reads tokens, got " +
                             std::to_string(in.tokens.size()));
    }
  }
  if (shard_.has_head) {
    PIPECOORD_RETURN_IF_ERROR(CheckIds("targets", in.targets, tokens_, config_.vocab));
  } else if (!in.targets.empty()) {
    return InvalidArgument("targets: only the head stage reads targets, got " +
                           std::to_string(in.targets.size()));
  }
  return Status::Ok();
}

Status CudaStageModel::CheckGradient(const Tensor& g) const {
  if (shard_.has_head) {
    if (!g.empty()) {
      return InvalidArgument("grad_output: the head stage starts from its loss; pass none, got " +
                             kernels::ToString(g.spec()));
    }
    return Status::Ok();
  }
  const TensorSpec want = ActivationSpec();
  if (g.spec() != want) {
    return InvalidArgument("grad_output: expected " + kernels::ToString(want) + ", got " +
                           kernels::ToString(g.spec()));
  }
  if (g.memory() != kernels::MemoryKind::kCuda || g.device() != device_->index()) {
    return InvalidArgument("grad_output: must be in the memory of CUDA device " +
                           std::to_string(device_->index()));
  }
  return Status::Ok();
}

Result<CudaStageModel::MicroBatch*> CudaStageModel::Find(int mb, Phase phase, const char* what) {
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

// ---- F ----

Result<Tensor> CudaStageModel::Forward(int mb, CudaStageInput input, Tensor* loss) {
  PIPECOORD_RETURN_IF_ERROR(CheckInput(mb, input));
  PIPECOORD_RETURN_IF_ERROR(device_->MakeCurrent());
  MicroBatch state;
  auto out = precision_ == Precision::kBf16 ? ForwardAs<__nv_bfloat16>(state, input, loss, true)
                                            : ForwardAs<float>(state, input, loss, true);
  // On an error nothing is kept: the micro-batch is not in flight.
  if (out.ok()) in_flight_.emplace(mb, std::move(state));
  return out;
}

Result<Tensor> CudaStageModel::ForwardOnly(CudaStageInput input, Tensor* loss) {
  PIPECOORD_RETURN_IF_ERROR(CheckInput(0x7fffffff, input));  // an id no schedule uses
  PIPECOORD_RETURN_IF_ERROR(device_->MakeCurrent());
  MicroBatch state;  // dropped on return: nothing kept
  return precision_ == Precision::kBf16 ? ForwardAs<__nv_bfloat16>(state, input, loss, false)
                                        : ForwardAs<float>(state, input, loss, false);
}

Result<Tensor> CudaStageModel::ReplayForward(int mb, CudaStageInput input, Tensor* loss) {
  auto it = in_flight_.find(mb);
  if (it == in_flight_.end()) return FailedPrecondition(Mb(mb) + ": replay needs its forward first");
  if (it->second.phase != Phase::kForwardDone) {
    return FailedPrecondition(Mb(mb) + ": replay needs the input its F read, released by its B");
  }
  // The held input itself (F only reads it), not a copy.
  const MicroBatch& state = it->second;
  if (!shard_.has_embedding) input.activations = state.blocks.empty() ? state.head.x : state.blocks[0].x;
  return ForwardOnly(std::move(input), loss);
}

template <typename T>
Result<Tensor> CudaStageModel::ForwardAs(MicroBatch& state, CudaStageInput& input, Tensor* loss_out, bool add_to_sum) {
  cudaStream_t stream = device_->stream();
  const int64_t n = tokens_, h = hidden_, V = vocab_;
  Tensor x;
  if (shard_.has_embedding) {
    // Vocabulary-parallel: ids of this rank's rows [first, first + V), the others' tokens
    // kOtherRankId (a row of zeros here; the group's sum holds their rows).
    if (tp_ != nullptr) {
      const int64_t first = V * tp_rank_;
      for (int32_t& id : input.tokens) id = id - first >= 0 && id - first < V ? static_cast<int32_t>(id - first) : kc::kOtherRankId;
    }
    PIPECOORD_CUDA_STAGE_ASSIGN(state.tokens, device_->Empty({DType::kI32, {n}}));
    PIPECOORD_RETURN_IF_ERROR(device_->Upload(input.tokens.data(), state.tokens));
    PIPECOORD_CUDA_STAGE_ASSIGN(x, Activation(h));
    const DeviceParameter& e = params_[embedding_];
    PIPECOORD_RETURN_IF_ERROR(kc::EmbeddingForward(Ptr<T>(e.compute), Ptr<int32_t>(state.tokens),
                                                   Ptr<T>(x), n, h, V, stream));
    PIPECOORD_CUDA_STAGE_ASSIGN(x, SumOverGroup<T>(std::move(x)));  // sp: this rank's tokens of the sum
  } else {
    x = std::move(input.activations);
  }
  state.blocks.resize(layers_.size());
  for (size_t i = 0; i < layers_.size(); ++i) {
    Tensor y;
    PIPECOORD_RETURN_IF_ERROR(BlockForward<T>(layers_[i], state.blocks[i], std::move(x), &y));
    if (recompute_ == model::Recompute::kFull) {  // the block's input only, until its B
      Tensor input = std::move(state.blocks[i].x);
      state.blocks[i] = BlockState();
      state.blocks[i].x = std::move(input);
    }
    x = std::move(y);
  }
  if (!shard_.has_head) return x.Reshaped(ActivationSpec().shape);
  // Final norm, LM head, cross-entropy; the loss goes to the device-side sum.
  HeadState& s = state.head;
  s.x = std::move(x);
  const int64_t nl = local_tokens_;
  PIPECOORD_CUDA_STAGE_ASSIGN(s.rstd, Floats(nl));
  PIPECOORD_CUDA_STAGE_ASSIGN(s.y, Local(h));
  PIPECOORD_RETURN_IF_ERROR(kc::RmsNormForward(Ptr<T>(s.x), Ptr<T>(params_[norm_].compute),
                                               Ptr<T>(s.y), Ptr<float>(s.rstd), nl, h,
                                               config_.rms_norm_eps, stream));
  PIPECOORD_CUDA_STAGE_ASSIGN(s.logits, Activation(V));
  {
    Tensor y_all;  // sp: every token's norm output, for the head's logits of every token
    PIPECOORD_CUDA_STAGE_ASSIGN(y_all, AllTokens<T>(s.y));
    PIPECOORD_RETURN_IF_ERROR(device_->gemm().Forward(
        Ptr<T>(y_all), Ptr<T>(params_[output_].compute), Ptr<T>(s.logits), {n, h, V}));
  }
  PIPECOORD_CUDA_STAGE_ASSIGN(s.targets, device_->Empty({DType::kI32, {n}}));
  PIPECOORD_RETURN_IF_ERROR(device_->Upload(input.targets.data(), s.targets));
  Tensor loss;
  PIPECOORD_CUDA_STAGE_ASSIGN(loss, device_->Empty(Doubles(1)));
  if (tp_ != nullptr) {
    PIPECOORD_RETURN_IF_ERROR(VocabParallelLoss<T>(s, loss));
  } else {
    PIPECOORD_RETURN_IF_ERROR(kc::CrossEntropyForward(Ptr<T>(s.logits), Ptr<int32_t>(s.targets), n,
                                                      V, nullptr, Ptr<double>(loss), stream));
  }
  if (add_to_sum) PIPECOORD_RETURN_IF_ERROR(AccumulateScalar(Ptr<double>(loss_sum_), Ptr<double>(loss), stream));
  if (loss_out != nullptr) *loss_out = std::move(loss);
  return Tensor();
}

template <typename T>
Status CudaStageModel::ReduceFromTensorParallel(Tensor& t) {
  if (tp_ == nullptr) return Status::Ok();
  Tensor sum = t;  // f32: in place
  if constexpr (!std::is_same_v<T, float>) {
    PIPECOORD_CUDA_STAGE_ASSIGN(sum, Floats(t.numel()));
    PIPECOORD_RETURN_IF_ERROR(CastToFloat(Ptr<T>(t), Ptr<float>(sum), t.numel(), device_->stream()));
  }
  auto buffer = DeviceTensorFloats::Create(device_, {sum});
  if (!buffer.ok()) return buffer.status();
  PIPECOORD_RETURN_IF_ERROR(tp_->ReduceFromTensorParallel(**buffer));
  if constexpr (!std::is_same_v<T, float>) {
    PIPECOORD_RETURN_IF_ERROR(CastToBf16(Ptr<float>(sum), Ptr<T>(t), t.numel(), device_->stream()));
  }
  return Status::Ok();
}

template <typename T>
Result<Tensor> CudaStageModel::SumOverGroup(Tensor partial) {
  if (sp_) return ScatterSequence<T>(std::move(partial));
  PIPECOORD_RETURN_IF_ERROR(ReduceFromTensorParallel<T>(partial));
  return partial;
}

template <typename T>
Result<Tensor> CudaStageModel::AllTokens(const Tensor& shard) {
  if (!sp_) return shard;  // every token's already: the same tensor
  return GatherSequence<T>(shard);
}

template <typename T>
Result<Tensor> CudaStageModel::GatherSequence(const Tensor& shard) {
  const int64_t count = shard.numel(), at = count * tp_rank_, total = count * tp_->size();
  Tensor all32;
  PIPECOORD_CUDA_STAGE_ASSIGN(all32, Floats(total));
  auto buffer = DeviceTensorFloats::Create(device_, {all32});
  if (!buffer.ok()) return buffer.status();
  if constexpr (std::is_same_v<T, float>) {
    Tensor flat;
    PIPECOORD_CUDA_STAGE_ASSIGN(flat, shard.Reshaped({count}));
    PIPECOORD_RETURN_IF_ERROR((*buffer)->Write(static_cast<size_t>(at), flat));
  } else {
    PIPECOORD_RETURN_IF_ERROR(CastToFloat(Ptr<T>(shard), Ptr<float>(all32) + at, count, device_->stream()));
  }
  PIPECOORD_RETURN_IF_ERROR(tp_->GatherFromTensorParallel(**buffer));
  if constexpr (std::is_same_v<T, float>) {
    return all32.Reshaped({total / hidden_, hidden_});
  } else {
    Tensor all;
    PIPECOORD_CUDA_STAGE_ASSIGN(all, device_->Empty({ActivationDType(precision_), {total / hidden_, hidden_}}));
    PIPECOORD_RETURN_IF_ERROR(CastToBf16(Ptr<float>(all32), Ptr<T>(all), total, device_->stream()));
    return all;
  }
}

template <typename T>
Result<Tensor> CudaStageModel::ScatterSequence(Tensor partial) {
  const int64_t total = partial.numel(), count = total / tp_->size(), at = count * tp_rank_;
  Tensor sum32 = partial;  // f32: in place
  if constexpr (!std::is_same_v<T, float>) {
    PIPECOORD_CUDA_STAGE_ASSIGN(sum32, Floats(total));
    PIPECOORD_RETURN_IF_ERROR(CastToFloat(Ptr<T>(partial), Ptr<float>(sum32), total, device_->stream()));
  }
  {
    auto buffer = DeviceTensorFloats::Create(device_, {sum32});
    if (!buffer.ok()) return buffer.status();
    PIPECOORD_RETURN_IF_ERROR(tp_->ReduceScatterToSequenceParallel(**buffer));
  }
  if constexpr (std::is_same_v<T, float>) {  // this rank's rows copied out
    Tensor mine;
    PIPECOORD_CUDA_STAGE_ASSIGN(mine, sum32.Reshaped({total}));
    PIPECOORD_CUDA_STAGE_ASSIGN(mine, mine.Slice(at, count));
    PIPECOORD_CUDA_STAGE_ASSIGN(mine, device_->Copy(mine));
    return mine.Reshaped({local_tokens_, hidden_});
  } else {
    Tensor out;
    PIPECOORD_CUDA_STAGE_ASSIGN(out, Local(hidden_));
    PIPECOORD_RETURN_IF_ERROR(CastToBf16(Ptr<float>(sum32) + at, Ptr<T>(out), count, device_->stream()));
    return out;
  }
}

template <typename T>
Status CudaStageModel::VocabParallelLoss(HeadState& s, Tensor& loss) {
  cudaStream_t stream = device_->stream();
  const int64_t n = tokens_, V = vocab_, first = V * tp_rank_;
  const int tp = tp_->size();
  // The rows' maxima side by side over the group (this rank's slot written in place), then the
  // other tokens' exps and the target's logit summed over it.
  Tensor maxima, row_max, sums;
  PIPECOORD_CUDA_STAGE_ASSIGN(maxima, Floats(n * tp));
  PIPECOORD_RETURN_IF_ERROR(kc::VocabParallelRowMax(Ptr<T>(s.logits), n, V, Ptr<float>(maxima) + n * tp_rank_, stream));
  {
    auto all = DeviceTensorFloats::Create(device_, {maxima});
    if (!all.ok()) return all.status();
    PIPECOORD_RETURN_IF_ERROR(tp_->GatherFromTensorParallel(**all));
  }
  PIPECOORD_CUDA_STAGE_ASSIGN(row_max, Floats(n));
  PIPECOORD_CUDA_STAGE_ASSIGN(sums, Floats(2 * n));
  PIPECOORD_RETURN_IF_ERROR(kc::VocabParallelSums(Ptr<T>(s.logits), Ptr<int32_t>(s.targets), n, V, first,
                                                  Ptr<float>(maxima), tp, Ptr<float>(row_max), Ptr<float>(sums), stream));
  maxima = Tensor();
  {
    auto group = DeviceTensorFloats::Create(device_, {sums});
    if (!group.ok()) return group.status();
    PIPECOORD_RETURN_IF_ERROR(tp_->ReduceFromTensorParallel(**group));
  }
  return kc::VocabParallelLossAndProbs(Ptr<T>(s.logits), n, V, first, Ptr<int32_t>(s.targets), Ptr<float>(row_max),
                                       Ptr<float>(sums), Ptr<double>(loss), stream);
}

template <typename T>
Status CudaStageModel::BlockForward(const Layer& L, BlockState& s, Tensor x, Tensor* y) {
  cudaStream_t stream = device_->stream();
  kc::GemmContext& gemm = device_->gemm();
  const int64_t n = tokens_, nl = local_tokens_, h = hidden_, f = ffn_, hq = width_, hkv = kv_width_;
  const kernels::cpu::AttentionDims ad{batch_.micro_batch_size, config_.seq_len, heads_, config_.HeadDim(), kv_heads_,
                                       config_.sliding_window};
  const kc::DeviceRopeTable rope{Ptr<double>(rope_cos_), Ptr<double>(rope_sin_), config_.seq_len,
                                 config_.HeadDim()};
  auto w = [&](int index) { return Ptr<T>(params_[index].compute); };
  // a = RMSNorm(x); q, k, v = a W^T with RoPE on q and k; o = attention; x1 = x + o Wo^T.
  // With sequence parallelism x, a, x1 and c are this rank's tokens (nl of n), gathered before
  // each tensor-parallel region and reduce-scattered after it.
  s.x = std::move(x);
  PIPECOORD_CUDA_STAGE_ASSIGN(s.rstd1, Floats(nl));
  PIPECOORD_CUDA_STAGE_ASSIGN(s.a, Local(h));
  PIPECOORD_RETURN_IF_ERROR(kc::RmsNormForward(Ptr<T>(s.x), w(L.attention_norm), Ptr<T>(s.a),
                                               Ptr<float>(s.rstd1), nl, h, config_.rms_norm_eps,
                                               stream));
  // Column-parallel q, k, v: this rank's heads, over every token.
  PIPECOORD_CUDA_STAGE_ASSIGN(s.q, Activation(hq));
  PIPECOORD_CUDA_STAGE_ASSIGN(s.k, Activation(hkv));
  PIPECOORD_CUDA_STAGE_ASSIGN(s.v, Activation(hkv));
  {
    Tensor a_all;
    PIPECOORD_CUDA_STAGE_ASSIGN(a_all, AllTokens<T>(s.a));
    const T* a = Ptr<T>(a_all);
    PIPECOORD_RETURN_IF_ERROR(gemm.Forward(a, w(L.wq), Ptr<T>(s.q), {n, h, hq}));
    PIPECOORD_RETURN_IF_ERROR(gemm.Forward(a, w(L.wk), Ptr<T>(s.k), {n, h, hkv}));
    PIPECOORD_RETURN_IF_ERROR(gemm.Forward(a, w(L.wv), Ptr<T>(s.v), {n, h, hkv}));
  }
  if (L.bq >= 0) {  // Qwen2's biases, before RoPE
    PIPECOORD_RETURN_IF_ERROR(AddBias(Ptr<T>(s.q), w(L.bq), n, hq, stream));
    PIPECOORD_RETURN_IF_ERROR(AddBias(Ptr<T>(s.k), w(L.bk), n, hkv, stream));
    PIPECOORD_RETURN_IF_ERROR(AddBias(Ptr<T>(s.v), w(L.bv), n, hkv, stream));
  }
  PIPECOORD_RETURN_IF_ERROR(kc::RopeForward(Ptr<T>(s.q), Ptr<T>(s.q), rope, ad.batch, ad.heads, stream));
  PIPECOORD_RETURN_IF_ERROR(kc::RopeForward(Ptr<T>(s.k), Ptr<T>(s.k), rope, ad.batch, ad.kv(), stream));
  PIPECOORD_CUDA_STAGE_ASSIGN(s.o, Activation(hq));
  PIPECOORD_CUDA_STAGE_ASSIGN(s.lse, Floats(ad.batch * ad.heads * ad.seq));
  PIPECOORD_RETURN_IF_ERROR(kc::FlashAttentionForward(Ptr<T>(s.q), Ptr<T>(s.k), Ptr<T>(s.v),
                                                      Ptr<T>(s.o), Ptr<float>(s.lse), ad, stream));
  // Row-parallel wo: each rank's heads' share, summed over the group (Megatron's g).
  PIPECOORD_CUDA_STAGE_ASSIGN(s.x1, Activation(h));
  PIPECOORD_RETURN_IF_ERROR(gemm.Forward(Ptr<T>(s.o), w(L.wo), Ptr<T>(s.x1), {n, hq, h}));
  PIPECOORD_CUDA_STAGE_ASSIGN(s.x1, SumOverGroup<T>(std::move(s.x1)));
  PIPECOORD_RETURN_IF_ERROR(AddInPlace(Ptr<T>(s.x1), Ptr<T>(s.x), nl * h, stream));
  // c = RMSNorm(x1); y = x1 + (silu(c W1^T) * (c W3^T)) W2^T.
  PIPECOORD_CUDA_STAGE_ASSIGN(s.rstd2, Floats(nl));
  PIPECOORD_CUDA_STAGE_ASSIGN(s.c, Local(h));
  PIPECOORD_RETURN_IF_ERROR(kc::RmsNormForward(Ptr<T>(s.x1), w(L.ffn_norm), Ptr<T>(s.c),
                                               Ptr<float>(s.rstd2), nl, h, config_.rms_norm_eps,
                                               stream));
  PIPECOORD_CUDA_STAGE_ASSIGN(s.gate, Activation(f));
  PIPECOORD_CUDA_STAGE_ASSIGN(s.up, Activation(f));
  {
    Tensor c_all;
    PIPECOORD_CUDA_STAGE_ASSIGN(c_all, AllTokens<T>(s.c));
    const T* c = Ptr<T>(c_all);
    PIPECOORD_RETURN_IF_ERROR(gemm.Forward(c, w(L.w1), Ptr<T>(s.gate), {n, h, f}));
    PIPECOORD_RETURN_IF_ERROR(gemm.Forward(c, w(L.w3), Ptr<T>(s.up), {n, h, f}));
  }
  PIPECOORD_CUDA_STAGE_ASSIGN(s.z, Activation(f));
  PIPECOORD_RETURN_IF_ERROR(kc::SwiGluForward(Ptr<T>(s.gate), Ptr<T>(s.up), Ptr<T>(s.z), n * f, stream));
  Tensor out;
  PIPECOORD_CUDA_STAGE_ASSIGN(out, Activation(h));
  PIPECOORD_RETURN_IF_ERROR(gemm.Forward(Ptr<T>(s.z), w(L.w2), Ptr<T>(out), {n, f, h}));
  PIPECOORD_CUDA_STAGE_ASSIGN(out, SumOverGroup<T>(std::move(out)));  // row-parallel w2 (g)
  PIPECOORD_RETURN_IF_ERROR(AddInPlace(Ptr<T>(out), Ptr<T>(s.x1), nl * h, stream));
  *y = std::move(out);
  return Status::Ok();
}

// ---- B ----

Result<Tensor> CudaStageModel::BackwardInput(int mb, Tensor grad_output) {
  auto found = Find(mb, Phase::kForwardDone, "input gradient (B)");
  if (!found.ok()) return found.status();
  PIPECOORD_RETURN_IF_ERROR(CheckGradient(grad_output));
  PIPECOORD_RETURN_IF_ERROR(device_->MakeCurrent());
  MicroBatch* state = *found;
  auto dx = precision_ == Precision::kBf16 ? BackwardInputAs<__nv_bfloat16>(*state, std::move(grad_output))
                                           : BackwardInputAs<float>(*state, std::move(grad_output));
  if (!dx.ok()) {
    in_flight_.erase(mb);  // half-done state cannot be resumed; the caller gets the error
    return dx;
  }
  state->phase = Phase::kInputGradDone;
  return dx;
}

template <typename T>
Result<Tensor> CudaStageModel::BackwardInputAs(MicroBatch& state, Tensor grad_output) {
  cudaStream_t stream = device_->stream();
  const int64_t n = tokens_, h = hidden_, V = vocab_;
  Tensor g = std::move(grad_output);
  if (shard_.has_head) {
    HeadState& s = state.head;
    // dlogits in place of the logits (they are not needed after B; under tensor parallelism F
    // left this rank's probabilities there).
    s.dlogits = std::move(s.logits);
    const double dloss = 1.0 / batch_.microbatches;
    if (tp_ != nullptr) {
      PIPECOORD_RETURN_IF_ERROR(kc::VocabParallelDlogits(Ptr<T>(s.dlogits), n, V, dloss, Ptr<T>(s.dlogits), stream));
    } else {
      PIPECOORD_RETURN_IF_ERROR(kc::CrossEntropyBackward(Ptr<T>(s.dlogits), Ptr<int32_t>(s.targets),
                                                         n, V, dloss, Ptr<T>(s.dlogits), stream));
    }
    s.targets = Tensor();
    PIPECOORD_CUDA_STAGE_ASSIGN(s.dy, Activation(h));
    PIPECOORD_RETURN_IF_ERROR(device_->gemm().BackwardInput(
        Ptr<T>(s.dlogits), Ptr<T>(params_[output_].compute), Ptr<T>(s.dy), {n, h, V}, false));
    // The vocabulary-parallel head's input gradient, summed (sp: this rank's tokens of the sum).
    PIPECOORD_CUDA_STAGE_ASSIGN(s.dy, SumOverGroup<T>(std::move(s.dy)));
    PIPECOORD_CUDA_STAGE_ASSIGN(g, Local(h));
    PIPECOORD_RETURN_IF_ERROR(kc::RmsNormBackwardInput(Ptr<T>(s.dy), Ptr<T>(s.x),
                                                       Ptr<T>(params_[norm_].compute),
                                                       Ptr<float>(s.rstd), Ptr<T>(g), local_tokens_, h,
                                                       false, stream));
  }
  for (size_t i = layers_.size(); i-- > 0;) {
    if (recompute_ == model::Recompute::kFull) {
      // The block's forward again from its input; its output is not needed.
      if (recompute_marker_) PIPECOORD_RETURN_IF_ERROR(recompute_marker_(true));
      Tensor input = std::move(state.blocks[i].x), rebuilt;
      state.blocks[i] = BlockState();
      PIPECOORD_RETURN_IF_ERROR(BlockForward<T>(layers_[i], state.blocks[i], std::move(input), &rebuilt));
      rebuilt = Tensor();
      if (recompute_marker_) PIPECOORD_RETURN_IF_ERROR(recompute_marker_(false));
    }
    Tensor dx;
    PIPECOORD_RETURN_IF_ERROR(BlockBackwardInput<T>(layers_[i], state.blocks[i], std::move(g), &dx));
    g = std::move(dx);
  }
  if (shard_.has_embedding) {
    state.embed_grad = std::move(g);  // token ids take no gradient: B ends here
    return Tensor();
  }
  return g.Reshaped(ActivationSpec().shape);
}

template <typename T>
Status CudaStageModel::BlockBackwardInput(const Layer& L, BlockState& s, Tensor dy, Tensor* dx) {
  cudaStream_t stream = device_->stream();
  kc::GemmContext& gemm = device_->gemm();
  const int64_t n = tokens_, nl = local_tokens_, h = hidden_, f = ffn_, hq = width_, hkv = kv_width_;
  const kernels::cpu::AttentionDims ad{batch_.micro_batch_size, config_.seq_len, heads_, config_.HeadDim(), kv_heads_,
                                       config_.sliding_window};
  const kc::DeviceRopeTable rope{Ptr<double>(rope_cos_), Ptr<double>(rope_sin_), config_.seq_len,
                                 config_.HeadDim()};
  auto w = [&](int index) { return Ptr<T>(params_[index].compute); };
  // MLP: y = x1 + W2 swiglu(W1 c, W3 c), c = norm(x1). With sequence parallelism dy, dc, dx1
  // and da are this rank's tokens: gathered before each tensor-parallel region's backward,
  // reduce-scattered after it.
  {
    Tensor dz, dy_all;
    PIPECOORD_CUDA_STAGE_ASSIGN(dz, Activation(f));
    PIPECOORD_CUDA_STAGE_ASSIGN(dy_all, AllTokens<T>(dy));
    PIPECOORD_RETURN_IF_ERROR(gemm.BackwardInput(Ptr<T>(dy_all), w(L.w2), Ptr<T>(dz), {n, f, h}, false));
    dy_all = Tensor();
    PIPECOORD_CUDA_STAGE_ASSIGN(s.dgate, Activation(f));
    PIPECOORD_CUDA_STAGE_ASSIGN(s.dup, Activation(f));
    PIPECOORD_RETURN_IF_ERROR(kc::SwiGluBackward(Ptr<T>(dz), Ptr<T>(s.gate), Ptr<T>(s.up),
                                                 Ptr<T>(s.dgate), Ptr<T>(s.dup), n * f, stream));
  }
  s.gate = Tensor();
  s.up = Tensor();
  PIPECOORD_CUDA_STAGE_ASSIGN(s.dc, Activation(h));
  PIPECOORD_RETURN_IF_ERROR(gemm.BackwardInput(Ptr<T>(s.dgate), w(L.w1), Ptr<T>(s.dc), {n, h, f}, false));
  PIPECOORD_RETURN_IF_ERROR(gemm.BackwardInput(Ptr<T>(s.dup), w(L.w3), Ptr<T>(s.dc), {n, h, f}, true));
  PIPECOORD_CUDA_STAGE_ASSIGN(s.dc, SumOverGroup<T>(std::move(s.dc)));  // column-parallel w1, w3: f's backward
  PIPECOORD_CUDA_STAGE_ASSIGN(s.dx1, device_->Copy(dy));  // residual path
  PIPECOORD_RETURN_IF_ERROR(kc::RmsNormBackwardInput(Ptr<T>(s.dc), Ptr<T>(s.x1), w(L.ffn_norm),
                                                     Ptr<float>(s.rstd2), Ptr<T>(s.dx1), nl, h,
                                                     true, stream));
  s.dy = std::move(dy);
  // Attention: x1 = x + Wo attn(rope(Wq a), rope(Wk a), Wv a), a = norm(x).
  {
    Tensor dout, delta, dx1_all;
    PIPECOORD_CUDA_STAGE_ASSIGN(dout, Activation(hq));
    PIPECOORD_CUDA_STAGE_ASSIGN(dx1_all, AllTokens<T>(s.dx1));
    PIPECOORD_RETURN_IF_ERROR(gemm.BackwardInput(Ptr<T>(dx1_all), w(L.wo), Ptr<T>(dout), {n, hq, h}, false));
    dx1_all = Tensor();
    PIPECOORD_CUDA_STAGE_ASSIGN(s.dq, Activation(hq));
    PIPECOORD_CUDA_STAGE_ASSIGN(s.dk, Activation(hkv));
    PIPECOORD_CUDA_STAGE_ASSIGN(s.dv, Activation(hkv));
    PIPECOORD_CUDA_STAGE_ASSIGN(delta, Floats(ad.batch * ad.heads * ad.seq));
    PIPECOORD_RETURN_IF_ERROR(kc::FlashAttentionBackward(
        Ptr<T>(dout), Ptr<T>(s.q), Ptr<T>(s.k), Ptr<T>(s.v), Ptr<T>(s.o), Ptr<float>(s.lse),
        Ptr<float>(delta), Ptr<T>(s.dq), Ptr<T>(s.dk), Ptr<T>(s.dv), ad, stream));
  }
  s.q = Tensor();
  s.k = Tensor();
  s.v = Tensor();
  s.lse = Tensor();
  PIPECOORD_RETURN_IF_ERROR(kc::RopeBackward(Ptr<T>(s.dq), Ptr<T>(s.dq), rope, ad.batch, ad.heads, stream));
  PIPECOORD_RETURN_IF_ERROR(kc::RopeBackward(Ptr<T>(s.dk), Ptr<T>(s.dk), rope, ad.batch, ad.kv(), stream));
  PIPECOORD_CUDA_STAGE_ASSIGN(s.da, Activation(h));
  PIPECOORD_RETURN_IF_ERROR(gemm.BackwardInput(Ptr<T>(s.dq), w(L.wq), Ptr<T>(s.da), {n, h, hq}, false));
  PIPECOORD_RETURN_IF_ERROR(gemm.BackwardInput(Ptr<T>(s.dk), w(L.wk), Ptr<T>(s.da), {n, h, hkv}, true));
  PIPECOORD_RETURN_IF_ERROR(gemm.BackwardInput(Ptr<T>(s.dv), w(L.wv), Ptr<T>(s.da), {n, h, hkv}, true));
  PIPECOORD_CUDA_STAGE_ASSIGN(s.da, SumOverGroup<T>(std::move(s.da)));  // column-parallel wq, wk, wv: f's backward
  Tensor out;
  PIPECOORD_CUDA_STAGE_ASSIGN(out, device_->Copy(s.dx1));  // residual path
  PIPECOORD_RETURN_IF_ERROR(kc::RmsNormBackwardInput(Ptr<T>(s.da), Ptr<T>(s.x), w(L.attention_norm),
                                                     Ptr<float>(s.rstd1), Ptr<T>(out), nl, h, true,
                                                     stream));
  *dx = std::move(out);
  return Status::Ok();
}

// ---- W ----

Status CudaStageModel::BackwardWeight(int mb) {
  auto found = Find(mb, Phase::kInputGradDone, "weight gradient (W)");
  if (!found.ok()) return found.status();
  PIPECOORD_RETURN_IF_ERROR(device_->MakeCurrent());
  PIPECOORD_RETURN_IF_ERROR(EnsureGradients());
  MicroBatch* state = *found;
  Status st = precision_ == Precision::kBf16 ? BackwardWeightAs<__nv_bfloat16>(*state)
                                             : BackwardWeightAs<float>(*state);
  in_flight_.erase(mb);  // its memory goes back to the pool in stream order
  return st;
}

template <typename T>
Status CudaStageModel::BackwardWeightAs(MicroBatch& state) {
  cudaStream_t stream = device_->stream();
  const int64_t n = tokens_, nl = local_tokens_, h = hidden_, V = vocab_;
  auto g = [&](int index) { return Ptr<float>(params_[index].grad); };
  // With sequence parallelism W gathers again the token shards B and F kept (each freed before
  // the next is gathered); the norm gains' gradients cover this rank's tokens (FinalizeGradients
  // sums them over the group).
  if (shard_.has_head) {
    HeadState& s = state.head;
    {
      Tensor y_all;
      PIPECOORD_CUDA_STAGE_ASSIGN(y_all, AllTokens<T>(s.y));
      PIPECOORD_RETURN_IF_ERROR(device_->gemm().BackwardWeight(Ptr<T>(s.dlogits), Ptr<T>(y_all),
                                                               g(output_), {n, h, V}));
    }
    PIPECOORD_RETURN_IF_ERROR(kc::RmsNormBackwardWeight(Ptr<T>(s.dy), Ptr<T>(s.x),
                                                        Ptr<float>(s.rstd), g(norm_), nl, h, stream));
    s = HeadState();
  }
  for (size_t i = layers_.size(); i-- > 0;) {
    PIPECOORD_RETURN_IF_ERROR(BlockBackwardWeight<T>(layers_[i], state.blocks[i]));
  }
  if (shard_.has_embedding) {
    Tensor grad_all;  // sp: the rows of every token, again
    PIPECOORD_CUDA_STAGE_ASSIGN(grad_all, AllTokens<T>(state.embed_grad));
    PIPECOORD_RETURN_IF_ERROR(kc::EmbeddingBackwardWeight(Ptr<T>(grad_all),
                                                          Ptr<int32_t>(state.tokens), g(embedding_),
                                                          n, h, V, stream));
  }
  return Status::Ok();
}

template <typename T>
Status CudaStageModel::BlockBackwardWeight(const Layer& L, BlockState& s) {
  cudaStream_t stream = device_->stream();
  kc::GemmContext& gemm = device_->gemm();
  const int64_t n = tokens_, nl = local_tokens_, h = hidden_, f = ffn_, hq = width_, hkv = kv_width_;
  auto g = [&](int index) { return Ptr<float>(params_[index].grad); };
  // Without sequence parallelism no communication: this rank's slices from its own activations
  // and gradients. With it the shards kept are gathered again (dy, c, dx1, a, in this order).
  Tensor gathered;
  auto all = [&](const Tensor& shard) -> Result<const T*> {
    gathered = Tensor();  // the previous one back to the pool first
    PIPECOORD_CUDA_STAGE_ASSIGN(gathered, AllTokens<T>(shard));
    return Ptr<T>(gathered);
  };
  const T* x = nullptr;
  PIPECOORD_CUDA_STAGE_ASSIGN(x, all(s.dy));
  PIPECOORD_RETURN_IF_ERROR(gemm.BackwardWeight(x, Ptr<T>(s.z), g(L.w2), {n, f, h}));
  PIPECOORD_CUDA_STAGE_ASSIGN(x, all(s.c));
  PIPECOORD_RETURN_IF_ERROR(gemm.BackwardWeight(Ptr<T>(s.dgate), x, g(L.w1), {n, h, f}));
  PIPECOORD_RETURN_IF_ERROR(gemm.BackwardWeight(Ptr<T>(s.dup), x, g(L.w3), {n, h, f}));
  PIPECOORD_RETURN_IF_ERROR(kc::RmsNormBackwardWeight(Ptr<T>(s.dc), Ptr<T>(s.x1), Ptr<float>(s.rstd2),
                                                      g(L.ffn_norm), nl, h, stream));
  PIPECOORD_CUDA_STAGE_ASSIGN(x, all(s.dx1));
  PIPECOORD_RETURN_IF_ERROR(gemm.BackwardWeight(x, Ptr<T>(s.o), g(L.wo), {n, hq, h}));
  PIPECOORD_CUDA_STAGE_ASSIGN(x, all(s.a));
  PIPECOORD_RETURN_IF_ERROR(gemm.BackwardWeight(Ptr<T>(s.dq), x, g(L.wq), {n, h, hq}));
  PIPECOORD_RETURN_IF_ERROR(gemm.BackwardWeight(Ptr<T>(s.dk), x, g(L.wk), {n, h, hkv}));
  PIPECOORD_RETURN_IF_ERROR(gemm.BackwardWeight(Ptr<T>(s.dv), x, g(L.wv), {n, h, hkv}));
  if (L.bq >= 0) {  // dq, dk, dv are the gradients of the biased projections (RoPE undone in B)
    PIPECOORD_RETURN_IF_ERROR(AddBiasGrad(Ptr<T>(s.dq), g(L.bq), n, hq, stream));
    PIPECOORD_RETURN_IF_ERROR(AddBiasGrad(Ptr<T>(s.dk), g(L.bk), n, hkv, stream));
    PIPECOORD_RETURN_IF_ERROR(AddBiasGrad(Ptr<T>(s.dv), g(L.bv), n, hkv, stream));
  }
  PIPECOORD_RETURN_IF_ERROR(kc::RmsNormBackwardWeight(Ptr<T>(s.da), Ptr<T>(s.x), Ptr<float>(s.rstd1),
                                                      g(L.attention_norm), nl, h, stream));
  gathered = Tensor();
  s = BlockState();
  return Status::Ok();
}

Result<Tensor> CudaStageModel::BackwardFull(int mb, Tensor grad_output) {
  // ZeRO-2: the gradients first (memory/'s pipecoord-cuda budget counts them before B's peak).
  if (in_flight_.count(mb)) {
    PIPECOORD_RETURN_IF_ERROR(device_->MakeCurrent());
    PIPECOORD_RETURN_IF_ERROR(EnsureGradients());
  }
  auto dx = BackwardInput(mb, std::move(grad_output));
  if (!dx.ok()) return dx;
  PIPECOORD_RETURN_IF_ERROR(BackwardWeight(mb));
  return dx;
}

// ---- optimizer, loss ----

Status CudaStageModel::ZeroGrad() {
  PIPECOORD_RETURN_IF_ERROR(device_->MakeCurrent());
  if (released_) return device_->SetZero(shard_grad_);
  for (DeviceParameter& p : params_) PIPECOORD_RETURN_IF_ERROR(device_->SetZero(p.grad));
  return Status::Ok();
}

Status CudaStageModel::OptimizerStep(const kernels::cpu::AdamWOptions& options) {
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
  PIPECOORD_RETURN_IF_ERROR(device_->MakeCurrent());
  std::vector<kc::AdamWTensor> tensors;
  tensors.reserve(params_.size());
  for (DeviceParameter& p : params_) {
    if (p.adam_m.empty()) continue;  // outside this replica's ZeRO shard
    kc::AdamWTensor t;
    t.param = Ptr<float>(p.master) + (masters_sharded_ ? 0 : p.moment_begin);
    t.grad = OptimizerGrad(p);
    t.m = Ptr<float>(p.adam_m);
    t.v = Ptr<float>(p.adam_v);
    // The bf16 copy of the stepped elements is re-rounded from the updated master in the same
    // pass (in bf16 ZeRO shards the masters: the all-gather of the bf16 copies brings the rest).
    t.param_bf16 = precision_ == Precision::kBf16 ? kernels::cuda::Bf16Offset(Ptr<__nv_bfloat16>(p.compute), p.moment_begin) : nullptr;
    t.n = p.adam_m.numel();
    t.weight_decay = p.weight_decay;
    tensors.push_back(t);
  }
  kc::AdamWOptions o;
  o.lr = options.lr;
  o.beta1 = options.beta1;
  o.beta2 = options.beta2;
  o.eps = options.eps;
  o.weight_decay = options.weight_decay;
  PIPECOORD_RETURN_IF_ERROR(
      kc::MultiTensorAdamWStep(tensors, o, optimizer_steps_ + 1, device_->stream()));
  ++optimizer_steps_;
  return Status::Ok();
}

Status CudaStageModel::RefreshComputeWeights() {
  if (precision_ != Precision::kBf16) return Status::Ok();
  PIPECOORD_RETURN_IF_ERROR(device_->MakeCurrent());
  for (DeviceParameter& p : params_) {
    // With sharded masters the shard's elements only (p.master is the shard's view).
    const int64_t first = masters_sharded_ ? p.moment_begin : 0;
    PIPECOORD_RETURN_IF_ERROR(CastToBf16(Ptr<float>(p.master), kernels::cuda::Bf16Offset(Ptr<__nv_bfloat16>(p.compute), first),
                                         p.master.numel(), device_->stream()));
  }
  return Status::Ok();
}

Result<double> CudaStageModel::TakeLossSum() {
  if (!shard_.has_head) return 0.0;
  PIPECOORD_RETURN_IF_ERROR(device_->MakeCurrent());
  double sum = 0;
  PIPECOORD_RETURN_IF_ERROR(device_->Download(loss_sum_, &sum));
  PIPECOORD_RETURN_IF_ERROR(device_->SetZero(loss_sum_));
  return sum;
}

#undef PIPECOORD_CUDA_STAGE_ASSIGN

}  // namespace pipecoord::worker::cuda
