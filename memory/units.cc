#include "memory/units.h"

#include <cstdio>

namespace pipecoord::memory {

std::string FormatBytes(int64_t bytes) {
  char buf[48];
  const double b = static_cast<double>(bytes);
  const int64_t mag = bytes < 0 ? -bytes : bytes;
  if (mag >= kGiB) std::snprintf(buf, sizeof buf, "%.2f GiB", b / kGiB);
  else if (mag >= kMiB) std::snprintf(buf, sizeof buf, "%.1f MiB", b / kMiB);
  else if (mag >= kKiB) std::snprintf(buf, sizeof buf, "%.1f KiB", b / kKiB);
  else std::snprintf(buf, sizeof buf, "%lld B", static_cast<long long>(bytes));
  return buf;
}

std::string FormatCount(int64_t n) {
  char buf[48];
  const double x = static_cast<double>(n);
  if (n >= 1'000'000'000) std::snprintf(buf, sizeof buf, "%.2f B", x / 1e9);
  else if (n >= 1'000'000) std::snprintf(buf, sizeof buf, "%.1f M", x / 1e6);
  else std::snprintf(buf, sizeof buf, "%lld", static_cast<long long>(n));
  return buf;
}

std::string FormatSeconds(double s) {
  char buf[48];
  if (s >= 1) std::snprintf(buf, sizeof buf, "%.2f s", s);
  else if (s >= 1e-3) std::snprintf(buf, sizeof buf, "%.1f ms", s * 1e3);
  else std::snprintf(buf, sizeof buf, "%.1f us", s * 1e6);
  return buf;
}

}  // namespace pipecoord::memory
