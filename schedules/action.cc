#include "schedules/action.h"

#include <array>
#include <cctype>

namespace pipecoord::schedules {
namespace {

constexpr std::array<const char*, kNumOps> kOpNames = {
    "F",      "B",      "W",   "BW",          "SEND_F",  "RECV_F",  "SEND_B",
    "RECV_B", "PROBE",  "OPT", "OVERLAP_F_B", "UNSHARD", "RESHARD", "REDUCE_GRAD"};

// Parses a non-negative decimal integer that fills `s`; -1 if it does not.
int ParseIndex(std::string_view s) {
  if (s.empty() || s.size() > 9) return -1;
  int v = 0;
  for (char c : s) {
    if (!std::isdigit(static_cast<unsigned char>(c))) return -1;
    v = v * 10 + (c - '0');
  }
  return v;
}

}  // namespace

const char* OpName(Op op) { return kOpNames[static_cast<int>(op)]; }

Result<Op> ParseOp(std::string_view name) {
  for (int i = 0; i < kNumOps; ++i) {
    if (name == kOpNames[i]) return static_cast<Op>(i);
  }
  return InvalidArgument("unknown op \"" + std::string(name) +
                         "\" (expected F, B, W, BW, SEND_F, RECV_F, SEND_B, RECV_B, PROBE, OPT, OVERLAP_F_B, "
                         "UNSHARD, RESHARD or REDUCE_GRAD)");
}

std::string ToString(const Action& a) {
  std::string text = std::to_string(a.stage) + OpName(a.op);
  if (a.mb >= 0 || TakesMicroBatch(a.op)) text += std::to_string(a.mb);
  return text;
}

Result<Action> ParseAction(std::string_view text) {
  size_t i = 0;
  while (i < text.size() && std::isdigit(static_cast<unsigned char>(text[i]))) ++i;
  size_t j = text.size();
  while (j > i && std::isdigit(static_cast<unsigned char>(text[j - 1]))) --j;
  const Status shape = InvalidArgument("action \"" + std::string(text) +
                                       "\": expected <stage><op><microbatch>, e.g. \"2F0\" or \"1SEND_B3\"");
  int stage = ParseIndex(text.substr(0, i));
  if (stage < 0 || i == j) return shape;
  auto op = ParseOp(text.substr(i, j - i));
  if (!op.ok()) return InvalidArgument("action \"" + std::string(text) + "\": " + op.status().message());
  int mb = -1;
  if (j < text.size() && (mb = ParseIndex(text.substr(j))) < 0) return shape;
  if (IsPerStage(*op) && mb >= 0) {
    return InvalidArgument("action \"" + std::string(text) + "\": " + OpName(*op) + " takes no micro-batch, e.g. \"" +
                           std::to_string(stage) + OpName(*op) + "\"");
  }
  if (mb < 0 && TakesMicroBatch(*op)) return shape;
  return Action{*op, stage, mb, -1};
}

}  // namespace pipecoord::schedules
