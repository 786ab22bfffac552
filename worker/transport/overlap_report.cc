#include "worker/transport/overlap_report.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

namespace pipecoord::worker {
namespace {

Status CheckPositive(const char* name, double value) {
  if (std::isfinite(value) && value > 0) return Status::Ok();
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%g", value);
  return InvalidArgument(std::string(name) + ": must be a positive finite number of milliseconds, got " + buf);
}

}  // namespace

Result<OverlapFigures> ComputeOverlap(const OverlapTimes& times) {
  PIPECOORD_RETURN_IF_ERROR(CheckPositive("compute_ms", times.compute_ms));
  PIPECOORD_RETURN_IF_ERROR(CheckPositive("transfer_ms", times.transfer_ms));
  PIPECOORD_RETURN_IF_ERROR(CheckPositive("together_ms", times.together_ms));
  OverlapFigures f;
  f.times = times;
  f.serial_ms = times.compute_ms + times.transfer_ms;
  f.overlap = (f.serial_ms - times.together_ms) / std::min(times.compute_ms, times.transfer_ms);
  f.together_over_serial = times.together_ms / f.serial_ms;
  return f;
}

Result<int> CallsToMatch(double target_ms, double per_call_ms, int max_calls) {
  PIPECOORD_RETURN_IF_ERROR(CheckPositive("target_ms", target_ms));
  PIPECOORD_RETURN_IF_ERROR(CheckPositive("per_call_ms", per_call_ms));
  if (max_calls < 1) return InvalidArgument("max_calls: must be >= 1, got " + std::to_string(max_calls));
  const double calls = std::round(target_ms / per_call_ms);
  if (calls >= max_calls) return max_calls;
  return std::max(1, static_cast<int>(calls));
}

std::string FormatOverlapTable(const OverlapFigures& f) {
  char buf[256];
  std::string out;
  std::snprintf(buf, sizeof(buf), "  %10s  %11s  %11s  %10s  %7s  %15s\n", "compute_ms", "transfer_ms", "together_ms",
                "serial_ms", "overlap", "together/serial");
  out += buf;
  std::snprintf(buf, sizeof(buf), "  %10.3f  %11.3f  %11.3f  %10.3f  %7.3f  %15.4f\n", f.times.compute_ms,
                f.times.transfer_ms, f.times.together_ms, f.serial_ms, f.overlap, f.together_over_serial);
  out += buf;
  return out;
}

}  // namespace pipecoord::worker
