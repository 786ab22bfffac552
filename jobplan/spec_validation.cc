#include "jobplan/spec_validation.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>

#include "jobplan/health_settings.h"
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

Status NonNegative(const char* field, double v) {
  if (!std::isfinite(v) || v < 0) {
    return InvalidArgument(std::string("spec.") + field + ": must be a finite number >= 0, got " + Num(v));
  }
  return Status::Ok();
}

}  // namespace

Status ValidateJobSpec(const v1::JobSpec& s) {
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
  if (m.hidden() % m.heads() != 0) {
    return InvalidArgument("spec.model.heads: must divide spec.model.hidden (" +
                           std::to_string(m.hidden()) + "), got " + std::to_string(m.heads()));
  }
  PIPECOORD_RETURN_IF_ERROR(Range("model.ffnHidden", m.ffn_hidden(), 0, 1 << 20));
  PIPECOORD_RETURN_IF_ERROR(Range("model.vocab", m.vocab(), 2, 1 << 22));
  PIPECOORD_RETURN_IF_ERROR(Range("model.seqLen", m.seq_len(), 1, 1 << 20));

  auto info = schedules::FindSchedule(s.schedule());
  if (!info.ok()) return InvalidArgument("spec." + info.status().message());
  PIPECOORD_RETURN_IF_ERROR(Range("pp", s.pp(), 1, 4096));
  PIPECOORD_RETURN_IF_ERROR(Range("vpp", s.vpp(), 0, 64));
  PIPECOORD_RETURN_IF_ERROR(Range("dp", s.dp(), 0, 4096));
  PIPECOORD_RETURN_IF_ERROR(Range("microbatches", s.microbatches(), 1, 1 << 16));
  PIPECOORD_RETURN_IF_ERROR(Range("microBatchSize", s.micro_batch_size(), 1, 1 << 16));
  PIPECOORD_RETURN_IF_ERROR(Range("steps", s.steps(), 1, 10'000'000));
  PIPECOORD_RETURN_IF_ERROR(Range("checkpointEvery", s.checkpoint_every(), 0, 10'000'000));
  PIPECOORD_RETURN_IF_ERROR(Range("maxRestarts", s.max_restarts(), 0, 100));
  if (!std::isfinite(s.learning_rate()) || s.learning_rate() < 0 || s.learning_rate() > 10) {
    return InvalidArgument("spec.learningRate: must be in [0, 10], got " + Num(s.learning_rate()));
  }
  if (!s.device().empty() && s.device() != "cpu" && s.device() != "cuda") {
    return InvalidArgument("spec.device: must be \"cpu\" or \"cuda\", got \"" + s.device() + "\"");
  }
  const long long world = static_cast<long long>(s.pp()) * std::max(1, s.dp());
  if (world > 4096) return InvalidArgument("spec.pp x spec.dp: must be at most 4096 workers, got " + std::to_string(world));
  if (s.has_costs()) {
    PIPECOORD_RETURN_IF_ERROR(NonNegative("costs.f", s.costs().f()));
    PIPECOORD_RETURN_IF_ERROR(NonNegative("costs.b", s.costs().b()));
    PIPECOORD_RETURN_IF_ERROR(NonNegative("costs.w", s.costs().w()));
    PIPECOORD_RETURN_IF_ERROR(NonNegative("costs.comm", s.costs().comm()));
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
  const int vpp = s.vpp() == 0 ? (*info)->default_vpp : s.vpp();
  if ((*info)->required_vpp != 0 && vpp != (*info)->required_vpp) {
    return InvalidArgument("spec.vpp: schedule " + s.schedule() + " places exactly " +
                           std::to_string((*info)->required_vpp) + " chunk(s) per rank, got " + std::to_string(vpp));
  }
  if (static_cast<long long>(m.layers()) < static_cast<long long>(s.pp()) * vpp) {
    return InvalidArgument("spec.model.layers: must be >= spec.pp x spec.vpp = " + std::to_string(s.pp() * vpp) +
                           " (a layer for each stage), got " + std::to_string(m.layers()));
  }
  PIPECOORD_RETURN_IF_ERROR(ValidateHealthConfig(s.health()));
  if (s.stage_layers_size() > 0) {
    std::vector<int> rank_layers(s.stage_layers().begin(), s.stage_layers().end());
    // The placement's shape is all that matters here: every schedule keeps vpp chunks per rank.
    auto parts = schedules::PartitionLayers(m.layers(), s.pp(), schedules::LoopedPlacement(s.pp(), vpp), rank_layers,
                                            kSpecPartitionFields);
    if (!parts.ok()) return parts.status();
  }
  return Status::Ok();
}

v1::JobSpec WithDefaults(const v1::JobSpec& in) {
  v1::JobSpec s = in;
  if (s.dp() == 0) s.set_dp(1);
  if (s.device().empty()) s.set_device("cpu");
  if (s.model().ffn_hidden() == 0) {
    const int h = s.model().hidden();
    s.mutable_model()->set_ffn_hidden(((8 * h / 3) + 63) / 64 * 64);
  }
  if (s.data_seed() == 0) s.set_data_seed(s.model().seed());
  if (!s.has_costs()) {
    s.mutable_costs()->set_f(1);
    s.mutable_costs()->set_b(1);
    s.mutable_costs()->set_w(1);
  }
  if (s.vpp() == 0) {
    auto info = schedules::FindSchedule(s.schedule());
    if (info.ok()) s.set_vpp((*info)->default_vpp);
  }
  return s;
}

}  // namespace pipecoord::jobplan
