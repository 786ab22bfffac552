// Data parallel stage by stage (issue 16): the measured step time of a dp 2 job whose plan
// reduces each stage's gradients with its own REDUCE_GRAD right after the stage's last W (in the
// background, overlapping the rest of the rank's cool-down) against the baseline, the same
// schedule reducing every gradient in one all-reduce after the step (the schedule imported as a
// CSV without REDUCE_GRAD, which runs as written). Both in the same run, alternated, the median
// step of each (STAGE_REDUCE_BENCH_VERBOSE=1 prints every step); and the simulator's prediction
// of the same ratio from the measured costs (it assumes a core per rank).
// A model with many parameters per FLOP (hidden 256, short sequences), so the all-reduce is a
// visible part of the step; pp 2 x dp 2 = 4 ranks, one thread each, TCP on loopback.
//   bazel run -c opt //bench:stage_reduce_bench [-- ROUNDS [SCHEDULE]]
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <string>
#include <vector>

#include "schedules/csv_format.h"
#include "schedules/registry.h"
#include "schedules/simulator.h"
#include "worker/daemon/local_run.h"

namespace {

using namespace pipecoord;

v1::JobSpec Job(const std::string& schedule) {
  v1::JobSpec s;
  s.set_name("stage-reduce-bench");
  s.set_schedule(schedule);
  s.set_pp(2);
  s.set_dp(2);
  s.set_microbatches(4);
  s.set_micro_batch_size(1);
  s.set_steps(4);
  s.set_learning_rate(0.001);
  v1::ModelSpec* m = s.mutable_model();
  m->set_layers(8);
  m->set_hidden(256);
  m->set_heads(4);
  m->set_vocab(256);
  m->set_seq_len(16);
  m->set_seed(5);
  return s;
}

schedules::Schedule Generated(const v1::JobSpec& spec, bool reduce_grads, const schedules::CostModel& costs = {}) {
  schedules::ScheduleSpec ss;
  ss.pp = spec.pp();
  ss.microbatches = spec.microbatches();
  ss.vpp = (*schedules::FindSchedule(spec.schedule()))->default_vpp;
  ss.costs = costs;
  ss.reduce_grads = reduce_grads;
  auto s = schedules::BuildSchedule(spec.schedule(), ss);
  if (!s.ok()) {
    std::fprintf(stderr, "%s\n", s.status().ToString().c_str());
    std::exit(1);
  }
  return *s;
}

// The baseline: the same schedule as an imported CSV, without REDUCE_GRAD.
v1::JobSpec AfterTheStep(const v1::JobSpec& spec) {
  const schedules::Schedule s = Generated(spec, false);
  v1::JobSpec out = spec;
  out.set_schedule("csv");
  out.set_vpp(s.vpp);
  out.set_csv_schedule(schedules::ScheduleToCsv(s));
  return out;
}

struct Costs {
  std::map<int, std::vector<double>> by_op;  // op -> durations, s (steps 1..)
  double Mean(v1::Op op) const {
    auto it = by_op.find(op);
    if (it == by_op.end() || it->second.empty()) return 0;
    double sum = 0;
    for (double v : it->second) sum += v;
    return sum / it->second.size();
  }
};

// Each step's span (first start to last end over every rank), steps 1.. (step 0 warms up).
std::vector<double> StepTimes(const v1::JobSpec& spec, Costs* costs) {
  auto run = worker::RunLocally(spec);
  if (!run.ok()) {
    std::fprintf(stderr, "%s: %s\n", spec.schedule().c_str(), run.status().ToString().c_str());
    std::exit(1);
  }
  std::map<int, std::pair<int64_t, int64_t>> span;
  for (const auto& rank : run->reports) {
    for (const auto& rep : rank) {
      if (rep.summary.step() == 0) continue;
      for (const auto& t : rep.actions) {
        costs->by_op[t.action().op()].push_back((t.end_ns() - t.start_ns()) * 1e-9);
        auto [it, fresh] = span.try_emplace(t.step(), t.start_ns(), t.end_ns());
        if (!fresh) {
          it->second.first = std::min(it->second.first, t.start_ns());
          it->second.second = std::max(it->second.second, t.end_ns());
        }
      }
    }
  }
  std::vector<double> out;
  for (const auto& [step, s] : span) out.push_back((s.second - s.first) * 1e-9);
  return out;
}

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v.size() % 2 ? v[v.size() / 2] : (v[v.size() / 2 - 1] + v[v.size() / 2]) / 2;
}

