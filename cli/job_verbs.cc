// The job verbs: submit, resubmit, jobs, status, watch, cancel, workers, trace. Each is a thin
// client of the coordinator's JobService.
#include <google/protobuf/util/json_util.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <map>
#include <string>
#include <thread>
#include <type_traits>

#include "cli/auto_plan_text.h"
#include "cli/best_text.h"
#include "cli/cli_io.h"
#include "cli/idle_text.h"
#include "cli/job_client.h"
#include "cli/json_keys.h"
#include "cli/spec_field_hint.h"
#include "cli/verbs.h"
#include "cli/weights_submit.h"
#include "common/flags.h"
#include "jobplan/data_spec.h"
#include "memory/units.h"

namespace pipecoord::cli {
namespace {

// "zbh1, pp 2, vpp 1, dp 2[, tp 2][, zero 1], 16 micro-batches of 1": how the job runs.
std::string StrategyLine(const v1::JobSpec& s) {
  return s.schedule() + ", pp " + std::to_string(s.pp()) + ", vpp " + std::to_string(s.vpp()) + ", dp " +
         std::to_string(s.dp()) + (s.tp() > 1 ? ", tp " + std::to_string(s.tp()) + (s.sequence_parallel() ? "+sp" : "") : "") +
         (s.zero() > 0 ? ", zero " + std::to_string(s.zero()) : "") +
         (!s.recompute().empty() && s.recompute() != "none" ? ", recompute " + s.recompute() : "") + ", " +
         std::to_string(s.microbatches()) +
         " micro-batches of " + std::to_string(s.micro_batch_size());
}

std::string ToJson(const google::protobuf::Message& m, bool whitespace = true) {
  std::string out;
  google::protobuf::util::JsonPrintOptions o;
  o.add_whitespace = whitespace;
  (void)google::protobuf::util::MessageToJsonString(m, &out, o);
  return out;
}

constexpr const char* kTextOrJson = "text (default) or json";

// Parses flags with one optional positional JOB id; prints help and returns -1 when asked.
int Parse(FlagSet& flags, int argc, char** argv, const char* verb, std::string* job, bool job_required) {
  std::vector<std::string> positional;
  if (int rc = ParseFlagsOrExit(flags, argc, argv, verb, &positional); rc >= 0) return rc;
  Status st;
  if (positional.size() > 1) st = InvalidArgument("expected one argument, got " + std::to_string(positional.size()));
  if (st.ok() && job_required && positional.empty()) st = InvalidArgument("JOB: required (see `pipectl jobs`)");
  if (!st.ok()) return Fail(verb, st);
  if (job != nullptr && !positional.empty()) *job = positional[0];
  return -1;
}

// One unary JobService call: connects, calls with a deadline of `deadline_s`, and returns the
// outcome as FromGrpc words it.
template <typename Request, typename Response>
Status CallJobService(Connection& conn, int deadline_s,
                      grpc::Status (v1::JobService::Stub::*method)(grpc::ClientContext*, const Request&, Response*),
                      const std::type_identity_t<Request>& req, Response* resp) {
  auto stub = JobStub(&conn);
  if (!stub.ok()) return stub.status();
  auto ctx = Deadline(deadline_s);
  return FromGrpc(((**stub).*method)(ctx.get(), req, resp), conn);
}

const char* State(v1::JobState s) {
  switch (s) {
    case v1::PENDING: return "PENDING";
    case v1::RUNNING: return "RUNNING";
    case v1::SUCCEEDED: return "SUCCEEDED";
    case v1::FAILED: return "FAILED";
    case v1::CANCELLED: return "CANCELLED";
    default: return "?";
  }
}

// A loss in nats, and in bits per byte for byte-level data: "1.2345 (1.781 bpb)".
std::string LossText(double nats, bool byte_level) {
  char buf[64];
  if (byte_level) {
    std::snprintf(buf, sizeof buf, "%.4f (%.3f bpb)", nats, jobplan::BitsPerByte(nats));
  } else {
    std::snprintf(buf, sizeof buf, "%.4f", nats);
  }
  return buf;
}

bool Terminal(v1::JobState s) { return s == v1::SUCCEEDED || s == v1::FAILED || s == v1::CANCELLED; }

// How long watch keeps trying to reach a coordinator that went away (a restart or failover).
constexpr auto kWatchReconnectFor = std::chrono::minutes(10);

// Follows a job until it ends: a line per step (a live line on a terminal), events, the end;
// with `json`, each JobUpdate as one line of JSON. A coordinator that goes away (UNAVAILABLE, or
// a stream ended before the job did: a shutdown) is reached again for up to kWatchReconnectFor,
// and the watch continues where it was: a new stream replays the job's log from its start, so
// steps already shown and events already shown (by text, as often as shown) are skipped.
int Watch(Connection conn, const std::string& job, const char* verb, bool json) {
  auto made = JobStub(&conn);
  if (!made.ok()) return Fail(verb, made.status());
  auto stub = std::move(made).value();
  v1::WatchJobRequest req;
  req.set_job_id(job);
  v1::JobUpdate u;
  v1::JobState last = v1::JOB_STATE_UNSPECIFIED;
  const bool tty = isatty(STDOUT_FILENO);
  int steps = 0;
  bool byte_level = false;  // losses also in bits per byte
  bool reached = false;     // a coordinator never reached is an error at once, not waited for
  {
    auto info = Deadline(10);
    v1::GetJobRequest g;
    g.set_job_id(job);
    v1::Job j;
    if (stub->GetJob(info.get(), g, &j).ok()) {
      steps = j.spec().steps();
      byte_level = jobplan::ByteLevel(j.spec());
      reached = true;
    }
  }
  int last_step = -1;
  std::map<std::string, int> events_shown;
  bool lost = false;
  std::chrono::steady_clock::time_point lost_since{};
  for (;;) {
    grpc::ClientContext ctx;
    auto reader = stub->WatchJob(&ctx, req);
    std::map<std::string, int> events_read;  // on this stream
    while (reader->Read(&u)) {
      reached = true;
      if (lost) {
        std::fprintf(stderr, "pipectl %s: reached the coordinator again; following %s\n", verb, job.c_str());
        lost = false;
      }
      last = u.state();
      if (!u.event().empty()) {
        if (++events_read[u.event()] <= events_shown[u.event()]) continue;  // shown before the reconnect
        events_shown[u.event()] = events_read[u.event()];
      } else {
        if (u.step() <= last_step) continue;
        last_step = u.step();
      }
      if (json) {
        std::printf("%s\n", ToJson(u, false).c_str());
      } else if (!u.event().empty()) {
        std::printf("%s%s: %s\n", tty ? "\r\033[K" : "", job.c_str(), u.event().c_str());
      } else {
        std::string losses = LossText(u.loss(), byte_level);
        if (u.has_val_loss()) losses += "  val " + LossText(u.val_loss(), byte_level);
        if (u.has_grad_norm()) {
          char norm[64];
          std::snprintf(norm, sizeof norm, "  grad norm %.4g  lr %.3g", u.grad_norm(), u.learning_rate());
          losses += norm;
        }
        std::printf("%s%s step %d/%d  loss %s  step %.3f s  bubble measured %.3f predicted %.3f%s",
                    tty ? "\r\033[K" : "", job.c_str(), u.step() + 1, steps, losses.c_str(), u.step_time_s(),
                    u.measured_bubble_rate(), u.predicted_bubble_rate(), tty ? "" : "\n");
      }
      std::fflush(stdout);
    }
    const grpc::Status gst = reader->Finish();
    if (gst.ok() && Terminal(last)) break;
    const bool gone = gst.error_code() == grpc::StatusCode::UNAVAILABLE || gst.ok();  // gst.ok(): a shutdown
    if (!gone || !reached) {
      if (tty && !json) std::printf("\n");
      return Fail(verb, FromGrpc(gst, conn));
    }
    const auto now = std::chrono::steady_clock::now();
    if (!lost) {
      lost = true;
      lost_since = now;
      std::fprintf(stderr, "%spipectl %s: lost the coordinator (%s); reconnecting for up to %d s\n",
                   tty && !json ? "\n" : "", verb, gst.ok() ? "it shut down" : gst.error_message().c_str(),
                   static_cast<int>(std::chrono::duration_cast<std::chrono::seconds>(kWatchReconnectFor).count()));
    } else if (now - lost_since > kWatchReconnectFor) {
      return Fail(verb, FromGrpc(gst.ok() ? grpc::Status(grpc::StatusCode::UNAVAILABLE, "the coordinator shut down")
                                          : gst,
                                 conn));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
  }
  if (tty && !json) std::printf("\n");
  return last == v1::SUCCEEDED ? kExitOk : kExitFailed;
}

// The answer to a dry run: the spec as it would run and, for schedule "auto", why.
int ReportDryRun(const v1::SubmitJobResponse& resp, const std::string& format) {
  if (format == "json") {
    std::printf("%s", ToJson(resp).c_str());
    return kExitOk;
  }
  const v1::JobSpec& s = resp.spec();
  std::printf("dry run: nothing submitted\n");
  if (resp.has_auto_plan()) {
    std::printf("%s", AutoPlanText(resp.auto_plan()).c_str());
  } else {
    std::printf("schedule  %s\n", StrategyLine(s).c_str());
    std::printf("%s", BestScheduleText(resp.best()).c_str());  // "" unless schedule "best" chose it
  }
  std::printf("predicted bubble rate %.4f, makespan %.4g cost units\n", resp.predicted_bubble_rate(),
              resp.predicted_makespan());
  return kExitOk;
}

// Submits `spec` and prints the new job's id as `format` says; follows it with `watch`.
int SubmitAndReport(Connection& conn, const v1::JobSpec& spec, const std::string& format, bool watch,
                    const char* verb, const std::string& note = "", bool dry_run = false) {
  v1::SubmitJobRequest req;
  *req.mutable_spec() = spec;
  req.set_dry_run(dry_run);
  v1::SubmitJobResponse resp;
  Status st = CallJobService(conn, 60, &v1::JobService::Stub::SubmitJob, req, &resp);
  if (!st.ok()) return Fail(verb, st);
  if (dry_run) return ReportDryRun(resp, format);
  if (format == "json") {
    std::printf("%s", ToJson(resp, !watch).c_str());
    if (watch) std::printf("\n");
  } else {
    std::printf("%s submitted%s (predicted bubble rate %.4f, makespan %.4g cost units)\n", resp.job_id().c_str(),
                note.c_str(), resp.predicted_bubble_rate(), resp.predicted_makespan());
  }
  std::fflush(stdout);
  return watch ? Watch(conn, resp.job_id(), verb, format == "json") : kExitOk;
}

}  // namespace

int RunSubmit(int argc, char** argv) {
  Connection conn;
  std::string format = "text";
  bool watch = false, dry_run = false;
  FlagSet flags("pipectl submit JOB.json [--watch | --dry-run] [--coordinator HOST:PORT] [--tls-ca FILE] "
                "[--token TOKEN] [--format text|json]",
                "Submits a job: JOB.json is a JobSpec in protobuf's JSON mapping (see docs/usage.md "
                "and examples/); a key given twice in one object is refused. Prints the job id and "
                "the plan's predicted bubble rate. With schedule \"auto\" the coordinator chooses the "
                "strategy for the workers free now.");
  AddConnectionFlags(flags, &conn);
  flags.Bool("watch", &watch, "follow the job until it ends, a line per step (json: a JobUpdate per line)");
  flags.Bool("dry-run", &dry_run,
             "plan only: print the spec as it would run (for schedule \"auto\": the chosen strategy, the next "
             "best and what was pruned); nothing is stored or started");
  flags.Format(&format, {"text", "json"}, kTextOrJson);
  std::string file;
  if (int rc = Parse(flags, argc, argv, "submit", &file, true); rc >= 0) return rc;
  if (watch && dry_run) return Fail("submit", InvalidArgument("--watch: a dry run starts no job to follow"));
  auto text = ReadInputFile("JOB.json", file, 16 << 20);
  if (!text.ok()) return Fail("submit", text.status());
  // protobuf's parser lets the last of two equal keys win; a spec must say each field once.
  Status keys = CheckJsonKeys(*text);
  if (!keys.ok()) return Fail("submit", InvalidArgument(file + ": " + keys.message()));
  v1::JobSpec spec;
  auto parsed = google::protobuf::util::JsonStringToMessage(*text, &spec);
  if (!parsed.ok()) {
    const auto hint = UnknownFieldMessage(*v1::JobSpec::descriptor(), "spec", std::string(parsed.message()));
    return Fail("submit", InvalidArgument(file + ": " + (hint ? *hint : "not a JobSpec: " + std::string(parsed.message()))));
  }
  if (Status weights = ResolveWeightFields(file, &spec); !weights.ok()) return Fail("submit", weights);
  return SubmitAndReport(conn, spec, format, watch, "submit", "", dry_run);
}

int RunResubmit(int argc, char** argv) {
  Connection conn;
  std::string format = "text", job;
  bool watch = false;
  FlagSet flags("pipectl resubmit JOB [--watch] [--coordinator HOST:PORT] [--tls-ca FILE] [--token TOKEN] "
                "[--format text|json]",
                "Submits a job's spec again (any job the coordinator still keeps, finished or not) as "
                "a new job. Prints the new job's id as submit does.");
  AddConnectionFlags(flags, &conn);
  flags.Bool("watch", &watch, "follow the new job until it ends, a line per step (json: a JobUpdate per line)");
  flags.Format(&format, {"text", "json"}, kTextOrJson);
  if (int rc = Parse(flags, argc, argv, "resubmit", &job, true); rc >= 0) return rc;
  v1::GetJobRequest req;
  req.set_job_id(job);
  v1::Job old;
  Status st = CallJobService(conn, 10, &v1::JobService::Stub::GetJob, req, &old);
  if (!st.ok()) return Fail("resubmit", st);
  return SubmitAndReport(conn, old.spec(), format, watch, "resubmit", " from " + old.id() + "'s spec");
}

int RunJobs(int argc, char** argv) {
  Connection conn;
  std::string format = "text";
  FlagSet flags("pipectl jobs [--coordinator HOST:PORT] [--tls-ca FILE] [--format text|json]", "Lists the coordinator's jobs.");
  AddConnectionFlags(flags, &conn);
  flags.Format(&format, {"text", "json"}, kTextOrJson);
  if (int rc = Parse(flags, argc, argv, "jobs", nullptr, false); rc >= 0) return rc;
  v1::ListJobsResponse resp;
  Status st = CallJobService(conn, 10, &v1::JobService::Stub::ListJobs, {}, &resp);
  if (!st.ok()) return Fail("jobs", st);
  if (format == "json") {
    std::printf("%s", ToJson(resp).c_str());
    return kExitOk;
  }
  std::printf("%-12s %-10s %-12s %4s %4s %11s %10s  %s\n", "JOB", "STATE", "SCHEDULE", "PP", "DP", "STEPS", "LOSS", "NAME");
  for (const v1::Job& j : resp.jobs()) {
    const std::string steps = std::to_string(j.steps_done()) + "/" + std::to_string(j.spec().steps());
    std::string loss = j.steps_size() ? std::to_string(j.steps(j.steps_size() - 1).loss()) : "-";
    std::printf("%-12s %-10s %-12s %4d %4d %11s %10.10s  %s\n", j.id().c_str(), State(j.state()),
                j.spec().schedule().c_str(), j.spec().pp(), j.spec().dp(), steps.c_str(), loss.c_str(),
                j.spec().name().c_str());
  }
  return kExitOk;
}

int RunStatus(int argc, char** argv) {
  Connection conn;
  std::string format = "text", job;
  FlagSet flags("pipectl status JOB [--coordinator HOST:PORT] [--tls-ca FILE] [--format text|json]",
                "Shows one job: state, cause of failure, steps measured, events.");
  AddConnectionFlags(flags, &conn);
  flags.Format(&format, {"text", "json"}, "text (default) or json (the whole Job, plan included)");
  if (int rc = Parse(flags, argc, argv, "status", &job, true); rc >= 0) return rc;
  v1::GetJobRequest req;
  req.set_job_id(job);
  v1::Job j;
  Status st = CallJobService(conn, 10, &v1::JobService::Stub::GetJob, req, &j);
  if (!st.ok()) return Fail("status", st);
  if (format == "json") {
    std::printf("%s", ToJson(j).c_str());
    return kExitOk;
  }
  std::printf("job       %s (%s)\nstate     %s\n", j.id().c_str(), j.spec().name().c_str(), State(j.state()));
  if (j.state() == v1::FAILED) {
    // failed_rank is -1 when no rank caused it (e.g. no workers came): then no rank is named.
    const std::string rank = j.failed_rank() >= 0 ? " (rank " + std::to_string(j.failed_rank()) + ")" : "";
    std::printf("cause     %s%s\n", j.failure_cause().c_str(), rank.c_str());
  }
  std::printf("schedule  %s\n", StrategyLine(j.spec()).c_str());
  if (j.spec().has_data()) {
    std::printf("data      %s%s\n", j.spec().data().path().c_str(),
                jobplan::ByteLevel(j.spec()) ? " (byte-level: losses also in bits per byte, loss / ln 2)" : "");
  }
  if (j.has_auto_plan()) std::printf("%s", AutoPlanText(j.auto_plan()).c_str());
  std::printf("%s", BestScheduleText(j.best()).c_str());  // "" unless schedule "best" chose it
  std::printf("steps     %d of %d\npredicted bubble rate %.4f\n", j.steps_done(), j.spec().steps(),
              j.plan().predicted_bubble_rate());
  if (j.spec().max_restarts() > 0 || j.spec().checkpoint_every() > 0) {
    const std::string saved = j.checkpointed_steps() > 0 ? "through step " + std::to_string(j.checkpointed_steps() - 1) : "no step yet";
    std::printf("restarts  %d of %d (this attempt from step %d; checkpointed on every rank: %s)\n", j.restarts(),
                j.spec().max_restarts(), j.start_step(), saved.c_str());
  }
  if (!j.recovering().empty()) std::printf("degraded  %s\n", j.recovering().c_str());
  if (j.recoveries() > 0) {
    std::printf("recovered %d lost rank(s) in place (no restart, no checkpoint read; events say how long each took)\n",
                j.recoveries());
  }
  if (j.steps_size() > 0) {
    const v1::StepRecord& first = j.steps(0);
    const v1::StepRecord& last = j.steps(j.steps_size() - 1);
    double time = 0, bubble = 0;
    for (const v1::StepRecord& s : j.steps()) {
      time += s.step_time_s();
      bubble += s.measured_bubble_rate();
    }
    const int n = j.steps_size();
    const bool byte_level = jobplan::ByteLevel(j.spec());
    std::printf("loss      %s at step %d -> %s at step %d\n", LossText(first.loss(), byte_level).c_str(), first.step(),
                LossText(last.loss(), byte_level).c_str(), last.step());
    // Validation (spec.evalEvery): the first and the last measured, in nats (and bits per byte).
    const v1::StepRecord* first_val = nullptr;
    const v1::StepRecord* last_val = nullptr;
    for (const v1::StepRecord& s : j.steps()) {
      if (!s.has_val_loss()) continue;
      if (first_val == nullptr) first_val = &s;
      last_val = &s;
    }
    if (last_val != nullptr) {
      std::printf("val loss  %s at step %d -> %s at step %d (%d batch(es) per replica every %d step(s))\n",
                  LossText(first_val->val_loss(), byte_level).c_str(), first_val->step(),
                  LossText(last_val->val_loss(), byte_level).c_str(), last_val->step(),
                  std::max(1, j.spec().eval_batches()), j.spec().eval_every());
    }
    std::printf("step time %.4f s mean over %d step(s)\n", time / n, n);
    std::printf("bubble    measured %.4f mean, predicted %.4f\n", bubble / n, j.plan().predicted_bubble_rate());
    // The measured peak of the last step beside the plan's budget (memory/'s prediction).
    std::printf("peak mem  measured/predicted:");
    for (int r = 0; r < last.peak_memory_bytes_size(); ++r) {
      const int rank = r % std::max(1, j.spec().pp());
      std::printf(" r%d %.2f/%.2f MiB", r, last.peak_memory_bytes(r) / 1048576.0,
                  rank < j.plan().memory_budget_bytes_size() ? j.plan().memory_budget_bytes(rank) / 1048576.0 : 0.0);
    }
    std::printf("\n");
    // The global gradient norm (what users watch for spikes) and the learning rate's course.
    const v1::StepRecord* spike = nullptr;
    int clipped = 0;
    const double clip = j.spec().optimizer().clip_grad_norm();
    for (const v1::StepRecord& s : j.steps()) {
      if (!s.has_grad_norm()) continue;
      if (spike == nullptr || s.grad_norm() > spike->grad_norm()) spike = &s;
      clipped += clip > 0 && s.grad_norm() > clip;
    }
    if (spike != nullptr && last.has_grad_norm()) {
      std::printf("grad norm %.4g at step %d (max %.4g at step %d)", last.grad_norm(), last.step(), spike->grad_norm(),
                  spike->step());
      if (clip > 0) std::printf(", clipped to %g in %d of %d step(s)", clip, clipped, n);
      std::printf("\n");
    }
    if (last.learning_rate() > 0) {  // reported by the C++ workers
      std::printf("lr        %.4g at step %d -> %.4g at step %d\n", first.learning_rate(), first.step(),
                  last.learning_rate(), last.step());
    }
  }
  std::printf("%s", PredictionAndIdleText(j).c_str());
  for (const v1::HealthEvent& e : j.events()) std::printf("event     %s\n", e.message().c_str());
  return kExitOk;
}

int RunWatch(int argc, char** argv) {
  Connection conn;
  std::string job;
  std::string format = "text";
  FlagSet flags("pipectl watch JOB [--coordinator HOST:PORT] [--tls-ca FILE] [--format text|json]",
                "Follows a job until it ends: a live line per step (loss, step time, measured and "
                "predicted bubble rate) and its events. A coordinator that restarts or fails over "
                "meanwhile is reached again (for up to 10 minutes) and the watch goes on where it was. "
                "Exit 0 if it succeeded, 1 otherwise.");
  AddConnectionFlags(flags, &conn);
  flags.Format(&format, {"text", "json"}, "text (default) or json (each JobUpdate on a line of its own)");
  if (int rc = Parse(flags, argc, argv, "watch", &job, true); rc >= 0) return rc;
  return Watch(conn, job, "watch", format == "json");
}

int RunCancel(int argc, char** argv) {
  Connection conn;
  std::string job;
  std::string format = "text";
  bool checkpoint = false;
  FlagSet flags("pipectl cancel JOB [--checkpoint] [--coordinator HOST:PORT] [--tls-ca FILE] [--token TOKEN] [--format text|json]",
                "Cancels a pending or running job.");
  AddConnectionFlags(flags, &conn);
  flags.Bool("checkpoint", &checkpoint,
             "a running job that saves checkpoints stops after one step that every rank checkpoints, then ends "
             "CANCELLED (pipectl export takes its weights); the answer is RUNNING until it has");
  flags.Format(&format, {"text", "json"}, "text (default) or json (the job's state after the call)");
  if (int rc = Parse(flags, argc, argv, "cancel", &job, true); rc >= 0) return rc;
  v1::CancelJobRequest req;
  req.set_job_id(job);
  req.set_checkpoint(checkpoint);
  v1::CancelJobResponse resp;
  Status st = CallJobService(conn, 10, &v1::JobService::Stub::CancelJob, req, &resp);
  if (!st.ok()) return Fail("cancel", st);
  if (format == "json") {
    std::printf("%s", ToJson(resp).c_str());
    return kExitOk;
  }
  if (checkpoint && resp.state() == v1::RUNNING) {
    std::printf("%s RUNNING: stopping after a step every rank checkpoints, then CANCELLED\n", job.c_str());
    return kExitOk;
  }
  std::printf("%s %s\n", job.c_str(), State(resp.state()));
  return kExitOk;
}

int RunWorkers(int argc, char** argv) {
  Connection conn;
  std::string format = "text";
  FlagSet flags("pipectl workers [--coordinator HOST:PORT] [--tls-ca FILE] [--format text|json]",
                "Lists registered workers, their state, job and rank, and their lease. STATE: idle (free for a "
                "job), running (its rank of JOB), closing (its part of JOB is over; it is closing the job's links "
                "and takes no new job until it has).");
  AddConnectionFlags(flags, &conn);
  flags.Format(&format, {"text", "json"}, kTextOrJson);
  if (int rc = Parse(flags, argc, argv, "workers", nullptr, false); rc >= 0) return rc;
  v1::ListWorkersResponse resp;
  Status st = CallJobService(conn, 10, &v1::JobService::Stub::ListWorkers, {}, &resp);
  if (!st.ok()) return Fail("workers", st);
  if (format == "json") {
    std::printf("%s", ToJson(resp).c_str());
    return kExitOk;
  }
  // Ids from certificates (pod names) are longer than the coordinator's own worker-NNNN.
  int id_width = 12;
  for (const v1::WorkerInfo& w : resp.workers()) id_width = std::max(id_width, static_cast<int>(w.worker_id().size()));
  std::printf("%-*s %-6s %-7s %-10s %-22s %-8s %-12s %5s %10s\n", id_width, "WORKER", "DEVICE", "KIND", "MEMORY",
              "DATA ENDPOINT", "STATE", "JOB", "RANK", "LEASE");
  for (const v1::WorkerInfo& w : resp.workers()) {
    const char* state = w.job_id().empty() ? "idle" : w.closing() ? "closing" : "running";
    // What the worker offers jobs (schedule "auto" plans against the smallest); "-": not reported.
    const std::string memory =
        w.device_memory_bytes() == 0 ? "-" : memory::FormatBytes(static_cast<int64_t>(w.device_memory_bytes()));
    // The worker program: the C++ daemon ("builtin") or pipecoord.torch_worker ("torch").
    const std::string kind = w.worker_kind().empty() ? "builtin" : w.worker_kind();
    std::printf("%-*s %-6s %-7s %-10s %-22s %-8s %-12s %5s %8lld ms\n", id_width, w.worker_id().c_str(),
                w.device_kind().c_str(), kind.c_str(), memory.c_str(), w.data_endpoint().c_str(), state, w.job_id().empty() ? "-" : w.job_id().c_str(),
                w.job_id().empty() || w.rank() < 0 ? "-" : std::to_string(w.rank()).c_str(),
                static_cast<long long>(w.lease_expires_in_ms()));
  }
  return kExitOk;
}

int RunTrace(int argc, char** argv) {
  Connection conn;
  std::string job, out;
  FlagSet flags("pipectl trace JOB --out run.json [--coordinator HOST:PORT] [--tls-ca FILE]",
                "Writes the measured run as a Chrome/Perfetto trace (open in ui.perfetto.dev): one "
                "track per rank, the plan's predicted idle windows beside them.");
  AddConnectionFlags(flags, &conn);
  flags.String("out", &out, "file to write; default: stdout");
  if (int rc = Parse(flags, argc, argv, "trace", &job, true); rc >= 0) return rc;
  v1::GetTraceRequest req;
  req.set_job_id(job);
  v1::GetTraceResponse resp;
  Status st = CallJobService(conn, 30, &v1::JobService::Stub::GetTrace, req, &resp);
  if (!st.ok()) return Fail("trace", st);
  return EmitOutput("trace", resp.perfetto_json(), out, "the trace of " + job);
}

}  // namespace pipecoord::cli
