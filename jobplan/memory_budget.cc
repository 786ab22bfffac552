#include "jobplan/memory_budget.h"

#include <algorithm>
#include <map>
#include <set>

#include "jobplan/probe_placement.h"
#include "memory/activations.h"
#include "memory/block_program.h"
#include "memory/pipecoord_cpu.h"
#include "memory/pipecoord_cuda.h"
#include "memory/training_spec.h"
#include "proto/op_kinds.h"

namespace pipecoord::jobplan {
namespace {

// Only sizes past 64-bit arithmetic (far beyond any machine) fail to resolve: such a stage
// gets a budget no rank can reach rather than a wrapped-around one.
constexpr int64_t kUnresolvable = int64_t{1} << 56;

// One stage as the walk needs it.
struct StagePrice {
  SavedBytes saved;
  uint64_t parameter_bytes = 0;
  uint64_t constant_bytes = 0;
  // A tensor passed to or from a neighbour stage: counted from the op that made it until a
  // transport takes it (SEND_F / SEND_B) or the next stage on this rank reads it.
  int64_t boundary = 0;
  // The most an op holds at once above the level before it: F from nothing of its own (its
  // input not yet counted), B from the level that holds what F stored. May be negative for B
  // (the CPU's B frees more than it keeps).
  int64_t forward_peak = 0;
  int64_t backward_peak = 0;
  // W above its start (CUDA: 0 but with sequence parallelism), and a PROBE's replayed or seeded
  // F from nothing of its own.
  int64_t weight_peak = 0;
  int64_t replay_peak = 0;
  int64_t seeded_peak = 0;  // the seeded replay's F (CUDA: its input is new, a replay's is held)
  // ZeRO-2 on the CPU: BW allocates the step's gradients between its B and its W (CUDA: first),
  // and OPT allocates the shard's gradients (shard_gradient_bytes) before it frees the whole ones.
  bool gradients_after_b = false;
  int64_t shard_gradient_bytes = 0;
  // ZeRO-2: what the stage's whole gradients add to the shard's (parameter_bytes counts those)
  // from its first W (or BW) of a step to OPT; 0 otherwise.
  int64_t step_gradient_bytes = 0;
  // CUDA's OPT (CudaOptimizerPeak): the stage's parameter count (this rank's slices) and whether
  // it holds norm gains (blocks or the head).
  int64_t parameter_count = 0;
  bool norm_gains = false;
  // Tied embeddings on more than one stage: the elements of the stage's embedding or head copy
  // (this rank's vocabulary rows), whose gradient OPT sums over the embedding group; 0 otherwise.
  int64_t tied_count = 0;
};

StagePrice Unresolvable() {
  StagePrice p;
  p.saved.after_f = p.saved.after_b = kUnresolvable;
  p.parameter_bytes = kUnresolvable;
  p.forward_peak = kUnresolvable;
  return p;
}

// The spec's backend in memory/'s terms, resolved once and priced per shard.
class Pricer {
 public:
  explicit Pricer(const v1::JobSpec& spec) : cuda_(spec.device() == "cuda") {
    const v1::ModelSpec& m = spec.model();
    // Validated: "", "none", "selective" or "full".
    const auto parsed = memory::ParseRecompute(spec.recompute().empty() ? "none" : spec.recompute());
    const memory::Recompute recompute = parsed.ok() ? *parsed : memory::Recompute::kNone;
    if (cuda_) {
      model_ = memory::PipecoordCudaModel(m.layers(), m.hidden(), m.ffn_hidden(), m.heads(), m.vocab(),
                                          m.seq_len(), m.kv_heads(), m.head_dim(), m.qkv_bias(), m.tied_embeddings());
      const bool bf16 = spec.precision() == "bf16";  // WithDefaults made "" fp32
      training_ = memory::PipecoordCudaTraining(spec.micro_batch_size(),
                                                bf16 ? memory::DtypePolicy::kBf16 : memory::DtypePolicy::kFp32,
                                                spec.zero(), std::max(1, spec.dp()), recompute, std::max(1, spec.tp()),
                                                spec.sequence_parallel());
    } else {
      model_ = memory::PipecoordCpuModel(m.layers(), m.hidden(), m.ffn_hidden(), m.heads(), m.vocab(), m.seq_len(),
                                         m.kv_heads(), m.qkv_bias(), m.tied_embeddings(), m.head_dim());
      training_ = memory::PipecoordCpuTraining(spec.micro_batch_size(), std::max(1, spec.tp()), spec.zero(),
                                               std::max(1, spec.dp()), recompute, spec.sequence_parallel());
      activations_ = memory::ResolveActivations(model_, training_);
    }
  }

