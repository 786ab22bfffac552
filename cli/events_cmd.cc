// pipectl events JOB: a job's events (lifecycle and health: bubble, straggler, hang, memory,
// sdc), oldest first, from the coordinator's job store.
#include <google/protobuf/util/json_util.h>

#include <cstdio>
#include <string>
#include <vector>

#include "cli/cli_io.h"
#include "cli/job_client.h"
#include "cli/verbs.h"
#include "common/flags.h"

namespace pipecoord::cli {

int RunEvents(int argc, char** argv) {
  Connection conn;
  std::string format = "text", kind;
  FlagSet flags("pipectl events JOB [--kind KIND] [--coordinator HOST:PORT] [--tls-ca FILE] [--format text|json]",
                "Lists a job's events, oldest first: lifecycle (submitted, running, finished) and the "
                "health checks' (BUBBLE, STRAGGLER, HANG, MEMORY, SDC; see docs/monitoring.md).");
  AddConnectionFlags(flags, &conn);
  flags.String("kind", &kind, "only events of this kind, e.g. SDC or health (every kind but LIFECYCLE)");
  flags.Format(&format, {"text", "json"}, "text (default) or json");
  std::vector<std::string> positional;
  if (int rc = ParseFlagsOrExit(flags, argc, argv, "events", &positional); rc >= 0) return rc;
  Status st;
  if (positional.size() != 1) st = InvalidArgument("JOB: exactly one job id required (see `pipectl jobs`)");
  v1::EventKind want = v1::EVENT_KIND_UNSPECIFIED;
  if (st.ok() && !kind.empty() && kind != "health" && !v1::EventKind_Parse(kind, &want)) {
    st = InvalidArgument("--kind: must be health, LIFECYCLE, BUBBLE, STRAGGLER, HANG, MEMORY or SDC, got \"" + kind + "\"");
  }
  if (!st.ok()) return Fail("events", st);
  auto stub = JobStub(&conn);
  if (!stub.ok()) return Fail("events", stub.status());
  auto ctx = Deadline(10);
  v1::GetJobRequest req;
  req.set_job_id(positional[0]);
  v1::Job job;
  st = FromGrpc((*stub)->GetJob(ctx.get(), req, &job), conn);
  if (!st.ok()) return Fail("events", st);
  v1::Job shown;  // only the events, filtered
  for (const v1::HealthEvent& e : job.events()) {
    if (kind == "health" && e.kind() == v1::LIFECYCLE) continue;
    if (want != v1::EVENT_KIND_UNSPECIFIED && e.kind() != want) continue;
    *shown.add_events() = e;
  }
  if (format == "json") {
    std::string out;
    google::protobuf::util::JsonPrintOptions o;
    o.add_whitespace = true;
    (void)google::protobuf::util::MessageToJsonString(shown, &out, o);
    std::printf("%s", out.c_str());
    return kExitOk;
  }
  std::printf("%-10s %-12s %5s  %s\n", "KIND", "RANK", "STEP", "MESSAGE");
  for (const v1::HealthEvent& e : shown.events()) {
    const std::string rank = e.rank() < 0 ? "-" : std::to_string(e.rank()) + " (dp " + std::to_string(e.dp_rank()) + ")";
    const std::string step = e.step() < 0 ? "-" : std::to_string(e.step());
    std::printf("%-10s %-12s %5s  %s\n", v1::EventKind_Name(e.kind()).c_str(), rank.c_str(), step.c_str(),
                e.message().c_str());
  }
  return kExitOk;
}

}  // namespace pipecoord::cli
