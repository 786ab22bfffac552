// StartHealthPort: a second gRPC server on its own address that serves only grpc.health.v1, in
// plaintext (coordinator --health-listen). Kubernetes' grpc probes cannot speak TLS, so when the
// main port serves TLS the probes call this one. It answers SERVING while the coordinator runs;
// nothing else (no JobService, WorkerService or reflection) is reachable through it.
#ifndef PIPECOORD_COORDINATOR_HEALTH_PORT_H_
#define PIPECOORD_COORDINATOR_HEALTH_PORT_H_

#include <grpcpp/server.h>

#include <memory>
#include <string>

#include "common/status.h"

namespace pipecoord::coordinator {

// `address`: HOST:PORT, port 0 picks a free one (written to *port). UNAVAILABLE when it cannot
// be bound. At most one per process (the server shares one static fallback service).
Result<std::unique_ptr<grpc::Server>> StartHealthPort(const std::string& address, int* port);

}  // namespace pipecoord::coordinator

#endif  // PIPECOORD_COORDINATOR_HEALTH_PORT_H_
