// Test helpers: a fully connected set of TcpTransports on 127.0.0.1.
#ifndef PIPECOORD_WORKER_TRANSPORT_TEST_UTIL_H_
#define PIPECOORD_WORKER_TRANSPORT_TEST_UTIL_H_

#include <chrono>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "common/status.h"
#include "worker/transport/tcp_transport.h"

namespace pipecoord::worker::testing {

// `n` transports, rank i at index i, each linked to all the others (Connect runs on one thread
// per rank, as separate processes would). The first error is returned.
inline Result<std::vector<std::unique_ptr<TcpTransport>>> MakeMesh(
    int n, const TcpTransportOptions& options = {},
    std::chrono::milliseconds timeout = std::chrono::milliseconds(10000)) {
  std::vector<std::unique_ptr<TcpTransport>> mesh;
  std::map<int, std::string> endpoints;
  for (int i = 0; i < n; ++i) {
    auto t = TcpTransport::Listen("127.0.0.1", 0, options);
    if (!t.ok()) return t.status();
    endpoints[i] = (*t)->endpoint();
    mesh.push_back(std::move(*t));
  }
  std::vector<Status> results(n);
  std::vector<std::thread> threads;
  for (int i = 0; i < n; ++i) {
    threads.emplace_back([&, i] { results[i] = mesh[i]->Connect(i, endpoints, timeout); });
  }
  for (auto& t : threads) t.join();
  for (const Status& s : results) {
    if (!s.ok()) return s;
  }
  return mesh;
}

// Whatever arrived for `tag` from `peer`, as floats (the tests send f32 payloads).
inline Result<std::vector<float>> RecvAll(TcpTransport& t, int peer, const MessageTag& tag,
                                          std::chrono::milliseconds timeout) {
  auto bytes = t.RecvBytes(peer, tag, timeout);
  if (!bytes.ok()) return bytes.status();
  auto floats = bytes->Viewed({kernels::DType::kF32, {bytes->numel() / 4}});
  if (!floats.ok()) return floats.status();
  return floats->ToFloats();
}

// The elapsed time of fn, in milliseconds.
template <typename Fn>
double ElapsedMs(Fn&& fn) {
  const auto t0 = std::chrono::steady_clock::now();
  fn();
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace pipecoord::worker::testing

#endif  // PIPECOORD_WORKER_TRANSPORT_TEST_UTIL_H_
