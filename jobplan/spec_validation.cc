#include "jobplan/spec_validation.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <limits>
#include <string>
#include <string_view>

#include "jobplan/data_spec.h"
#include "jobplan/health_settings.h"
#include "jobplan/hf_config.h"
#include "jobplan/optimizer_schedule.h"
#include "jobplan/plan_job.h"
#include "proto/worker_kinds.h"
#include "schedules/partition.h"
#include "schedules/registry.h"

namespace pipecoord::jobplan {
namespace {

// Every message names the field as the user wrote it (protobuf's JSON name under "spec.") and
// reads "FIELD: RULE, got VALUE"; numbers are echoed in %g.
std::string Num(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", v);
  return buf;
}

Status Range(const char* field, long long v, long long lo, long long hi) {
  if (v < lo || v > hi) {
    return InvalidArgument(std::string("spec.") + field + ": must be in " + std::to_string(lo) + ".." +
                           std::to_string(hi) + ", got " + std::to_string(v));
  }
  return Status::Ok();
}

// "package.module:function": dotted Python identifiers, a colon, an identifier.
bool IsImportPath(const std::string& s) {
  auto ident_char = [](char c, bool first) {
    return c == '_' || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (!first && c >= '0' && c <= '9');
  };
  const size_t colon = s.find(':');
  if (colon == std::string::npos || s.find(':', colon + 1) != std::string::npos) return false;
  auto dotted = [&](std::string_view part, bool allow_dots) {
    bool first = true;
    for (char c : part) {
      if (c == '.' && allow_dots && !first) {
        first = true;
        continue;
      }
      if (!ident_char(c, first)) return false;
      first = false;
    }
    return !first;  // not empty, not ending in a dot
  };
  return dotted(std::string_view(s).substr(0, colon), true) && dotted(std::string_view(s).substr(colon + 1), false);
}

// spec.worker: which program runs the job, and what PyTorch workers do not do (yet).
Status ValidateWorkerSpec(const v1::JobSpec& s) {
  const v1::WorkerSpec& w = s.worker();
  if (!v1::KnownWorkerKind(w.kind())) {
    return InvalidArgument("spec.worker.kind: must be \"builtin\" or \"torch\", got \"" + w.kind() + "\"");
  }
  if (w.kind() != v1::kTorchWorker) {
    if (!w.module().empty()) return InvalidArgument("spec.worker.module: only for spec.worker.kind \"torch\"");
    return Status::Ok();
  }
  if (!IsImportPath(w.module())) {
    return InvalidArgument("spec.worker.module: must be \"package.module:function\" (a function (StageShard, "
                           "ModelSpec) -> torch.nn.Module), got \"" + w.module() + "\"");
  }
  if (IsAuto(s)) {
    return InvalidArgument("spec.schedule: \"auto\" plans the built-in model's memory; name a schedule (or "
                           "\"best\") for torch workers");
  }
  if (s.precision() == "bf16") {
    return InvalidArgument("spec.precision: torch workers train in \"fp32\" (bf16 on them is not implemented)");
  }
  if (!s.init().empty()) {
    // Never ignored silently: the user's module has names of its own, which the Hugging Face
    // names in the folder need not match.
    return InvalidArgument("spec.init: torch workers do not load it (the stage builder makes each module's weights: "
                           "load them there, e.g. with safetensors.torch.load_file); leave init empty");
  }
  // spec.data and its validation (evalEvery) are read and run as the C++ workers do
  // (python/pipecoord/token_data.py, torch_eval.py).
  return Status::Ok();
}

// spec.tp and spec.sequenceParallel: the shapes a Megatron-style split needs (heads, the SwiGLU
// width and the vocabulary cut into tp equal slices; sequence parallelism cuts the sequence).
Status ValidateTensorParallel(const v1::JobSpec& s) {
  PIPECOORD_RETURN_IF_ERROR(Range("tp", s.tp(), 0, 1024));
  const int tp = std::max(1, s.tp());
  const v1::ModelSpec& m = s.model();
  if (tp > 1) {
    for (auto [field, value] :
         {std::pair{"model.heads", m.heads()}, {"model.kvHeads", m.kv_heads() != 0 ? m.kv_heads() : m.heads()},
          {"model.ffnHidden", FfnHiddenOf(m)}, {"model.vocab", m.vocab()}}) {
      if (value % tp != 0) {
        return InvalidArgument("spec.tp: must divide spec." + std::string(field) + " (" + std::to_string(value) +
                               ": each tensor-parallel rank holds an equal slice), got " + std::to_string(tp));
      }
    }
  }
  if (s.sequence_parallel()) {
    if (tp == 1) return InvalidArgument("spec.sequenceParallel: needs spec.tp > 1 (it splits the sequence over the tensor-parallel group)");
    if (m.seq_len() % tp != 0) {
      return InvalidArgument("spec.sequenceParallel: spec.tp (" + std::to_string(tp) + ") must divide spec.model.seqLen (" +
                             std::to_string(m.seq_len()) + ")");
    }
  }
  if (tp > 1) {
    // What tensor parallelism does not run yet is refused by name, never run as something else.
    if (s.worker().kind() == v1::kTorchWorker) {
      // Torch workers hand the stage builder its tensor-parallel group (docs/pytorch.md); what
      // they do not combine with it yet is refused by name.
      if (s.sequence_parallel()) {
        return InvalidArgument("spec.sequenceParallel: torch workers run tp without sequence parallelism (it runs on the C++ workers)");
      }
    }
    // Checkpoints: each rank writes its slices to its own file and a restart with the same
    // layout reads them back (pipectl export puts the slices back together); spec.init is cut
    // into each rank's slices.
  }
  return Status::Ok();
}

// spec.zero: the distributed optimizer runs on the C++ workers (CPU and CUDA), ZeRO-1 on torch workers.
Status ValidateZero(const v1::JobSpec& s) {
  PIPECOORD_RETURN_IF_ERROR(Range("zero", s.zero(), 0, 2));
  if (s.zero() == 0) return Status::Ok();
  // What ZeRO does not run on yet is refused by name, never run as something else.
  if (s.zero() == 2 && s.worker().kind() == v1::kTorchWorker) {
    return InvalidArgument("spec.zero: torch workers run zero 0 or 1 (ZeRO-2 runs on the C++ workers)");
  }
  return Status::Ok();
}

Status NonNegative(const char* field, double v) {
  if (!std::isfinite(v) || v < 0) {
    return InvalidArgument(std::string("spec.") + field + ": must be a finite number >= 0, got " + Num(v));
  }
  return Status::Ok();
}

// globalBatch: 0 or exactly dp x microbatches x microBatchSize; under "auto" required, and a
// multiple of the fixed ones' product (a 0 there is the coordinator's to choose).
Status ValidateGlobalBatch(const v1::JobSpec& s) {
  PIPECOORD_RETURN_IF_ERROR(Range("globalBatch", s.global_batch(), 0, std::numeric_limits<int32_t>::max()));
  const long long dp = s.dp(), m = s.microbatches(), b = s.micro_batch_size();
  if (!IsAuto(s)) {
    const long long product = std::max(1LL, dp) * m * b;
    if (s.global_batch() != 0 && s.global_batch() != product) {
      return InvalidArgument("spec.globalBatch: must be 0 or spec.dp x spec.microbatches x spec.microBatchSize = " +
                             std::to_string(std::max(1LL, dp)) + " x " + std::to_string(m) + " x " + std::to_string(b) +
                             " = " + std::to_string(product) + ", got " + std::to_string(s.global_batch()));
    }
    return Status::Ok();
  }
  if (s.global_batch() == 0) {
    return InvalidArgument(
        "spec.globalBatch: required when spec.schedule is \"auto\" (samples per step: the coordinator chooses "
        "dp x microbatches x microBatchSize equal to it)");
  }
  std::string fields, values;
  long long product = 1;
  for (const auto& [name, v] : {std::pair<const char*, long long>{"spec.dp", dp}, {"spec.microbatches", m},
                                {"spec.microBatchSize", b}}) {
    if (v == 0) continue;
    fields += (fields.empty() ? "" : " x ") + std::string(name);
    values += (values.empty() ? "" : " x ") + std::to_string(v);
    product *= v;
  }
  if (product > 1 && s.global_batch() % product != 0) {
    const bool all = dp != 0 && m != 0 && b != 0;
    return InvalidArgument("spec.globalBatch: must be " + std::string(all ? "" : "a multiple of ") + fields + " = " +
                           values + " = " + std::to_string(product) + " (fixed in the spec), got " +
                           std::to_string(s.global_batch()));
  }
  if (dp != 0 && m != 0 && b != 0 && s.global_batch() != product) {
    return InvalidArgument("spec.globalBatch: must be " + fields + " = " + values + " = " + std::to_string(product) +
                           " (fixed in the spec), got " + std::to_string(s.global_batch()));
  }
  return Status::Ok();
}

}  // namespace

int FfnHiddenOf(const v1::ModelSpec& m) {
  return m.ffn_hidden() != 0 ? m.ffn_hidden() : ((8 * m.hidden() / 3) + 63) / 64 * 64;
}

Status ValidateJobSpec(const v1::JobSpec& spec) {
  // spec.model.hfConfig gives the model's shape: the spec is checked as it expands.
  auto expanded = ApplyHfConfig(spec);
  if (!expanded.ok()) return expanded.status();
  const v1::JobSpec& s = *expanded;
  PIPECOORD_RETURN_IF_ERROR(ValidateWeightFields(s));
  if (s.name().size() > 200) {
    return InvalidArgument("spec.name: must be at most 200 characters, got " + std::to_string(s.name().size()));
  }
  for (unsigned char c : s.name()) {
    if (c < 0x20 || c == 0x7f) return InvalidArgument("spec.name: must not contain control characters");
  }
  if (!s.has_model()) return InvalidArgument("spec.model: required");
  const v1::ModelSpec& m = s.model();
  PIPECOORD_RETURN_IF_ERROR(Range("model.layers", m.layers(), 1, 4096));
  PIPECOORD_RETURN_IF_ERROR(Range("model.hidden", m.hidden(), 1, 65536));
  PIPECOORD_RETURN_IF_ERROR(Range("model.heads", m.heads(), 1, 1024));
  if (m.head_dim() == 0 && m.hidden() % m.heads() != 0) {
    return InvalidArgument("spec.model.heads: must divide spec.model.hidden (" +
                           std::to_string(m.hidden()) + "), got " + std::to_string(m.heads()));
  }
  PIPECOORD_RETURN_IF_ERROR(Range("model.kvHeads", m.kv_heads(), 0, m.heads()));
  PIPECOORD_RETURN_IF_ERROR(Range("model.headDim", m.head_dim(), 0, 65536));
  if (m.head_dim() % 2 != 0) {
    return InvalidArgument("spec.model.headDim: must be even (RoPE rotates pairs of features), got " +
                           std::to_string(m.head_dim()));
  }
  if (s.device() == "cuda" && m.heads() > 0) {
    // kernels/cuda/attention.h's kFlashMaxHeadDim: its tiles hold up to 128 features per head.
    constexpr int kCudaMaxHeadDim = 128;
    const int64_t head_dim = m.head_dim() != 0 ? m.head_dim() : m.hidden() / m.heads();
    if (head_dim > kCudaMaxHeadDim) {
      return InvalidArgument("spec.model.headDim: the CUDA backend's flash attention runs up to " +
                             std::to_string(kCudaMaxHeadDim) + " features per head, got " + std::to_string(head_dim) +
                             (m.head_dim() != 0 ? std::string() : " (hidden / heads)") +
                             "; more heads, or the CPU backend, run it");
    }
  }
  if (m.kv_heads() != 0 && m.heads() % m.kv_heads() != 0) {
    return InvalidArgument("spec.model.kvHeads: must divide spec.model.heads (" + std::to_string(m.heads()) +
                           "), got " + std::to_string(m.kv_heads()));
  }
  PIPECOORD_RETURN_IF_ERROR(Range("model.slidingWindow", m.sliding_window(), 0, 1 << 24));
  if (m.tied_embeddings()) {
    if (s.worker().kind() == v1::kTorchWorker) {
      return InvalidArgument("spec.model.tiedEmbeddings: torch workers train the module they are given (tie it "
                             "there); the built-in model's tied embeddings run on the C++ workers");
    }
    if (s.zero() > 0 && s.pp() > 1) {
      // The embedding's and the head copy's ZeRO shards fall at different places of their stages'
      // flat buffers, so the sum of their gradients has no shard to land in.
      return InvalidArgument("spec.zero: must be 0 with spec.model.tiedEmbeddings when pp > 1 (the embedding and "
                             "the LM head on different stages), got " + std::to_string(s.zero()));
    }
  }
  PIPECOORD_RETURN_IF_ERROR(Range("model.ffnHidden", m.ffn_hidden(), 0, 1 << 20));
  PIPECOORD_RETURN_IF_ERROR(Range("model.vocab", m.vocab(), 2, 1 << 22));
  PIPECOORD_RETURN_IF_ERROR(Range("model.seqLen", m.seq_len(), 1, 1 << 20));

  const bool is_auto = IsAuto(s);
  const schedules::ScheduleInfo* sched = nullptr;
  if (!is_auto && !IsBest(s)) {
    auto info = schedules::FindSchedule(s.schedule());
    if (!info.ok()) {
      return InvalidArgument("spec." + info.status().message() +
                             ", \"auto\" (the coordinator chooses) or \"best\" (the registered schedule with the "
                             "shortest predicted step within spec.memLimit)");
    }
    sched = *info;
  }
  // Under "auto" a 0 leaves the degree to the coordinator.
  const int least = is_auto ? 0 : 1;
  PIPECOORD_RETURN_IF_ERROR(Range("pp", s.pp(), least, 4096));
  PIPECOORD_RETURN_IF_ERROR(Range("vpp", s.vpp(), 0, 64));
  PIPECOORD_RETURN_IF_ERROR(Range("dp", s.dp(), 0, 4096));
  PIPECOORD_RETURN_IF_ERROR(Range("microbatches", s.microbatches(), least, 1 << 16));
  PIPECOORD_RETURN_IF_ERROR(Range("microBatchSize", s.micro_batch_size(), least, 1 << 16));
  PIPECOORD_RETURN_IF_ERROR(ValidateGlobalBatch(s));
  PIPECOORD_RETURN_IF_ERROR(Range("steps", s.steps(), 1, 10'000'000));
  PIPECOORD_RETURN_IF_ERROR(Range("checkpointEvery", s.checkpoint_every(), 0, 10'000'000));
  PIPECOORD_RETURN_IF_ERROR(Range("maxRestarts", s.max_restarts(), 0, 100));
  if (!std::isfinite(s.learning_rate()) || s.learning_rate() < 0 || s.learning_rate() > 10) {
    return InvalidArgument("spec.learningRate: must be in [0, 10], got " + Num(s.learning_rate()));
  }
  if (!s.device().empty() && s.device() != "cpu" && s.device() != "cuda") {
    return InvalidArgument("spec.device: must be \"cpu\" or \"cuda\", got \"" + s.device() + "\"");
  }
  if (!s.precision().empty() && s.precision() != "fp32" && s.precision() != "bf16") {
    return InvalidArgument("spec.precision: must be \"fp32\" or \"bf16\", got \"" + s.precision() + "\"");
  }
  if (s.precision() == "bf16" && s.device() != "cuda") {
    return InvalidArgument("spec.precision: \"bf16\" needs device \"cuda\" (the CPU backend trains in fp32)");
  }
  if (!s.recovery().empty() && s.recovery() != "auto" && s.recovery() != "restart") {
    return InvalidArgument("spec.recovery: must be \"auto\" or \"restart\", got \"" + s.recovery() + "\"");
  }
  PIPECOORD_RETURN_IF_ERROR(ValidateWorkerSpec(s));
  PIPECOORD_RETURN_IF_ERROR(ValidateTensorParallel(s));
  PIPECOORD_RETURN_IF_ERROR(ValidateZero(s));
  PIPECOORD_RETURN_IF_ERROR(ValidateOptimizer(s));
  if (const std::string& r = s.recompute(); !r.empty() && r != "none" && r != "selective" && r != "full") {
    return InvalidArgument("spec.recompute: must be \"none\", \"selective\" or \"full\", got \"" + r + "\"");
  }
  if (s.recompute() == "selective" && s.worker().kind() == v1::kTorchWorker) {
    // Full recompute checkpoints the module's blocks (python/pipecoord/torch_stages.py); the
    // attention core inside a user's block is not known from outside.
    return InvalidArgument("spec.recompute: torch workers run \"none\" or \"full\" (selective recompute of the "
                           "attention core runs on the C++ workers)");
  }
  const long long world = static_cast<long long>(s.pp()) * std::max(1, s.dp()) * std::max(1, s.tp());
  // The largest job the coordinator is measured with (//bench:stream_scale_bench: 16,384 ranks).
  if (world > 16384) {
    return InvalidArgument("spec.pp x spec.dp x spec.tp: must be at most 16384 workers, got " + std::to_string(world));
  }
  if (s.has_costs()) {
    PIPECOORD_RETURN_IF_ERROR(NonNegative("costs.f", s.costs().f()));
    PIPECOORD_RETURN_IF_ERROR(NonNegative("costs.b", s.costs().b()));
    PIPECOORD_RETURN_IF_ERROR(NonNegative("costs.w", s.costs().w()));
    PIPECOORD_RETURN_IF_ERROR(NonNegative("costs.comm", s.costs().comm()));
    PIPECOORD_RETURN_IF_ERROR(NonNegative("costs.reduceGrad", s.costs().reduce_grad()));
    const double sum = s.costs().f() + s.costs().b() + s.costs().w();
    if (sum <= 0) return InvalidArgument("spec.costs: f + b + w must be > 0, got " + Num(sum));
  }
  PIPECOORD_RETURN_IF_ERROR(NonNegative("memLimit", s.mem_limit()));
  if (s.schedule() == "csv" && s.csv_schedule().empty()) {
    return InvalidArgument("spec.csvSchedule: required when spec.schedule is \"csv\"");
  }
  if (s.schedule() != "csv" && !s.csv_schedule().empty()) {
    return InvalidArgument("spec.csvSchedule: only allowed when spec.schedule is \"csv\"");
  }
  if (s.csv_schedule().size() > (16 << 20)) {
    return InvalidArgument("spec.csvSchedule: must be at most 16 MiB (16777216 bytes), got " +
                           std::to_string(s.csv_schedule().size()) + " bytes");
  }
  // Under "auto" an unset vpp or pp counts as 1 here: the least the coordinator may choose.
  const int vpp = s.vpp() != 0 ? s.vpp() : sched != nullptr ? sched->default_vpp : 1;
  if (sched != nullptr && sched->required_vpp != 0 && vpp != sched->required_vpp) {
    return InvalidArgument("spec.vpp: schedule " + s.schedule() + " places exactly " +
                           std::to_string(sched->required_vpp) + " chunk(s) per rank, got " + std::to_string(vpp));
  }
  if (is_auto && s.pp() > 0 && s.stage_layers_size() > 0 && s.stage_layers_size() != s.pp()) {
    return InvalidArgument("spec.stageLayers: one count per rank, spec.pp = " + std::to_string(s.pp()) + ", got " +
                           std::to_string(s.stage_layers_size()));
  }
  // stageLayers fixes pp under "auto" when pp is left to choose.
  const int pp = s.pp() != 0 ? s.pp() : std::max(1, s.stage_layers_size());
  if (static_cast<long long>(m.layers()) < static_cast<long long>(pp) * vpp) {
    return InvalidArgument("spec.model.layers: must be >= spec.pp x spec.vpp = " + std::to_string(pp * vpp) +
                           " (a layer for each stage), got " + std::to_string(m.layers()));
  }
  PIPECOORD_RETURN_IF_ERROR(ValidateHealthConfig(s.health()));
  PIPECOORD_RETURN_IF_ERROR(ValidateDataSpec(s));  // spec.data, evalEvery, evalBatches (jobplan/data_spec.h)
  if (s.stage_layers_size() > 0) {
    std::vector<int> rank_layers(s.stage_layers().begin(), s.stage_layers().end());
    // The placement's shape is all that matters here: every schedule keeps vpp chunks per rank.
    auto parts = schedules::PartitionLayers(m.layers(), pp, schedules::LoopedPlacement(pp, vpp), rank_layers,
                                            kSpecPartitionFields);
    if (!parts.ok()) return parts.status();
  }
  return Status::Ok();
}

v1::JobSpec WithDefaults(const v1::JobSpec& in, v1::BestScheduleReport* best) {
  if (best != nullptr) best->Clear();
  auto expanded = ApplyHfConfig(in);  // the model's shape from spec.model.hfConfig
  v1::JobSpec s = expanded.ok() ? std::move(expanded).value() : in;
  if (s.dp() == 0 && !IsAuto(s)) s.set_dp(1);
  if (s.device().empty()) s.set_device("cpu");
  if (s.precision().empty()) s.set_precision("fp32");
  if (s.model().ffn_hidden() == 0) s.mutable_model()->set_ffn_hidden(FfnHiddenOf(s.model()));
  if (s.data_seed() == 0) s.set_data_seed(s.model().seed());
  if (!s.has_costs()) {
    s.mutable_costs()->set_f(1);
    s.mutable_costs()->set_b(1);
    s.mutable_costs()->set_w(1);
  }
  if (s.vpp() == 0 && !IsAuto(s)) {
    auto info = schedules::FindSchedule(s.schedule());
    if (info.ok()) s.set_vpp((*info)->default_vpp);
  }
  if (IsBest(s)) {
    auto resolved = ResolveBestSchedule(s, best);
    if (resolved.ok()) s = std::move(resolved).value();
  }
  return s;
}

}  // namespace pipecoord::jobplan
