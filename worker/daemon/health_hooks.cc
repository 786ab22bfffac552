#include "worker/daemon/health_hooks.h"

#include <chrono>
#include <cstdio>
#include <cstring>
#include <thread>

#include "jobplan/probe_placement.h"
#include "kernels/cpu/known_answer_gemm.h"
#include "kernels/cpu/linear.h"

namespace pipecoord::worker {
namespace {

kernels::cpu::ProbeShape ProbeShapeOf(const v1::Assignment& a) {
  bool head = false;
  for (const v1::StageShard& s : a.shards()) head = head || s.has_head();
  const jobplan::ProbeGemm g = jobplan::ProbeGemmFor(a.spec(), head);
  return {g.m, g.k, g.n};
}

}  // namespace

HealthHooks::HealthHooks(const v1::Assignment& a, std::vector<FaultRule> faults)
    : seed_(a.spec().model().seed()),
      probe_shape_(ProbeShapeOf(a)),
      faults_(std::move(faults)) {
  progress_.set_job_id(a.job_id());
  progress_.set_rank(a.rank());
  progress_.set_dp_rank(a.dp_rank());
  progress_.set_tp_rank(a.tp_rank());
  progress_.set_step(0);
  progress_.set_action_index(-1);
  progress_.set_wait_peer(-1);
  moved_ = std::chrono::steady_clock::now();
}

v1::Progress HealthHooks::progress() const {
  std::lock_guard<std::mutex> lock(mu_);
  v1::Progress p = progress_;
  p.set_progress_age_ns(std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - moved_).count());
  return p;
}

void HealthHooks::OnActionStart(int step, int index, const v1::Action& action, int input_peer) {
  std::lock_guard<std::mutex> lock(mu_);
  progress_.set_step(step);
  progress_.set_action_index(index);
  *progress_.mutable_action() = action;
  progress_.set_waiting(input_peer >= 0);
  progress_.set_wait_peer(input_peer);
  moved_ = std::chrono::steady_clock::now();
}

void HealthHooks::OnInputReady() {
  std::lock_guard<std::mutex> lock(mu_);
  progress_.set_waiting(false);
  progress_.set_wait_peer(-1);
}

void HealthHooks::OnActionDone() {
  std::lock_guard<std::mutex> lock(mu_);
  progress_.set_actions_done(progress_.actions_done() + 1);
}

bool HealthHooks::CorruptAt(int step) const {
  for (const FaultRule& f : faults_) {
    if (f.kind == FaultRule::Kind::kCorrupt && step >= f.step) return true;
  }
  return false;
}

Status HealthHooks::BeforeCompute(int step, const v1::Action& action, const std::atomic<bool>& cancelled) {
  kernels::cpu::SetGemmCorruption(CorruptAt(step));  // this rank's thread's GEMMs
  for (const FaultRule& f : faults_) {
    if (f.kind == FaultRule::Kind::kFlip && !flipped_ && step == f.step && action.op() == v1::F &&
        action.microbatch() == f.microbatch) {
      flipped_ = true;  // once: this F's first GEMM
      kernels::cpu::CorruptNextGemm();
    }
  }
  for (const FaultRule& f : faults_) {
    if (f.kind != FaultRule::Kind::kHang || f.step != step || hung_) continue;
    hung_ = true;  // once: the first compute action of that step
    // When the fault began and when the rank last progressed (this action's start, perhaps
    // before a wait for its input: what the hang check dates), for tests that measure its
    // detection end to end.
    const int64_t unix_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                                std::chrono::system_clock::now().time_since_epoch()).count();
    const int64_t age_ms = progress().progress_age_ns() / 1'000'000;
    std::fprintf(stderr, "worker: --inject %s: stopped at step %d, unix ms %lld (last progress unix ms %lld)\n",
                 f.text.c_str(), step, static_cast<long long>(unix_ms), static_cast<long long>(unix_ms - age_ms));
    while (!cancelled) std::this_thread::sleep_for(std::chrono::milliseconds(10));
    return FailedPrecondition("cancelled");
  }
  return Status::Ok();
}

void HealthHooks::AfterCompute(int step, const v1::Action&, int64_t elapsed_ns) {
  for (const FaultRule& f : faults_) {
    if (f.kind == FaultRule::Kind::kSlow && f.factor > 1 && step >= f.step) {
      // Exactly FACTOR x: a sleep overshoots by its wake-up latency (50-100 us here), which on a
      // 0.4 ms action made 1.3x a 1.5x; so sleep to 200 us short of the end, then yield to it.
      using Clock = std::chrono::steady_clock;
      const Clock::time_point end =
          Clock::now() + std::chrono::nanoseconds(static_cast<int64_t>((f.factor - 1) * elapsed_ns));
      const Clock::time_point nap = end - std::chrono::microseconds(200);
      if (Clock::now() < nap) std::this_thread::sleep_until(nap);
      while (Clock::now() < end) std::this_thread::yield();
    }
  }
}

Result<uint64_t> HealthHooks::Probe(int step, const ProbeGemmFn& gemm) {
  // The training kernel at the stage's shapes on the known-answer inputs (integers: exact in any
  // summation order), so a GEMM that corrupts what it computes is caught, not a reference copy.
  kernels::cpu::SetGemmCorruption(CorruptAt(step));
  const kernels::cpu::ProbeShape& s = probe_shape_;
  const uint64_t seed = kernels::cpu::ProbeSeed(seed_, step);
  const kernels::cpu::ProbeInputs in = kernels::cpu::MakeProbeInputs(seed, s);
  std::vector<float> y;
  Status st = gemm(s, in.x, in.w, &y);
  if (!st.ok()) return Status(st.code(), "the numerical probe's " + s.ToString() + ": " + st.message());
  if (y.size() != static_cast<size_t>(s.m * s.n)) {
    return Internal("the numerical probe's " + s.ToString() + " returned " + std::to_string(y.size()) + " elements");
  }
  return kernels::cpu::ProbeChecksum(y.data(), s, seed);
}

uint64_t HealthHooks::OomBytes(int step) {
  for (const FaultRule& f : faults_) {
    if (f.kind == FaultRule::Kind::kOom && !oom_applied_ && step >= f.step) {
      oom_applied_ = true;
      return f.bytes;
    }
  }
  return 0;
}

}  // namespace pipecoord::worker
