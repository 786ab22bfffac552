// gpu_transport_bench: how fast the GPU transports move a device tensor, against the device's
// own copy bandwidth.
//
//   d2d_memcpy  cudaMemcpyAsync device -> device on GPU 0: the baseline every ratio divides by
//   staged      StagedTransport over TCP on 127.0.0.1, both ranks on GPU 0 (Send + Recv, one
//               message at a time, until the received tensor is on the device)
//   nccl        NcclTransport from GPU 0 to GPU 1 (a stream of messages), when two GPUs are visible
//
// Bandwidth is payload bytes per second (1 GB = 1e9 bytes). Without a GPU it prints
// "no CUDA device: ..." and exits 0; any other failure exits 1 with the error.
//   gpu_transport_bench [max_mib]   (default 256: sizes 1, 16, 64, 256 MiB up to max_mib)
#include <cuda_runtime_api.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "common/status.h"
#include "kernels/cuda/cuda_check.h"
#include "kernels/device.h"
#include "kernels/tensor.h"
#include "worker/transport/cuda_stream.h"
#include "worker/transport/local_rendezvous.h"
#include "worker/transport/nccl_transport.h"
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
  staged.clear();
  nccl.clear();
  return 0;
}

}  // namespace
}  // namespace pipecoord::worker

int main(int argc, char** argv) { return pipecoord::worker::Main(argc, argv); }
