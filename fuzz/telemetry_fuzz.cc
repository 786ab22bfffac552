// Fuzz target: the telemetry handler. The input is a TelemetryBatch in protobuf's wire format,
// fed to Coordinator::IngestTelemetry of a coordinator with a running job (pp 2 x dp 2, 4 steps,
// health checks and probes on): once as it is (identity and all, as any client could send it),
// then from every worker of the job under that worker's identity, four rounds: the batch as it
// is, again (a worker that resends), then with every step number moved on by 1 and by 2 (a
// worker that goes on). Besides never crashing or hanging, the job must stay bounded: at most
// one measured record per step, however often a step is reported, and an ack that counts
// exactly the actions of the batches accepted.
#include <google/protobuf/stubs/logging.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "coordinator/coordinator.h"
#include "coordinator/telemetry_order.h"
#include "fuzz/fuzz_check.h"
#include "proto/telemetry.pb.h"

namespace {

using namespace pipecoord;

constexpr int kPp = 2, kDp = 2, kWorld = kPp * kDp, kSteps = 4;
constexpr int kStepShift[] = {0, 0, 1, 2};  // per round

v1::JobSpec Spec() {
  v1::JobSpec s;
  s.set_schedule("1f1b");
  s.set_pp(kPp);
  s.set_dp(kDp);
  s.set_microbatches(2);
  s.set_micro_batch_size(1);
  s.set_steps(kSteps);
  v1::ModelSpec* m = s.mutable_model();
  m->set_layers(kPp);
  m->set_hidden(8);
  m->set_heads(1);
  m->set_vocab(16);
  m->set_seq_len(4);
  return s;
}

// A coordinator whose job-000001 runs on kWorld registered workers, on a clock that only
// moves when told.
struct Cluster {
  int64_t now = 1'000'000'000;
  std::unique_ptr<coordinator::Coordinator> c;
  std::string job;
  v1::Job running;

  Cluster() {
    coordinator::CoordinatorOptions o;
    o.now_ns = [this] { return now; };
    o.lease = std::chrono::hours(1);
    c = std::make_unique<coordinator::Coordinator>(o);
    auto submitted = c->SubmitJob(Spec());
    FUZZ_CHECK(submitted.ok(), "submit: %s", submitted.status().message().c_str());
    job = submitted->job_id();
    for (int i = 0; i < kWorld; ++i) {
      v1::RegisterRequest r;
      r.set_device_kind("cpu");
      r.set_device_memory_bytes(1ull << 30);
      r.set_data_endpoint("127.0.0.1:" + std::to_string(10000 + i));
      FUZZ_CHECK(c->Register(r).ok(), "register");
    }
    running = *c->GetJob(job);
    FUZZ_CHECK(running.state() == v1::RUNNING && running.worker_ids_size() == kWorld, "not running");
  }

  void Feed(const v1::TelemetryBatch& b) {
    v1::TelemetryAck ack;
    ack.set_actions_accepted(7);  // the handler adds to what the stream acknowledged so far
    const bool ok = c->IngestTelemetry(b, &ack).ok();
    FUZZ_CHECK(ack.actions_accepted() == 7 + (ok ? coordinator::TimedActions(b) : 0), "ack %lld for %d actions (%s)",
               static_cast<long long>(ack.actions_accepted()), b.actions_size(), ok ? "accepted" : "refused");
    now += 1'000'000;
    c->Tick();
  }
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size > (16 << 10)) return 0;
  static const bool quiet = [] {
    google::protobuf::SetLogHandler(nullptr);  // invalid UTF-8 in a string field logs an error
    return true;
  }();
  (void)quiet;
  v1::TelemetryBatch batch;
  if (!batch.ParseFromArray(data, static_cast<int>(size))) return 0;
  Cluster cluster;
  cluster.Feed(batch);
  for (int shift : kStepShift) {
    for (int g = 0; g < kWorld; ++g) {
      v1::TelemetryBatch b = batch;
      b.set_worker_id(cluster.running.worker_ids(g));
      b.set_job_id(cluster.job);
      b.set_rank(g % kPp);
      b.set_dp_rank(g / kPp);
      // Unsigned: a fuzzed step near INT32_MAX wraps instead of overflowing.
      for (auto& t : *b.mutable_actions()) t.set_step(static_cast<int32_t>(static_cast<uint32_t>(t.step()) + shift));
      for (auto& st : *b.mutable_steps()) st.set_step(static_cast<int32_t>(static_cast<uint32_t>(st.step()) + shift));
      cluster.Feed(b);
    }
    const v1::Job job = *cluster.c->GetJob(cluster.job);
    FUZZ_CHECK(job.steps_size() <= kSteps && job.steps_done() <= kSteps, "%d step records, %d steps done of %d",
               job.steps_size(), job.steps_done(), kSteps);
  }
  return 0;
}