void Compare(const std::string& schedule, int rounds) {
  const v1::JobSpec by_stage = Job(schedule);
  const v1::JobSpec after_step = AfterTheStep(by_stage);
  std::vector<double> a, b;
  Costs ca, cb;
  for (int k = 0; k < rounds; ++k) {  // alternated A B B A ..., so drift and order hit both alike
    for (int i = 0; i < 2; ++i) {
      if ((k + i) % 2 == 0) {
        for (double t : StepTimes(by_stage, &ca)) a.push_back(t);
      } else {
        for (double t : StepTimes(after_step, &cb)) b.push_back(t);
      }
    }
  }
  const double ta = Median(a), tb = Median(b);
  if (std::getenv("STAGE_REDUCE_BENCH_VERBOSE") != nullptr) {
    for (const auto* v : {&a, &b}) {
      std::vector<double> sorted = *v;
      std::sort(sorted.begin(), sorted.end());
      for (double t : sorted) std::printf(" %.3f", t);
      std::printf("\n");
    }
  }
  // The simulator with the measured costs: F, B, W (or BW) per micro-batch of a stage, and one
  // stage's all-reduce (a REDUCE_GRAD's span) -> per rank's whole share, x vpp.
  const schedules::Schedule shape = Generated(by_stage, false);
  const int v = shape.vpp;
  schedules::CostModel c;
  c.f = ca.Mean(v1::F) * v;
  if (ca.Mean(v1::BW) > 0 && ca.Mean(v1::B) == 0) {
    c.b = c.w = ca.Mean(v1::BW) * v / 2;
  } else {
    c.b = ca.Mean(v1::B) * v;
    c.w = ca.Mean(v1::W) * v;
  }
  c.reduce_grad = ca.Mean(v1::REDUCE_GRAD) * v;
  auto predict = [&](bool stage_by_stage) {
    schedules::Schedule s = Generated(by_stage, stage_by_stage, c);
    if (!stage_by_stage) {  // the all-reduce after the step: every stage's, just before OPT
      for (int r = 0; r < s.pp; ++r) {
        for (int st = 0; st < s.num_stages(); ++st) {
          if (s.stage_to_rank[st] == r) s.ranks[r].push_back({schedules::Op::kReduceGrad, st, -1, -1});
        }
      }
    }
    for (auto& list : s.ranks) list.push_back({schedules::Op::kOpt, 0, -1, -1});
    return schedules::Simulate(s, c)->makespan;
  };
  const double pa = predict(true), pb = predict(false);
  std::printf("%-12s pp 2 vpp %d dp 2: REDUCE_GRAD per stage %.4f s vs baseline all-reduce after the step %.4f s: "
              "ratio %.3f (%s); one stage's all-reduce %.4f s, F %.4f s (baseline's F %.4f s, OPT with its "
              "all-reduce %.4f s); simulator with these costs: %.4f vs %.4f s, ratio %.3f (%zu steps each)\n",
              schedule.c_str(), v, ta, tb, ta / tb, ta < tb ? "faster" : "not faster", ca.Mean(v1::REDUCE_GRAD),
              ca.Mean(v1::F), cb.Mean(v1::F), cb.Mean(v1::OPT), pa, pb, pa / pb, a.size());
}

}  // namespace

int main(int argc, char** argv) {
  const int rounds = argc > 1 ? std::max(1, std::atoi(argv[1])) : 5;
  const char* only = argc > 2 ? argv[2] : nullptr;  // one schedule, e.g. 1f1b
  for (const char* schedule : {"interleaved", "zbv", "1f1b"}) {
    if (only == nullptr || std::string(only) == schedule) Compare(schedule, rounds);
  }
  return 0;
}
