#include "coordinator/health/event_text.h"

#include <cstdarg>
#include <cstdio>

namespace pipecoord::coordinator::health {

std::string ActionName(const v1::Action& a) {
  std::string s = std::to_string(a.stage()) + v1::Op_Name(a.op());
  if (a.microbatch() >= 0 && a.op() != v1::PROBE && a.op() != v1::OPT) s += std::to_string(a.microbatch());
  return s;
}

std::string Format(const char* fmt, ...) {
  va_list args, again;
  va_start(args, fmt);
  va_copy(again, args);
  const int n = std::vsnprintf(nullptr, 0, fmt, args);
  va_end(args);
  std::string out(n > 0 ? n : 0, '\0');
  std::vsnprintf(out.data(), out.size() + 1, fmt, again);
  va_end(again);
  return out;
}

std::string MiB(uint64_t bytes) { return Format("%.2f MiB", static_cast<double>(bytes) / (1 << 20)); }

v1::HealthEvent MakeEvent(v1::EventKind kind, int g, const RankLayout& layout, int step, std::string message) {
  v1::HealthEvent e;
  e.set_kind(kind);
  e.set_rank(g < 0 ? -1 : layout.PipelineRank(g));
  e.set_dp_rank(g < 0 ? -1 : layout.DataRank(g));
  e.set_tp_rank(g < 0 ? -1 : layout.TensorRank(g));
  e.set_step(step);
  e.set_message(std::move(message));
  return e;
}

}  // namespace pipecoord::coordinator::health
