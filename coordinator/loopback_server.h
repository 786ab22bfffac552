// LoopbackServer: a coordinator served over real gRPC inside this process, on a free loopback port,
// with its lease ticker running: what benchmarks and load tests drive. Plaintext, no auth.
// Destroying it stops the ticker, wakes every waiting stream and shuts the server down.
#ifndef PIPECOORD_COORDINATOR_LOOPBACK_SERVER_H_
#define PIPECOORD_COORDINATOR_LOOPBACK_SERVER_H_

#include <grpcpp/grpcpp.h>

#include <atomic>
#include <memory>
#include <string>
#include <thread>

#include "common/status.h"
#include "coordinator/coordinator.h"
#include "coordinator/service.h"

namespace pipecoord::coordinator {

class LoopbackServer {
 public:
  // UNAVAILABLE when no loopback port can be bound.
  static Result<std::unique_ptr<LoopbackServer>> Start(CoordinatorOptions options);
  ~LoopbackServer();
  LoopbackServer(const LoopbackServer&) = delete;
  LoopbackServer& operator=(const LoopbackServer&) = delete;

  Coordinator& core() { return core_; }
  const std::string& address() const { return address_; }  // "127.0.0.1:PORT"

 private:
  explicit LoopbackServer(CoordinatorOptions options);

  Coordinator core_;
  JobServiceImpl jobs_;
  WorkerServiceImpl workers_;
  std::unique_ptr<grpc::Server> server_;
  std::string address_;
  std::atomic<bool> stop_{false};
  std::thread ticker_;
};

}  // namespace pipecoord::coordinator

#endif  // PIPECOORD_COORDINATOR_LOOPBACK_SERVER_H_
