// An event storm into the state file: N health events (3,209: the memory-event storm a 4,096-rank
// job once raised in one round) written one committed write each (the baseline: how every event
// was stored) and then inside one StateWriter round (one transaction), into a real SQLite file
// on this machine's disk. Prints both times and the ratio.
// Not a test: bazel run -c opt //bench:event_storm_bench [-- --events=3209]
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "coordinator/state_writer.h"

namespace {

using Clock = std::chrono::steady_clock;

double Write(pipecoord::coordinator::StateWriter& w, int events, bool round) {
  pipecoord::v1::HealthEvent e;
  e.set_kind(pipecoord::v1::MEMORY);
  e.set_message("rank 1234 (dp 77): peak 81.2 GiB, over its budget 80.0 GiB by 1.2 GiB");
  const auto start = Clock::now();
  if (round) w.BeginRound();
  for (int i = 0; i < events; ++i) {
    e.set_rank(i);
    w.AppendEvent("job-1", e);
  }
  if (round) w.EndRound();
  return std::chrono::duration<double>(Clock::now() - start).count();
}

}  // namespace

int main(int argc, char** argv) {
  int events = 3209;
  for (int i = 1; i < argc; ++i) {
    if (std::strncmp(argv[i], "--events=", 9) == 0) events = std::atoi(argv[i] + 9);
  }
  const char* tmp = std::getenv("TMPDIR");
  const std::string path = std::string(tmp != nullptr ? tmp : "/tmp") + "/event_storm_" + std::to_string(getpid()) + ".db";
  std::remove(path.c_str());
  auto store = pipecoord::coordinator::StateStore::Open(path);
  if (!store.ok()) {
    std::fprintf(stderr, "%s\n", store.status().ToString().c_str());
    return 1;
  }
  pipecoord::coordinator::StateWriter w(store->get(), 1000);
  pipecoord::v1::Job job;
  job.set_id("job-1");
  if (!w.PutNewJob(job, {}).ok()) return 1;
  const double one_by_one = Write(w, events, false);
  const double in_a_round = Write(w, events, true);
  std::vector<std::vector<std::string>> stored;
  auto state = w.Load(&stored);
  const size_t n = state.ok() && !stored.empty() ? stored[0].size() : 0;
  std::printf("%d events into %s: one write each (baseline) %.3f s (%.1f us each); in one round %.3f s (%.1f us each); "
              "ratio %.3f; %zu stored (expected %d)\n",
              events, path.c_str(), one_by_one, 1e6 * one_by_one / events, in_a_round, 1e6 * in_a_round / events,
              in_a_round / one_by_one, n, 2 * events);
  std::remove(path.c_str());
  std::remove((path + "-wal").c_str());
  std::remove((path + "-shm").c_str());
  return n == static_cast<size_t>(2 * events) ? 0 : 1;
}
