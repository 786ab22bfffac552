// PortReservation: a TCP port held for this process without accepting connections: a socket
// bound to HOST:PORT and never listening. No other process is given the port (not even by a bind
// to port 0, which two workers started at once on one host otherwise can be), while dialers get
// "connection refused" at once, as from a closed port. A worker holds its data port this way
// between jobs and releases it just before a job's transport listens there.
//
// Not thread-safe; movable. Errors name the address and the system's reason.
#ifndef PIPECOORD_WORKER_TRANSPORT_PORT_RESERVATION_H_
#define PIPECOORD_WORKER_TRANSPORT_PORT_RESERVATION_H_

#include <memory>
#include <string>

#include "common/status.h"

namespace pipecoord::worker {

class PortReservation {
 public:
  // Binds HOST (an IP address) and PORT (0: a free one the system picks). A given PORT is bound
  // with SO_REUSEADDR, so a worker takes its data port back while the last job's connections
  // linger in TIME_WAIT there; binds to port 0 and plain binds still never get it, though a
  // listener asking for this very port with SO_REUSEADDR could. UNAVAILABLE naming HOST:PORT
  // when the port is taken, INVALID_ARGUMENT when HOST is not an IP address.
  static Result<PortReservation> Bind(const std::string& host, int port);

  PortReservation(PortReservation&&) noexcept;
  PortReservation& operator=(PortReservation&&) noexcept;
  ~PortReservation();

  int port() const { return port_; }
  // Frees the port (idempotent).
  void Release();

 private:
  PortReservation() = default;
  int fd_ = -1;
  int port_ = 0;
};

}  // namespace pipecoord::worker

#endif  // PIPECOORD_WORKER_TRANSPORT_PORT_RESERVATION_H_
