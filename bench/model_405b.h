// The 405B-class model the scale benchmarks plan for (Llama 3 405B's shape: 126 layers, h 16384,
// ffn 53248, 128 heads, vocabulary 128256, s 8192; without its grouped-query attention, 8
// key/value heads, which the CUDA backend does not run yet: spec.model.kvHeads is refused on
// device "cuda"), as a schedule "auto" job of global batch 2048.
#ifndef PIPECOORD_BENCH_MODEL_405B_H_
#define PIPECOORD_BENCH_MODEL_405B_H_

#include "proto/job.pb.h"

namespace pipecoord::bench {

inline v1::JobSpec Auto405BSpec() {
  v1::JobSpec s;
  s.set_name("405b-auto");
  s.set_schedule("auto");
  s.set_global_batch(2048);
  s.set_steps(1000);
  v1::ModelSpec* m = s.mutable_model();
  m->set_layers(126);
  m->set_hidden(16384);
  m->set_heads(128);
  m->set_ffn_hidden(53248);
  m->set_vocab(128256);
  m->set_seq_len(8192);
  return s;
}

}  // namespace pipecoord::bench

#endif  // PIPECOORD_BENCH_MODEL_405B_H_
