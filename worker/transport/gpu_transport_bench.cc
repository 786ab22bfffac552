// gpu_transport_bench: how fast the GPU transports move a device tensor, against the device's
// own copy bandwidth; then how much of a staged send the sender's compute hides.
//
//   d2d_memcpy  cudaMemcpyAsync device -> device on GPU 0: the baseline every ratio divides by
//   staged      StagedTransport over TCP on 127.0.0.1, both ranks on GPU 0 (Send + Recv, one
//               message at a time, until the received tensor is on the device)
//   nccl        NcclTransport from GPU 0 to GPU 1 (a stream of messages), when two GPUs are visible
//
// Bandwidth is payload bytes per second (1 GB = 1e9 bytes).
//
// Overlap (issue 15 section 3: "sends/receives overlap compute (measured)"), on one GPU: the
// same two staged ranks on GPU 0 (rank 0 sends, rank 1 receives, each with its own compute
// stream and stream-ordered allocator, as two workers sharing a GPU have), one message of
// min(64, max_mib) MiB, and a compute workload on rank 0's compute stream: a loop of bf16 GEMMs
// y = x w^T with x, w, y [4096, 4096] through kernels/cuda/gemm.h's GemmContext, its length
// chosen so that it takes about as long as the transfer (per-GEMM time and transfer time measured
// first). Three wall-clock times (steady_clock, from the first call of a round, issued with both
// streams idle, until the host has seen every piece of the round's work finish), each the best
// (min) of 5 rounds, the rounds interleaved (a, b, c, a, b, c, ...) in the same run:
//   compute_ms   (a) the GEMM loop alone, until rank 0's compute stream finished it
//   transfer_ms  (b) the transfer alone: rank 0's compute stream writes the tensor (a memset, the
//                producer), rank 0 sends it at once (StagedTransport::Send records an event on
//                the compute stream, its copy stream waits for it and copies to pinned memory, its
//                staging thread writes it to TCP), rank 1 receives it (StagedTransport::Recv: TCP,
//                pinned memory, a copy onto rank 1's compute stream), until that copy finished
//   together_ms  (c) both, issued as the worker's executor issues them: producer, Send (returns at
//                once), then the GEMM loop on the same compute stream (the next compute action),
//                until both the GEMMs and the receiver's copy finished
//   serial_ms    compute_ms + transfer_ms: the named baseline (no overlap at all)
//   overlap      (compute_ms + transfer_ms - together_ms) / min(compute_ms, transfer_ms):
//                1.0 the shorter one fully hidden, 0 serial, < 0 each slowed the other down
//   together/serial  together_ms / serial_ms: the ratio against the baseline (lower is better;
//                max(compute, transfer) / serial when fully hidden)
// Before the timed rounds: 2 warm-up rounds (the GEMM's plan, pinned buffers, the pools), then 2
// rounds each of 20 GEMMs and of the transfer to size the loop (overlap_report.h's CallsToMatch,
// at most 20000 GEMMs). Rank 1 computes nothing here: in a job its copy onto the device queues
// behind its own compute stream's work, which this does not measure.
// Every received tensor is copied back and checked byte for byte against the value its producer
// wrote in that round (a different value each round): a send that did not wait for its producer
// fails the bench. Every wait is bounded (60 s); a wait that runs out fails the bench naming it.
//
// Output: the devices, the versions, the bandwidth table (unchanged), then three lines: what
// was measured (one line; here folded in two)
//   overlap: staged 64MiB cuda:0 -> cuda:0 beside 330 bf16 GEMMs y = x w^T [4096x4096]
//   (0.201 ms each) on the sender's compute stream; wall clock, best of 5 rounds; baseline serial
// and overlap_report.h's column names and figures, e.g.
//     compute_ms  transfer_ms  together_ms   serial_ms  overlap  together/serial
//         66.123       67.031       70.112     133.154    0.953           0.5265
// Without a GPU it prints "no CUDA device: ..." and exits 0; any other failure exits 1 with the
// error.
//   gpu_transport_bench [max_mib]   (default 256: sizes 1, 16, 64, 256 MiB up to max_mib)
#include <cuda_runtime_api.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "common/status.h"
#include "kernels/cpu/linear.h"
#include "kernels/cuda/bf16.h"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/gemm.h"
#include "kernels/device.h"
#include "kernels/tensor.h"
#include "worker/transport/cuda_stream.h"
#include "worker/transport/local_rendezvous.h"
#include "worker/transport/nccl_transport.h"
#include "worker/transport/overlap_report.h"
#include "worker/transport/staged_transport.h"
#include "worker/transport/tcp_transport.h"

