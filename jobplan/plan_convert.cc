#include "jobplan/plan_convert.h"

#include <algorithm>
#include <string>

namespace pipecoord::jobplan {

namespace sch = pipecoord::schedules;

v1::Action ToProto(const sch::Action& a) {
  v1::Action out;
  out.set_op(static_cast<v1::Op>(static_cast<int>(a.op) + 1));
  out.set_stage(a.stage);
  out.set_microbatch(a.mb);
  out.set_peer(a.peer);
  return out;
}

sch::Action FromProto(const v1::Action& a) {
  sch::Action out;
  out.op = a.op() == v1::OP_UNSPECIFIED ? sch::Op::kF : static_cast<sch::Op>(static_cast<int>(a.op()) - 1);
  out.stage = a.stage();
  out.mb = a.microbatch();
  out.peer = a.peer();
  return out;
}

void ScheduleToPlan(const sch::Schedule& s, v1::Plan* plan) {
  plan->clear_stage_to_rank();
  for (int r : s.stage_to_rank) plan->add_stage_to_rank(r);
  plan->clear_ranks();
  for (int r = 0; r < static_cast<int>(s.ranks.size()); ++r) {
    v1::RankJobs* jobs = plan->add_ranks();
    jobs->set_rank(r);
    for (const sch::Action& a : s.ranks[r]) *jobs->add_actions() = ToProto(a);
  }
}

sch::Schedule PlanToSchedule(const v1::JobSpec& spec, const v1::Plan& plan) {
  std::vector<int> stage_to_rank(plan.stage_to_rank().begin(), plan.stage_to_rank().end());
  sch::Schedule s = sch::MakeSchedule(spec.schedule(), spec.pp(), std::max(1, spec.vpp()), spec.microbatches(),
                                      std::move(stage_to_rank));
  s.ranks.assign(plan.ranks_size(), {});
  for (int r = 0; r < plan.ranks_size(); ++r) {
    for (const v1::Action& a : plan.ranks(r).actions()) s.ranks[r].push_back(FromProto(a));
  }
  return s;
}

Status CheckWorkersRun(const sch::Schedule& s, std::string_view device) {
  const bool cuda = device == "cuda";
  for (size_t r = 0; r < s.ranks.size(); ++r) {
    for (size_t i = 0; i < s.ranks[r].size(); ++i) {
      const sch::Action& a = s.ranks[r][i];
      if (a.op == sch::Op::kReduceGrad && !cuda) continue;
      if (sch::IsPerStage(a.op)) {
        const std::string where =
            "rank " + std::to_string(r) + ", position " + std::to_string(i) + " (" + sch::ToString(a) + "): ";
        if (a.op == sch::Op::kReduceGrad) {
          return InvalidArgument(where + "cuda workers do not run REDUCE_GRAD (they all-reduce every gradient at OPT); "
                                         "CPU workers do");
        }
        return InvalidArgument(where + "the workers do not run " + sch::OpName(a.op) +
                               " (they run F, B, W, BW, SEND/RECV, PROBE, OPT, OVERLAP_F_B (its F and backward one "
                               "after the other) and, on the CPU, REDUCE_GRAD)");
      }
    }
  }
  return Status::Ok();
}

bool ReducesGradientsPerStage(const v1::JobSpec& spec) {
  return spec.dp() > 1 && spec.device() != "cuda" && spec.schedule() != "csv";
}

}  // namespace pipecoord::jobplan
