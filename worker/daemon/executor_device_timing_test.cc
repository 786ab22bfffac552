// The executor's timing of an asynchronous backend (ComputeBackend::TimesOnDevice), without a
// GPU: a fake backend whose "device" runs each call's work later and longer than its host call,
// on a clock the test moves by hand, so every reported number is known exactly.
//
// The fake device (FakeBackend::Resolve): a mark's device start is 5 ns after the later of its
// host MarkBegin and the previous mark's device end (one stream: work runs in order), and its
// work lasts 10x its host bracket. Each backend call costs 10 ns of host time, a send 3 ns, and
// a receive of activations the peer's delay the test sets per micro-batch.
//
// What the tests show: with the fake device, F/B/W/BW/OPT report exactly the resolved device
// spans, in list order, and sends and receives keep their host times; wait_ns is the part of the
// device's idle gap before the action during which the executor waited for its input (0 when
// the device was still busy when the input came, the part after the device went idle when it was
// not, carried across steps); a synchronous backend keeps its host times and gets no marks; a
// failed resolve fails the step with the backend's message.
#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <limits>
#include <map>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "worker/daemon/executor.h"

namespace pipecoord::worker {
namespace {

constexpr int64_t kCallNs = 10;      // host time of one backend call
constexpr int64_t kSendNs = 3;       // host time of one send
constexpr int64_t kLatencyNs = 5;    // from queued (or the stream free) to running on the device
constexpr int64_t kDeviceScale = 10;  // device work per ns of host bracket

// A clock that moves only when the fakes say so.
struct ManualClock {
  int64_t now = 1000;
  std::function<int64_t()> Fn() {
    return [this] { return now; };
  }
};

kernels::TensorSpec Spec() { return {kernels::DType::kF32, {2}}; }
kernels::Tensor SomeTensor() { return kernels::Tensor::FromVector(std::vector<float>{1.0f, 2.0f}); }

// Receives of activations take the peer's delay for that micro-batch; sends take kSendNs.
class ScriptedTransport final : public Transport {
 public:
  ScriptedTransport(ManualClock* clock, std::map<int, int64_t> recv_delay_by_mb)
      : clock_(clock), delay_(std::move(recv_delay_by_mb)) {}
  Status Send(int, const MessageTag&, kernels::Tensor) override {
    clock_->now += kSendNs;
    ++sends;
    return Status::Ok();
  }
  Result<kernels::Tensor> Recv(int peer, const MessageTag& tag, const kernels::TensorSpec&,
                               std::chrono::milliseconds) override {
    if (peer != 0 || tag.channel != kActivationChannel) return Internal("unexpected receive from " + std::to_string(peer));
    clock_->now += delay_.at(tag.mb);
    return SomeTensor();
  }
  Status Flush(std::chrono::milliseconds) override { return Status::Ok(); }
  void Shutdown() override {}
  std::vector<int> BrokenPeers() const override { return {}; }
  uint64_t bytes_sent() const override { return 0; }
  uint64_t bytes_received() const override { return 0; }

  int sends = 0;

 private:
  ManualClock* clock_;
  std::map<int, int64_t> delay_;
};

// The last stage of two: F ends in the loss (no output), B and BW return the gradient to send.
class FakeBackend final : public ComputeBackend {
 public:
  FakeBackend(ManualClock* clock, bool asynchronous) : clock_(clock), asynchronous_(asynchronous) {}

  kernels::TensorSpec BoundarySpec() const override { return Spec(); }
  Result<kernels::Tensor> Forward(int, int, int, kernels::Tensor input) override {
    if (input.numel() != 2) return InvalidArgument("Forward without its input");
    clock_->now += kCallNs;
    return kernels::Tensor();
  }
  Result<kernels::Tensor> BackwardInput(int, int, kernels::Tensor) override {
    clock_->now += kCallNs;
    return SomeTensor();
  }
  Status BackwardWeight(int, int) override {
    clock_->now += kCallNs;
    return Status::Ok();
  }
  Result<kernels::Tensor> BackwardFull(int, int, kernels::Tensor) override {
    clock_->now += kCallNs;
    return SomeTensor();
  }
  std::vector<std::span<float>> Gradients() override { return {}; }
  Status OptimizerStep(int) override {
    clock_->now += kCallNs;
    return Status::Ok();
  }
  bool StepLoss(double*) override { return false; }
  uint64_t memory_in_use_bytes() const override { return 0; }
  uint64_t memory_peak_bytes() const override { return 0; }
  void ResetPeak() override {}
  std::vector<StateTensor> CheckpointState() override { return {}; }
  int64_t optimizer_steps() const override { return 0; }
  void set_optimizer_steps(int64_t) override {}

