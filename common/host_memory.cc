#include "common/host_memory.h"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <fstream>
#include <sstream>

namespace pipecoord {
namespace {

// A cgroup limit file: a byte count, or "max" (v2) / a huge number (v1's "no limit").
uint64_t ReadLimit(const std::string& path) {
  std::ifstream in(path);
  std::string text;
  if (!(in >> text) || text == "max") return 0;
  uint64_t v = 0;
  auto [p, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec != std::errc() || p != text.data() + text.size()) return 0;
  return v >= (uint64_t{1} << 60) ? 0 : v;  // v1 writes 2^63 rounded to pages for "none"
}

uint64_t ReadMemTotal(const std::string& path) {
  std::ifstream in(path);
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("MemTotal:", 0) != 0) continue;
    std::istringstream fields(line.substr(9));
    uint64_t kib = 0;
    if (fields >> kib) return kib * 1024;
  }
  return 0;
}

}  // namespace

uint64_t HostMemoryLimitBytes(const std::string& root) {
  uint64_t best = ReadMemTotal(root + "/proc/meminfo");
  for (const char* path : {"/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes"}) {
    const uint64_t limit = ReadLimit(root + path);
    if (limit > 0) best = best == 0 ? limit : std::min(best, limit);
  }
  return best;
}

Result<uint64_t> ParseByteSize(std::string_view text, const std::string& field) {
  auto bad = [&] {
    return InvalidArgument(field + ": must be a byte count such as 8GiB, 512MiB or 1048576, got \"" +
                           std::string(text) + "\"");
  };
  size_t digits = 0;
  while (digits < text.size() && std::isdigit(static_cast<unsigned char>(text[digits]))) ++digits;
  if (digits == 0) return bad();
  uint64_t n = 0;
  auto [p, ec] = std::from_chars(text.data(), text.data() + digits, n);
  if (ec != std::errc() || p != text.data() + digits) return bad();
  const std::string_view unit = text.substr(digits);
  int shift = 0;
  if (unit.empty() || unit == "B") shift = 0;
  else if (unit == "KiB" || unit == "K") shift = 10;
  else if (unit == "MiB" || unit == "M") shift = 20;
  else if (unit == "GiB" || unit == "G") shift = 30;
  else if (unit == "TiB" || unit == "T") shift = 40;
  else return bad();
  if (n == 0 || n > (uint64_t{1} << (50 - shift))) {
    return InvalidArgument(field + ": must be between 1 B and 1 PiB, got \"" + std::string(text) + "\"");
  }
  return n << shift;
}

}  // namespace pipecoord
