// The job the CPU-backend benchmarks run (pipeline_bench, checkpoint_bench): a tiny Llama-style
// model (4 layers, hidden 128, 4 heads, vocab 256, sequence 64) on pp 2 with 8 micro-batches of
// 4, big enough that compute, not bookkeeping, fills a step on two cores.
#ifndef PIPECOORD_BENCH_CPU_BENCH_JOB_H_
#define PIPECOORD_BENCH_CPU_BENCH_JOB_H_

#include <string>

#include "proto/job.pb.h"

namespace pipecoord::bench {

inline v1::JobSpec CpuBenchJob(const std::string& schedule, int steps) {
  v1::JobSpec s;
  s.set_name("bench");
  s.set_schedule(schedule);
  s.set_pp(2);
  s.set_microbatches(8);
  s.set_micro_batch_size(4);
  s.set_steps(steps);
  s.set_learning_rate(0.001);
  v1::ModelSpec* m = s.mutable_model();
  m->set_layers(4);
  m->set_hidden(128);
  m->set_heads(4);
  m->set_vocab(256);
  m->set_seq_len(64);
  m->set_seed(5);
  return s;
}

}  // namespace pipecoord::bench

#endif  // PIPECOORD_BENCH_CPU_BENCH_JOB_H_
