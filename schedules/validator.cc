#include "schedules/validator.h"

#include <string>
#include <vector>

#include "schedules/cost_model.h"
#include "schedules/dependencies.h"
#include "schedules/simulator.h"

namespace pipecoord::schedules {
namespace {

std::string Where(int rank, size_t pos, const Action& a) {
  return "rank " + std::to_string(rank) + ", position " + std::to_string(pos) + " (" +
         ToString(a) + ")";
}

struct Place {
  int rank = -1;
  int pos = -1;
};

// Communication channels: kDirF carries F(s) -> F(s+1), kDirB carries B(s) -> B(s-1).
enum Dir { kDirF = 0, kDirB = 1 };

// The channel and the producer's stage a comm action belongs to.
void Channel(const Action& a, Dir* dir, int* producer_stage) {
  switch (a.op) {
    case Op::kSendF: *dir = kDirF; *producer_stage = a.stage; break;
    case Op::kRecvF: *dir = kDirF; *producer_stage = a.stage - 1; break;
    case Op::kSendB: *dir = kDirB; *producer_stage = a.stage; break;
    default: *dir = kDirB; *producer_stage = a.stage + 1; break;  // kRecvB
  }
}

class Checker {
 public:
  explicit Checker(const Schedule& s)
      : s_(s), stages_(s.num_stages()), mbs_(s.microbatches),
        plane_(static_cast<size_t>(stages_) * mbs_) {}

  Status Run() {
    PIPECOORD_RETURN_IF_ERROR(CheckShape(s_));
    PIPECOORD_RETURN_IF_ERROR(IndexComputeActions());
    PIPECOORD_RETURN_IF_ERROR(CheckComplete());
    PIPECOORD_RETURN_IF_ERROR(CheckSameRankOrder());
    PIPECOORD_RETURN_IF_ERROR(CheckOverlaps());
    PIPECOORD_RETURN_IF_ERROR(CheckReduceGrad());
    PIPECOORD_RETURN_IF_ERROR(CheckSharding());
    if (s_.HasCommunication()) {
      PIPECOORD_RETURN_IF_ERROR(CheckCommunication());
      return CheckRendezvous();
    }
    auto sim = Simulate(s_, CostModel{});
    if (!sim.ok()) return InvalidArgument("deadlock: " + sim.status().message());
    return Status::Ok();
  }

 private:
  size_t Index(int stage, int mb) const { return static_cast<size_t>(stage) * mbs_ + mb; }

  Status IndexComputeActions() {
    for (auto* table : {&f_, &b_, &w_, &bw_}) table->assign(plane_, Place{});
    for (int r = 0; r < s_.pp; ++r) {
      const auto& list = s_.ranks[r];
      for (size_t i = 0; i < list.size(); ++i) {
        const Action& a = list[i];
        if (!IsCompute(a.op) && !IsPerStage(a.op)) continue;
        if (s_.stage_to_rank[a.stage] != r) {
          return InvalidArgument(Where(r, i, a) + ": stage " + std::to_string(a.stage) +
                                 " is placed on rank " + std::to_string(s_.stage_to_rank[a.stage]));
        }
        if (!IsCompute(a.op)) continue;
        std::vector<Place>& table = a.op == Op::kF ? f_ : a.op == Op::kB ? b_ : a.op == Op::kW ? w_ : bw_;
        Place& p = table[Index(a.stage, a.mb)];
        if (p.rank >= 0) {
          return InvalidArgument(Where(r, i, a) + ": a second " + OpName(a.op) + " for stage " +
                                 std::to_string(a.stage) + " micro-batch " + std::to_string(a.mb) +
                                 " (the first is at " + Where(p.rank, p.pos, a) + ")");
        }
        p = {r, static_cast<int>(i)};
      }
    }
    return Status::Ok();
  }

  Status CheckComplete() const {
    for (int st = 0; st < stages_; ++st) {
      for (int mb = 0; mb < mbs_; ++mb) {
        const size_t k = Index(st, mb);
        const std::string what = "stage " + std::to_string(st) + " micro-batch " + std::to_string(mb);
        if (f_[k].rank < 0) return InvalidArgument(what + " has no F");
        const bool split = b_[k].rank >= 0 || w_[k].rank >= 0;
        if (bw_[k].rank >= 0 && split) {
          return InvalidArgument(what + " has both a BW and a split B/W backward");
        }
        if (bw_[k].rank < 0 && b_[k].rank < 0) return InvalidArgument(what + " has no B or BW");
        if (bw_[k].rank < 0 && w_[k].rank < 0) return InvalidArgument(what + " has a B but no W");
      }
    }
    return Status::Ok();
  }

