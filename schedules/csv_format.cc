#include "schedules/csv_format.h"

#include <algorithm>
#include <cctype>
#include <vector>

namespace pipecoord::schedules {
namespace {

constexpr int kMaxRows = 4096;
constexpr int kMaxIndex = 1'000'000;
constexpr long long kMaxPairs = 50'000'000;

constexpr std::string_view kKnownOps[] = {"F",      "I",      "B",      "W",     "BW", "SEND_F",
                                          "RECV_F", "SEND_B", "RECV_B", "PROBE", "OPT"};

// One non-empty cell as written, before the dialect decides what "B" means.
struct Cell {
  int row = 0;
  int col = 0;
  std::string_view text;  // trimmed, unquoted; points into the input
  int stage = 0;
  std::string_view op;  // one of kKnownOps
  int mb = -1;          // -1: not written (OPT only)
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

Status ParseCell(Cell* c) {
  std::string_view rest = c->text;
  const Status shape = CellError(*c, "expected <stage><op><micro-batch>, e.g. \"2F0\" or \"1SEND_B3\"");
  const int stage = TakeIndex(&rest);
  if (stage == -1) return shape;
  size_t n = 0;
  while (n < rest.size() && (std::isupper(static_cast<unsigned char>(rest[n])) || rest[n] == '_')) ++n;
  const std::string_view op = rest.substr(0, n);
  rest.remove_prefix(n);
  const int mb = TakeIndex(&rest);
  if (op.empty() || !rest.empty()) return shape;
  if (stage == -2 || stage > kMaxIndex) {
    return CellError(*c, "stage must be <= " + std::to_string(kMaxIndex));
  }
  if (mb == -2 || mb > kMaxIndex) return CellError(*c, "micro-batch must be <= " + std::to_string(kMaxIndex));
  const auto known = std::find(std::begin(kKnownOps), std::end(kKnownOps), op);
  if (known == std::end(kKnownOps)) {
    return CellError(*c, "unknown op \"" + std::string(op) +
                             "\" (expected F, I, B, W, BW, SEND_F, RECV_F, SEND_B, RECV_B, "
                             "PROBE or OPT)");
  }
  if (mb == -1 && op != "OPT") return shape;
  c->op = *known;
  c->stage = stage;
  c->mb = mb;
  return Status::Ok();
}

Op ToOp(std::string_view op, bool b_is_input) {
  if (op == "F") return Op::kF;
  if (op == "I") return Op::kB;
  if (op == "B") return b_is_input ? Op::kB : Op::kBW;
  if (op == "W") return Op::kW;
  if (op == "BW") return Op::kBW;
  return *ParseOp(op);  // SEND_F ... OPT: ParseCell checked the name
}

// PyTorch's letters: I for our B, B for our BW.
const char* CsvName(Op op) {
  if (op == Op::kB) return "I";
  if (op == Op::kBW) return "B";
  return OpName(op);
}

// The rank a communication cell exchanges with, from the placement; errors name the cell.
Result<int> Peer(const Cell& c, Op op, const std::vector<int>& stage_to_rank) {
  const int stages = static_cast<int>(stage_to_rank.size());
  const bool towards_next = op == Op::kSendF || op == Op::kRecvB;
  const int other = towards_next ? c.stage + 1 : c.stage - 1;
  if (other < 0 || other >= stages) {
    return CellError(c, std::string(OpName(op)) + " needs stage " + std::to_string(other) +
                            ", but the stages are 0.." + std::to_string(stages - 1));
  }
  const int peer = stage_to_rank[other];
  if (peer == c.row) {
    return CellError(c, "stages " + std::to_string(std::min(c.stage, other)) + " and " +
                            std::to_string(std::max(c.stage, other)) + " both live on rank " +
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
      out += std::to_string(a.stage) + CsvName(a.op);
      if (!(a.op == Op::kOpt && a.mb < 0)) out += std::to_string(a.mb);
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
        has_i |= c.op == "I";
        has_w |= c.op == "W";
        max_stage = std::max(max_stage, c.stage);
        max_mb = std::max(max_mb, c.mb);
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
  std::vector<int> owner(stages, -1);  // index into `cells` of the stage's first cell
  for (size_t i = 0; i < cells.size(); ++i) {
    const Cell& c = cells[i];
    int& first = owner[c.stage];
    if (first < 0) {
      first = static_cast<int>(i);
    } else if (cells[first].row != c.row) {
      return CellError(c, "stage " + std::to_string(c.stage) + " is also in row " +
                              std::to_string(cells[first].row) + " (column " +
                              std::to_string(cells[first].col) + ", \"" + std::string(cells[first].text) +
                              "\"); a stage lives on one rank");
    }
  }
  std::vector<int> stage_to_rank(stages);
  std::vector<int> per_row(pp, 0);
  for (int k = 0; k < stages; ++k) {
    if (owner[k] < 0) {
      return InvalidArgument("csv: stage " + std::to_string(k) + " appears in no row (the stages are 0.." +
                             std::to_string(stages - 1) + ", from the largest stage index)");
    }
    stage_to_rank[k] = cells[owner[k]].row;
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
    Action a{ToOp(c.op, b_is_input), c.stage, c.mb, -1};
    if (IsComm(a.op)) {
      auto peer = Peer(c, a.op, stage_to_rank);
      if (!peer.ok()) return peer.status();
      a.peer = *peer;
    }
    s.ranks[c.row].push_back(a);
  }
  return s;
}

}  // namespace pipecoord::schedules
