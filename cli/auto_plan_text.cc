#include "cli/auto_plan_text.h"

#include <cstdio>
#include <string>

#include "jobplan/auto_plan.h"
#include "memory/units.h"

namespace pipecoord::cli {
namespace {

std::string Bytes(uint64_t b) { return memory::FormatBytes(static_cast<int64_t>(b)); }

std::string Rate(double r) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.4f", r);
  return buf;
}

std::string Layers(const v1::StrategyChoice& c) {
  std::string out;
  for (int n : c.stage_layers()) out += (out.empty() ? "" : "/") + std::to_string(n);
  return out;
}

}  // namespace

std::string AutoPlanText(const v1::AutoPlanReport& r) {
  const v1::StrategyChoice& c = r.chosen();
  std::string out = "auto      " + jobplan::DescribeStrategy(c) + ", layers " + Layers(c) + "\n";
  out += "          predicted " + memory::FormatSeconds(c.predicted_step_s()) + " per step, bubble " +
         Rate(c.predicted_bubble_rate()) + ", peak " + Bytes(c.peak_bytes()) + " (rank " +
         std::to_string(c.tightest_rank()) + ")\n";
  out += "planned   for " + std::to_string(r.workers()) + " free " + r.device_kind() + " worker(s), " +
         (r.worker_memory_bytes() == 0 ? std::string("memory not reported (not checked)")
                                       : "the smallest reports " + Bytes(r.worker_memory_bytes())) +
         "\n";
  out += "searched  " + std::to_string(r.candidates()) + " strategies: " + std::to_string(r.feasible()) +
         " feasible, " + std::to_string(r.pruned_for_memory()) + " pruned for memory\n";
  for (const v1::StrategyChoice& n : r.next_best()) {
    out += "next best " + jobplan::DescribeStrategy(n) + ": " + memory::FormatSeconds(n.predicted_step_s()) +
           ", bubble " + Rate(n.predicted_bubble_rate()) + ", " + Bytes(n.peak_bytes()) + "\n";
  }
  for (const std::string& p : r.pruned()) out += "pruned    " + p + "\n";
  return out;
}

}  // namespace pipecoord::cli