namespace pipecoord::worker {
namespace {

using Clock = std::chrono::steady_clock;
using kernels::cuda::CudaStatus;
using std::chrono::milliseconds;

constexpr milliseconds kTimeout(60000);
constexpr double kGB = 1e9;

int Iterations(size_t bytes) {
  // About 2 GiB moved per measurement, at least 5 and at most 200 messages.
  const size_t n = (size_t{2} << 30) / std::max<size_t>(bytes, 1);
  return static_cast<int>(std::min<size_t>(200, std::max<size_t>(5, n)));
}

// One rank: its device, compute stream and allocator.
struct Rank {
  int device;
  cuda::CudaStream stream;
  std::unique_ptr<cuda::StreamOrderedAllocator> allocator;
  Status Sync() const { return CudaStatus(cudaStreamSynchronize(stream.get()), "cudaStreamSynchronize"); }
};

Result<std::unique_ptr<Rank>> MakeRank(int device) {
  auto stream = cuda::CudaStream::Create(device);
  if (!stream.ok()) return stream.status();
  auto r = std::make_unique<Rank>();
  r->device = device;
  r->stream = std::move(*stream);
  r->allocator = std::make_unique<cuda::StreamOrderedAllocator>(device, r->stream.get());
  return r;
}

Result<kernels::Tensor> Filled(Rank& rank, size_t bytes) {
  auto t = kernels::Tensor::Empty(*rank.allocator, {kernels::DType::kU8, {static_cast<int64_t>(bytes)}});
  if (!t.ok()) return t.status();
  auto scope = cuda::DeviceScope::Enter(rank.device);
  if (!scope.ok()) return scope.status();
  PIPECOORD_RETURN_IF_ERROR(CudaStatus(cudaMemsetAsync(t->data(), 0x5A, bytes, rank.stream.get()), "cudaMemsetAsync"));
  PIPECOORD_RETURN_IF_ERROR(rank.Sync());
  return t;
}

double Seconds(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

// cudaMemcpyAsync device -> device on GPU 0, timed with events.
Result<double> D2dGbps(Rank& rank, size_t bytes) {
  auto src = Filled(rank, bytes);
  if (!src.ok()) return src.status();
  auto dst = Filled(rank, bytes);
  if (!dst.ok()) return dst.status();
  auto start = cuda::CudaEvent::Create(rank.device, /*timing=*/true);
  if (!start.ok()) return start.status();
  auto stop = cuda::CudaEvent::Create(rank.device, /*timing=*/true);
  if (!stop.ok()) return stop.status();
  auto scope = cuda::DeviceScope::Enter(rank.device);
  if (!scope.ok()) return scope.status();
  const int n = Iterations(bytes);
  auto copy = [&] {
    return CudaStatus(cudaMemcpyAsync(dst->data(), src->data(), bytes, cudaMemcpyDeviceToDevice, rank.stream.get()),
                      "cudaMemcpyAsync device to device");
  };
  PIPECOORD_RETURN_IF_ERROR(copy());  // warm-up
  PIPECOORD_RETURN_IF_ERROR(start->Record(rank.stream.get()));
  for (int i = 0; i < n; ++i) PIPECOORD_RETURN_IF_ERROR(copy());
  PIPECOORD_RETURN_IF_ERROR(stop->Record(rank.stream.get()));
  PIPECOORD_RETURN_IF_ERROR(stop->Synchronize());
  float ms = 0;
  PIPECOORD_RETURN_IF_ERROR(CudaStatus(cudaEventElapsedTime(&ms, start->get(), stop->get()), "cudaEventElapsedTime"));
  return static_cast<double>(bytes) * n / (ms / 1000.0) / kGB;
}

// Two TCP transports on 127.0.0.1, connected to each other.
Result<std::vector<std::unique_ptr<TcpTransport>>> TcpPair() {
  std::vector<std::unique_ptr<TcpTransport>> tcp;
  std::map<int, std::string> endpoints;
  for (int i = 0; i < 2; ++i) {
    auto t = TcpTransport::Listen("127.0.0.1", 0);
    if (!t.ok()) return t.status();
    endpoints[i] = (*t)->endpoint();
    tcp.push_back(std::move(*t));
  }
  std::vector<Status> results(2);
  std::vector<std::thread> threads;
  for (int i = 0; i < 2; ++i) threads.emplace_back([&, i] { results[i] = tcp[i]->Connect(i, endpoints, kTimeout); });
  for (auto& t : threads) t.join();
  for (const Status& s : results) PIPECOORD_RETURN_IF_ERROR(s);
  return tcp;
}

// One message at a time from rank 0 to rank 1 (both on GPU 0), until it is on the device.
Result<double> StagedGbps(std::vector<std::unique_ptr<Rank>>& ranks, std::vector<std::unique_ptr<StagedTransport>>& t,
                          size_t bytes, int step) {
  auto src = Filled(*ranks[0], bytes);
  if (!src.ok()) return src.status();
  const kernels::TensorSpec spec = src->spec();
  const int n = Iterations(bytes) / 4 + 2;  // staging is far slower: fewer messages
  auto one = [&](int i) -> Status {
    const MessageTag tag{0, 0, i, step};
    PIPECOORD_RETURN_IF_ERROR(t[0]->Send(1, tag, *src));
    auto got = t[1]->Recv(0, tag, spec, kTimeout);
    return got.status();
  };
  PIPECOORD_RETURN_IF_ERROR(one(-1));  // warm-up: pinned buffers, connections
  PIPECOORD_RETURN_IF_ERROR(ranks[1]->Sync());
  const auto t0 = Clock::now();
  for (int i = 0; i < n; ++i) PIPECOORD_RETURN_IF_ERROR(one(i));
  PIPECOORD_RETURN_IF_ERROR(ranks[1]->Sync());
  return static_cast<double>(bytes) * n / Seconds(t0) / kGB;
}

// A stream of messages from GPU 0 to GPU 1: rank 0 sends them all while rank 1 receives them.
Result<double> NcclGbps(std::vector<std::unique_ptr<Rank>>& ranks, std::vector<std::unique_ptr<NcclTransport>>& t,
                        size_t bytes, int step) {
  auto src = Filled(*ranks[0], bytes);
  if (!src.ok()) return src.status();
  const kernels::TensorSpec spec = src->spec();
  const int n = Iterations(bytes);
  auto run = [&](int first, int count) -> Result<double> {
    Status sent, received;
    const auto t0 = Clock::now();
    std::thread sender([&] {
      for (int i = first; i < first + count && sent.ok(); ++i) sent = t[0]->Send(1, {0, 0, i, step}, *src);
      if (sent.ok()) sent = t[0]->Flush(kTimeout);
    });
    for (int i = first; i < first + count && received.ok(); ++i) {
      received = t[1]->Recv(0, {0, 0, i, step}, spec, kTimeout).status();
    }
    if (received.ok()) received = ranks[1]->Sync();
    sender.join();
    PIPECOORD_RETURN_IF_ERROR(sent);
    PIPECOORD_RETURN_IF_ERROR(received);
    return static_cast<double>(bytes) * count / Seconds(t0) / kGB;
  };
  auto warm = run(-2, 2);
  if (!warm.ok()) return warm.status();
  return run(0, n);
}

// ---- Overlap: a staged send beside compute on the sender's stream (the header's (a), (b), (c)) ----

constexpr int kOverlapRounds = 5;
constexpr int kCalibrationGemms = 20;
constexpr int kMaxGemms = 20000;  // a few seconds of these GEMMs on an H100: a bound, not a target
constexpr int64_t kGemmSide = 4096;
constexpr int kOverlapStep = 1000;  // the tag's step: apart from the bandwidth table's

std::string Ms(double ms) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.3f ms", ms);
  return buf;
}

double MsSince(Clock::time_point t0, Clock::time_point t1) {
  return std::chrono::duration<double, std::milli>(t1 - t0).count();
}

// Records `event` on `stream` and polls it until the work queued there so far finished, or
// fails at `deadline` naming `what` (never an unbounded wait).
Status WaitQueued(cudaStream_t stream, cuda::CudaEvent& event, Clock::time_point deadline, const std::string& what) {
  PIPECOORD_RETURN_IF_ERROR(event.Record(stream));
  cuda::PollBackoff backoff(std::chrono::microseconds(20));
  for (;;) {
    auto done = event.Query();
    if (!done.ok()) return Status(done.status().code(), what + ": " + done.status().message());
    if (*done) return Status::Ok();
    if (Clock::now() >= deadline) {
      return Unavailable(what + ": not finished within the round's limit of " + std::to_string(kTimeout.count()) +
                         " ms (the overlap measurement waits no longer)");
    }
    backoff.Pause();
  }
}

milliseconds Left(Clock::time_point deadline) {
  return std::max(milliseconds(0), std::chrono::duration_cast<milliseconds>(deadline - Clock::now()));
}

// The two staged ranks of the bandwidth table (rank 0 sends, rank 1 receives, both on one GPU),
// a GEMM loop on rank 0's compute stream, and one message size.
class OverlapBench {
 public:
  static Result<std::unique_ptr<OverlapBench>> Create(std::vector<std::unique_ptr<Rank>>& ranks,
                                                      std::vector<std::unique_ptr<StagedTransport>>& t, size_t bytes) {
    auto b = std::unique_ptr<OverlapBench>(new OverlapBench(ranks, t, bytes));
    PIPECOORD_RETURN_IF_ERROR(b->Init());
    return b;
  }

