// A tiny job for the coordinator's tests: `schedule` on pp ranks, 4 micro-batches of 2, 2 steps,
// 4 layers of hidden 32 (4 heads), vocabulary 64, sequence 8. Valid as it is; tests change one
// field at a time.
#ifndef PIPECOORD_JOBPLAN_TINY_SPEC_FOR_TESTS_H_
#define PIPECOORD_JOBPLAN_TINY_SPEC_FOR_TESTS_H_

#include <string>

#include "proto/job.pb.h"

namespace pipecoord::jobplan {

inline v1::JobSpec TinySpec(int pp = 2, const std::string& schedule = "1f1b") {
  v1::JobSpec s;
  s.set_name("tiny");
  s.set_schedule(schedule);
  s.set_pp(pp);
  s.set_microbatches(4);
  s.set_micro_batch_size(2);
  s.set_steps(2);
  s.set_learning_rate(0.01);
  v1::ModelSpec* m = s.mutable_model();
  m->set_layers(4);
  m->set_hidden(32);
  m->set_heads(4);
  m->set_vocab(64);
  m->set_seq_len(8);
  m->set_seed(1);
  return s;
}

}  // namespace pipecoord::jobplan

#endif  // PIPECOORD_JOBPLAN_TINY_SPEC_FOR_TESTS_H_
