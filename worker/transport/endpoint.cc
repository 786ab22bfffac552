#include "worker/transport/endpoint.h"

#include <charconv>

namespace pipecoord::worker {

Result<HostPort> ParseHostPort(std::string_view text) {
  auto bad = [&](const std::string& why) {
    return InvalidArgument("endpoint '" + std::string(text) + "' is not HOST:PORT: " + why);
  };
  const size_t colon = text.rfind(':');
  if (colon == std::string_view::npos) return bad("no ':'");
  std::string_view host = text.substr(0, colon);
  std::string_view port = text.substr(colon + 1);
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') {
    host = host.substr(1, host.size() - 2);
  } else if (host.find(':') != std::string_view::npos) {
    return bad("an IPv6 address needs brackets, as in [::1]:4000");
  }
  if (host.empty()) return bad("empty host");
  int value = -1;
  auto [end, ec] = std::from_chars(port.data(), port.data() + port.size(), value);
  if (port.empty() || ec != std::errc() || end != port.data() + port.size() || value < 0 ||
      value > 65535) {
    return bad("port must be a number in 0..65535");
  }
  return HostPort{std::string(host), value};
}

std::string FormatHostPort(const std::string& host, int port) {
  if (host.find(':') != std::string::npos) return "[" + host + "]:" + std::to_string(port);
  return host + ":" + std::to_string(port);
}

}  // namespace pipecoord::worker
