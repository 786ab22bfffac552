// Endpoint: "host:port" strings as workers publish them ("127.0.0.1:4000", "[::1]:4000",
// "worker-3.pipecoord:4000").
#ifndef PIPECOORD_WORKER_TRANSPORT_ENDPOINT_H_
#define PIPECOORD_WORKER_TRANSPORT_ENDPOINT_H_

#include <string>
#include <string_view>

#include "common/status.h"

namespace pipecoord::worker {

struct HostPort {
  std::string host;  // without brackets
  int port = 0;      // 0..65535
};

// INVALID_ARGUMENT naming the text when it is not HOST:PORT with a port in 0..65535.
Result<HostPort> ParseHostPort(std::string_view text);

// "host:port", with brackets around an IPv6 address.
std::string FormatHostPort(const std::string& host, int port);

}  // namespace pipecoord::worker

#endif  // PIPECOORD_WORKER_TRANSPORT_ENDPOINT_H_