  bool TimesOnDevice() const override { return asynchronous_; }
  Status MarkBegin(int mark) override {
    ++mark_calls;
    if (mark != static_cast<int>(begin_.size())) return Internal("marks out of order");
    begin_.push_back(clock_->now);
    return Status::Ok();
  }
  Status MarkEnd(int mark) override {
    ++mark_calls;
    if (mark + 1 != static_cast<int>(begin_.size()) || end_.size() != begin_.size() - 1) {
      return Internal("MarkEnd(" + std::to_string(mark) + ") does not close the open mark");
    }
    end_.push_back(clock_->now);
    return Status::Ok();
  }
  Result<std::vector<DeviceSpan>> ResolveMarks(int count, const std::function<int64_t()>& clock_ns) override {
    ++resolve_calls;
    if (!resolve_error.ok()) return resolve_error;
    if (clock_ns() != clock_->now) return Internal("not the executor's clock");
    if (count != static_cast<int>(begin_.size()) || end_.size() != begin_.size()) {
      return Internal("resolve of " + std::to_string(count) + " marks, " + std::to_string(begin_.size()) + " begun");
    }
    std::vector<DeviceSpan> spans;
    for (int i = 0; i < count; ++i) {
      const int64_t start = std::max(begin_[i], device_free_) + kLatencyNs;
      device_free_ = start + kDeviceScale * (end_[i] - begin_[i]);
      spans.push_back({start, device_free_});
    }
    begin_.clear();
    end_.clear();
    resolved.push_back(spans);
    return spans;
  }

  int mark_calls = 0;
  int resolve_calls = 0;
  Status resolve_error;
  std::vector<std::vector<DeviceSpan>> resolved;  // by step

