// The CPU backend: one StageModel per virtual stage this rank holds, fed by the job's training
// data (worker/daemon/training_data.h: the synthetic stream or the job's datasets).
//
// Memory: every buffer the stages make (weights, gradients, moments, what F keeps for B and W,
// the temporaries inside an action, a received input once taken) comes from the rank's counting
// host allocator (kernels/host_pool.h), current on the calling thread inside each method. What
// the backend reports is that allocator's count, never a sum of the buffers the model means to
// keep: memory_in_use_bytes its allocated bytes, memory_peak_bytes the most it held (owned: a
// tensor a transport holds after Send is not) since ResetPeak, the temporaries inside every op
// included; memory/'s pipecoord-cpu recipe and its replay of the model's allocations
// (pipecoord_cpu.h) budget exactly that.
#include <algorithm>
#include <cstring>
#include <cstdint>
#include <map>
#include <memory>

#include "kernels/cpu/adamw.h"
#include "kernels/cpu/checksum.h"
#include "kernels/cpu/known_answer_gemm.h"
#include "kernels/cpu/rng.h"
#include "kernels/host_pool.h"
#include "worker/cuda/cuda_backend.h"
#include "worker/daemon/assignment_model.h"
#include "worker/daemon/backend_factory.h"
#include "worker/model/stage_model.h"
#include "worker/daemon/training_data.h"

namespace pipecoord::worker {
namespace {

class CpuBackend final : public ComputeBackend {
 public:
  CpuBackend(const v1::Assignment& a, std::shared_ptr<const TrainingData> data)
      : data_(std::move(data)), mbs_(a.spec().microbatches()),
        mbs_size_(a.spec().micro_batch_size()), seq_(a.spec().model().seq_len()),
        hidden_(a.spec().model().hidden()), spec_(a.spec()) {}

  Status AddStage(const model::ModelConfig& config, const model::BatchShape& batch, const v1::StageShard& s,
                  parallel::TensorParallel* tp, bool sequence_parallel) {
    const kernels::ScopedHostPool scope(&pool_);
    auto stage = model::StageModel::Create(config, StageShardOf(s), batch, tp, sequence_parallel);
    if (!stage.ok()) return stage.status();
    stages_[s.stage()] = std::move(stage).value();
    return Status::Ok();
  }

  kernels::TensorSpec BoundarySpec() const override {
    // With sequence parallelism this rank's 1/tp of the micro-batch's tokens, [b s / tp, h].
    if (spec_.sequence_parallel()) return {kernels::DType::kF32, {mbs_size_ * seq_ / spec_.tp(), hidden_}};
    return {kernels::DType::kF32, {mbs_size_, seq_, hidden_}};
  }

  Status FinalizeGradients() override {
    const kernels::ScopedHostPool scope(&pool_);
    for (auto& [k, m] : stages_) {
      PIPECOORD_RETURN_IF_ERROR(m->FinalizeGradients());
      m->ReleaseGradients();  // ZeRO-2: the shard's gradients only, until the next step's first W
    }
    return Status::Ok();
  }

  Result<kernels::Tensor> Forward(int stage, int mb, int step, kernels::Tensor input) override {
    auto* m = Stage(stage);
    if (m == nullptr) return NoStage(stage);
    const kernels::ScopedHostPool scope(&pool_);
    model::StageInput in;
    if (m->shard().has_embedding || m->shard().has_head) {
      auto batch = data_->Train(step, mb);  // this replica's own sequences
      if (!batch.ok()) return batch.status();
      if (m->shard().has_embedding) in.tokens = kernels::ToHostBuffer(batch->inputs);
      if (m->shard().has_head) in.targets = kernels::ToHostBuffer(batch->targets);
    }
    if (!m->shard().has_embedding) in.activations = input.TakeHostBuffer();
    auto out = m->Forward(mb, std::move(in));
    if (!out.ok()) return out.status();
    if (step != forwards_step_) forwards_.clear();
    forwards_step_ = step;
    forwards_.push_back({stage, mb, OutputChecksum(*out)});
    if (out->loss) {
      loss_sum_ += *out->loss;
      has_loss_ = true;
    }
    return Boundary(std::move(out->activations));
  }

