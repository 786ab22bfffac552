// CudaBackend's device timing (ComputeBackend::MarkBegin/MarkEnd/ResolveMarks), built two ways:
//
// cuda_backend_timing_test (gpu-tagged, skips without a GPU): the real events on the compute
// stream. Marks resolve in stream order, never before the host recorded them, and a
// device-timed F of a large layer lasts longer than its launch and ends after its call returned
// (the host clock around the call would have measured the launch only).
//
// cuda_backend_timing_test_host (runs everywhere): the same code against host_kernels_for_tests.cc,
// whose stand-in events complete when recorded, stamped with the host's steady clock. There a
// mark's device span must equal the host time between its MarkBegin and MarkEnd (to the float
// milliseconds cudaEventElapsedTime answers), placed on the executor's clock (a steady clock
// shifted by 10^15 ns, so a span left on the events' own clock shows); the events are created
// once (two per mark and the reference) and reused; CUDA failures come back as Status values
// naming the call. The stand-in cannot show the device's lag behind the host: the GPU test does.
//
// Both: the real Executor over a CudaBackend reports, for every compute action and OPT, spans in
// list order that lie inside the run's host window.
#include "worker/cuda/cuda_backend.h"

#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "worker/cuda/cuda_test_util.h"
#include "worker/daemon/executor.h"

#ifdef PIPECOORD_CUDA_HOST_EMULATION
// Defined by host_kernels_for_tests.cc.
namespace pipecoord::worker::cuda::host_double {
int64_t EventsCreated();
int64_t EventsLive();
void FailNextCall(const std::string& call, cudaError_t error);
}  // namespace pipecoord::worker::cuda::host_double
#endif

