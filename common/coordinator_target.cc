#include "common/coordinator_target.h"

#include <arpa/inet.h>
#include <netdb.h>

#include <vector>

namespace pipecoord {

Result<CoordinatorTarget> ResolveCoordinatorTarget(const std::string& flag, const std::string& value) {
  CoordinatorTarget out;
  if (value.find(',') == std::string::npos) {
    out.target = value;
    return out;
  }
  std::vector<std::string> v4, v6;
  size_t start = 0;
  while (start <= value.size()) {
    size_t comma = value.find(',', start);
    if (comma == std::string::npos) comma = value.size();
    const std::string entry = value.substr(start, comma - start);
    start = comma + 1;
    const size_t colon = entry.rfind(':');
    const bool port_ok = colon != std::string::npos && colon > 0 && colon + 1 < entry.size() &&
                         entry.find_first_not_of("0123456789", colon + 1) == std::string::npos;
    if (!port_ok) {
      return InvalidArgument(flag + ": several coordinators are HOST:PORT,HOST:PORT,... (each a coordinator's "
                             "--listen address), got \"" + entry + "\" in \"" + value + "\"");
    }
    std::string host = entry.substr(0, colon);
    const std::string port = entry.substr(colon + 1);
    if (host.size() > 2 && host.front() == '[' && host.back() == ']') host = host.substr(1, host.size() - 2);
    addrinfo hints{};
    hints.ai_socktype = SOCK_STREAM;
    addrinfo* res = nullptr;
    const int rc = getaddrinfo(host.c_str(), port.c_str(), &hints, &res);
    if (rc != 0 || res == nullptr) {
      return InvalidArgument(flag + ": cannot resolve \"" + host + "\": " + gai_strerror(rc));
    }
    char text[INET6_ADDRSTRLEN] = {0};
    if (res->ai_family == AF_INET) {
      inet_ntop(AF_INET, &reinterpret_cast<sockaddr_in*>(res->ai_addr)->sin_addr, text, sizeof text);
      v4.push_back(std::string(text) + ":" + port);
    } else {
      inet_ntop(AF_INET6, &reinterpret_cast<sockaddr_in6*>(res->ai_addr)->sin6_addr, text, sizeof text);
      v6.push_back("[" + std::string(text) + "]:" + port);
    }
    freeaddrinfo(res);
    if (out.authority.empty()) out.authority = entry;
  }
  if (!v4.empty() && !v6.empty()) {
    return InvalidArgument(flag + ": the coordinators must all be IPv4 or all IPv6, got \"" + value + "\"");
  }
  const std::vector<std::string>& all = v4.empty() ? v6 : v4;
  out.target = v4.empty() ? "ipv6:" : "ipv4:";
  for (size_t i = 0; i < all.size(); ++i) out.target += (i ? "," : "") + all[i];
  return out;
}

}  // namespace pipecoord