  Result<Replay> ReplayForward(int stage, int mb, int step) override {
    model::StageModel* m = Stage(stage);
    if (m == nullptr) return NoStage(stage);
    for (const ForwardRun& f : forwards_) {
      if (f.stage != stage || f.mb != mb || forwards_step_ != step) continue;
      const kernels::ScopedHostPool scope(&pool_);
      auto again = m->ReplayForward(mb);
      if (!again.ok()) return again.status();
      return Replay{stage, mb, f.checksum, OutputChecksum(*again)};
    }
    return FailedPrecondition("PROBE replays F of stage " + std::to_string(stage) + " micro-batch " + std::to_string(mb) +
                              ", which has not run in step " + std::to_string(step));
  }

  Result<uint64_t> SeededForward(int stage, int step) override {
    model::StageModel* m = Stage(stage);
    if (m == nullptr) return NoStage(stage);
    const kernels::ScopedHostPool scope(&pool_);
    auto out = m->SeededForward(
        kernels::cpu::CombineSeeds(kernels::cpu::ProbeSeed(spec_.model().seed(), step), static_cast<uint64_t>(stage)));
    if (!out.ok()) return out.status();
    return OutputChecksum(*out);
  }

  Result<kernels::Tensor> Evaluate(int stage, int batch, kernels::Tensor input) override {
    auto* m = Stage(stage);
    if (m == nullptr) return NoStage(stage);
    const kernels::ScopedHostPool scope(&pool_);
    model::StageInput in;
    if (m->shard().has_embedding || m->shard().has_head) {
      auto tokens = data_->Validation(batch);
      if (!tokens.ok()) return tokens.status();
      if (m->shard().has_embedding) in.tokens = kernels::ToHostBuffer(tokens->inputs);
      if (m->shard().has_head) in.targets = kernels::ToHostBuffer(tokens->targets);
    }
    if (!m->shard().has_embedding) in.activations = input.TakeHostBuffer();
    auto out = m->ForwardOnly(std::move(in));
    if (!out.ok()) return out.status();
    if (out->loss) {
      val_loss_sum_ += *out->loss;
      ++val_batches_;
    }
    return Boundary(std::move(out->activations));
  }

  bool TakeValidationLoss(double* loss) override {
    if (val_batches_ == 0) return false;
    *loss = val_loss_sum_ / val_batches_;
    val_loss_sum_ = 0;
    val_batches_ = 0;
    return true;
  }

  Result<kernels::Tensor> BackwardInput(int stage, int mb, kernels::Tensor grad) override {
    auto* m = Stage(stage);
    if (m == nullptr) return NoStage(stage);
    const kernels::ScopedHostPool scope(&pool_);
    auto out = m->BackwardInput(mb, grad.TakeHostBuffer());
    if (!out.ok()) return out.status();
    return Boundary(std::move(out).value());
  }

  Status BackwardWeight(int stage, int mb) override {
    auto* m = Stage(stage);
    if (m == nullptr) return NoStage(stage);
    const kernels::ScopedHostPool scope(&pool_);
    PIPECOORD_RETURN_IF_ERROR(m->BackwardWeight(mb));
    return Status::Ok();
  }

  Result<kernels::Tensor> BackwardFull(int stage, int mb, kernels::Tensor grad) override {
    auto* m = Stage(stage);
    if (m == nullptr) return NoStage(stage);
    const kernels::ScopedHostPool scope(&pool_);
    auto out = m->BackwardFull(mb, grad.TakeHostBuffer());
    if (!out.ok()) return out.status();
    return Boundary(std::move(out).value());
  }

  std::vector<std::span<float>> Gradients() override {
    std::vector<std::span<float>> out;
    for (auto& [k, m] : stages_) {
      for (const model::ParameterRef& p : m->Parameters()) out.push_back(p.grad);
    }
    return out;
  }

  Result<std::vector<std::span<float>>> StageGradients(int stage) override {
    return StageSpans(stage, &model::ParameterRef::grad);
  }

  Result<std::span<float>> TiedEmbeddingGradient(int stage) override {
    model::StageModel* m = Stage(stage);
    if (m == nullptr) return NoStage(stage);
    std::span<float> g = m->TiedEmbeddingGradient();
    if (g.empty()) return FailedPrecondition("stage " + std::to_string(stage) + " holds no tied embedding gradient");
    return g;
  }

  Result<std::vector<std::span<float>>> StageValues(int stage) override {
    return StageSpans(stage, &model::ParameterRef::value);
  }