  // One round, from both streams idle: with `transfer`, a tensor produced on rank 0's compute
  // stream and sent to rank 1 at once; then `gemms` GEMMs on rank 0's compute stream. Returns the
  // wall milliseconds until everything issued finished (the received tensor's copy onto rank 1's
  // device included), after checking the received bytes outside the timed span.
  Result<double> RoundMs(bool transfer, int gemms) {
    const Clock::time_point deadline = Clock::now() + kTimeout;
    const int round = rounds_++;
    const uint8_t fill = static_cast<uint8_t>(1 + round % 255);  // differs from the last round's
    const MessageTag tag{kActivationChannel, 0, round, kOverlapStep};
    kernels::Tensor send;
    if (transfer) {
      auto fresh = kernels::Tensor::Empty(*send_.allocator, spec_);
      if (!fresh.ok()) return fresh.status();
      send = std::move(*fresh);
    }

    // Rank 1: its thread starts (and posts the receive) before the timed span; its part ends
    // once the copy onto its device finished.
    Status received_status;
    kernels::Tensor received;
    Clock::time_point received_at{};
    std::thread receiver;
    if (transfer) {
      receiver = std::thread([&] {
        auto scope = cuda::DeviceScope::Enter(recv_.device);
        if (!scope.ok()) {
          received_status = scope.status();
          return;
        }
        auto got = t_[1]->Recv(0, tag, spec_, Left(deadline));
        if (!got.ok()) {
          received_status = got.status();
          return;
        }
        received_status = WaitQueued(recv_.stream.get(), recv_done_, deadline,
                                     "rank 1: the received tensor's copy to the device (round " +
                                         std::to_string(round) + ")");
        received_at = Clock::now();
        received = std::move(*got);
      });
    }
    auto join = [&] {
      if (receiver.joinable()) receiver.join();
    };

    const Clock::time_point start = Clock::now();
    Status sent = Issue(transfer, gemms, fill, tag, std::move(send));
    if (sent.ok()) sent = WaitQueued(send_.stream.get(), send_done_, deadline, "rank 0: its compute stream (round " +
                                                                                   std::to_string(round) + ")");
    const Clock::time_point sent_at = Clock::now();
    if (!sent.ok()) {
      t_[1]->Shutdown();  // wakes the receiver now; the bench ends with this error
      join();
      return sent;
    }
    join();
    PIPECOORD_RETURN_IF_ERROR(received_status);
    const double ms = MsSince(start, transfer ? std::max(sent_at, received_at) : sent_at);
    if (transfer) {
      // Staged sends report late failures at Flush; then the bytes: the producer's, this round's.
      PIPECOORD_RETURN_IF_ERROR(t_[0]->Flush(Left(deadline)));
      PIPECOORD_RETURN_IF_ERROR(CheckReceived(received, fill, round, deadline));
    }
    return ms;
  }

