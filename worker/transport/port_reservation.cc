#include "worker/transport/port_reservation.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <utility>

#include "worker/transport/endpoint.h"

namespace pipecoord::worker {

Result<PortReservation> PortReservation::Bind(const std::string& host, int port) {
  sockaddr_storage addr{};
  socklen_t len = 0;
  int family = AF_INET;
  auto* v4 = reinterpret_cast<sockaddr_in*>(&addr);
  auto* v6 = reinterpret_cast<sockaddr_in6*>(&addr);
  if (inet_pton(AF_INET, host.c_str(), &v4->sin_addr) == 1) {
    v4->sin_family = AF_INET;
    v4->sin_port = htons(static_cast<uint16_t>(port));
    len = sizeof(sockaddr_in);
  } else if (inet_pton(AF_INET6, host.c_str(), &v6->sin6_addr) == 1) {
    family = AF_INET6;
    v6->sin6_family = AF_INET6;
    v6->sin6_port = htons(static_cast<uint16_t>(port));
    len = sizeof(sockaddr_in6);
  } else {
    return InvalidArgument("reserving a port: \"" + host + "\" is not an IP address");
  }
  PortReservation r;
  r.fd_ = ::socket(family, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (r.fd_ < 0) return Unavailable("reserving " + FormatHostPort(host, port) + ": socket: " + std::strerror(errno));
  // Taking a given port back after a job listened there: its accepted connections, closed by
  // this side first, sit in TIME_WAIT on it for a minute and would refuse a plain bind. Binds to
  // port 0 still never get a port bound this way (the kernel's choice skips any bound port).
  const int reuse = 1;
  if (port != 0 && ::setsockopt(r.fd_, SOL_SOCKET, SO_REUSEADDR, &reuse, sizeof reuse) != 0) {
    return Unavailable("reserving " + FormatHostPort(host, port) + ": SO_REUSEADDR: " + std::strerror(errno));
  }
  if (::bind(r.fd_, reinterpret_cast<sockaddr*>(&addr), len) != 0) {
    return Unavailable("reserving " + FormatHostPort(host, port) + ": " + std::strerror(errno));
  }
  if (::getsockname(r.fd_, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    return Unavailable("reserving " + FormatHostPort(host, port) + ": getsockname: " + std::strerror(errno));
  }
  r.port_ = ntohs(family == AF_INET ? v4->sin_port : v6->sin6_port);
  return r;
}

PortReservation::PortReservation(PortReservation&& o) noexcept
    : fd_(std::exchange(o.fd_, -1)), port_(o.port_) {}

PortReservation& PortReservation::operator=(PortReservation&& o) noexcept {
  if (this != &o) {
    Release();
    fd_ = std::exchange(o.fd_, -1);
    port_ = o.port_;
  }
  return *this;
}

PortReservation::~PortReservation() { Release(); }

void PortReservation::Release() {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
}

}  // namespace pipecoord::worker