  // Position of the action that fills `slot` for (stage, mb).
  Place Producer(Slot slot, int stage, int mb) const {
    const size_t k = Index(stage, mb);
    if (slot == kFwd) return f_[k];
    if (slot == kGrad) return b_[k].rank >= 0 ? b_[k] : bw_[k];
    return w_[k].rank >= 0 ? w_[k] : bw_[k];
  }

  Status CheckSameRankOrder() const {
    for (int r = 0; r < s_.pp; ++r) {
      const auto& list = s_.ranks[r];
      for (size_t i = 0; i < list.size(); ++i) {
        const Action& a = list[i];
        SlotRef deps[2];
        int n = Producers(a, stages_, deps);
        for (int d = 0; d < n; ++d) {
          Place p = Producer(deps[d].slot, deps[d].stage, a.mb);
          if (p.rank == r && p.pos > static_cast<int>(i)) {
            return InvalidArgument(Where(r, i, a) + ": runs before the " +
                                   ToString(s_.ranks[r][p.pos]) + " it needs, at position " +
                                   std::to_string(p.pos));
          }
        }
      }
    }
    return Status::Ok();
  }

  // The two halves of an OVERLAP_F_B start together: the backward half cannot be the one that
  // needs the forward half (B(s, m) needs F(s, m)); longer chains through other ranks or stages
  // are cycles the deadlock checks find.
  Status CheckOverlaps() const {
    for (int r = 0; r < s_.pp; ++r) {
      const auto& list = s_.ranks[r];
      for (size_t i = 0; i < list.size(); ++i) {
        if (list[i].op != Op::kOverlapFB) continue;
        const Action &f = list[i + 1], &b = list[i + 2];  // CheckShape placed them
        if (f.stage == b.stage && f.mb == b.mb) {
          return InvalidArgument(Where(r, i, list[i]) + ": its backward half " + ToString(b) + " needs its forward half " +
                                 ToString(f) + ", and the two run at once");
        }
      }
    }
    return Status::Ok();
  }

  // REDUCE_GRAD (PyTorch's _add_reduce_grad): once per stage, after the stage's last weight
  // gradient (W or BW) on its rank, and then on every stage: a replica that reduces some stages'
  // gradients and not others' trains on unreduced ones. An OPT (which steps every stage of its
  // rank) comes after the REDUCE_GRAD of each stage its rank holds.
  Status CheckReduceGrad() const {
    std::vector<Place> reduce(stages_);
    Place first;
    for (int r = 0; r < s_.pp; ++r) {
      const auto& list = s_.ranks[r];
      for (size_t i = 0; i < list.size(); ++i) {
        const Action& a = list[i];
        if (a.op != Op::kReduceGrad) continue;
        Place& p = reduce[a.stage];
        if (p.rank >= 0) {
          return InvalidArgument(Where(r, i, a) + ": a second REDUCE_GRAD of stage " + std::to_string(a.stage) +
                                 " (the first is at " + Where(p.rank, p.pos, s_.ranks[p.rank][p.pos]) +
                                 "); a stage's gradients are reduced once, after its last W");
        }
        p = {r, static_cast<int>(i)};
        if (first.rank < 0) first = p;
        Place last;  // the stage's last weight gradient: the latest W or BW of any micro-batch
        for (int mb = 0; mb < mbs_; ++mb) {
          const Place w = Producer(kWeight, a.stage, mb);
          if (w.pos > last.pos) last = w;
        }
        if (last.pos > p.pos) {
          return InvalidArgument(Where(r, i, a) + ": runs before " + ToString(list[last.pos]) +
                                 ", the last weight gradient of stage " + std::to_string(a.stage) + ", at position " +
                                 std::to_string(last.pos) + "; REDUCE_GRAD comes after a stage's last W");
        }
      }
    }
    if (first.rank < 0) return Status::Ok();
    // An OPT steps every stage of its rank, so it comes after each of their reductions.
    for (int r = 0; r < s_.pp; ++r) {
      const auto& list = s_.ranks[r];
      for (size_t i = 0; i < list.size(); ++i) {
        if (list[i].op != Op::kOpt) continue;
        for (int st = 0; st < stages_; ++st) {
          const Place& p = reduce[st];
          if (p.rank == r && p.pos > static_cast<int>(i)) {
            return InvalidArgument(Where(r, i, list[i]) + ": runs before " + ToString(list[p.pos]) + " at position " +
                                   std::to_string(p.pos) + "; the optimizer step of a stage follows its REDUCE_GRAD");
          }
        }
      }
    }
    for (int st = 0; st < stages_; ++st) {
      if (reduce[st].rank < 0) {
        return InvalidArgument("stage " + std::to_string(st) + " has no REDUCE_GRAD, but stage " +
                               std::to_string(s_.ranks[first.rank][first.pos].stage) + " has one at " +
                               Where(first.rank, first.pos, s_.ranks[first.rank][first.pos]) +
                               "; with REDUCE_GRAD every stage reduces its gradients once, after its last W");
      }
    }
    return Status::Ok();
  }