namespace pipecoord::worker::cuda {
namespace {

// The executor's clock in these tests: not the clock the events are stamped with.
constexpr int64_t kClockOffsetNs = 1'000'000'000'000'000;
int64_t ClockNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
             .count() +
         kClockOffsetNs;
}
// How far a resolved time may sit from the host readings around it: the reference's pairing
// (half its record-and-wait window, microseconds unless the thread is descheduled).
constexpr int64_t kPairingToleranceNs = 2'000'000;
// Consecutive marks: each span is rounded separately from float milliseconds.
constexpr int64_t kRoundingToleranceNs = 2'000;

// A transport for one rank alone (pp = 1, dp = 1): nothing is ever sent or received.
class NoPeers final : public Transport {
 public:
  Status Send(int peer, const MessageTag&, kernels::Tensor) override {
    return Internal("no peers: send to " + std::to_string(peer));
  }
  Result<kernels::Tensor> Recv(int peer, const MessageTag&, const kernels::TensorSpec&,
                               std::chrono::milliseconds) override {
    return Internal("no peers: receive from " + std::to_string(peer));
  }
  Status Flush(std::chrono::milliseconds) override { return Status::Ok(); }
  void Shutdown() override {}
  std::vector<int> BrokenPeers() const override { return {}; }
  uint64_t bytes_sent() const override { return 0; }
  uint64_t bytes_received() const override { return 0; }
};

class CudaBackendTimingTest : public CudaModelTest {
 protected:
  std::unique_ptr<CudaBackend> Make(const v1::Assignment& a) {
    CudaBackendOptions options;
    options.shared_device = device_;
    auto b = MakeCudaBackend(a, options);
    EXPECT_TRUE(b.ok()) << b.status().ToString();
    return b.ok() ? std::move(b).value() : nullptr;
  }
  std::unique_ptr<CudaBackend> WholeModelBackend(int microbatches) {
    return Make(TestAssignment({model::WholeModel(TestConfig())}, 1, 0, microbatches, "cuda"));
  }
};

// Host readings around one mark: outer around the mark calls, inner around the work.
struct Bracket {
  int64_t outer_begin, inner_begin, inner_end, outer_end;
};

TEST_F(CudaBackendTimingTest, MarksResolveInOrderOnTheExecutorsClock) {
  auto backend = WholeModelBackend(2);
  ASSERT_TRUE(backend);
  ASSERT_TRUE(backend->TimesOnDevice());
  std::vector<Bracket> host;
  // F of mb 0 and 1, then BW of mb 0 (its gradient is the loss's own: empty on the head stage).
  for (int i = 0; i < 3; ++i) {
    Bracket b{};
    b.outer_begin = ClockNs();
    ASSERT_TRUE(backend->MarkBegin(i).ok());
    b.inner_begin = ClockNs();
    if (i < 2) {
      auto out = backend->Forward(0, i, 0, kernels::Tensor());
      ASSERT_TRUE(out.ok()) << out.status().ToString();
    } else {
      auto out = backend->BackwardFull(0, 0, kernels::Tensor());
      ASSERT_TRUE(out.ok()) << out.status().ToString();
    }
    b.inner_end = ClockNs();
    ASSERT_TRUE(backend->MarkEnd(i).ok());
    b.outer_end = ClockNs();
    host.push_back(b);
  }
  const int64_t before_resolve = ClockNs();
  auto spans = backend->ResolveMarks(3, ClockNs);
  const int64_t after_resolve = ClockNs();
  ASSERT_TRUE(spans.ok()) << spans.status().ToString();
  ASSERT_EQ(spans->size(), 3u);
  for (size_t i = 0; i < spans->size(); ++i) {
    SCOPED_TRACE("mark " + std::to_string(i));
    const DeviceSpan& s = (*spans)[i];
    const Bracket& b = host[i];
    EXPECT_LE(s.start_ns, s.end_ns);
    // No device runs a mark before the host recorded it, nor after the resolve returned.
    EXPECT_GE(s.start_ns, b.outer_begin - kPairingToleranceNs);
    EXPECT_LE(s.end_ns, after_resolve + kPairingToleranceNs);
    if (i > 0) {
      EXPECT_LE((*spans)[i - 1].end_ns, s.start_ns + kRoundingToleranceNs) << "stream order";
    }
#ifdef PIPECOORD_CUDA_HOST_EMULATION
    // The stand-in's events complete when recorded: device time is host time, so the span is
    // the work's host time, within the mark calls' own.
    EXPECT_GE(s.end_ns - s.start_ns, b.inner_end - b.inner_begin - kRoundingToleranceNs);
    EXPECT_LE(s.end_ns - s.start_ns, b.outer_end - b.outer_begin + kRoundingToleranceNs);
    EXPECT_LE(s.start_ns, b.inner_begin + kPairingToleranceNs);
    EXPECT_LE(s.end_ns, before_resolve + kPairingToleranceNs);
#else
    (void)before_resolve;
#endif
  }
  // The marks were consumed: a second resolve of them is refused until they are recorded again.
  auto again = backend->ResolveMarks(1, ClockNs);
  EXPECT_EQ(again.status().code(), Code::kFailedPrecondition) << again.status().ToString();
}

TEST_F(CudaBackendTimingTest, ResolveRefusesMarksNotBegunOrNotEnded) {
  auto backend = WholeModelBackend(1);
  ASSERT_TRUE(backend);
  EXPECT_EQ(backend->MarkEnd(0).code(), Code::kFailedPrecondition);  // never begun
  EXPECT_EQ(backend->MarkBegin(-1).code(), Code::kInvalidArgument);
  ASSERT_TRUE(backend->MarkBegin(0).ok());
  auto open = backend->ResolveMarks(1, ClockNs);
  EXPECT_EQ(open.status().code(), Code::kFailedPrecondition);
  EXPECT_NE(open.status().message().find("mark 0 was not ended"), std::string::npos) << open.status().ToString();
  auto beyond = backend->ResolveMarks(5, ClockNs);
  EXPECT_EQ(beyond.status().code(), Code::kFailedPrecondition) << beyond.status().ToString();
  // A begin left over (a failed step) starts over with the next step's begin.
  ASSERT_TRUE(backend->MarkBegin(0).ok());
  ASSERT_TRUE(backend->MarkEnd(0).ok());
  auto ok = backend->ResolveMarks(1, ClockNs);
  ASSERT_TRUE(ok.ok()) << ok.status().ToString();
  EXPECT_EQ(ok->size(), 1u);
  auto none = backend->ResolveMarks(0, ClockNs);
  ASSERT_TRUE(none.ok()) << none.status().ToString();
  EXPECT_TRUE(none->empty());
}

// The real executor on the CUDA backend: one rank holding the model, 2 micro-batches, 2 steps.
TEST_F(CudaBackendTimingTest, ExecutorReportsEveryComputeActionAndOptOnTheDevice) {
#ifdef PIPECOORD_CUDA_HOST_EMULATION
  const int64_t created_before = host_double::EventsCreated();
  const int64_t live_before = host_double::EventsLive();
#endif
  v1::Assignment a = TestAssignment({model::WholeModel(TestConfig())}, 1, 0, 2, "cuda");
  a.mutable_spec()->set_steps(2);
  a.add_stage_to_rank(0);
  for (auto [op, mb] : std::vector<std::pair<v1::Op, int>>{
           {v1::F, 0}, {v1::F, 1}, {v1::B, 0}, {v1::W, 0}, {v1::BW, 1}, {v1::OPT, -1}}) {
    v1::Action* x = a.mutable_jobs()->add_actions();
    x->set_op(op);
    x->set_stage(0);
    x->set_microbatch(mb);
    x->set_peer(-1);
  }
  {
    auto backend = Make(a);
    ASSERT_TRUE(backend);
    NoPeers transport;
    ExecutorOptions options;
    options.clock_ns = ClockNs;
    Executor executor(a, backend.get(), &transport, options);
    std::vector<StepReport> reports;
    std::vector<int64_t> step_from, step_to;  // host window of each step
    step_from.push_back(ClockNs());
    Status st = executor.Run([&](StepReport&& r) {
      step_to.push_back(ClockNs());
      reports.push_back(std::move(r));
      step_from.push_back(ClockNs());
      return Status::Ok();
    });
    ASSERT_TRUE(st.ok()) << st.ToString();
    ASSERT_EQ(reports.size(), 2u);
    for (size_t step = 0; step < reports.size(); ++step) {
      SCOPED_TRACE("step " + std::to_string(step));
      const StepReport& r = reports[step];
      EXPECT_TRUE(r.summary.has_loss());
      ASSERT_EQ(r.actions.size(), 6u);
      for (size_t k = 0; k < r.actions.size(); ++k) {
        SCOPED_TRACE("action " + std::to_string(k));
        const v1::ActionTiming& t = r.actions[k];
        EXPECT_LE(t.start_ns(), t.end_ns());
        EXPECT_GE(t.start_ns(), step_from[step] - kPairingToleranceNs);
        EXPECT_LE(t.end_ns(), step_to[step] + kPairingToleranceNs);
        EXPECT_EQ(t.wait_peer(), -1);
        if (k > 0) {
          EXPECT_LE(r.actions[k - 1].end_ns(), t.start_ns() + kRoundingToleranceNs) << "stream order";
        }
      }
    }
#ifdef PIPECOORD_CUDA_HOST_EMULATION
    // Two events per timed action of a step (6) and the reference, created in step 0 only.
    EXPECT_EQ(host_double::EventsCreated() - created_before, 2 * 6 + 1);
    EXPECT_EQ(host_double::EventsLive() - live_before, 2 * 6 + 1);
#endif
  }
#ifdef PIPECOORD_CUDA_HOST_EMULATION
  EXPECT_EQ(host_double::EventsLive(), live_before) << "the backend destroys its events";
#endif
}

#ifdef PIPECOORD_CUDA_HOST_EMULATION

TEST_F(CudaBackendTimingTest, CudaFailuresAreStatusValuesNamingTheCall) {
  auto backend = WholeModelBackend(1);
  ASSERT_TRUE(backend);
  host_double::FailNextCall("cudaEventCreateWithFlags", cudaErrorMemoryAllocation);
  Status created = backend->MarkBegin(0);
  EXPECT_EQ(created.code(), Code::kResourceExhausted);
  EXPECT_EQ(created.message(), "cudaEventCreateWithFlags(timing event): cudaErrorMemoryAllocation "
                               "(error injected by the host double)");
  host_double::FailNextCall("cudaEventRecord", cudaErrorLaunchFailure);
  Status recorded = backend->MarkBegin(0);
  EXPECT_EQ(recorded.code(), Code::kInternal);
  EXPECT_EQ(recorded.message(), "cudaEventRecord(timing mark 0 begin): cudaErrorLaunchFailure "
                                "(error injected by the host double)");
  ASSERT_TRUE(backend->MarkBegin(0).ok());
  ASSERT_TRUE(backend->MarkEnd(0).ok());
  host_double::FailNextCall("cudaEventSynchronize", cudaErrorLaunchFailure);
  auto synced = backend->ResolveMarks(1, ClockNs);
  EXPECT_EQ(synced.status().code(), Code::kInternal);
  EXPECT_EQ(synced.status().message(), "cudaEventSynchronize(timing reference): cudaErrorLaunchFailure "
                                       "(error injected by the host double)");
  ASSERT_TRUE(backend->MarkBegin(0).ok());
  ASSERT_TRUE(backend->MarkEnd(0).ok());
  host_double::FailNextCall("cudaEventElapsedTime", cudaErrorInvalidResourceHandle);
  auto elapsed = backend->ResolveMarks(1, ClockNs);
  EXPECT_EQ(elapsed.status().code(), Code::kInternal);
  EXPECT_EQ(elapsed.status().message(), "cudaEventElapsedTime(timing mark 0 begin, reference): "
                                        "cudaErrorInvalidResourceHandle (error injected by the host double)");
}

#else  // a GPU

// A model whose one stage (no embedding, no head: nothing read back to the host) is two blocks
// of hidden 1024 over 4 x 1024 tokens: about 0.2 TFLOP per F, milliseconds on an H100, against
// tens of microseconds to launch its kernels.
v1::Assignment LargeLayerAssignment() {
  v1::Assignment a;
  a.set_job_id("cuda-timing-large");
  v1::JobSpec* s = a.mutable_spec();
  s->set_device("cuda");
  s->set_pp(3);
  s->set_microbatches(1);
  s->set_micro_batch_size(4);
  s->set_steps(1);
  s->set_learning_rate(1e-3);
  s->set_data_seed(5);
  v1::ModelSpec* m = s->mutable_model();
  m->set_layers(2);
  m->set_hidden(1024);
  m->set_heads(8);
  m->set_vocab(256);
  m->set_seq_len(1024);
  m->set_seed(3);
  v1::StageShard* sh = a.add_shards();
  sh->set_stage(1);
  sh->set_first_layer(0);
  sh->set_num_layers(2);
  return a;
}

TEST_F(CudaBackendTimingTest, DeviceTimedForwardOfALargeLayerOutlastsItsLaunch) {
  auto backend = Make(LargeLayerAssignment());
  ASSERT_TRUE(backend);
  const kernels::TensorSpec spec = backend->BoundarySpec();
  std::vector<float> values(static_cast<size_t>(spec.numel()));
  for (size_t i = 0; i < values.size(); ++i) values[i] = static_cast<float>((i * 7919) % 2003) / 1001.0f - 1.0f;
  auto input = [&]() -> kernels::Tensor {
    auto t = device_->Empty(spec);
    EXPECT_TRUE(t.ok()) << t.status().ToString();
    if (!t.ok()) return kernels::Tensor();
    EXPECT_TRUE(device_->Upload(values.data(), *t).ok());
    return std::move(t).value();
  };
  // Warm-up: kernels loaded, GEMM plans chosen, the pool's blocks cached (freed by BW), so the
  // timed F launches without allocating or loading anything.
  auto warm = backend->Forward(1, 0, 0, input());
  ASSERT_TRUE(warm.ok()) << warm.status().ToString();
  auto grad = device_->Zeros(spec);
  ASSERT_TRUE(grad.ok());
  auto back = backend->BackwardFull(1, 0, std::move(grad).value());
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  kernels::Tensor timed_input = input();
  ASSERT_TRUE(device_->Synchronize().ok());

  const int64_t launch_from = ClockNs();
  ASSERT_TRUE(backend->MarkBegin(0).ok());
  auto out = backend->Forward(1, 0, 1, std::move(timed_input));
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  ASSERT_TRUE(backend->MarkEnd(0).ok());
  const int64_t launch_to = ClockNs();
  auto spans = backend->ResolveMarks(1, ClockNs);
  ASSERT_TRUE(spans.ok()) << spans.status().ToString();
  const DeviceSpan& s = (*spans)[0];
  const int64_t launch_ns = launch_to - launch_from;
  const int64_t device_ns = s.end_ns - s.start_ns;
  std::printf("large F: launch %.1f us, device %.1f us, device end %.1f us after the call returned\n",
              launch_ns * 1e-3, device_ns * 1e-3, (s.end_ns - launch_to) * 1e-3);
  EXPECT_GT(device_ns, launch_ns);
  EXPECT_GT(s.end_ns, launch_to) << "the work ended after the call returned";
  EXPECT_GE(s.start_ns, launch_from - kPairingToleranceNs);
}

#endif  // PIPECOORD_CUDA_HOST_EMULATION

}  // namespace
}  // namespace pipecoord::worker::cuda