  int64_t recompute_ns() const override {
    int64_t ns = 0;
    for (const auto& [k, m] : stages_) ns += m->recompute_ns();
    return ns;
  }

  void SetRecompute(model::Recompute r) {
    for (auto& [k, m] : stages_) m->SetRecompute(r);
  }

  // ZeRO-1: each stage keeps the moments of shard `index` of `shards`; ZeRO-2 its gradients too
  // (outside a step's first W .. OPT).
  Status ShardOptimizerStates(int shards, int index, bool shard_gradients) {
    const kernels::ScopedHostPool scope(&pool_);
    for (auto& [k, m] : stages_) PIPECOORD_RETURN_IF_ERROR(m->ShardOptimizerStates(shards, index, shard_gradients));
    return Status::Ok();
  }

  Result<double> GradientSquareSum(bool count_replicated) override {
    double sum = 0;
    for (const auto& [k, m] : stages_) sum += m->GradientSquareSum(count_replicated);
    return sum;
  }

  Status ScaleGradients(float factor) override {
    for (auto& [k, m] : stages_) m->ScaleGradients(factor);
    return Status::Ok();
  }

  Status OptimizerStep(int) override {
    const kernels::ScopedHostPool scope(&pool_);
    const kernels::cpu::AdamWOptions options = AdamWOptionsAt(spec_, optimizer_steps());
    for (auto& [k, m] : stages_) {
      PIPECOORD_RETURN_IF_ERROR(m->OptimizerStep(options));
      m->ZeroGrad();
    }
    return Status::Ok();
  }

  Status AbortStep() override {
    const kernels::ScopedHostPool scope(&pool_);
    for (auto& [k, m] : stages_) {
      m->DropMicroBatches();
      m->ZeroGrad();
    }
    forwards_.clear();
    loss_sum_ = 0;
    has_loss_ = false;
    val_loss_sum_ = 0;
    val_batches_ = 0;
    return Status::Ok();
  }

  bool StepLoss(double* loss) override {
    if (!has_loss_) return false;
    *loss = loss_sum_ / mbs_;
    loss_sum_ = 0;
    return true;
  }

  uint64_t memory_in_use_bytes() const override { return static_cast<uint64_t>(pool_.allocated_bytes()); }

  uint64_t memory_peak_bytes() const override { return static_cast<uint64_t>(pool_.owned_peak_bytes()); }

  void ResetPeak() override { pool_.ResetPeaks(); }

  Status HoldBytes(uint64_t bytes) override {
    const kernels::ScopedHostPool scope(&pool_);
    try {
      held_.emplace_back(bytes, 1);  // written, so the pages are resident
    } catch (const std::bad_alloc&) {
      return Status(Code::kResourceExhausted, "host memory: cannot allocate " + std::to_string(bytes) + " bytes");
    }
    return Status::Ok();
  }

  std::vector<StateTensor> CheckpointState() override {
    std::vector<StateTensor> out;
    for (auto& [k, m] : stages_) {
      const std::string stage = "stage" + std::to_string(k) + "/";
      for (const model::ParameterRef& p : m->Parameters()) {
        const std::string name = stage + std::string(p.name);
        const std::vector<int64_t> shape(p.shape.begin(), p.shape.end());
        out.push_back({name + "/value", p.value, shape});
        if (p.adam_m.size() == p.value.size()) {
          out.push_back({name + "/adam_m", p.adam_m, shape});
          out.push_back({name + "/adam_v", p.adam_v, shape});
        } else if (!p.adam_m.empty()) {
          // A ZeRO shard holds elements [begin, begin + n) of the tensor's moments (flattened).
          const std::string range = "@" + std::to_string(p.moment_begin);
          const std::vector<int64_t> flat = {static_cast<int64_t>(p.adam_m.size())};
          out.push_back({name + "/adam_m" + range, p.adam_m, flat});
          out.push_back({name + "/adam_v" + range, p.adam_v, flat});
        }
      }
    }
    return out;
  }

  int64_t optimizer_steps() const override { return stages_.empty() ? 0 : stages_.begin()->second->optimizer_steps(); }
  void set_optimizer_steps(int64_t steps) override {
    for (auto& [k, m] : stages_) m->set_optimizer_steps(steps);
  }

