#include "schedules/cost_model.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>

namespace pipecoord::schedules {
namespace {

std::string Num(double v) {  // %g: "1e+308", not a 309-digit number
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", v);
  return buf;
}

Status CheckNonNegative(const char* field, double v) {
  if (!std::isfinite(v) || v < 0) {
    return InvalidArgument(std::string(field) + ": must be a finite number >= 0, got " + Num(v));
  }
  return Status::Ok();
}

}  // namespace

Status ValidateCostModel(const CostModel& c, int pp, int num_stages) {
  PIPECOORD_RETURN_IF_ERROR(CheckNonNegative("cost-f", c.f));
  PIPECOORD_RETURN_IF_ERROR(CheckNonNegative("cost-b", c.b));
  PIPECOORD_RETURN_IF_ERROR(CheckNonNegative("cost-w", c.w));
  PIPECOORD_RETURN_IF_ERROR(CheckNonNegative("cost-comm", c.comm));
  PIPECOORD_RETURN_IF_ERROR(CheckNonNegative("cost-unshard", c.unshard));
  PIPECOORD_RETURN_IF_ERROR(CheckNonNegative("cost-reshard", c.reshard));
  PIPECOORD_RETURN_IF_ERROR(CheckNonNegative("cost-reduce-grad", c.reduce_grad));
  if (!(c.overlap >= 0 && c.overlap <= 1)) {
    return InvalidArgument("overlap: must be in [0, 1], got " + Num(c.overlap));
  }
  if (c.f + c.b + c.w <= 0) return InvalidArgument("cost-f + cost-b + cost-w: must be > 0");
  if (!(c.w_share >= 0 && c.w_share <= 1)) {
    return InvalidArgument("w-share: must be in [0, 1], got " + Num(c.w_share));
  }
  if (!c.stage_fraction.empty()) {
    if (static_cast<int>(c.stage_fraction.size()) != num_stages) {
      return InvalidArgument("stage_fraction: needs one value per virtual stage (" +
                             std::to_string(num_stages) + "), got " +
                             std::to_string(c.stage_fraction.size()));
    }
    for (double v : c.stage_fraction) {
      if (!std::isfinite(v) || v <= 0) return InvalidArgument("stage_fraction: values must be > 0");
    }
  }
  if (!c.rank_slowdown.empty()) {
    if (static_cast<int>(c.rank_slowdown.size()) != pp) {
      return InvalidArgument("rank_slowdown: needs one value per rank (" + std::to_string(pp) +
                             "), got " + std::to_string(c.rank_slowdown.size()));
    }
    for (double v : c.rank_slowdown) {
      if (!std::isfinite(v) || v <= 0) return InvalidArgument("rank_slowdown: values must be > 0");
    }
  }
  return Status::Ok();
}

double StageCosts::Duration(const Action& a) const {
  switch (a.op) {
    case Op::kF: return f[a.stage];
    case Op::kB: return b[a.stage];
    case Op::kW: return w[a.stage];
    case Op::kBW: return b[a.stage] + w[a.stage];
    case Op::kUnshard: return unshard[a.stage];
    case Op::kReshard: return reshard[a.stage];
    case Op::kReduceGrad: return reduce_grad[a.stage];
    default: return 0.0;
  }
}

double StageCosts::SlotDuration(double f_time, double b_time) const {
  return f_time + b_time - overlap * std::min(f_time, b_time);
}

StageCosts ResolveCosts(const CostModel& c, const Schedule& s) {
  const int n = s.num_stages();
  StageCosts r;
  r.f.resize(n);
  r.b.resize(n);
  r.w.resize(n);
  r.activation.resize(n);
  r.unshard.resize(n);
  r.reshard.resize(n);
  r.reduce_grad.resize(n);
  r.comm = c.comm;
  r.w_share = c.w_share;
  r.overlap = c.overlap;
  for (int k = 0; k < n; ++k) {
    double frac = c.stage_fraction.empty() ? 1.0 / s.vpp : c.stage_fraction[k];
    double slow = c.rank_slowdown.empty() ? 1.0 : c.rank_slowdown[s.stage_to_rank[k]];
    r.f[k] = c.f * frac * slow;
    r.b[k] = c.b * frac * slow;
    r.w[k] = c.w * frac * slow;
    r.activation[k] = frac;
    r.unshard[k] = c.unshard * frac;
    r.reshard[k] = c.reshard * frac;
    r.reduce_grad[k] = c.reduce_grad * frac;
  }
  return r;
}

}  // namespace pipecoord::schedules