  StagePrice Price(const v1::StageShard& shard) const {
    return cuda_ ? PriceCuda(shard) : PriceCpu(shard);
  }

 private:
  // The CPU backend's peak is its counting allocator's (worker/daemon/cpu_backend.cc): each op's
  // from memory/'s replay of the model's allocations (PipecoordCpuOpPeaks); an op's output is its
  // own until sent or read.
  StagePrice PriceCpu(const v1::StageShard& shard) const {
    if (!activations_.ok()) return Unresolvable();
    const memory::CpuStageMemory st = memory::PipecoordCpuStage(
        model_, training_, *activations_, shard.num_layers(), shard.has_embedding(), shard.has_head());
    auto ops = memory::PipecoordCpuOpPeaks(model_, training_, shard.num_layers(), shard.has_embedding(),
                                           shard.has_head());
    if (!ops.ok()) return Unresolvable();
    StagePrice p;
    p.saved.after_f = static_cast<uint64_t>(st.per_microbatch.stored);
    p.saved.after_b = static_cast<uint64_t>(st.per_microbatch.kept_for_w);
    p.parameter_bytes = static_cast<uint64_t>(st.parameter_bytes);
    p.boundary = ops->boundary;
    // The replay and the recipe must agree on what F and B leave (memory's tests hold them to it).
    const int64_t f_out = shard.has_head() ? 0 : p.boundary, b_out = shard.has_embedding() ? 0 : p.boundary;
    if (ops->forward_end != st.per_microbatch.stored + f_out ||
        ops->backward_end != st.per_microbatch.kept_for_w - st.per_microbatch.stored + b_out) {
      return Unresolvable();
    }
    p.forward_peak = ops->forward;
    p.backward_peak = ops->backward;
    p.weight_peak = ops->weight;
    p.replay_peak = p.seeded_peak = ops->replay;
    p.gradients_after_b = true;
    if (training_.zero >= 2 && training_.dp > 1) {
      // fp32: the whole gradients replace the shard's (ceil(n / dp), counted in parameter_bytes).
      p.shard_gradient_bytes = (st.parameters + training_.dp - 1) / training_.dp * 4;
      p.step_gradient_bytes = st.parameters * 4 - p.shard_gradient_bytes;
    }
    return p;
  }