 private:
  // One stage's parameters' `field` (their values or gradients), in parameter order.
  Result<std::vector<std::span<float>>> StageSpans(int stage, std::span<float> model::ParameterRef::*field) {
    auto* m = Stage(stage);
    if (m == nullptr) return NoStage(stage);
    std::vector<std::span<float>> out;
    for (const model::ParameterRef& p : m->Parameters()) out.push_back(p.*field);
    return out;
  }

  model::StageModel* Stage(int stage) {
    auto it = stages_.find(stage);
    return it == stages_.end() ? nullptr : it->second.get();
  }
  static Status NoStage(int stage) {
    return FailedPrecondition("stage " + std::to_string(stage) + " is not held by this rank");
  }
  // What the replay probe compares: the activations' HashFloats, or the head's loss's bits mixed.
  static uint64_t OutputChecksum(const model::StageOutput& out) {
    if (out.loss) {
      uint64_t bits;
      std::memcpy(&bits, &*out.loss, sizeof bits);
      return kernels::cpu::Mix64(bits);
    }
    return kernels::cpu::HashFloats(out.activations.data(), static_cast<int64_t>(out.activations.size()));
  }
  // A stage's output as the boundary tensor (no copy); empty stays empty (no next stage).
  kernels::Tensor Boundary(kernels::HostBuffer<float> values) const {
    if (values.empty()) return kernels::Tensor();
    return kernels::Tensor::FromHostBuffer(std::move(values), BoundarySpec().shape);
  }

  // Declared first: destroyed after the stages whose buffers it counts.
  kernels::CountingHostAllocator pool_;
  std::shared_ptr<const TrainingData> data_;
  const int mbs_;
  const int64_t mbs_size_, seq_, hidden_;  // the boundary tensor [micro-batch, seq, hidden]
  const v1::JobSpec spec_;  // its optimizer settings, step by step (AdamWOptionsAt)
  std::map<int, std::unique_ptr<model::StageModel>> stages_;
  std::vector<kernels::HostBuffer<char>> held_;  // HoldBytes (the oom fault)
  double loss_sum_ = 0;
  bool has_loss_ = false;
  double val_loss_sum_ = 0;  // validation batches' losses since TakeValidationLoss
  // The F actions of step forwards_step_, in the order they ran, with their outputs' checksums
  // (what the replay probe compares with).
  struct ForwardRun {
    int stage = 0, mb = 0;
    uint64_t checksum = 0;
  };
  std::vector<ForwardRun> forwards_;
  int forwards_step_ = -1;
  int val_batches_ = 0;
};

}  // namespace

Result<std::unique_ptr<ComputeBackend>> MakeBackend(const v1::Assignment& a, parallel::TensorParallel* tp) {
  if (a.spec().device() == "cuda") {
    cuda::CudaBackendOptions options;
    options.tensor_parallel = tp;
    auto cuda_backend = cuda::MakeCudaBackend(a, options);
    if (!cuda_backend.ok()) return cuda_backend.status();
    return std::unique_ptr<ComputeBackend>(std::move(cuda_backend).value());
  }
  const model::ModelConfig config = ModelConfigOf(a.spec().model());
  const model::BatchShape batch = BatchShapeOf(a.spec());
  auto data = TrainingData::Open(a.spec(), a.dp_rank());
  if (!data.ok()) return data.status();
  auto backend = std::make_unique<CpuBackend>(a, std::move(data).value());
  if (a.spec().tp() > 1 && (tp == nullptr || tp->size() != a.spec().tp())) {
    return InvalidArgument("spec.tp is " + std::to_string(a.spec().tp()) + ": the rank needs its tensor-parallel group");
  }
  for (const v1::StageShard& s : a.shards()) {
    PIPECOORD_RETURN_IF_ERROR(
        backend->AddStage(config, batch, s, a.spec().tp() > 1 ? tp : nullptr, a.spec().sequence_parallel()));
  }
  const int dp = std::max(1, a.spec().dp());
  if (a.spec().zero() >= 1 && dp > 1) {
    PIPECOORD_RETURN_IF_ERROR(backend->ShardOptimizerStates(dp, a.dp_rank(), a.spec().zero() >= 2));
  }
  backend->SetRecompute(model::RecomputeOf(a.spec().recompute()));
  return std::unique_ptr<ComputeBackend>(std::move(backend));
}

}  // namespace pipecoord::worker