 private:
  ManualClock* clock_;
  const bool asynchronous_;
  std::vector<int64_t> begin_, end_;  // host times of this step's marks
  int64_t device_free_ = std::numeric_limits<int64_t>::min() / 2;
};

v1::Action Act(v1::Op op, int mb, int peer = -1) {
  v1::Action a;
  a.set_op(op);
  a.set_stage(1);
  a.set_microbatch(mb);
  a.set_peer(peer);
  return a;
}

// Rank 1 of pp = 2 (stage 1, the loss), 3 micro-batches: B and W split for mb 0, BW after.
v1::Assignment LastStage(int steps) {
  v1::Assignment a;
  a.set_job_id("timing");
  a.set_rank(1);
  v1::JobSpec* s = a.mutable_spec();
  s->set_pp(2);
  s->set_dp(1);
  s->set_microbatches(3);
  s->set_steps(steps);
  a.add_stage_to_rank(0);
  a.add_stage_to_rank(1);
  const std::vector<v1::Action> list = {
      Act(v1::RECV_F, 0, 0), Act(v1::F, 0),  Act(v1::B, 0),      Act(v1::SEND_B, 0, 0), Act(v1::W, 0),
      Act(v1::RECV_F, 1, 0), Act(v1::F, 1),  Act(v1::BW, 1),     Act(v1::SEND_B, 1, 0), Act(v1::RECV_F, 2, 0),
      Act(v1::F, 2),         Act(v1::BW, 2), Act(v1::SEND_B, 2, 0), Act(v1::OPT, -1)};
  for (const v1::Action& x : list) *a.mutable_jobs()->add_actions() = x;
  return a;
}

struct Row {
  v1::Op op;
  int64_t start, end, wait;
  int wait_peer;
};

// The peer is late by 500 ns for mb 0, 100 for mb 1, 1000 for mb 2.
const std::map<int, int64_t> kDelays = {{0, 500}, {1, 100}, {2, 1000}};

std::vector<StepReport> RunSteps(const v1::Assignment& a, FakeBackend* backend, ScriptedTransport* transport,
                                 ManualClock* clock, Status* result) {
  ExecutorOptions options;
  options.clock_ns = clock->Fn();
  Executor executor(a, backend, transport, options);
  std::vector<StepReport> reports;
  *result = executor.Run([&](StepReport&& r) {
    reports.push_back(std::move(r));
    return Status::Ok();
  });
  return reports;
}

void ExpectRows(const StepReport& report, const std::vector<Row>& rows) {
  ASSERT_EQ(report.actions.size(), rows.size());
  for (size_t i = 0; i < rows.size(); ++i) {
    SCOPED_TRACE("entry " + std::to_string(i));
    const v1::ActionTiming& t = report.actions[i];
    EXPECT_EQ(t.action().op(), rows[i].op);
    EXPECT_EQ(t.start_ns(), rows[i].start);
    EXPECT_EQ(t.end_ns(), rows[i].end);
    EXPECT_EQ(t.wait_ns(), rows[i].wait);
    EXPECT_EQ(t.wait_peer(), rows[i].wait_peer);
  }
}

TEST(ExecutorDeviceTimingTest, SynchronousBackendKeepsHostTimesAndGetsNoMarks) {
  ManualClock clock;
  FakeBackend backend(&clock, /*asynchronous=*/false);
  ScriptedTransport transport(&clock, kDelays);
  Status result;
  auto reports = RunSteps(LastStage(1), &backend, &transport, &clock, &result);
  ASSERT_TRUE(result.ok()) << result.ToString();
  ASSERT_EQ(reports.size(), 1u);
  EXPECT_EQ(backend.mark_calls, 0);
  EXPECT_EQ(backend.resolve_calls, 0);
  // Host times: a compute action from its input's arrival to its call's return; wait = the
  // receive's whole delay.
  ExpectRows(reports[0], {{v1::RECV_F, 1000, 1000, 0, -1},
                          {v1::F, 1500, 1510, 500, 0},
                          {v1::B, 1510, 1520, 0, -1},
                          {v1::SEND_B, 1520, 1523, 0, -1},
                          {v1::W, 1523, 1533, 0, -1},
                          {v1::RECV_F, 1533, 1533, 0, -1},
                          {v1::F, 1633, 1643, 100, 0},
                          {v1::BW, 1643, 1653, 0, -1},
                          {v1::SEND_B, 1653, 1656, 0, -1},
                          {v1::RECV_F, 1656, 1656, 0, -1},
                          {v1::F, 2656, 2666, 1000, 0},
                          {v1::BW, 2666, 2676, 0, -1},
                          {v1::SEND_B, 2676, 2679, 0, -1},
                          {v1::OPT, 2679, 2689, 0, -1}});
}

TEST(ExecutorDeviceTimingTest, AsynchronousBackendReportsResolvedDeviceSpansAndDeviceIdleWaits) {
  ManualClock clock;
  FakeBackend backend(&clock, /*asynchronous=*/true);
  ScriptedTransport transport(&clock, kDelays);
  Status result;
  auto reports = RunSteps(LastStage(2), &backend, &transport, &clock, &result);
  ASSERT_TRUE(result.ok()) << result.ToString();
  ASSERT_EQ(reports.size(), 2u);
  // 8 timed actions a step (F0 B0 W0 F1 BW1 F2 BW2 OPT), each begun and ended.
  EXPECT_EQ(backend.resolve_calls, 2);
  EXPECT_EQ(backend.mark_calls, 2 * 2 * 8);
  ASSERT_EQ(backend.resolved.size(), 2u);
  // The host clock runs exactly as in the synchronous run (marks cost no host time here); the
  // device, by the rule in the file's comment:
  //   F0 host [1500,1510] -> device [1505,1605]; the device was free before, so of the wait
  //      [1000,1500] all 500 ns left it idle.
  //   B0 [1510,1520] -> [1610,1710]; W0 [1523,1533] -> [1715,1815].
  //   F1 waited [1533,1633] for its input while the device ran W0 until 1815: wait 0.
  //   F1 [1633,1643] -> [1820,1920]; BW1 [1643,1653] -> [1925,2025].
  //   F2 waited [1656,2656]; the device went idle at 2025: wait 2656 - 2025 = 631.
  //   F2 [2656,2666] -> [2661,2761]; BW2 [2666,2676] -> [2766,2866]; OPT [2679,2689] -> [2871,2971].
  ExpectRows(reports[0], {{v1::RECV_F, 1000, 1000, 0, -1},
                          {v1::F, 1505, 1605, 500, 0},
                          {v1::B, 1610, 1710, 0, -1},
                          {v1::SEND_B, 1520, 1523, 0, -1},
                          {v1::W, 1715, 1815, 0, -1},
                          {v1::RECV_F, 1533, 1533, 0, -1},
                          {v1::F, 1820, 1920, 0, 0},
                          {v1::BW, 1925, 2025, 0, -1},
                          {v1::SEND_B, 1653, 1656, 0, -1},
                          {v1::RECV_F, 1656, 1656, 0, -1},
                          {v1::F, 2661, 2761, 631, 0},
                          {v1::BW, 2766, 2866, 0, -1},
                          {v1::SEND_B, 2676, 2679, 0, -1},
                          {v1::OPT, 2871, 2971, 0, -1}});
  // Every timed entry of both steps is the backend's span, in order.
  for (size_t step = 0; step < 2; ++step) {
    SCOPED_TRACE("step " + std::to_string(step));
    size_t k = 0;
    for (const v1::ActionTiming& t : reports[step].actions) {
      const v1::Op op = t.action().op();
      if (op == v1::SEND_B || op == v1::RECV_F) continue;
      ASSERT_LT(k, backend.resolved[step].size());
      EXPECT_EQ(t.start_ns(), backend.resolved[step][k].start_ns);
      EXPECT_EQ(t.end_ns(), backend.resolved[step][k].end_ns);
      ++k;
    }
    EXPECT_EQ(k, backend.resolved[step].size());
  }
  // Step 1 starts at host 2689. F0 waits [2689,3189]; the device ran step 0's OPT until 2971,
  // so the wait is 3189 - 2971 = 218 (the idle gap carries across the step boundary).
  const v1::ActionTiming& f0 = reports[1].actions[1];
  EXPECT_EQ(f0.action().op(), v1::F);
  EXPECT_EQ(f0.start_ns(), 3194);
  EXPECT_EQ(f0.wait_ns(), 218);
  EXPECT_EQ(f0.wait_peer(), 0);
  // Sends and receives keep host times in step 1 too.
  EXPECT_EQ(reports[1].actions[0].start_ns(), 2689);
  EXPECT_EQ(reports[1].actions[3].action().op(), v1::SEND_B);
  EXPECT_EQ(reports[1].actions[3].start_ns(), 2689 + 500 + 2 * kCallNs);
  EXPECT_EQ(reports[1].actions[3].end_ns(), 2689 + 500 + 2 * kCallNs + kSendNs);
}

TEST(ExecutorDeviceTimingTest, AFailedResolveFailsTheStepWithTheBackendsMessage) {
  ManualClock clock;
  FakeBackend backend(&clock, /*asynchronous=*/true);
  backend.resolve_error = Internal("cudaStreamSynchronize(compute stream): cudaErrorLaunchFailure");
  ScriptedTransport transport(&clock, kDelays);
  Status result;
  auto reports = RunSteps(LastStage(2), &backend, &transport, &clock, &result);
  EXPECT_TRUE(reports.empty());
  EXPECT_EQ(result.code(), Code::kInternal);
  EXPECT_EQ(result.message(), "step 0: device timing: cudaStreamSynchronize(compute stream): cudaErrorLaunchFailure");
}

}  // namespace
}  // namespace pipecoord::worker