  std::string GemmShape() const {
    return "y = x w^T [" + std::to_string(kGemmSide) + "x" + std::to_string(kGemmSide) + "]";
  }

 private:
  OverlapBench(std::vector<std::unique_ptr<Rank>>& ranks, std::vector<std::unique_ptr<StagedTransport>>& t,
               size_t bytes)
      : send_(*ranks[0]), recv_(*ranks[1]), t_(t), spec_{kernels::DType::kU8, {static_cast<int64_t>(bytes)}} {}

  Status Init() {
    auto scope = cuda::DeviceScope::Enter(send_.device);
    if (!scope.ok()) return scope.status();
    for (cuda::CudaEvent* e : {&send_done_, &recv_done_, &checked_}) {
      auto event = cuda::CudaEvent::Create(send_.device);
      if (!event.ok()) return event.status();
      *e = std::move(*event);
    }
    auto check = cuda::PinnedBuffer::Allocate(spec_.bytes());
    if (!check.ok()) return check.status();
    check_ = std::move(*check);
    auto context = kernels::cuda::GemmContext::Create(kernels::cuda::GemmOptions{.stream = send_.stream.get()});
    if (!context.ok()) return context.status();
    gemm_ = std::move(*context);
    const kernels::TensorSpec square{kernels::DType::kBF16, {kGemmSide, kGemmSide}};
    for (kernels::Tensor* m : {&x_, &w_, &y_}) {
      auto fresh = kernels::Tensor::Empty(*send_.allocator, square);
      if (!fresh.ok()) return fresh.status();
      *m = std::move(*fresh);
    }
    // Every bf16 element 0x3C3C (about 0.0115): finite inputs, sums of 4096 products near 0.5.
    for (kernels::Tensor* m : {&x_, &w_}) {
      PIPECOORD_RETURN_IF_ERROR(
          CudaStatus(cudaMemsetAsync(m->data(), 0x3C, m->bytes(), send_.stream.get()), "cudaMemsetAsync(GEMM input)"));
    }
    return WaitQueued(send_.stream.get(), send_done_, Clock::now() + kTimeout, "rank 0: filling the GEMM inputs");
  }