  // UNSHARD / RESHARD (PyTorch's FSDP lowering, _add_unshard_reshard and the runtime's checks),
  // for each stage that has either: they alternate on the stage's rank starting with UNSHARD,
  // every compute action of the stage runs between an UNSHARD and its RESHARD, a RESHARD follows
  // at least one compute since its UNSHARD (the runtime waits for the gather at the first
  // compute), and the stage ends resharded. A stage with neither is not sharded.
  Status CheckSharding() const {
    std::vector<char> sharded_stage(stages_, 0);
    for (const auto& list : s_.ranks) {
      for (const Action& a : list) {
        if (a.op == Op::kUnshard || a.op == Op::kReshard) sharded_stage[a.stage] = 1;
      }
    }
    for (int r = 0; r < s_.pp; ++r) {
      const auto& list = s_.ranks[r];
      std::vector<int> unsharded_at(stages_, -1);  // position of the open UNSHARD, -1: sharded
      std::vector<char> computed(stages_, 0);      // a compute since that UNSHARD
      for (size_t i = 0; i < list.size(); ++i) {
        const Action& a = list[i];
        if (a.op == Op::kUnshard) {
          if (unsharded_at[a.stage] >= 0) {
            return InvalidArgument(Where(r, i, a) + ": a second UNSHARD of stage " + std::to_string(a.stage) +
                                   ", unsharded since position " + std::to_string(unsharded_at[a.stage]) +
                                   " with no RESHARD between");
          }
          unsharded_at[a.stage] = static_cast<int>(i);
          computed[a.stage] = 0;
        } else if (a.op == Op::kReshard) {
          if (unsharded_at[a.stage] < 0) {
            return InvalidArgument(Where(r, i, a) + ": RESHARD of stage " + std::to_string(a.stage) +
                                   ", which no UNSHARD before it gathered");
          }
          if (!computed[a.stage]) {
            return InvalidArgument(Where(r, i, a) + ": RESHARD of stage " + std::to_string(a.stage) +
                                   " with no compute of the stage since its UNSHARD at position " +
                                   std::to_string(unsharded_at[a.stage]) +
                                   " (the gather is waited for at the stage's first compute)");
          }
          unsharded_at[a.stage] = -1;
        } else if (IsCompute(a.op) && sharded_stage[a.stage]) {
          if (unsharded_at[a.stage] < 0) {
            return InvalidArgument(Where(r, i, a) + ": runs while stage " + std::to_string(a.stage) +
                                   " is sharded; an UNSHARD of the stage must come before it (and its RESHARD after)");
          }
          computed[a.stage] = 1;
        }
      }
      for (int st = 0; st < stages_; ++st) {
        if (unsharded_at[st] >= 0) {
          return InvalidArgument(Where(r, unsharded_at[st], list[unsharded_at[st]]) + ": stage " + std::to_string(st) +
                                 " is left unsharded, no RESHARD after this UNSHARD");
        }
      }
    }
    return Status::Ok();
  }

