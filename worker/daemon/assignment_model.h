// What a compute backend builds from its assignment, the same for every backend: the model's
// shape, the batch shape, each stage's shard and the synthetic data stream every rank
// regenerates from the job's data seed.
#ifndef PIPECOORD_WORKER_DAEMON_ASSIGNMENT_MODEL_H_
#define PIPECOORD_WORKER_DAEMON_ASSIGNMENT_MODEL_H_

#include "proto/job.pb.h"
#include "proto/worker.pb.h"
#include "worker/model/model_config.h"
#include "worker/model/stage_shard.h"
#include "worker/model/synthetic_data.h"

namespace pipecoord::worker {

inline model::ModelConfig ModelConfigOf(const v1::ModelSpec& ms) {
  model::ModelConfig config;
  config.layers = ms.layers();
  config.hidden = ms.hidden();
  config.ffn_hidden = ms.ffn_hidden();
  config.heads = ms.heads();
  config.kv_heads = ms.kv_heads();
  config.qkv_bias = ms.qkv_bias();
  config.sliding_window = ms.sliding_window();
  config.tied_embeddings = ms.tied_embeddings();
  config.head_dim = ms.head_dim();
  config.vocab = ms.vocab();
  config.seq_len = ms.seq_len();
  config.seed = ms.seed();
  if (ms.rms_norm_eps() != 0) config.rms_norm_eps = ms.rms_norm_eps();  // 0: Llama's default
  if (ms.rope_theta() != 0) config.rope_theta = ms.rope_theta();
  if (ms.has_rope_scaling()) {
    config.rope_scaling.factor = ms.rope_scaling().factor();
    config.rope_scaling.low_freq_factor = ms.rope_scaling().low_freq_factor();
    config.rope_scaling.high_freq_factor = ms.rope_scaling().high_freq_factor();
    config.rope_scaling.original_max_positions = ms.rope_scaling().original_max_position_embeddings();
  }
  return config;
}

inline model::BatchShape BatchShapeOf(const v1::JobSpec& spec) {
  model::BatchShape batch;
  batch.micro_batch_size = spec.micro_batch_size();
  batch.microbatches = spec.microbatches();
  return batch;
}

inline model::StageShard StageShardOf(const v1::StageShard& s) {
  return {s.stage(), s.first_layer(), s.num_layers(), s.has_embedding(), s.has_head()};
}

// The job's synthetic token stream (data_seed 0: the model's seed).
inline model::SyntheticData SyntheticDataOf(const v1::JobSpec& spec) {
  const v1::ModelSpec& ms = spec.model();
  const uint64_t seed = spec.data_seed() != 0 ? spec.data_seed() : ms.seed();
  return model::SyntheticData(seed, ms.vocab(), ms.seq_len(), spec.micro_batch_size());
}

}  // namespace pipecoord::worker

#endif  // PIPECOORD_WORKER_DAEMON_ASSIGNMENT_MODEL_H_