  // Queues the round's work on rank 0, as the executor does: the producer, Send, the next compute.
  Status Issue(bool transfer, int gemms, uint8_t fill, const MessageTag& tag, kernels::Tensor send) {
    auto scope = cuda::DeviceScope::Enter(send_.device);
    if (!scope.ok()) return scope.status();
    if (transfer) {
      PIPECOORD_RETURN_IF_ERROR(CudaStatus(cudaMemsetAsync(send.data(), fill, send.bytes(), send_.stream.get()),
                                           "cudaMemsetAsync(the sent tensor: its producer)"));
      PIPECOORD_RETURN_IF_ERROR(t_[0]->Send(1, tag, std::move(send)));
    }
    const kernels::cpu::LinearDims d{kGemmSide, kGemmSide, kGemmSide};
    for (int i = 0; i < gemms; ++i) {
      PIPECOORD_RETURN_IF_ERROR(gemm_->Forward(static_cast<const __nv_bfloat16*>(x_.data()),
                                               static_cast<const __nv_bfloat16*>(w_.data()),
                                               static_cast<__nv_bfloat16*>(y_.data()), d));
    }
    return Status::Ok();
  }

  // Copies the received tensor back to the host and checks that every byte is this round's fill.
  Status CheckReceived(const kernels::Tensor& received, uint8_t fill, int round, Clock::time_point deadline) {
    if (received.spec() != spec_ || received.on_host() || received.device() != recv_.device) {
      return Internal("round " + std::to_string(round) + ": received " + kernels::ToString(received.spec()) +
                      (received.on_host() ? " on the host" : " on cuda:" + std::to_string(received.device())) +
                      ", expected " + kernels::ToString(spec_) + " on cuda:" + std::to_string(recv_.device));
    }
    auto scope = cuda::DeviceScope::Enter(recv_.device);
    if (!scope.ok()) return scope.status();
    PIPECOORD_RETURN_IF_ERROR(CudaStatus(cudaMemcpyAsync(check_.data(), received.data(), received.bytes(),
                                                         cudaMemcpyDeviceToHost, recv_.stream.get()),
                                         "cudaMemcpyAsync(received tensor to the host for the check)"));
    PIPECOORD_RETURN_IF_ERROR(WaitQueued(recv_.stream.get(), checked_, deadline, "rank 1: copying back for the check"));
    const auto* bytes = static_cast<const uint8_t*>(check_.data());
    const auto* end = bytes + received.bytes();
    const auto* bad = std::find_if(bytes, end, [fill](uint8_t b) { return b != fill; });
    if (bad != end) {
      char buf[160];
      std::snprintf(buf, sizeof(buf), "round %d: received byte %td is 0x%02X, the producer wrote 0x%02X", round,
                    bad - bytes, *bad, fill);
      return Internal(std::string(buf) + " (the send did not wait for its producer on the compute stream, or the "
                                         "bytes were damaged on the way)");
    }
    return Status::Ok();
  }

