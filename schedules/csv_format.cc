#include "schedules/csv_format.h"

#include <algorithm>
#include <cctype>
#include <utility>
#include <vector>

namespace pipecoord::schedules {
namespace {

constexpr int kMaxRows = 4096;
constexpr int kMaxIndex = 1'000'000;
constexpr long long kMaxPairs = 50'000'000;

constexpr std::string_view kKnownOps[] = {"F",      "I",      "B",     "W",   "BW",          "SEND_F",
                                          "RECV_F", "SEND_B", "RECV_B", "PROBE", "OPT", "OVERLAP_F_B",
                                          "UNSHARD", "RESHARD", "REDUCE_GRAD"};
constexpr char kKnownList[] =
    "F, I, B, W, BW, SEND_F, RECV_F, SEND_B, RECV_B, PROBE, OPT, OVERLAP_F_B, UNSHARD, RESHARD or REDUCE_GRAD";
constexpr char kOverlapShape[] =
    "expected (<forward>;<backward>)OVERLAP_F_B, a forward then an I or B of this rank, e.g. "
    "\"(0F3;1B2)OVERLAP_F_B\"";

// One action as written, before the dialect decides what "B" means.
struct Part {
  int stage = 0;
  std::string_view op;  // one of kKnownOps
  int mb = -1;          // -1: not written (OPT, UNSHARD, RESHARD, REDUCE_GRAD)
};

// One non-empty cell: one action, or an OVERLAP_F_B with its forward and backward parts.
struct Cell {
  int row = 0;
  int col = 0;
  std::string_view text;  // trimmed, unquoted; points into the input
  bool overlap = false;
  Part part[2];
  int parts = 1;
};

std::string Where(const Cell& c) {
  return "csv row " + std::to_string(c.row) + " (rank " + std::to_string(c.row) + "), column " +
         std::to_string(c.col) + " (\"" + std::string(c.text) + "\")";
}

Status CellError(const Cell& c, const std::string& what) { return InvalidArgument(Where(c) + ": " + what); }

std::string_view Trim(std::string_view s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
  return s;
}

std::string_view Unquote(std::string_view s) {
  if (s.size() >= 2 && s.front() == '"' && s.back() == '"') s = Trim(s.substr(1, s.size() - 2));
  return s;
}

bool IsBlank(std::string_view line) { return Trim(line).empty(); }

// Reads a decimal index of at most 7 digits at the front of `s`; -1 if none, -2 if too long.
int TakeIndex(std::string_view* s) {
  size_t n = 0;
  while (n < s->size() && std::isdigit(static_cast<unsigned char>((*s)[n]))) ++n;
  if (n == 0) return -1;
  if (n > 7) {
    s->remove_prefix(n);
    return -2;
  }
  int v = 0;
  for (size_t i = 0; i < n; ++i) v = v * 10 + ((*s)[i] - '0');
  s->remove_prefix(n);
  return v;
}

bool NamesNoMicroBatch(std::string_view op) { return op == "UNSHARD" || op == "RESHARD" || op == "REDUCE_GRAD"; }

// "<stage><op><micro-batch>" (the micro-batch left out by OPT, UNSHARD, RESHARD, REDUCE_GRAD).
Status ParsePart(const Cell& c, std::string_view text, Part* out) {
  std::string_view rest = text;
  const Status shape = CellError(c, "expected <stage><op><micro-batch>, e.g. \"2F0\" or \"1SEND_B3\"");
  const int stage = TakeIndex(&rest);
  if (stage == -1) return shape;
  size_t n = 0;
  while (n < rest.size() && (std::isupper(static_cast<unsigned char>(rest[n])) || rest[n] == '_')) ++n;
  const std::string_view op = rest.substr(0, n);
  rest.remove_prefix(n);
  const int mb = TakeIndex(&rest);
  if (op.empty() || !rest.empty()) return shape;
  if (stage == -2 || stage > kMaxIndex) {
    return CellError(c, "stage must be <= " + std::to_string(kMaxIndex));
  }
  if (mb == -2 || mb > kMaxIndex) return CellError(c, "micro-batch must be <= " + std::to_string(kMaxIndex));
  const auto known = std::find(std::begin(kKnownOps), std::end(kKnownOps), op);
  if (known == std::end(kKnownOps)) {
    return CellError(c, "unknown op \"" + std::string(op) + "\" (expected " + kKnownList + ")");
  }
  if (NamesNoMicroBatch(op) && mb >= 0) {
    return CellError(c, std::string(op) + " takes no micro-batch, e.g. \"" + std::to_string(stage) + std::string(op) +
                            "\"");
  }
  if (mb == -1 && op != "OPT" && !NamesNoMicroBatch(op)) return shape;
  out->op = *known;
  out->stage = stage;
  out->mb = mb;
  return Status::Ok();
}

// A cell: one action, or "(<F>;<I or B>)OVERLAP_F_B" as PyTorch's _Action.__repr__ writes an
// action with sub-actions.
Status ParseCell(Cell* c) {
  if (c->text.front() != '(') {
    PIPECOORD_RETURN_IF_ERROR(ParsePart(*c, c->text, &c->part[0]));
    if (c->part[0].op == "OVERLAP_F_B") {
      return CellError(*c, "OVERLAP_F_B holds its two sub-actions: " + std::string(kOverlapShape));
    }
    return Status::Ok();
  }
  const size_t close = c->text.find(')');
  if (close == std::string_view::npos || Trim(c->text.substr(close + 1)) != "OVERLAP_F_B") {
    return CellError(*c, kOverlapShape);
  }
  const std::string_view inner = c->text.substr(1, close - 1);
  const size_t semi = inner.find(';');
  if (semi == std::string_view::npos || inner.find(';', semi + 1) != std::string_view::npos) {
    return CellError(*c, kOverlapShape);
  }
  PIPECOORD_RETURN_IF_ERROR(ParsePart(*c, Trim(inner.substr(0, semi)), &c->part[0]));
  PIPECOORD_RETURN_IF_ERROR(ParsePart(*c, Trim(inner.substr(semi + 1)), &c->part[1]));
  const std::string_view b = c->part[1].op;
  if (c->part[0].op != "F" || !(b == "I" || b == "B" || b == "BW")) return CellError(*c, kOverlapShape);
  c->overlap = true;
  c->parts = 2;
  return Status::Ok();
}

Op ToOp(std::string_view op, bool b_is_input) {
  if (op == "F") return Op::kF;
  if (op == "I") return Op::kB;
  if (op == "B") return b_is_input ? Op::kB : Op::kBW;
  if (op == "W") return Op::kW;
  if (op == "BW") return Op::kBW;
  return *ParseOp(op);  // SEND_F ... REDUCE_GRAD: ParsePart checked the name
}

// PyTorch's letters: I for our B, B for our BW.
const char* CsvName(Op op) {
  if (op == Op::kB) return "I";
  if (op == Op::kBW) return "B";
  return OpName(op);
}

// One action as PyTorch writes it; a micro-batch below 0 (OPT's, the per-stage ops') is left out.
std::string CsvText(const Action& a) {
  std::string text = std::to_string(a.stage) + CsvName(a.op);
  if (a.mb >= 0) text += std::to_string(a.mb);
  return text;
}

// The rank a communication cell exchanges with, from the placement; errors name the cell.
Result<int> Peer(const Cell& c, Op op, int stage, const std::vector<int>& stage_to_rank) {
  const int stages = static_cast<int>(stage_to_rank.size());
  const bool towards_next = op == Op::kSendF || op == Op::kRecvB;
  const int other = towards_next ? stage + 1 : stage - 1;
  if (other < 0 || other >= stages) {
    return CellError(c, std::string(OpName(op)) + " needs stage " + std::to_string(other) +
                            ", but the stages are 0.." + std::to_string(stages - 1));
  }
  const int peer = stage_to_rank[other];
  if (peer == c.row) {
    return CellError(c, "stages " + std::to_string(std::min(stage, other)) + " and " +
                            std::to_string(std::max(stage, other)) + " both live on rank " +
                            std::to_string(peer) + ", there is nothing to exchange");
  }
  return peer;
}

}  // namespace

std::string ScheduleToCsv(const Schedule& s) {
  std::string out;
  for (const auto& list : s.ranks) {
    for (size_t i = 0; i < list.size(); ++i) {
      const Action& a = list[i];
      if (i > 0) out += ',';
      const bool slot = a.op == Op::kOverlapFB && i + 2 < list.size() && IsCompute(list[i + 1].op) &&
                        IsCompute(list[i + 2].op);
      if (slot) {  // the OVERLAP_F_B and the two actions it opens are one cell
        out += "(" + CsvText(list[i + 1]) + ";" + CsvText(list[i + 2]) + ")OVERLAP_F_B";
        i += 2;
        continue;
      }
      out += CsvText(a);
    }
    out += '\n';
  }
  return out;
}

Result<Schedule> ParseScheduleCsv(std::string_view text) {
  // Rows; blank lines count as (empty) ranks only when a non-blank line follows them.
  std::vector<std::string_view> lines;
  size_t blanks = 0;
  for (size_t start = 0; start < text.size();) {
    size_t end = text.find('\n', start);
    if (end == std::string_view::npos) end = text.size();
    std::string_view line = text.substr(start, end - start);
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    start = end + 1;
    if (IsBlank(line)) {
      ++blanks;
      continue;
    }
    if (lines.size() + blanks + 1 > kMaxRows) {
      return InvalidArgument("csv: more than " + std::to_string(kMaxRows) +
                             " rows (one per rank); refusing");
    }
    lines.insert(lines.end(), blanks, std::string_view());
    blanks = 0;
    lines.push_back(line);
  }
  if (lines.empty()) return InvalidArgument("csv: no rows; expected one row of actions per rank");
  const int pp = static_cast<int>(lines.size());

  std::vector<Cell> cells;
  bool has_i = false, has_w = false;
  int max_stage = -1, max_mb = -1;
  for (int r = 0; r < pp; ++r) {
    std::string_view line = lines[r];
    for (int col = 0;; ++col) {
      const size_t comma = line.find(',');
      std::string_view raw = line.substr(0, comma);
      std::string_view cell_text = Unquote(Trim(raw));
      if (!cell_text.empty()) {
        Cell c;
        c.row = r;
        c.col = col;
        c.text = cell_text;
        PIPECOORD_RETURN_IF_ERROR(ParseCell(&c));
        for (int k = 0; k < c.parts; ++k) {
          has_i |= c.part[k].op == "I";
          has_w |= c.part[k].op == "W";
          max_stage = std::max(max_stage, c.part[k].stage);
          max_mb = std::max(max_mb, c.part[k].mb);
        }
        cells.push_back(c);
      }
      if (comma == std::string_view::npos) break;
      line.remove_prefix(comma + 1);
    }
  }
  if (cells.empty()) return InvalidArgument("csv: no actions in any row");
  if (max_mb < 0) return InvalidArgument("csv: no action names a micro-batch");
  const int stages = max_stage + 1;
  const int microbatches = max_mb + 1;
  if (static_cast<long long>(stages) * microbatches > kMaxPairs) {
    return InvalidArgument("csv: " + std::to_string(stages) + " stages x " +
                           std::to_string(microbatches) + " micro-batches is more than " +
                           std::to_string(kMaxPairs) + "; refusing");
  }

  // Placement: the row that holds each stage.
  std::vector<std::pair<int, int>> owner(stages, {-1, 0});  // index into `cells` and part of the stage's first
  for (size_t i = 0; i < cells.size(); ++i) {
    const Cell& c = cells[i];
    for (int k = 0; k < c.parts; ++k) {
      auto& first = owner[c.part[k].stage];
      if (first.first < 0) {
        first = {static_cast<int>(i), k};
      } else if (cells[first.first].row != c.row) {
        const Cell& f = cells[first.first];
        return CellError(c, "stage " + std::to_string(c.part[k].stage) + " is also in row " + std::to_string(f.row) +
                                " (column " + std::to_string(f.col) + ", \"" + std::string(f.text) +
                                "\"); a stage lives on one rank");
      }
    }
  }
  std::vector<int> stage_to_rank(stages);
  std::vector<int> per_row(pp, 0);
  for (int k = 0; k < stages; ++k) {
    if (owner[k].first < 0) {
      return InvalidArgument("csv: stage " + std::to_string(k) + " appears in no row (the stages are 0.." +
                             std::to_string(stages - 1) + ", from the largest stage index)");
    }
    stage_to_rank[k] = cells[owner[k].first].row;
    ++per_row[stage_to_rank[k]];
  }
  for (int r = 1; r < pp; ++r) {
    if (per_row[r] != per_row[0]) {
      return InvalidArgument("csv: row " + std::to_string(r) + " (rank " + std::to_string(r) +
                             ") holds " + std::to_string(per_row[r]) + " stage(s) but row 0 holds " +
                             std::to_string(per_row[0]) +
                             "; every rank must hold the same number of stages");
    }
  }

  Schedule s = MakeSchedule("csv", pp, stages / pp, microbatches, stage_to_rank);
  const bool b_is_input = has_w && !has_i;
  for (const Cell& c : cells) {
    std::vector<Action>& list = s.ranks[c.row];
    if (c.overlap) list.push_back(Action{Op::kOverlapFB, c.part[0].stage, c.part[0].mb, -1});
    for (int k = 0; k < c.parts; ++k) {
      Action a{ToOp(c.part[k].op, b_is_input), c.part[k].stage, c.part[k].mb, -1};
      if (IsComm(a.op)) {
        auto peer = Peer(c, a.op, a.stage, stage_to_rank);
        if (!peer.ok()) return peer.status();
        a.peer = *peer;
      }
      list.push_back(a);
    }
  }
  return s;
}

}  // namespace pipecoord::schedules