  Status CheckCommunication() {
    for (auto* t : {&send_[0], &send_[1], &recv_[0], &recv_[1]}) t->assign(plane_, Place{});
    for (int r = 0; r < s_.pp; ++r) {
      const auto& list = s_.ranks[r];
      for (size_t i = 0; i < list.size(); ++i) {
        const Action& a = list[i];
        if (!IsComm(a.op)) continue;
        Dir dir;
        int ps;
        Channel(a, &dir, &ps);
        const int cs = dir == kDirF ? ps + 1 : ps - 1;  // consumer stage
        if (ps < 0 || ps >= stages_ || cs < 0 || cs >= stages_) {
          return InvalidArgument(Where(r, i, a) + ": there is no stage " + std::to_string(ps < 0 || ps >= stages_ ? ps : cs) +
                                 " to exchange with");
        }
        const int pr = s_.stage_to_rank[ps], cr = s_.stage_to_rank[cs];
        const bool is_send = IsSend(a.op);
        if ((is_send ? pr : cr) != r) {
          return InvalidArgument(Where(r, i, a) + ": stage " + std::to_string(a.stage) +
                                 " is placed on rank " + std::to_string(s_.stage_to_rank[a.stage]));
        }
        if (pr == cr) {
          return InvalidArgument(Where(r, i, a) + ": stages " + std::to_string(ps) + " and " +
                                 std::to_string(cs) + " share rank " + std::to_string(r) +
                                 ", nothing to send");
        }
        const int want_peer = is_send ? cr : pr;
        if (a.peer != want_peer) {
          return InvalidArgument(Where(r, i, a) + ": peer must be rank " +
                                 std::to_string(want_peer) + ", got " + std::to_string(a.peer));
        }
        Place& p = (is_send ? send_ : recv_)[dir][Index(ps, a.mb)];
        if (p.rank >= 0) return InvalidArgument(Where(r, i, a) + ": duplicate " + OpName(a.op));
        p = {r, static_cast<int>(i)};
      }
    }
    // Every cross-rank edge has its send after the producer and its receive before the consumer.
    for (int ps = 0; ps < stages_; ++ps) {
      for (int mb = 0; mb < mbs_; ++mb) {
        for (Dir dir : {kDirF, kDirB}) {
          const int cs = dir == kDirF ? ps + 1 : ps - 1;
          if (cs < 0 || cs >= stages_ || s_.stage_to_rank[ps] == s_.stage_to_rank[cs]) continue;
          const Place prod = Producer(dir == kDirF ? kFwd : kGrad, ps, mb);
          const Place cons = dir == kDirF ? f_[Index(cs, mb)] : Producer(kGrad, cs, mb);
          const Place snd = send_[dir][Index(ps, mb)], rcv = recv_[dir][Index(ps, mb)];
          const char* sname = dir == kDirF ? "SEND_F" : "SEND_B";
          const char* rname = dir == kDirF ? "RECV_F" : "RECV_B";
          const Action& pa = s_.ranks[prod.rank][prod.pos];
          const Action& ca = s_.ranks[cons.rank][cons.pos];
          if (snd.rank < 0) return InvalidArgument(Where(prod.rank, prod.pos, pa) + ": no " + sname + " of its result");
          if (snd.pos < prod.pos) return InvalidArgument(Where(snd.rank, snd.pos, s_.ranks[snd.rank][snd.pos]) + ": sends before " + ToString(pa) + " produced it");
          if (rcv.rank < 0) return InvalidArgument(Where(cons.rank, cons.pos, ca) + ": no " + rname + " of its input");
          if (rcv.pos > cons.pos) return InvalidArgument(Where(cons.rank, cons.pos, ca) + ": runs before its " + rname + " at position " + std::to_string(rcv.pos));
        }
      }
    }
    return Status::Ok();
  }

  // Each SEND completes only together with its RECV. Any order that passes this also runs
  // with buffered (non-blocking) sends.
  Status CheckRendezvous() const {
    std::vector<size_t> pos(s_.pp, 0);
    std::vector<int> work;
    for (int r = s_.pp - 1; r >= 0; --r) work.push_back(r);
    auto match = [&](const Action& a, const Action& b) {
      if (b.peer < 0 || !IsComm(b.op) || IsSend(a.op) == IsSend(b.op)) return false;
      Dir da, db;
      int pa, pb;
      Channel(a, &da, &pa);
      Channel(b, &db, &pb);
      return da == db && pa == pb && a.mb == b.mb;
    };
    while (!work.empty()) {
      int r = work.back();
      work.pop_back();
      const auto& list = s_.ranks[r];
      while (pos[r] < list.size()) {
        const Action& a = list[pos[r]];
        if (!IsComm(a.op)) {
          ++pos[r];
          continue;
        }
        const int q = a.peer;
        if (pos[q] < s_.ranks[q].size() && match(a, s_.ranks[q][pos[q]])) {
          ++pos[r];
          ++pos[q];
          work.push_back(q);
          continue;
        }
        break;
      }
    }
    std::string stuck;
    for (int r = 0; r < s_.pp; ++r) {
      if (pos[r] >= s_.ranks[r].size()) continue;
      const Action& a = s_.ranks[r][pos[r]];
      stuck += (stuck.empty() ? "" : "; ") + Where(r, pos[r], a) + " waits for rank " + std::to_string(a.peer);
    }
    if (!stuck.empty()) return InvalidArgument("deadlock under blocking send/recv: " + stuck);
    return Status::Ok();
  }