  Rank& send_;
  Rank& recv_;
  std::vector<std::unique_ptr<StagedTransport>>& t_;
  const kernels::TensorSpec spec_;
  int rounds_ = 0;
  cuda::CudaEvent send_done_, recv_done_, checked_;
  cuda::PinnedBuffer check_;
  std::unique_ptr<kernels::cuda::GemmContext> gemm_;
  kernels::Tensor x_, w_, y_;
};

// Warm-up, the GEMM loop's length, then (a), (b), (c) interleaved; prints the overlap lines.
Status MeasureOverlap(std::vector<std::unique_ptr<Rank>>& ranks, std::vector<std::unique_ptr<StagedTransport>>& t,
                      size_t bytes) {
  auto bench = OverlapBench::Create(ranks, t, bytes);
  if (!bench.ok()) return bench.status();
  OverlapBench& b = **bench;
  auto in = [](const char* step, const Status& s) { return Status(s.code(), std::string(step) + ": " + s.message()); };
  // Warm-up: the GEMM's plan, pinned buffers, the allocators' pools.
  for (int i = 0; i < 2; ++i) {
    auto warm = b.RoundMs(/*transfer=*/true, /*gemms=*/1);
    if (!warm.ok()) return in("warm-up", warm.status());
  }
  // Calibration: one GEMM's time and the transfer's, best of 2 each.
  double per_gemm = 0, transfer = 0;
  for (int i = 0; i < 2; ++i) {
    auto g = b.RoundMs(false, kCalibrationGemms);
    if (!g.ok()) return in("calibrating the GEMM loop", g.status());
    auto x = b.RoundMs(true, 0);
    if (!x.ok()) return in("calibrating the transfer", x.status());
    per_gemm = i == 0 ? *g / kCalibrationGemms : std::min(per_gemm, *g / kCalibrationGemms);
    transfer = i == 0 ? *x : std::min(transfer, *x);
  }
  auto gemms = CallsToMatch(transfer, per_gemm, kMaxGemms);
  if (!gemms.ok()) return in("sizing the GEMM loop", gemms.status());
  OverlapTimes best;
  for (int r = 0; r < kOverlapRounds; ++r) {
    auto a = b.RoundMs(false, *gemms);
    if (!a.ok()) return in("(a) compute alone", a.status());
    auto x = b.RoundMs(true, 0);
    if (!x.ok()) return in("(b) transfer alone", x.status());
    auto c = b.RoundMs(true, *gemms);
    if (!c.ok()) return in("(c) together", c.status());
    best.compute_ms = r == 0 ? *a : std::min(best.compute_ms, *a);
    best.transfer_ms = r == 0 ? *x : std::min(best.transfer_ms, *x);
    best.together_ms = r == 0 ? *c : std::min(best.together_ms, *c);
  }
  auto figures = ComputeOverlap(best);
  if (!figures.ok()) return in("figures", figures.status());
  std::printf("overlap: staged %zuMiB cuda:%d -> cuda:%d beside %d bf16 GEMMs %s (%s each) on the sender's compute "
              "stream; wall clock, best of %d rounds; baseline serial\n",
              bytes >> 20, ranks[0]->device, ranks[1]->device, *gemms, b.GemmShape().c_str(), Ms(per_gemm).c_str(),
              kOverlapRounds);
  std::printf("%s", FormatOverlapTable(*figures).c_str());
  std::fflush(stdout);
  return Status::Ok();
}

int Fail(const std::string& what, const Status& st) {
  std::fprintf(stderr, "gpu_transport_bench: %s: %s\n", what.c_str(), st.ToString().c_str());
  return 1;
}

int Main(int argc, char** argv) {
  auto devices = kernels::QueryDevices();
  if (!devices.ok()) {
    if (devices.status().code() == Code::kUnavailable) {
      std::printf("%s\n", devices.status().message().c_str());  // "no CUDA device: ..."
      return 0;
    }
    return Fail("QueryDevices", devices.status());
  }
  const size_t max_mib = argc > 1 ? std::strtoul(argv[1], nullptr, 10) : 256;
  std::vector<size_t> sizes;
  for (size_t mib : {1, 16, 64, 256}) {
    if (mib <= max_mib) sizes.push_back(mib << 20);
  }
  const bool two = devices->size() >= 2;
  std::printf("devices: %zu (cuda:0 %s%s)\n", devices->size(), (*devices)[0].name.c_str(),
              two ? (", cuda:1 " + (*devices)[1].name).c_str() : "");
  std::printf("nccl %d, cuda runtime %d, driver %d\n", kernels::NcclVersion(), kernels::CudaRuntimeVersion(),
              kernels::CudaDriverVersion());

  std::vector<std::unique_ptr<Rank>> staged_ranks;
  for (int r = 0; r < 2; ++r) {
    auto rank = MakeRank(0);
    if (!rank.ok()) return Fail("rank on cuda:0", rank.status());
    staged_ranks.push_back(std::move(*rank));
  }
  auto tcp = TcpPair();
  if (!tcp.ok()) return Fail("TCP transports", tcp.status());
  std::vector<std::unique_ptr<StagedTransport>> staged;
  for (int r = 0; r < 2; ++r) {
    staged.push_back(std::make_unique<StagedTransport>(
        *(*tcp)[r], StagedTransportOptions{staged_ranks[r]->allocator.get(), staged_ranks[r]->stream.get()}));
  }

  std::vector<std::unique_ptr<Rank>> nccl_ranks;
  std::vector<std::unique_ptr<NcclTransport>> nccl;
  LocalRendezvous rendezvous;
  if (two) {
    for (int r = 0; r < 2; ++r) {
      auto rank = MakeRank(r);
      if (!rank.ok()) return Fail("rank on cuda:" + std::to_string(r), rank.status());
      auto t = NcclTransport::Create(r, (*rank)->stream.get(), *(*rank)->allocator);
      if (!t.ok()) return Fail("NcclTransport::Create", t.status());
      nccl_ranks.push_back(std::move(*rank));
      nccl.push_back(std::move(*t));
    }
    std::vector<Status> results(2);
    std::vector<std::thread> threads;
    for (int r = 0; r < 2; ++r) {
      threads.emplace_back([&, r] { results[r] = nccl[r]->Connect(r, {1 - r}, 1, rendezvous.Fn(), kTimeout); });
    }
    for (auto& t : threads) t.join();
    for (const Status& s : results) {
      if (!s.ok()) return Fail("NcclTransport::Connect", s);
    }
  } else {
    std::printf("nccl: skipped (needs 2 GPUs: NCCL refuses two ranks on one device)\n");
  }

  std::printf("%-9s %12s %12s %11s %12s %11s\n", "size", "d2d_GB/s", "staged_GB/s", "staged/d2d", "nccl_GB/s",
              "nccl/d2d");
  int step = 0;
  for (size_t bytes : sizes) {
    auto d2d = D2dGbps(*staged_ranks[0], bytes);
    if (!d2d.ok()) return Fail("d2d_memcpy", d2d.status());
    auto st = StagedGbps(staged_ranks, staged, bytes, step);
    if (!st.ok()) return Fail("staged", st.status());
    std::string nccl_gbps = "-", nccl_ratio = "-";
    if (two) {
      auto nc = NcclGbps(nccl_ranks, nccl, bytes, step);
      if (!nc.ok()) return Fail("nccl", nc.status());
      char buf[64];
      std::snprintf(buf, sizeof(buf), "%.2f", *nc);
      nccl_gbps = buf;
      std::snprintf(buf, sizeof(buf), "%.4f", *nc / *d2d);
      nccl_ratio = buf;
    }
    std::printf("%6zuMiB %12.2f %12.2f %11.4f %12s %11s\n", bytes >> 20, *d2d, *st, *st / *d2d, nccl_gbps.c_str(),
                nccl_ratio.c_str());
    std::fflush(stdout);
    ++step;
  }
  const size_t overlap_bytes = std::clamp<size_t>(max_mib, 1, 64) << 20;
  Status overlap = MeasureOverlap(staged_ranks, staged, overlap_bytes);
  if (!overlap.ok()) return Fail("overlap", overlap);
  staged.clear();
  nccl.clear();
  return 0;
}

}  // namespace
}  // namespace pipecoord::worker

int main(int argc, char** argv) { return pipecoord::worker::Main(argc, argv); }
