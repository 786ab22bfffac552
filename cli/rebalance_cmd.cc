// pipectl rebalance JOB: the layer placement (stageLayers) the job's measured stage costs
// suggest, with the predicted gain (jobplan/rebalance.h), from the coordinator's job store.
#include <google/protobuf/util/json_util.h>

#include <cstdio>
#include <string>
#include <vector>

#include "cli/cli_io.h"
#include "cli/idle_text.h"
#include "cli/job_client.h"
#include "cli/verbs.h"
#include "common/flags.h"

namespace pipecoord::cli {

int RunRebalance(int argc, char** argv) {
  Connection conn;
  std::string format = "text";
  FlagSet flags("pipectl rebalance JOB [--coordinator HOST:PORT] [--tls-ca FILE] [--token TOKEN] [--format text|json]",
                "Proposes layers per rank (stageLayers) for a job from its measured per-stage costs: each "
                "placement is predicted by re-simulating the job's own schedule with the per-layer, embedding "
                "and head costs fitted to what its steps measured (docs/monitoring.md). Exit 0 with a proposal or "
                "when the running placement is already the fastest found; 1 while the job is not calibrated yet.");
  AddConnectionFlags(flags, &conn);
  flags.Format(&format, {"text", "json"}, "text (default) or json (the job id, its calibration and the proposal)");
  std::vector<std::string> positional;
  if (int rc = ParseFlagsOrExit(flags, argc, argv, "rebalance", &positional); rc >= 0) return rc;
  if (positional.size() != 1) return Fail("rebalance", InvalidArgument("JOB: exactly one job id required (see `pipectl jobs`)"));
  auto stub = JobStub(&conn);
  if (!stub.ok()) return Fail("rebalance", stub.status());
  auto ctx = Deadline(10);
  v1::GetJobRequest req;
  req.set_job_id(positional[0]);
  v1::Job job;
  Status st = FromGrpc((*stub)->GetJob(ctx.get(), req, &job), conn);
  if (!st.ok()) return Fail("rebalance", st);
  if (!job.has_calibration()) {
    return Fail("rebalance", FailedPrecondition(job.id() + " is not calibrated yet (" + std::to_string(job.steps_done()) +
                                                " step(s) measured; it is after spec.health.warmupSteps + "
                                                "spec.health.calibrationSteps, 1 + 3 by default)"));
  }
  if (format == "json") {
    v1::Job shown;
    shown.set_id(job.id());
    *shown.mutable_calibration() = job.calibration();
    if (job.has_rebalance()) *shown.mutable_rebalance() = job.rebalance();
    std::string out;
    google::protobuf::util::JsonPrintOptions o;
    o.add_whitespace = true;
    (void)google::protobuf::util::MessageToJsonString(shown, &out, o);
    std::printf("%s", out.c_str());
    return kExitOk;
  }
  if (!job.has_rebalance()) {
    std::printf("%s: no placement found that is predicted at least 2 %% faster than the running one "
                "(calibrated step %.4f s)\n", job.id().c_str(), job.calibration().predicted_step_s());
    return kExitOk;
  }
  std::printf("%s", RebalanceText(job).c_str());
  return kExitOk;
}

}  // namespace pipecoord::cli
