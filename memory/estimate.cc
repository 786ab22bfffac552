#include "memory/estimate.h"

#include <algorithm>

#include "memory/live_peak.h"
#include "schedules/partition.h"
#include "schedules/registry.h"

namespace pipecoord::memory {

const RankMemory& MemoryReport::Tightest() const {
  size_t best = 0;
  for (size_t r = 1; r < ranks.size(); ++r) {
    if (ranks[r].peak_bytes > ranks[best].peak_bytes) best = r;
  }
  return ranks[best];
}

Result<MemoryReport> EstimateMemory(const ModelSpec& model, const TrainingSpec& training) {
  PIPECOORD_RETURN_IF_ERROR(ValidateModel(model));
  PIPECOORD_RETURN_IF_ERROR(ValidateTraining(model, training));
  auto info = schedules::FindSchedule(training.schedule);
  if (!info.ok()) return InvalidArgument(info.status().message());
  MemoryReport rep;
  rep.model = model;
  rep.training = training;
  if (rep.training.vpp == 0) rep.training.vpp = (*info)->default_vpp;
  const TrainingSpec& t = rep.training;
  PIPECOORD_RETURN_IF_ERROR(ValidateTraining(model, t));  // layers >= pp x resolved vpp
  rep.split_backward = (*info)->split_backward;

  schedules::ScheduleSpec spec;
  spec.pp = t.pp;
  spec.vpp = t.vpp;
  spec.microbatches = t.microbatches;
  auto schedule = schedules::GenerateComputeOrder(t.schedule, spec);
  if (!schedule.ok()) return schedule.status();
  rep.stage_to_rank = schedule->stage_to_rank;
  auto layers = schedules::PartitionLayers(model.layers, t.pp, rep.stage_to_rank);
  if (!layers.ok()) return layers.status();
  rep.stage_layers = *layers;

  auto act = ResolveActivations(model, t);
  if (!act.ok()) return act.status();
  rep.activations = std::move(*act);
  const BlockActivations& blk = rep.activations.block;
  const EdgeActivations& first = rep.activations.first;
  const EdgeActivations& last = rep.activations.last;

  // Keeps every sum below 2^63: a block, its stage and the micro-batches in flight.
  const int64_t kMaxBlockBytes = int64_t{1} << 44;
  if (blk.saved_bytes > kMaxBlockBytes || blk.w_bytes > kMaxBlockBytes || first.stored_bytes > kMaxBlockBytes ||
      last.stored_bytes > kMaxBlockBytes || last.w_bytes > kMaxBlockBytes) {
    return InvalidArgument("activations: more than 16 TiB per block and micro-batch; reduce seq-len or micro-batch");
  }
  const int num_stages = static_cast<int>(rep.stage_to_rank.size());
  std::vector<StageBytes> stage_bytes(num_stages);
  for (int k = 0; k < num_stages; ++k) {
    StageBytes& sb = stage_bytes[k];
    sb.stored = rep.stage_layers[k] * blk.stored_bytes;
    sb.kept_for_w = rep.stage_layers[k] * blk.w_bytes;
    if (k == 0) {
      sb.stored += first.stored_bytes;
      sb.kept_for_w += first.w_bytes;
    }
    if (k == num_stages - 1) {
      sb.stored += last.stored_bytes;
      sb.kept_for_w += last.w_bytes;
    }
  }
  for (const StageBytes& sb : stage_bytes) {
    const __int128 most = static_cast<__int128>(std::max(sb.stored, sb.kept_for_w)) * t.microbatches * t.vpp;
    if (most > (static_cast<__int128>(1) << 61)) {
      return InvalidArgument("activations: a rank could hold more than 2^61 bytes; reduce the sizes");
    }
  }
  const std::vector<LivePeak> peaks = PeakLiveActivations(*schedule, stage_bytes);

  const ParamCounts pc = CountParams(model, t.tp);
  rep.total_params = TotalParams(model);
  const int first_rank = rep.stage_to_rank.front();
  const int last_rank = rep.stage_to_rank.back();
  const int64_t param_elem = ActivationBytes(t.dtype);
  const int64_t grad_elem = (t.dtype != DtypePolicy::kFp32 && !t.fp32_grads) ? 2 : 4;
  rep.ranks.resize(t.pp);
  for (int r = 0; r < t.pp; ++r) {
    RankMemory& rm = rep.ranks[r];
    rm.rank = r;
    for (int k = 0; k < num_stages; ++k) {
      if (rep.stage_to_rank[k] != r) continue;
      rm.stages.push_back(k);
      rm.layers += rep.stage_layers[k];
    }
    rm.first_stage = r == first_rank;
    rm.last_stage = r == last_rank;
    rm.params = rm.layers * pc.per_block;
    if (rm.first_stage) rm.params += pc.embedding + pc.positions;
    if (rm.last_stage) {
      rm.params += pc.final_norm;
      // A tied LM head reuses the embedding where one stage holds both (pp 1); elsewhere the last
      // stage keeps its own copy (Megatron does the same and all-reduces their gradients), also
      // on a V schedule's rank 0, whose two stages are separate models (the CPU workers').
      if (!model.tied_embeddings || num_stages > 1) rm.params += pc.lm_head;
    }
    rm.states = ParamStateBytes(rm.params, t);
    rm.activations_bytes = peaks[r].bytes;
    rm.live_microbatches = peaks[r].live_microbatches;
    int64_t transient = rm.layers > 0 ? blk.recompute_bytes : 0;
    if (rm.last_stage) transient = std::max(transient, last.transient_bytes);
    if (t.zero >= 3 && rm.layers > 0) transient += pc.per_block * (param_elem + grad_elem);
    rm.transient_bytes = transient;
    rm.peak_bytes = rm.states.total() + rm.activations_bytes + rm.transient_bytes;
  }
  return rep;
}

}  // namespace pipecoord::memory
