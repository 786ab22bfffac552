#include "worker/daemon/fault_injection.h"

#include <charconv>
#include <cmath>

namespace pipecoord::worker {
namespace {

Status Bad(std::string_view rule, const std::string& why) {
  return InvalidArgument("--inject " + std::string(rule) + ": " + why);
}

bool ParseInt(std::string_view s, long long* out) {
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), *out);
  return ec == std::errc() && p == s.data() + s.size();
}

}  // namespace

Result<FaultRule> ParseFaultRule(std::string_view text) {
  std::vector<std::string_view> parts;
  size_t from = 0;
  while (true) {
    const size_t colon = text.find(':', from);
    parts.push_back(text.substr(from, colon == std::string_view::npos ? std::string_view::npos : colon - from));
    if (colon == std::string_view::npos) break;
    from = colon + 1;
  }
  if (parts.size() != 3 && !(parts.size() == 4 && (parts[0] == "oom" || parts[0] == "slow" || parts[0] == "slowlink" || parts[0] == "flip"))) {
    return Bad(text, "must be KIND:RANK:VALUE with KIND slow, hang, corrupt, flip, oom or slowlink (slow:RANK:FACTOR[:STEP], "
                     "flip:RANK:STEP[:MB], oom:RANK:BYTES[:STEP], slowlink:RANK:MS[:STEP])");
  }
  FaultRule r;
  r.text = std::string(text);
  const std::string_view kind = parts[0], value = parts[2];
  if (kind == "slow") r.kind = FaultRule::Kind::kSlow;
  else if (kind == "hang") r.kind = FaultRule::Kind::kHang;
  else if (kind == "corrupt") r.kind = FaultRule::Kind::kCorrupt;
  else if (kind == "flip") r.kind = FaultRule::Kind::kFlip;
  else if (kind == "oom") r.kind = FaultRule::Kind::kOom;
  else if (kind == "slowlink") r.kind = FaultRule::Kind::kSlowLink;
  else return Bad(text, "KIND must be slow, hang, corrupt, flip, oom or slowlink, got \"" + std::string(kind) + "\"");
  long long rank = 0;
  if (!ParseInt(parts[1], &rank) || rank < 0 || rank > 4095) {
    return Bad(text, "RANK must be an integer in [0, 4095], got \"" + std::string(parts[1]) + "\"");
  }
  r.rank = static_cast<int>(rank);
  long long n = 0;
  switch (r.kind) {
    case FaultRule::Kind::kSlow: {
      double f = 0;
      auto [p, ec] = std::from_chars(value.data(), value.data() + value.size(), f);
      if (ec != std::errc() || p != value.data() + value.size() || !std::isfinite(f) || f < 1 || f > 1000) {
        return Bad(text, "FACTOR must be a number in [1, 1000], got \"" + std::string(value) + "\"");
      }
      r.factor = f;
      break;  // STEP below
    }
    case FaultRule::Kind::kHang:
    case FaultRule::Kind::kCorrupt:
    case FaultRule::Kind::kFlip:
      if (!ParseInt(value, &n) || n < 0 || n > 10'000'000) {
        return Bad(text, "STEP must be an integer in [0, 10000000], got \"" + std::string(value) + "\"");
      }
      r.step = static_cast<int>(n);
      break;
    case FaultRule::Kind::kOom:
      if (!ParseInt(value, &n) || n < 1 || n > (1LL << 40)) {
        return Bad(text, "BYTES must be an integer in [1, 2^40], got \"" + std::string(value) + "\"");
      }
      r.bytes = static_cast<uint64_t>(n);
      break;
    case FaultRule::Kind::kSlowLink:
      if (!ParseInt(value, &n) || n < 1 || n > 60'000) {
        return Bad(text, "MS must be an integer in [1, 60000], got \"" + std::string(value) + "\"");
      }
      r.delay_ms = static_cast<int>(n);
      break;
  }
  if (parts.size() == 4 && r.kind == FaultRule::Kind::kFlip) {  // the micro-batch whose F flips
    if (!ParseInt(parts[3], &n) || n < 0 || n > 1'000'000) {
      return Bad(text, "MB must be an integer in [0, 1000000], got \"" + std::string(parts[3]) + "\"");
    }
    r.microbatch = static_cast<int>(n);
  } else if (parts.size() == 4) {  // slow, oom and slowlink: the first step the fault applies to (default 0)
    if (!ParseInt(parts[3], &n) || n < 0 || n > 10'000'000) {
      return Bad(text, "STEP must be an integer in [0, 10000000], got \"" + std::string(parts[3]) + "\"");
    }
    r.step = static_cast<int>(n);
  }
  return r;
}

Result<std::vector<FaultRule>> ParseFaultRules(std::string_view text) {
  std::vector<FaultRule> out;
  size_t from = 0;
  while (from <= text.size() && !text.empty()) {
    const size_t comma = text.find(',', from);
    auto rule = ParseFaultRule(text.substr(from, comma == std::string_view::npos ? std::string_view::npos : comma - from));
    if (!rule.ok()) return rule.status();
    out.push_back(std::move(rule).value());
    if (comma == std::string_view::npos) break;
    from = comma + 1;
  }
  return out;
}

std::vector<FaultRule> RulesFor(const std::vector<FaultRule>& rules, int global_rank) {
  std::vector<FaultRule> out;
  for (const FaultRule& r : rules) {
    if (r.rank == global_rank) out.push_back(r);
  }
  return out;
}

}  // namespace pipecoord::worker
