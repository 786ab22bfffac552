// Fuzz target: a JobSpec in protobuf's JSON mapping, as `pipectl submit` reads it, then what
// Coordinator::SubmitJob does with it: validation, defaults and the plan. Specs too big to plan
// in a few milliseconds are validated only (the limits jobplan::ValidateJobSpec allows are meant for real
// clusters); what is planned must have one job list per rank.
#include <google/protobuf/util/json_util.h>

#include <cstddef>
#include <cstdint>
#include <string>

#include "jobplan/plan_job.h"
#include "jobplan/spec_validation.h"
#include "fuzz/fuzz_check.h"
#include "proto/job.pb.h"

namespace {

using namespace pipecoord;

// Actions of one step across all ranks, roughly; the bound keeps one input under ~100 ms.
bool SmallEnoughToPlan(const v1::JobSpec& s) {
  const long long stages = static_cast<long long>(s.pp()) * s.vpp();
  return s.pp() <= 64 && stages <= 256 && stages * s.microbatches() <= 4096 && s.model().layers() <= 1024 &&
         s.csv_schedule().size() <= 4096;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size > (64 << 10)) return 0;
  v1::JobSpec raw;
  const std::string text(reinterpret_cast<const char*>(data), size);
  if (!google::protobuf::util::JsonStringToMessage(text, &raw).ok()) return 0;
  if (!jobplan::ValidateJobSpec(raw).ok()) return 0;
  const v1::JobSpec spec = jobplan::WithDefaults(raw);
  FUZZ_CHECK(jobplan::ValidateJobSpec(spec).ok(), "defaults made a valid spec invalid");
  if (!SmallEnoughToPlan(spec)) return 0;
  auto plan = jobplan::PlanJob(spec);
  if (!plan.ok()) {
    FUZZ_CHECK(!plan.status().message().empty(), "an error without a message");
    return 0;
  }
  // The coordinator dispatches pp x dp workers and hands rank r the list plan.ranks(r).
  FUZZ_CHECK(plan->ranks_size() == spec.pp(), "%d job lists for pp %d", plan->ranks_size(), spec.pp());
  FUZZ_CHECK(plan->predicted_bubble_rate() >= 0 && plan->predicted_bubble_rate() <= 1, "bubble rate %g",
             plan->predicted_bubble_rate());
  int layers = 0;
  for (const v1::StageShard& s : plan->shards()) layers += s.num_layers();
  FUZZ_CHECK(layers == spec.model().layers(), "shards hold %d of %d layers", layers, spec.model().layers());
  return 0;
}