  StagePrice PriceCuda(const v1::StageShard& shard) const {
    auto st = memory::PipecoordCudaStage(model_, training_, shard.num_layers(), shard.has_embedding(),
                                         shard.has_head());
    if (!st.ok() || st->per_microbatch.stored > kUnresolvable || st->per_microbatch.kept_for_w > kUnresolvable ||
        st->parameter_bytes > kUnresolvable || st->forward_peak > kUnresolvable ||
        st->backward_peak > kUnresolvable) {
      return Unresolvable();
    }
    StagePrice p;
    p.saved.after_f = static_cast<uint64_t>(st->per_microbatch.stored);
    p.saved.after_b = static_cast<uint64_t>(st->per_microbatch.kept_for_w);
    p.parameter_bytes = static_cast<uint64_t>(st->parameter_bytes);
    p.constant_bytes = static_cast<uint64_t>(st->constant_bytes);
    p.boundary = st->boundary_bytes;
    p.forward_peak = st->forward_peak;
    p.backward_peak = st->backward_peak;
    p.weight_peak = st->weight_peak;
    p.parameter_count = st->parameters;
    p.norm_gains = shard.num_layers() > 0 || shard.has_head();
    if (model_.tied_embeddings && shard.has_embedding() != shard.has_head()) {  // the model spans stages
      p.tied_count = model_.vocab / std::max(1, training_.tp) * model_.hidden;
    }
    if (st->whole_gradient_bytes > 0) {  // ZeRO-2 (CudaStageModel::EnsureGradients, ReleaseGradients)
      p.shard_gradient_bytes = st->shard_gradient_bytes;
      p.step_gradient_bytes = st->whole_gradient_bytes - st->shard_gradient_bytes;
    }
    // A PROBE's replayed F allocates what F does but its input (the held tensor itself); the
    // seeded one uploads its input as F receives one (CudaBackend::ReplayForward, SeededForward).
    p.seeded_peak = st->forward_peak;
    p.replay_peak = st->forward_peak - (shard.has_embedding() ? 0 : st->boundary_bytes);
    return p;
  }

