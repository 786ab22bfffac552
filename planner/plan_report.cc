#include "planner/plan_report.h"

#include <cstdio>

#include "common/json_writer.h"
#include "memory/units.h"

namespace pipecoord::planner {
namespace {

using memory::FormatBytes;
using memory::FormatSeconds;

std::string Pad(std::string s, size_t w) {
  if (s.size() < w) s.resize(w, ' ');
  return s;
}
std::string LPad(const std::string& s, size_t w) { return s.size() < w ? std::string(w - s.size(), ' ') + s : s; }
std::string I(int64_t v) { return std::to_string(v); }

}  // namespace

std::string PlanText(const memory::ModelSpec& m, const ClusterSpec& c, const SearchSpace& s, const PlanResult& r) {
  std::string o;
  char line[512];
  std::snprintf(line, sizeof line,
                "plan for %s on %d GPUs (%s each, %s reserved; %d per node), global batch %d x %lld "
                "tokens, %s, %s\n",
                m.name.c_str(), c.gpus, FormatBytes(c.gpu_memory_bytes).c_str(),
                FormatBytes(c.reserved_bytes).c_str(), c.gpus_per_node, s.global_batch,
                static_cast<long long>(m.seq_len), memory::DtypePolicyName(s.dtype),
                memory::OptimizerName(s.optimizer));
  o += line;
  std::snprintf(line, sizeof line,
                "searched %lld candidates: %lld fit, %lld pruned; %lld schedule shapes simulated "
                "(%lld reused from the cache)\n\n",
                static_cast<long long>(r.candidates), static_cast<long long>(r.feasible),
                static_cast<long long>(r.candidates - r.feasible), static_cast<long long>(r.schedule_profiles),
                static_cast<long long>(r.schedule_cache_hits));
  o += line;
  if (r.top.empty()) {
    o += "no strategy fits: see the reasons below\n";
  } else {
    o += Pad("#", 4) + LPad("dp", 5) + LPad("tp", 6) + LPad("pp", 4) + LPad("vpp", 4) + "  " + Pad("schedule", 12) +
         LPad("mb", 4) + LPad("m", 6) + LPad("zero", 5) + "  " + Pad("recompute", 10) + LPad("step", 10) +
         LPad("tokens/s", 11) + LPad("MFU", 6) + LPad("peak", 12) + "\n";
    for (size_t i = 0; i < r.top.size(); ++i) {
      const Candidate& k = r.top[i];
      const StrategyShape& sh = k.shape;
      char tok[32], mfu[16];
      std::snprintf(tok, sizeof tok, "%.0f", k.tokens_per_s);
      std::snprintf(mfu, sizeof mfu, "%.1f%%", 100 * k.mfu);
      o += Pad(I(i + 1), 4) + LPad(I(sh.dp), 5) + LPad(I(sh.tp) + (sh.sp ? "+sp" : ""), 6) + LPad(I(sh.pp), 4) +
           LPad(I(sh.vpp), 4) + "  " + Pad(k.schedule, 12) + LPad(I(sh.micro_batch), 4) + LPad(I(sh.microbatches), 6) +
           LPad(I(sh.zero), 5) + "  " + Pad(memory::RecomputeName(sh.recompute), 10) +
           LPad(FormatSeconds(k.time.total_s), 10) + LPad(tok, 11) + LPad(mfu, 6) + LPad(FormatBytes(k.peak_bytes), 12) +
           "\n";
    }
    o += "\nmemory of the tightest rank (bytes per GPU) and where the step time goes\n";
    o += Pad("#", 4) + LPad("rank", 5) + LPad("weights", 11) + LPad("grads", 11) + LPad("optimizer", 11) +
         LPad("activations", 12) + LPad("transient", 11) + " |" + LPad("compute", 10) + LPad("tp comm", 10) +
         LPad("bubble", 10) + LPad("(rate)", 8) + LPad("pp comm", 10) + LPad("dp comm", 10) + LPad("optimizer", 10) + "\n";
    for (size_t i = 0; i < r.top.size(); ++i) {
      const Candidate& k = r.top[i];
      char rate[16];
      std::snprintf(rate, sizeof rate, "%.1f%%", 100 * k.shape.bubble_rate);
      o += Pad(I(i + 1), 4) + LPad(I(k.tightest_rank), 5) + LPad(FormatBytes(k.params_bytes), 11) +
           LPad(FormatBytes(k.grads_bytes), 11) + LPad(FormatBytes(k.optimizer_bytes), 11) +
           LPad(FormatBytes(k.activations_bytes), 12) + LPad(FormatBytes(k.transient_bytes), 11) + " |" +
           LPad(FormatSeconds(k.time.compute_s), 10) + LPad(FormatSeconds(k.time.tp_comm_s), 10) +
           LPad(FormatSeconds(k.time.bubble_s), 10) + LPad(rate, 8) + LPad(FormatSeconds(k.time.pp_comm_s), 10) +
           LPad(FormatSeconds(k.time.dp_comm_s), 10) + LPad(FormatSeconds(k.time.optimizer_s), 10) + "\n";
    }
  }
  o += "\npruned (candidates, rule, one example)\n";
  for (const PrunedReason& p : r.pruned) {
    o += LPad(I(p.count), 9) + "  " + p.reason + "\n           e.g. " + p.example + "\n";
  }
  return o;
}

std::string PlanJson(const memory::ModelSpec& m, const ClusterSpec& c, const SearchSpace& s, const PlanResult& r) {
  std::string o = "{\"model\": " + JsonString(m.name) + ", \"gpus\": " + I(c.gpus) + ", \"gpu_memory_bytes\": " +
                  I(c.gpu_memory_bytes) + ", \"reserved_bytes\": " + I(c.reserved_bytes) +
                  ", \"global_batch\": " + I(s.global_batch) + ", \"seq_len\": " + I(m.seq_len) + ",\n";
  o += " \"candidates\": " + I(r.candidates) + ", \"feasible\": " + I(r.feasible) + ", \"schedule_profiles\": " +
       I(r.schedule_profiles) + ", \"schedule_cache_hits\": " + I(r.schedule_cache_hits) + ",\n \"top\": [";
  for (size_t i = 0; i < r.top.size(); ++i) {
    const Candidate& k = r.top[i];
    const StrategyShape& sh = k.shape;
    o += std::string(i ? ",\n  " : "\n  ") + "{\"rank\": " + I(i + 1) + ", \"schedule\": " + JsonString(k.schedule) +
         ", \"dp\": " + I(sh.dp) + ", \"tp\": " + I(sh.tp) + ", \"sp\": " + (sh.sp ? "true" : "false") +
         ", \"pp\": " + I(sh.pp) + ", \"vpp\": " + I(sh.vpp) + ", \"micro_batch\": " + I(sh.micro_batch) +
         ", \"microbatches\": " + I(sh.microbatches) + ", \"zero\": " + I(sh.zero) + ", \"recompute\": \"" +
         memory::RecomputeName(sh.recompute) + "\",\n   \"memory\": {\"peak_bytes\": " + I(k.peak_bytes) +
         ", \"tightest_rank\": " + I(k.tightest_rank) + ", \"params_bytes\": " + I(k.params_bytes) +
         ", \"grads_bytes\": " + I(k.grads_bytes) + ", \"optimizer_bytes\": " + I(k.optimizer_bytes) +
         ", \"activations_bytes\": " + I(k.activations_bytes) + ", \"transient_bytes\": " + I(k.transient_bytes) +
         "},\n   \"time\": {\"step_s\": " + JsonNumber(k.time.total_s) + ", \"compute_s\": " +
         JsonNumber(k.time.compute_s) + ", \"tp_comm_s\": " + JsonNumber(k.time.tp_comm_s) + ", \"bubble_s\": " +
         JsonNumber(k.time.bubble_s) + ", \"bubble_rate\": " + JsonNumber(sh.bubble_rate) + ", \"pp_comm_s\": " +
         JsonNumber(k.time.pp_comm_s) + ", \"dp_comm_s\": " + JsonNumber(k.time.dp_comm_s) + ", \"optimizer_s\": " +
         JsonNumber(k.time.optimizer_s) + "},\n   \"tokens_per_s\": " + JsonNumber(k.tokens_per_s) +
         ", \"mfu\": " + JsonNumber(k.mfu) + "}";
  }
  o += "],\n \"pruned\": [";
  for (size_t i = 0; i < r.pruned.size(); ++i) {
    const PrunedReason& p = r.pruned[i];
    o += std::string(i ? ",\n  " : "\n  ") + "{\"reason\": " + JsonString(p.reason) + ", \"count\": " + I(p.count) +
         ", \"example\": " + JsonString(p.example) + "}";
  }
  return o + "]}\n";
}

}  // namespace pipecoord::planner
