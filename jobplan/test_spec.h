// A tiny job for the health tests: 1f1b (or another schedule), pp 2, m 4, 4 layers of h 32.
#ifndef PIPECOORD_JOBPLAN_TEST_SPEC_H_
#define PIPECOORD_JOBPLAN_TEST_SPEC_H_

#include <string>

#include "jobplan/plan_job.h"
#include "jobplan/spec_validation.h"
#include "jobplan/tiny_spec_for_tests.h"
#include "proto/job.pb.h"

namespace pipecoord::jobplan {

inline v1::JobSpec TestSpec(const std::string& schedule = "1f1b", int pp = 2, int vpp = 0) {
  v1::JobSpec s = TinySpec(pp, schedule);  // the same model and micro-batches
  s.clear_name();
  s.set_vpp(vpp);
  s.set_steps(10);
  s.mutable_model()->set_seed(3);
  return WithDefaults(s);
}

inline v1::Job TestJob(const v1::JobSpec& spec) {
  v1::Job j;
  j.set_id("job-test");
  *j.mutable_spec() = spec;
  *j.mutable_plan() = PlanJob(spec).value();
  return j;
}

}  // namespace pipecoord::jobplan

#endif  // PIPECOORD_JOBPLAN_TEST_SPEC_H_
