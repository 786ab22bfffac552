#include "memory/report.h"

#include <cstdio>
#include <map>
#include <vector>

#include "common/json_writer.h"
#include "memory/units.h"

namespace pipecoord::memory {
namespace {

std::string ShapeText(const std::vector<int64_t>& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

std::string Pad(std::string s, size_t width) {
  if (s.size() < width) s.resize(width, ' ');
  return s;
}

std::string LPad(const std::string& s, size_t width) {
  return s.size() < width ? std::string(width - s.size(), ' ') + s : s;
}

std::string Bool(bool b) { return b ? "true" : "false"; }
std::string Int(int64_t v) { return std::to_string(v); }

std::string TensorsJson(const std::vector<ResolvedTensor>& ts, const std::vector<ResolvedTensor>* kept) {
  std::string out = "[";
  for (size_t i = 0; i < ts.size(); ++i) {
    const ResolvedTensor& t = ts[i];
    std::string shape = "[";
    for (size_t d = 0; d < t.shape.size(); ++d) shape += (d ? ", " : "") + Int(t.shape[d]);
    shape += "]";
    out += std::string(i ? ",\n      " : "\n      ") + "{\"name\": " + JsonString(t.name) +
           ", \"group\": " + JsonString(t.group) + ", \"shape\": " + shape +
           ", \"dtype\": " + JsonString(t.dtype) + ", \"bytes\": " + Int(t.bytes);
    if (kept != nullptr) {
      bool k = false;
      for (const ResolvedTensor& x : *kept) k = k || x.name == t.name;
      out += ", \"kept\": " + Bool(k);
    }
    out += ", \"weight_input\": " + Bool(t.flags & kWeightInput) +
           ", \"selective\": " + Bool(t.flags & kSelective) + ", \"why\": " + JsonString(t.why) + "}";
  }
  return out + "]";
}

std::map<std::string, int64_t> Groups(const std::vector<ResolvedTensor>& ts) {
  std::map<std::string, int64_t> g;
  for (const ResolvedTensor& t : ts) g[t.group] += t.bytes;
  return g;
}

std::string IntList(const std::vector<int>& v) {
  std::string s = "[";
  for (size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + std::to_string(v[i]);
  return s + "]";
}

void TensorTable(const std::vector<ResolvedTensor>& ts, std::string* out) {
  *out += "  " + Pad("tensor", 34) + Pad("group", 20) + Pad("shape (this rank)", 26) +
          Pad("dtype", 6) + LPad("size", 12) + "\n";
  for (const ResolvedTensor& t : ts) {
    std::string name = t.name;
    if (t.flags & kWeightInput) name += " (W)";
    if (t.flags & kSelective) name += " (sel)";
    *out += "  " + Pad(name, 34) + Pad(t.group, 20) + Pad(ShapeText(t.shape), 26) + Pad(t.dtype, 6) +
            LPad(FormatBytes(t.bytes), 12) + "\n";
  }
}

}  // namespace

std::string MemoryReportText(const MemoryReport& r) {
  const ModelSpec& m = r.model;
  const TrainingSpec& t = r.training;
  const BlockActivations& blk = r.activations.block;
  std::string out;
  char line[512];
  std::snprintf(line, sizeof line,
                "model %s: %d layers, hidden %lld, ffn %lld, heads %lld (kv %lld), vocab %lld, "
                "seq %lld, %s, %s, %s attention, %s embeddings; %s parameters\n",
                m.name.c_str(), m.layers, (long long)m.hidden, (long long)m.ffn, (long long)m.heads,
                (long long)m.kv_heads, (long long)m.vocab, (long long)m.seq_len, NormName(m.norm),
                MlpName(m.mlp), AttentionName(m.attention), m.tied_embeddings ? "tied" : "untied",
                FormatCount(r.total_params).c_str());
  out += line;
  std::snprintf(line, sizeof line,
                "training: micro-batch %d x %d per step, %s%s, %s, ZeRO-%d over dp %d, tp %d%s, "
                "pp %d x vpp %d (%s), recompute %s, recipe %s\n\n",
                t.micro_batch, t.microbatches, DtypePolicyName(t.dtype),
                t.dtype == DtypePolicy::kFp32 ? "" : " (fp32 master)", OptimizerName(t.optimizer),
                t.zero, t.dp, t.tp, t.sp ? " + sp" : "", t.pp, t.vpp, t.schedule.c_str(),
                RecomputeName(t.recompute), r.activations.recipe->name);
  out += line;

  out += "one block, one micro-batch, one rank: saves " + FormatBytes(blk.saved_bytes) +
         "; keeps " + FormatBytes(blk.stored_bytes) + " under recompute " + RecomputeName(t.recompute);
  if (r.split_backward) out += "; keeps " + FormatBytes(blk.w_bytes) + " from B until W";
  out += "\n";
  TensorTable(blk.saved, &out);
  out += "  by group:";
  for (const auto& [g, b] : Groups(blk.saved)) out += " " + g + " " + FormatBytes(b) + ";";
  out += "\n  (W): read by the weight-gradient pass; (sel): dropped by selective recompute\n";
  if (t.recompute == Recompute::kFull) {
    out += "  full recompute keeps only:\n";
    TensorTable(blk.kept, &out);
  }
  if (!r.activations.first.tensors.empty()) {
    out += "\nfirst stage, per micro-batch: " + FormatBytes(r.activations.first.stored_bytes) + "\n";
    TensorTable(r.activations.first.tensors, &out);
  }
  out += "\nlast stage, per micro-batch: " + FormatBytes(r.activations.last.stored_bytes) +
         " (plus " + FormatBytes(r.activations.last.transient_bytes) + " while the loss runs)\n";
  TensorTable(r.activations.last.tensors, &out);

  out += "\nper rank (weights, gradients, optimizer = fp32 master (+ fp32 gradient copy) + moments; activations = peak "
         "live under the schedule)\n";
  out += Pad("rank", 6) + Pad("layers", 8) + LPad("params", 10) + LPad("weights", 12) +
         LPad("grads", 12) + LPad("optimizer", 12) + LPad("activations", 13) + LPad("live mb", 9) +
         LPad("transient", 12) + LPad("peak", 12) + "\n";
  for (const RankMemory& rm : r.ranks) {
    std::string tag = std::to_string(rm.rank);
    if (rm.first_stage) tag += "E";
    if (rm.last_stage) tag += "H";
    out += Pad(tag, 6) + Pad(std::to_string(rm.layers), 8) + LPad(FormatCount(rm.params), 10) +
           LPad(FormatBytes(rm.states.params), 12) + LPad(FormatBytes(rm.states.grads), 12) +
           LPad(FormatBytes(rm.states.optimizer_side()), 12) +
           LPad(FormatBytes(rm.activations_bytes), 13) + LPad(std::to_string(rm.live_microbatches), 9) +
           LPad(FormatBytes(rm.transient_bytes), 12) + LPad(FormatBytes(rm.peak_bytes), 12) + "\n";
  }
  out += "(E: holds the embedding; H: holds the final norm, LM head and loss)\n";
  const RankMemory& worst = r.Tightest();
  out += "peak: " + FormatBytes(worst.peak_bytes) + " on rank " + std::to_string(worst.rank) +
         " (not counted: CUDA context, communication buffers, allocator fragmentation)\n";
  return out;
}

std::string MemoryReportJson(const MemoryReport& r, const std::string& extra_members) {
  const ModelSpec& m = r.model;
  const TrainingSpec& t = r.training;
  const BlockActivations& blk = r.activations.block;
  std::string o = "{\n";
  o += "  \"model\": {\"name\": " + JsonString(m.name) + ", \"layers\": " + Int(m.layers) +
       ", \"hidden\": " + Int(m.hidden) + ", \"ffn\": " + Int(m.ffn) + ", \"heads\": " + Int(m.heads) +
       ", \"kv_heads\": " + Int(m.kv_heads) + ", \"vocab\": " + Int(m.vocab) + ", \"seq_len\": " +
       Int(m.seq_len) + ", \"tied_embeddings\": " + Bool(m.tied_embeddings) + ", \"norm\": \"" +
       NormName(m.norm) + "\", \"mlp\": \"" + MlpName(m.mlp) + "\", \"attention\": \"" +
       AttentionName(m.attention) + "\", \"linear_bias\": " + Bool(m.linear_bias) +
       ", \"dropout\": " + Bool(m.dropout) + ", \"learned_positions\": " + Int(m.learned_positions) + "},\n";
  o += "  \"training\": {\"micro_batch\": " + Int(t.micro_batch) + ", \"microbatches\": " +
       Int(t.microbatches) + ", \"dtype\": \"" + DtypePolicyName(t.dtype) + "\", \"optimizer\": \"" +
       OptimizerName(t.optimizer) + "\", \"zero\": " + Int(t.zero) + ", \"dp\": " + Int(t.dp) +
       ", \"tp\": " + Int(t.tp) + ", \"sp\": " + Bool(t.sp) + ", \"pp\": " + Int(t.pp) +
       ", \"vpp\": " + Int(t.vpp) + ", \"schedule\": " + JsonString(t.schedule) +
       ", \"recompute\": \"" + RecomputeName(t.recompute) + "\", \"recipe\": " + JsonString(t.recipe) +
       ", \"fp32_grads\": " + Bool(t.fp32_grads) + "},\n";
  o += "  \"total_params\": " + Int(r.total_params) + ",\n";
  o += "  \"split_backward\": " + Bool(r.split_backward) + ",\n";
  o += "  \"stage_to_rank\": " + IntList(r.stage_to_rank) + ",\n";
  o += "  \"stage_layers\": " + IntList(r.stage_layers) + ",\n";
  o += "  \"block\": {\"saved_bytes\": " + Int(blk.saved_bytes) + ", \"stored_bytes\": " +
       Int(blk.stored_bytes) + ", \"w_bytes\": " + Int(blk.w_bytes) + ", \"recompute_bytes\": " +
       Int(blk.recompute_bytes) + ",\n    \"groups\": {";
  bool first = true;
  for (const auto& [g, b] : Groups(blk.saved)) {
    o += std::string(first ? "" : ", ") + JsonString(g) + ": " + Int(b);
    first = false;
  }
  o += "},\n    \"tensors\": " + TensorsJson(blk.saved, &blk.kept) + ",\n    \"kept\": " +
       TensorsJson(blk.kept, nullptr) + ",\n    \"w_grads\": " + TensorsJson(blk.w_grads, nullptr) + "},\n";
  const EdgeActivations& fs = r.activations.first;
  const EdgeActivations& ls = r.activations.last;
  o += "  \"first_stage\": {\"stored_bytes\": " + Int(fs.stored_bytes) + ", \"w_bytes\": " +
       Int(fs.w_bytes) + ", \"tensors\": " + TensorsJson(fs.tensors, nullptr) + "},\n";
  o += "  \"last_stage\": {\"stored_bytes\": " + Int(ls.stored_bytes) + ", \"w_bytes\": " +
       Int(ls.w_bytes) + ", \"transient_bytes\": " + Int(ls.transient_bytes) + ", \"tensors\": " +
       TensorsJson(ls.tensors, nullptr) + ", \"transient\": " + TensorsJson(ls.transient, nullptr) + "},\n";
  o += "  \"ranks\": [";
  for (size_t i = 0; i < r.ranks.size(); ++i) {
    const RankMemory& rm = r.ranks[i];
    o += std::string(i ? ",\n    " : "\n    ") + "{\"rank\": " + Int(rm.rank) + ", \"stages\": " +
         IntList(rm.stages) + ", \"layers\": " + Int(rm.layers) + ", \"first_stage\": " +
         Bool(rm.first_stage) + ", \"last_stage\": " + Bool(rm.last_stage) + ", \"params\": " +
         Int(rm.params) + ", \"params_bytes\": " + Int(rm.states.params) + ", \"grads_bytes\": " +
         Int(rm.states.grads) + ", \"master_bytes\": " + Int(rm.states.master) +
         ", \"grad_copy_bytes\": " + Int(rm.states.grad_copy) + ", \"optimizer_state_bytes\": " + Int(rm.states.optimizer) + ", \"optimizer_bytes\": " +
         Int(rm.states.optimizer_side()) + ", \"activations_bytes\": " +
         Int(rm.activations_bytes) + ", \"live_microbatches\": " + Int(rm.live_microbatches) +
         ", \"transient_bytes\": " + Int(rm.transient_bytes) + ", \"peak_bytes\": " +
         Int(rm.peak_bytes) + "}";
  }
  o += "]";
  if (!extra_members.empty()) o += ",\n  " + extra_members;
  return o + "\n}\n";
}

}  // namespace pipecoord::memory