  const Schedule& s_;
  const int stages_, mbs_;
  const size_t plane_;
  std::vector<Place> f_, b_, w_, bw_;
  std::vector<Place> send_[2], recv_[2];
};

}  // namespace

Status CheckShape(const Schedule& s) {
  if (s.pp < 1) return InvalidArgument("pp: must be >= 1, got " + std::to_string(s.pp));
  if (s.vpp < 1) return InvalidArgument("vpp: must be >= 1, got " + std::to_string(s.vpp));
  if (s.microbatches < 1) {
    return InvalidArgument("microbatches: must be >= 1, got " + std::to_string(s.microbatches));
  }
  if (static_cast<int>(s.ranks.size()) != s.pp) {
    return InvalidArgument("ranks: expected one job list per rank (" + std::to_string(s.pp) +
                           "), got " + std::to_string(s.ranks.size()));
  }
  if (s.num_stages() != s.pp * s.vpp) {
    return InvalidArgument("stage_to_rank: expected pp x vpp = " + std::to_string(s.pp * s.vpp) +
                           " stages, got " + std::to_string(s.num_stages()));
  }
  for (int k = 0; k < s.num_stages(); ++k) {
    if (s.stage_to_rank[k] < 0 || s.stage_to_rank[k] >= s.pp) {
      return InvalidArgument("stage_to_rank[" + std::to_string(k) + "]: rank " +
                             std::to_string(s.stage_to_rank[k]) + " is not in 0.." +
                             std::to_string(s.pp - 1));
    }
  }
  for (int r = 0; r < s.pp; ++r) {
    for (size_t i = 0; i < s.ranks[r].size(); ++i) {
      const Action& a = s.ranks[r][i];
      if (static_cast<int>(a.op) >= kNumOps) {
        return InvalidArgument("rank " + std::to_string(r) + ", position " + std::to_string(i) + ": unknown op");
      }
      if (a.stage < 0 || a.stage >= s.num_stages()) {
        return InvalidArgument(Where(r, i, a) + ": stage must be in 0.." + std::to_string(s.num_stages() - 1));
      }
      if (TakesMicroBatch(a.op) && (a.mb < 0 || a.mb >= s.microbatches)) {
        return InvalidArgument(Where(r, i, a) + ": micro-batch must be in 0.." + std::to_string(s.microbatches - 1));
      }
      if (IsPerStage(a.op) && a.mb != -1) {
        return InvalidArgument(Where(r, i, a) + ": " + OpName(a.op) + " takes no micro-batch (mb -1), got " +
                               std::to_string(a.mb));
      }
      if (a.op == Op::kOverlapFB) {
        const auto& list = s.ranks[r];
        const bool f_next = i + 1 < list.size() && list[i + 1].op == Op::kF && list[i + 1].stage == a.stage &&
                            list[i + 1].mb == a.mb;
        const bool b_after = i + 2 < list.size() && (list[i + 2].op == Op::kB || list[i + 2].op == Op::kBW);
        if (!f_next || !b_after) {
          return InvalidArgument(Where(r, i, a) + ": OVERLAP_F_B must be followed by the F it overlaps (" +
                                 ToString(Action{Op::kF, a.stage, a.mb, -1}) +
                                 ") and then the B or BW that runs with it, nothing in between");
        }
      }
      if (IsComm(a.op) && (a.peer < 0 || a.peer >= s.pp || a.peer == r)) {
        return InvalidArgument(Where(r, i, a) + ": peer must be another rank in 0.." +
                               std::to_string(s.pp - 1) + ", got " + std::to_string(a.peer));
      }
    }
  }
  return Status::Ok();
}

Status Validate(const Schedule& schedule) { return Checker(schedule).Run(); }

}  // namespace pipecoord::schedules