  bool cuda_;
  memory::ModelSpec model_;
  memory::TrainingSpec training_;
  Result<memory::ActivationModel> activations_ = Internal("unresolved");
};

// The numerical probe's GEMM in the backend's pool (ComputeBackend::ProbeGemm): the CUDA
// backend's inputs and fp32 output, each a pool block (in bf16 the inputs are bf16); 0 on the
// CPU, whose probe uses plain host vectors outside the counting allocator.
int64_t ProbeGemmBytes(const v1::JobSpec& spec, bool holds_head) {
  if (spec.device() != "cuda") return 0;
  const ProbeGemm g = ProbeGemmFor(spec, holds_head);
  const int64_t in = spec.precision() == "bf16" ? 2 : 4;
  return memory::CudaPoolBytes(in * g.m * g.k) + memory::CudaPoolBytes(in * g.n * g.k) +
         memory::CudaPoolBytes(4 * g.m * g.n);
}

// The CUDA backend's replay hash slots (CudaBackend's hashes_): 8 bytes per F a PROBE replays
// and one for the replay's own output, one pool block, held from the start; none without replays.
int64_t ReplayHashBytes(const v1::JobSpec& spec, const v1::RankJobs& jobs) {
  if (spec.device() != "cuda") return 0;
  std::set<std::pair<int, int>> named;
  bool replays = false;
  for (const v1::Action& act : jobs.actions()) {
    if (act.op() != v1::PROBE) continue;
    if (act.microbatch() >= 0) named.insert({act.stage(), act.microbatch()});
    replays = replays || act.microbatch() >= 0 || act.microbatch() == kSeededReplay;
  }
  return replays ? memory::CudaPoolBytes(static_cast<int64_t>(8 * (named.size() + 1))) : 0;
}

// The CUDA backend's OPT (worker/daemon/executor.cc's OptimizerStepWithDataParallel over
// CudaBackend), above `base` (the level when it starts, ZeRO-2's whole gradients included), its
// allocations one after the other: the data-parallel ring's largest chunk (read out to send, freed
// when Send returns, then the one received) of each stage's reduce-scatter under ZeRO, or of the
// one all-reduce of every gradient; tied embeddings' sum of the embedding's and the head copy's
// gradients (two held: the copy read out and added in, then the sum read out and written back,
// one at a time; one held: the two-member ring's chunk); then stage by stage (ascending) the norm gains' sum over the
// tensor-parallel group with sequence parallelism (its chunk) and ZeRO-2's release of a stage whose
// whole gradients are live (the shard's made, the whole ones freed); the norm's scratch (one
// double per stage and elementwise.h's 128); under ZeRO the all-gather of each stage's masters
// (its chunk).
struct HeldStage {
  const StagePrice* price;
  bool gradients_live;  // ZeRO-2: its whole gradients were made this step
};
int64_t CudaOptimizerPeak(const v1::JobSpec& spec, const std::vector<HeldStage>& stages, int64_t base) {
  const int dp = std::max(1, spec.dp()), tp = std::max(1, spec.tp());
  const bool zero = spec.zero() >= 1 && dp > 1;
  auto chunk = [](int64_t count, int n) { return memory::CudaPoolBytes(4 * ((count + n - 1) / n)); };
  int64_t level = base, peak = base, all = 0, largest = 0;
  for (const HeldStage& h : stages) {
    all += h.price->parameter_count;
    largest = std::max(largest, chunk(h.price->parameter_count, dp));
  }
  if (dp > 1) peak = std::max(peak, level + (zero ? largest : chunk(all, dp)));
  int tied_held = 0;
  int64_t tied = 0;
  for (const HeldStage& h : stages) {
    if (h.price->tied_count > 0) {
      ++tied_held;
      tied = h.price->tied_count;
    }
  }
  if (tied_held == 2) peak = std::max(peak, level + memory::CudaPoolBytes(4 * tied));
  if (tied_held == 1) peak = std::max(peak, level + chunk(tied, 2));
  for (const HeldStage& h : stages) {
    if (spec.sequence_parallel() && tp > 1 && h.price->norm_gains) {
      peak = std::max(peak, level + chunk(spec.model().hidden(), tp));
    }
    if (h.gradients_live && h.price->step_gradient_bytes > 0) {
      peak = std::max(peak, level + h.price->shard_gradient_bytes);
      level -= h.price->step_gradient_bytes;
    }
  }
  const int64_t scratch = memory::CudaPoolBytes(8 * (static_cast<int64_t>(stages.size()) + 128));
  peak = std::max(peak, level + scratch);
  if (zero) peak = std::max(peak, level + largest);
  return peak - base;
}

}  // namespace

SavedBytes StageSavedBytes(const v1::JobSpec& spec, const v1::StageShard& shard) {
  return Pricer(spec).Price(shard).saved;
}

std::vector<RankMemoryEstimate> EstimateRankMemory(const v1::JobSpec& spec, const v1::Plan& plan) {
  const Pricer pricer(spec);
  std::vector<RankMemoryEstimate> out(spec.pp());
  std::map<int, StagePrice> price;  // by stage
  for (const v1::StageShard& shard : plan.shards()) {
    const int r = plan.stage_to_rank(shard.stage());
    if (r < 0 || r >= spec.pp()) continue;
    const StagePrice p = pricer.Price(shard);
    out[r].parameter_bytes += p.parameter_bytes;
    out[r].constant_bytes += p.constant_bytes;
    price[shard.stage()] = p;
  }
  const int stages = plan.stage_to_rank_size();
  for (const v1::RankJobs& jobs : plan.ranks()) {
    const int r = jobs.rank();
    if (r < 0 || r >= spec.pp()) continue;
    auto on_this_rank = [&](int stage) { return stage >= 0 && stage < stages && plan.stage_to_rank(stage) == r; };
    // The bytes the rank holds now (micro-batches in flight and tensors waiting to be sent or
    // read), and the most seen during any op.
    int64_t now = 0, peak = 0;
    const int64_t probe_bytes = ProbeGemmBytes(spec, HoldsHead(plan, r));
    out[r].constant_bytes += ReplayHashBytes(spec, jobs);
    std::map<std::pair<int, int>, int64_t> held;  // (stage, micro-batch) -> bytes
    // ZeRO-2: the gradients allocated this step (from each stage's first W or BW), and by whom.
    int64_t grads = 0;
    std::set<int> grads_live;
    auto allocate_grads = [&](int s, const StagePrice& p) {
      if (p.step_gradient_bytes > 0 && grads_live.insert(s).second) grads += p.step_gradient_bytes;
    };
    for (const v1::Action& act : jobs.actions()) {
      const v1::Op op = act.op();
      const int s = act.stage();
      const auto it = price.find(s);
      if (it == price.end()) continue;
      const StagePrice& p = it->second;
      if (op == v1::SEND_F || op == v1::SEND_B) {
        now -= p.boundary;  // the transport has it now
        continue;
      }
      if (op == v1::PROBE) {
        // The numerical probe's GEMM, then the replayed (or seeded) F if the PROBE names one.
        peak = std::max(peak, now + grads + probe_bytes);
        if (act.microbatch() >= 0) peak = std::max(peak, now + grads + p.replay_peak);
        if (act.microbatch() == kSeededReplay) peak = std::max(peak, now + grads + p.seeded_peak);
        continue;
      }
      if (op == v1::OPT && spec.device() == "cuda") {
        std::vector<HeldStage> held;  // ascending, as the executor and the backend go
        for (const auto& [t, q] : price) {
          if (on_this_rank(t)) held.push_back({&q, grads_live.count(t) > 0});
        }
        peak = std::max(peak, now + grads + CudaOptimizerPeak(spec, held, now + grads));
        grads = 0;
        grads_live.clear();
        continue;
      }
      if (op == v1::OPT) {
        // ZeRO-2 (CPU): stage by stage, the shard's gradients are allocated, then the whole ones
        // freed (StageModel::ReleaseGradients).
        for (int t : grads_live) {
          const StagePrice& q = price.at(t);
          peak = std::max(peak, now + grads + q.shard_gradient_bytes);
          grads -= q.step_gradient_bytes;
        }
        grads_live.clear();
        continue;
      }
      if (!v1::IsCompute(op)) continue;
      int64_t& mine = held[{s, act.microbatch()}];
      auto set = [&](uint64_t bytes) {
        now = now - mine + static_cast<int64_t>(bytes);
        mine = static_cast<int64_t>(bytes);
      };
      // An input made on this rank was counted since its producer ran; from here the op counts
      // it (F's and B's peaks start with their input).
      auto take_input = [&](int producer) {
        if (on_this_rank(producer)) now -= p.boundary;
      };
      switch (op) {
        case v1::F:
          if (s > 0) take_input(s - 1);
          peak = std::max(peak, now + grads + p.forward_peak);
          set(p.saved.after_f);
          if (s + 1 < stages) now += p.boundary;  // the output, until sent or read here
          break;
        case v1::B:
        case v1::BW:
          if (s + 1 < stages) take_input(s + 1);
          if (op == v1::BW && !p.gradients_after_b) {
            // CUDA: ZeRO-2's gradients come first (an output still waiting here included).
            allocate_grads(s, p);
            peak = std::max(peak, now + grads);
          }
          peak = std::max(peak, now + grads + p.backward_peak);
          set(p.saved.after_b);
          if (s > 0) now += p.boundary;  // the input's gradient, until sent or read here
          if (op == v1::BW) {            // W, with the input's gradient still here
            allocate_grads(s, p);
            peak = std::max(peak, now + grads + p.weight_peak);
            set(0);
          }
          break;
        case v1::W:
          allocate_grads(s, p);
          peak = std::max(peak, now + grads + p.weight_peak);  // at its start, before it frees
          set(0);
          break;
        default:
          break;
      }
    }
    out[r].activation_bytes = static_cast<uint64_t>(std::max<int64_t>(peak, 0));
  }
  for (RankMemoryEstimate& e : out) e.budget_bytes = e.parameter_bytes + e.constant_bytes + e.activation_bytes;
  return out;
}

void FillMemoryBudgets(const v1::JobSpec& spec, v1::Plan* plan) {
  plan->clear_memory_budget_bytes();
  for (const RankMemoryEstimate& e : EstimateRankMemory(spec, *plan)) plan->add_memory_budget_bytes(e.budget_bytes);
}

}  // namespace pipecoord::jobplan
