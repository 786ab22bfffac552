#include "worker/daemon/local_run.h"

#include <chrono>
#include <mutex>
#include <thread>

#include "jobplan/assignment.h"
#include "jobplan/layout.h"
#include "jobplan/plan_job.h"
#include "jobplan/spec_validation.h"
#include "worker/daemon/rank_run.h"
#include "worker/transport/local_rendezvous.h"
#include "worker/transport/tcp_transport.h"

namespace pipecoord::worker {

Result<LocalRunResult> RunLocally(const v1::JobSpec& raw, const std::function<void(int, const StepReport&)>& on_step,
                                  const LocalCheckpoints& checkpoints, bool keep_final_state) {
  PIPECOORD_RETURN_IF_ERROR(jobplan::ValidateJobSpec(raw));
  const v1::JobSpec spec = jobplan::WithDefaults(raw);
  auto plan = jobplan::PlanJob(spec);
  if (!plan.ok()) return plan.status();
  const int world = jobplan::LayoutOf(spec).world();
  constexpr uint64_t kSession = 42;
  std::vector<std::unique_ptr<TcpTransport>> transports;
  std::vector<std::string> endpoints;
  for (int g = 0; g < world; ++g) {
    auto t = TcpTransport::Listen("127.0.0.1", 0);
    if (!t.ok()) return t.status();
    endpoints.push_back((*t)->endpoint());
    transports.push_back(std::move(t).value());
  }
  // The ranks' rendezvous (their transport choice on cuda), as the coordinator's for daemons.
  LocalRendezvous rendezvous;
  LocalRunResult result;
  result.reports.resize(world);
  if (keep_final_state) result.final_state.resize(world);
  std::vector<Status> status(world);
  std::mutex mu;
  int first_failed = -1;
  std::vector<std::thread> threads;
  const auto start = std::chrono::steady_clock::now();
  for (int g = 0; g < world; ++g) {
    threads.emplace_back([&, g] {
      auto fail = [&](Status st) {
        {
          std::lock_guard<std::mutex> lock(mu);
          if (first_failed < 0) first_failed = g;  // the root cause; the others fail because of it
        }
        status[g] = std::move(st);
        for (auto& t : transports) t->Shutdown();  // wake the others: fail fast, never hang
      };
      v1::Assignment a = jobplan::BuildAssignment(checkpoints.job_id, spec, *plan, g, endpoints, kSession);
      a.set_start_step(checkpoints.start_step);
      a.set_checkpoint_dp(checkpoints.checkpoint_dp);
      RankRunOptions options;
      options.checkpoint_dir = checkpoints.dir;
      options.rendezvous = rendezvous.Fn();
      RankRun rank(a, std::move(options));
      RankRunCallbacks callbacks;
      callbacks.on_step = [&](StepReport&& r) {
        if (on_step) on_step(g, r);
        result.reports[g].push_back(std::move(r));
        return Status::Ok();
      };
      // Every rank listened before any started (the assignments list their endpoints).
      Status st = rank.Run([&](const v1::Assignment&) -> Result<TcpTransport*> { return transports[g].get(); }, callbacks);
      if (!st.ok()) {
        fail(st);
      } else if (keep_final_state && rank.backend() != nullptr) {
        for (const StateTensor& t : rank.backend()->CheckpointState()) {
          result.final_state[g][t.name].assign(t.data.begin(), t.data.end());
        }
      }
    });
  }
  for (auto& t : threads) t.join();
  result.wall_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  if (first_failed >= 0) {
    const Status& st = status[first_failed];
    return Status(st.code(), "global rank " + std::to_string(first_failed) + ": " + st.message());
  }
  return result;
}

std::vector<double> StepLosses(const LocalRunResult& r) {
  std::vector<double> sum, count;
  for (const auto& rank : r.reports) {
    for (const StepReport& s : rank) {
      const size_t step = s.summary.step();
      if (sum.size() <= step) {
        sum.resize(step + 1, 0.0);
        count.resize(step + 1, 0.0);
      }
      if (s.summary.has_loss()) {
        sum[step] += s.summary.loss();
        count[step] += 1;
      }
    }
  }
  for (size_t i = 0; i < sum.size(); ++i) sum[i] = count[i] > 0 ? sum[i] / count[i] : 0.0;
  return sum;
}

}  // namespace pipecoord::worker
