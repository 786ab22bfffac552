#include "jobplan/optimizer_schedule.h"

#include <algorithm>
#include <cmath>
#include <numbers>
#include <string>

namespace pipecoord::jobplan {

OptimizerStepSettings OptimizerAt(const v1::JobSpec& spec, int64_t k) {
  const v1::OptimizerSpec& o = spec.optimizer();
  OptimizerStepSettings s;
  if (o.has_beta1()) s.beta1 = o.beta1();
  if (o.has_beta2()) s.beta2 = o.beta2();
  if (o.has_eps()) s.eps = o.eps();
  s.weight_decay = o.weight_decay();
  s.clip_grad_norm = o.clip_grad_norm();
  const double lr = spec.learning_rate();
  const int64_t warmup = o.warmup_steps();
  if (k < warmup) {
    s.lr = lr * static_cast<double>(k + 1) / static_cast<double>(warmup);
    return s;
  }
  const int64_t decay = o.decay_steps() > 0 ? o.decay_steps() : std::max<int64_t>(1, spec.steps() - warmup);
  const double p = std::clamp(static_cast<double>(k - warmup) / static_cast<double>(decay), 0.0, 1.0);
  if (o.lr_schedule() == "cosine") {
    s.lr = o.min_lr() + (lr - o.min_lr()) * (1 + std::cos(std::numbers::pi * p)) / 2;
  } else if (o.lr_schedule() == "linear") {
    s.lr = lr - (lr - o.min_lr()) * p;
  } else {
    s.lr = lr;
  }
  return s;
}

namespace {

std::string Num(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", v);
  return buf;
}

}  // namespace

Status ValidateOptimizer(const v1::JobSpec& spec) {
  const v1::OptimizerSpec& o = spec.optimizer();
  for (auto [field, has, v] : {std::tuple{"beta1", o.has_beta1(), o.beta1()}, {"beta2", o.has_beta2(), o.beta2()}}) {
    if (has && !(v >= 0 && v < 1)) {
      return InvalidArgument(std::string("spec.optimizer.") + field + ": must be in [0, 1), got " + Num(v));
    }
  }
  if (o.has_eps() && !(std::isfinite(o.eps()) && o.eps() > 0)) {
    return InvalidArgument("spec.optimizer.eps: must be a finite number > 0, got " + Num(o.eps()));
  }
  for (auto [field, v] : {std::pair{"weightDecay", o.weight_decay()}, {"minLr", o.min_lr()},
                          {"clipGradNorm", o.clip_grad_norm()}}) {
    if (!(std::isfinite(v) && v >= 0)) {
      return InvalidArgument(std::string("spec.optimizer.") + field + ": must be a finite number >= 0, got " + Num(v));
    }
  }
  const std::string& sched = o.lr_schedule();
  if (!sched.empty() && sched != "constant" && sched != "cosine" && sched != "linear") {
    return InvalidArgument("spec.optimizer.lrSchedule: must be \"constant\", \"cosine\" or \"linear\", got \"" + sched + "\"");
  }
  if (o.min_lr() > spec.learning_rate()) {
    return InvalidArgument("spec.optimizer.minLr: must be <= spec.learningRate (" + Num(spec.learning_rate()) +
                           "), got " + Num(o.min_lr()));
  }
  for (auto [field, v] : {std::pair{"warmupSteps", o.warmup_steps()}, {"decaySteps", o.decay_steps()}}) {
    if (v < 0 || v > 1000000000) {
      return InvalidArgument(std::string("spec.optimizer.") + field + ": must be in 0..1000000000, got " +
                             std::to_string(v));
    }
  }
  return Status::Ok();
}

}  // namespace pipecoord::jobplan
