#include "memory/liveness_report.h"

#include "common/json_writer.h"
#include "memory/block_program.h"
#include "memory/units.h"

namespace pipecoord::memory {
namespace {

std::string Pad(std::string s, size_t w) {
  if (s.size() < w) s.resize(w, ' ');
  return s;
}
std::string LPad(const std::string& s, size_t w) { return s.size() < w ? std::string(w - s.size(), ' ') + s : s; }
std::string I(int64_t v) { return std::to_string(v); }

}  // namespace

std::string LivenessText(const LivenessResult& r) {
  std::string o = Pad("op", 44) + LPad("before", 14) + LPad("during", 14) + LPad("after", 14) + "\n";
  for (size_t i = 0; i < r.ops.size(); ++i) {
    const OpLiveness& op = r.ops[i];
    o += Pad(op.name + (static_cast<int>(i) == r.peak_op ? "  <- peak" : ""), 44) + LPad(FormatBytes(op.before), 14) +
         LPad(FormatBytes(op.during), 14) + LPad(FormatBytes(op.after), 14) + "\n";
  }
  o += "persistable " + FormatBytes(r.persistable_bytes) + ", inputs of the programs " + FormatBytes(r.input_bytes) +
       "; peak " + FormatBytes(r.peak_bytes);
  if (r.peak_op >= 0) o += " during " + r.ops[r.peak_op].name;
  return o + "\n";
}

std::string LivenessJson(const LivenessResult& r) {
  std::string o = "{\"persistable_bytes\": " + I(r.persistable_bytes) + ", \"input_bytes\": " + I(r.input_bytes) +
                  ", \"peak_bytes\": " + I(r.peak_bytes) + ", \"peak_op\": " + I(r.peak_op) +
                  ", \"peak_op_name\": " + JsonString(r.peak_op >= 0 ? r.ops[r.peak_op].name : "") +
                  ",\n  \"program_end\": [";
  for (size_t i = 0; i < r.program_end.size(); ++i) o += (i ? ", " : "") + I(r.program_end[i]);
  o += "],\n  \"ops\": [";
  for (size_t i = 0; i < r.ops.size(); ++i) {
    const OpLiveness& op = r.ops[i];
    o += std::string(i ? ",\n    " : "\n    ") + "{\"name\": " + JsonString(op.name) + ", \"before\": " + I(op.before) +
         ", \"during\": " + I(op.during) + ", \"after\": " + I(op.after) + "}";
  }
  return o + "]}";
}

Result<BlockComparison> CompareBlock(const ModelSpec& m, const TrainingSpec& t) {
  auto am = ResolveActivations(m, t);
  if (!am.ok()) return am.status();
  auto set = TransformerBlockProgram(m, t);
  if (!set.ok()) return set.status();
  auto live = SimulateLiveness(*set);
  if (!live.ok()) return live.status();
  // Handed between blocks, not this block's activations: its output and the gradient it passes
  // back (kept), and the incoming gradient (an input of the set, live from the start).
  const int64_t handed = BlockBoundaryBytes(m, t);
  const int64_t base = live->persistable_bytes;
  BlockComparison c;
  c.analytic_forward = am->block.stored_bytes;
  c.analytic_w = am->block.w_bytes;
  c.analytic_peak = am->block.stored_bytes + am->block.recompute_bytes;
  c.live_forward = live->program_end.front() - base - 2 * handed;
  const size_t b_index = live->program_end.size() - 2;  // backward_input
  c.live_w = live->program_end[b_index] - base - 2 * handed;
  c.live_peak = live->peak_bytes - base - handed;
  c.live_peak_op = live->ops[live->peak_op].name;
  return c;
}

std::string BlockComparisonText(const BlockComparison& c) {
  std::string o = "one block, one micro-batch: analytic recipe vs op-level liveness (beyond weights and the\n"
                  "tensors handed between blocks)\n";
  o += Pad("", 34) + LPad("analytic", 14) + LPad("liveness", 14) + "\n";
  o += Pad("kept by forward for backward", 34) + LPad(FormatBytes(c.analytic_forward), 14) +
       LPad(FormatBytes(c.live_forward), 14) + "\n";
  o += Pad("kept by B for W", 34) + LPad(FormatBytes(c.analytic_w), 14) + LPad(FormatBytes(c.live_w), 14) + "\n";
  o += Pad("peak while the block runs", 34) + LPad(FormatBytes(c.analytic_peak), 14) +
       LPad(FormatBytes(c.live_peak), 14) + "  (liveness peak during " + c.live_peak_op + ")\n";
  return o;
}

std::string BlockComparisonJson(const BlockComparison& c) {
  return "{\"analytic\": {\"forward_keeps\": " + I(c.analytic_forward) + ", \"b_keeps_for_w\": " + I(c.analytic_w) +
         ", \"peak\": " + I(c.analytic_peak) + "}, \"liveness\": {\"forward_keeps\": " + I(c.live_forward) +
         ", \"b_keeps_for_w\": " + I(c.live_w) + ", \"peak\": " + I(c.live_peak) + ", \"peak_op\": " +
         JsonString(c.live_peak_op) + "}}";
}

}  // namespace pipecoord::memory
