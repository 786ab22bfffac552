#include "planner/planner.h"

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <functional>
#include <limits>
#include <map>
#include <thread>
#include <tuple>

#include "memory/activations.h"
#include "memory/param_states.h"
#include "planner/schedule_cache.h"
#include "schedules/partition.h"
#include "schedules/registry.h"

namespace pipecoord::planner {
namespace {

using memory::ActivationModel;
using memory::ModelSpec;
using memory::Recompute;
using memory::TrainingSpec;

// A schedule as the search tries it: the name a plan shows and the generator that orders its
// micro-batches (the same but for pp 1, which has no pipeline and so no schedule: kNoSchedule,
// run as kNoScheduleEngine runs one rank).
struct Variant {
  std::string schedule;
  int vpp;
  std::string engine;
};

// Where the blocks of one schedule shape sit: per rank, its stages' block counts and whether it
// holds the first or last stage.
struct StageOnRank {
  int layers;
  bool first, last;
};
struct Layout {
  Status status;
  std::vector<std::vector<StageOnRank>> ranks;
  std::vector<int> rank_layers;
};

// "interleaved: microbatches: 3 must be >= pp 4" -> "... N must be >= pp N": one bucket per rule.
std::string WithoutNumbers(const std::string& s) {
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (std::isdigit(static_cast<unsigned char>(s[i]))) {
      out += 'N';
      while (i + 1 < s.size() && std::isdigit(static_cast<unsigned char>(s[i + 1]))) ++i;
    } else {
      out += s[i];
    }
  }
  return out;
}

class Search {
 public:
  Search(const ModelSpec& m, const ClusterSpec& c, const SearchSpace& s, const PlanOptions& o)
      : m_(m), c_(c), s_(s), o_(o), own_cache_(o.cache_schedules),
        cache_(o.shared_cache != nullptr && o.cache_schedules ? *o.shared_cache : own_cache_) {}

  Result<PlanResult> Run() {
    for (const std::string& name : s_.schedules.empty() ? AllNames() : s_.schedules) {
      const schedules::ScheduleInfo* info = *schedules::FindSchedule(name);
      if (info->required_vpp != 0) {
        variants_.push_back({name, info->required_vpp, name});
      } else {
        for (int v : s_.vpps) variants_.push_back({name, v, name});
      }
    }
    const int64_t per_b = static_cast<int64_t>(s_.zero_stages.size()) * s_.recompute.size();
    const int64_t per_variant = static_cast<int64_t>(s_.micro_batches.size()) * per_b;
    // Candidates under one (tp, pp, sp): every variant, or at pp 1 the one plan with no schedule.
    auto per_sp = [&](int pp) { return static_cast<int64_t>(VariantsFor(pp).size()) * per_variant; };
    std::vector<int> tps, all_divisors;
    for (int d = 1; d <= c_.gpus; ++d) {
      if (c_.gpus % d == 0) all_divisors.push_back(d);
    }
    for (int d : all_divisors) {
      if (d <= s_.max_tp) tps.push_back(d);
    }
    auto sp_options = [&](int tp) { return tp > 1 && s_.sequence_parallel ? 2 : 1; };
    for (int tp : tps) {
      for (int pp : all_divisors) {
        if (InSpace(tp, pp)) res_.candidates += sp_options(tp) * per_sp(pp);
      }
    }
    threads_ = o_.threads > 0 ? o_.threads : static_cast<int>(std::thread::hardware_concurrency());
    PIPECOORD_RETURN_IF_ERROR(Walk(tps, all_divisors, per_sp, per_variant, per_b));
    PIPECOORD_RETURN_IF_ERROR(o_.bound_by_step_time ? RunBounded() : RunAll());
    Finish();
    return std::move(res_);
  }

 private:
  // (tp, pp) fills the cluster with a whole dp and keeps the space's fixed pp and dp.
  bool InSpace(int tp, int pp) const {
    if ((c_.gpus / tp) % pp != 0) return false;
    if (s_.pp > 0 && pp != s_.pp) return false;
    return s_.dp == 0 || c_.gpus / tp / pp == s_.dp;
  }

  // The variants tried at pipeline degree `pp`.
  const std::vector<Variant>& VariantsFor(int pp) const { return pp == 1 ? no_schedule_ : variants_; }

  Status Walk(const std::vector<int>& tps, const std::vector<int>& all_divisors,
              const std::function<int64_t(int pp)>& per_sp, int64_t per_variant, int64_t per_b) {
    auto sp_options = [&](int tp) { return tp > 1 && s_.sequence_parallel ? 2 : 1; };
    auto budget = c_.gpu_memory_bytes - c_.reserved_bytes;
    for (int tp : tps) {
      std::vector<int> pps;
      int64_t per_tp = 0;
      for (int pp : all_divisors) {
        if (InSpace(tp, pp)) {
          pps.push_back(pp);
          per_tp += sp_options(tp) * per_sp(pp);
        }
      }
      if (m_.heads % tp || m_.kv_heads % tp || m_.ffn % tp) {
        Prune("tp must divide heads, kv-heads and ffn", per_tp, "tp " + std::to_string(tp));
        continue;
      }
      if (tp > c_.gpus_per_node) {
        Prune("tp larger than gpus per node (tensor parallelism across nodes)", per_tp,
              "tp " + std::to_string(tp) + " > " + std::to_string(c_.gpus_per_node));
        continue;
      }
      for (int pp : pps) {
        const int dp = c_.gpus / tp / pp;
        for (int spi = 0; spi < sp_options(tp); ++spi) {
          const bool sp = spi == 1;
          if (sp && m_.seq_len % tp) {
            Prune("sequence parallel needs tp to divide seq-len", per_sp(pp),
                  "seq-len " + std::to_string(m_.seq_len) + ", tp " + std::to_string(tp));
            continue;
          }
          for (const Variant& var : VariantsFor(pp)) {
            if (m_.layers < pp * var.vpp) {
              Prune("layers < pp x vpp (a chunk without blocks)", per_variant,
                    std::to_string(m_.layers) + " layers, pp " + std::to_string(pp) + " x vpp " + std::to_string(var.vpp));
              continue;
            }
            for (int b : s_.micro_batches) {
              if (s_.global_batch % (static_cast<int64_t>(dp) * b) != 0) {
                Prune("dp x micro-batch must divide the global batch", per_b,
                      "dp " + std::to_string(dp) + " x micro-batch " + std::to_string(b) + " vs " +
                          std::to_string(s_.global_batch));
                continue;
              }
              const int mbs = s_.global_batch / (dp * b);
              if (s_.microbatches > 0 && mbs != s_.microbatches) {
                Prune("micro-batch count fixed by the search space", per_b,
                      "dp " + std::to_string(dp) + " x micro-batch " + std::to_string(b) + ": " + std::to_string(mbs) +
                          " micro-batches, not " + std::to_string(s_.microbatches));
                continue;
              }
              // A bound no schedule can beat: the busiest rank holds at least ceil(L/p) blocks and one
              // micro-batch of them, with the most sharded states and the leanest recompute.
              auto bound = LowerBound(tp, sp, b, dp, pp);
              if (!bound.ok()) return bound.status();
              if (*bound > budget) {
                Prune("memory over budget", per_b,
                      "dp " + std::to_string(dp) + " tp " + std::to_string(tp) + " pp " + std::to_string(pp) +
                          " mb " + std::to_string(b) + ": at least " + std::to_string(*bound >> 20) +
                          " MiB on the rank with the most blocks whatever the schedule, ZeRO stage and recompute");
                continue;
              }
              groups_.push_back(Group{tp, pp, dp, sp, &var, b, mbs, per_b});
            }
          }
        }
      }
    }
    return Status::Ok();
  }

  // Candidates sharing everything but the ZeRO stage and the recompute policy.
  struct Group {
    int tp, pp, dp;
    bool sp;
    const Variant* var;
    int b, mbs;
    int64_t size;
  };

  Status EvaluateGroup(const Group& g) {
    const Variant& var = *g.var;
    const int64_t budget = c_.gpu_memory_bytes - c_.reserved_bytes;
    const ScheduleProfile& prof = cache_.Get(var.engine, g.pp, var.vpp, g.mbs);
    if (!prof.status.ok()) {
      std::string why = prof.status.code() == Code::kUnimplemented
                            ? "schedule " + var.schedule + " not implemented yet"
                            : "schedule refused: " + WithoutNumbers(prof.status.message());
      Prune(why, g.size, var.schedule + " pp " + std::to_string(g.pp) + " vpp " + std::to_string(var.vpp) + " m " +
                             std::to_string(g.mbs) + ": " + prof.status.message());
      return Status::Ok();
    }
    const Layout& layout = GetLayout(var, g.pp, prof);
    if (!layout.status.ok()) {
      Prune("layer placement refused: " + WithoutNumbers(layout.status.message()), g.size, layout.status.message());
      return Status::Ok();
    }
    for (int zero : s_.zero_stages) {
      if (zero > 0 && g.dp == 1) {
        Prune("ZeRO needs dp > 1 (same as ZeRO-0)", s_.recompute.size(), "dp 1, zero " + std::to_string(zero));
        continue;
      }
      for (Recompute rc : s_.recompute) {
        Candidate cand;
        cand.schedule = var.schedule;
        StrategyShape& sh = cand.shape;
        sh.dp = g.dp;
        sh.tp = g.tp;
        sh.pp = g.pp;
        sh.vpp = var.vpp;
        sh.sp = g.sp;
        sh.zero = zero;
        sh.recompute = rc;
        sh.micro_batch = g.b;
        sh.microbatches = g.mbs;
        sh.dtype = s_.dtype;
        sh.bubble_rate = prof.bubble_rate;
        auto am = Activations(g.tp, g.sp, rc, g.b);
        if (!am.ok()) return am.status();
        Evaluate(**am, layout, prof, &cand);
        Tick(1);
        if (cand.peak_bytes > budget) {
          Prune("memory over budget", 0, Describe(cand) + ": peak " + std::to_string(cand.peak_bytes >> 20) +
                                             " MiB on rank " + std::to_string(cand.tightest_rank));
          continue;
        }
        ++res_.feasible;
        Keep(std::move(cand));
      }
    }
    return Status::Ok();
  }

  // The fastest any member of the group could be: the least bubble any schedule of its shape can
  // have (MinBubbleRate), the fewest blocks the busiest rank can hold, no head, the cheapest ZeRO stage and
  // recompute policy of the space among those whose MemoryLowerBound fits (memory that forces
  // recompute makes every member pay for it).
  Result<double> TimeLowerBound(const Group& g) {
    const memory::ParamCounts& pc = Params(g.tp);
    StrategyShape sh;
    sh.dp = g.dp;
    sh.tp = g.tp;
    sh.pp = g.pp;
    sh.vpp = g.var->vpp;
    sh.sp = g.sp;
    sh.micro_batch = g.b;
    sh.microbatches = g.mbs;
    sh.dtype = s_.dtype;
    sh.bubble_rate = MinBubbleRate(g.pp, g.var->vpp, g.mbs);
    // Some rank holds at least ceil(L/p) blocks; the busiest (Evaluate) works at least as long.
    sh.bottleneck_layers = (m_.layers + g.pp - 1) / g.pp;
    sh.bottleneck_has_head = false;
    sh.params_per_rank = sh.bottleneck_layers * pc.per_block;
    const int64_t budget = c_.gpu_memory_bytes - c_.reserved_bytes;
    double best = -1;
    for (int zero : s_.zero_stages) {
      if (zero > 0 && g.dp == 1) continue;  // no candidate: pruned as "ZeRO needs dp > 1"
      for (Recompute rc : s_.recompute) {
        auto least = MemoryLowerBound(g.tp, g.sp, g.b, g.dp, g.pp, zero, rc);
        if (!least.ok()) return least.status();
        if (*least > budget) continue;
        sh.zero = zero;
        sh.recompute = rc;
        const double t = EstimateStepTime(m_, c_, sh).total_s;
        if (best < 0 || t < best) best = t;
      }
    }
    return best < 0 ? 0.0 : best;  // no member can fit or exist: evaluated, to be pruned by name
  }

  // Every group, fastest-possible first, each only while it could still enter the top k (or beat
  // the caller's time_to_beat). In batches holding one slow build per thread (and the quick ones
  // met on the way, which ride along): the batch's schedules are built in parallel, then the batch
  // is evaluated and the bound tightens for the next.
  Status RunBounded() {
    std::vector<std::pair<double, const Group*>> order;
    order.reserve(groups_.size());
    for (const Group& g : groups_) {
      auto bound = TimeLowerBound(g);
      if (!bound.ok()) return bound.status();
      order.emplace_back(*bound, &g);
    }
    std::stable_sort(order.begin(), order.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
    const size_t k = static_cast<size_t>(std::max(o_.top_k, 0));
    const size_t batch = static_cast<size_t>(std::max(threads_, 1));
    for (size_t i = 0; i < order.size();) {
      std::vector<const Group*> run;
      std::vector<ScheduleCache::Key> keys;
      size_t slow = 0;
      for (; i < order.size() && slow < batch && run.size() < kMaxBatch; ++i) {
        const auto& [bound, g] = order[i];
        const bool top_full = k > 0 && res_.top.size() >= k;
        const double own = top_full ? res_.top.front().time.total_s : std::numeric_limits<double>::infinity();
        if (bound > std::min(own, o_.time_to_beat)) {
          char example[192];
          std::snprintf(example, sizeof example, "%s pp %d vpp %d m %d: at least %.3f s, %s %.3f s", g->var->schedule.c_str(),
                        g->pp, g->var->vpp, g->mbs, bound,
                        own <= o_.time_to_beat ? "the top k's slowest takes" : "the caller's bound is", std::min(own, o_.time_to_beat));
          Prune("cannot enter the top k even with the least pipeline bubble (schedule not built)", g->size, example);
          continue;
        }
        run.push_back(g);
        keys.emplace_back(g->var->engine, g->pp, g->var->vpp, g->mbs);
        // Counted whether built already or not: a batch is the same on a warm cache (the coordinator's,
        // kept across submissions) as on a cold one, so what is pruned, and the report, are too.
        if (SlowToBuild(g->var->engine)) ++slow;
      }
      if (o_.cache_schedules && run.size() > 1) cache_.Prefetch(keys, static_cast<int>(batch));
      for (const Group* g : run) PIPECOORD_RETURN_IF_ERROR(EvaluateGroup(*g));
    }
    return Status::Ok();
  }

  // Schedules whose profile takes a tenth of a second or more to build at the sizes auto meets
  // (zb-auto and v-auto search; v-half and v-min replay their orders eleven times); the others
  // build in milliseconds.
  static bool SlowToBuild(const std::string& engine) {
    return engine == "zb-auto" || engine == "v-auto" || engine == "v-half" || engine == "v-min";
  }
  // Groups per batch at most, so the bound still tightens between batches of quick builds.
  static constexpr size_t kMaxBatch = 64;

  // Every group in the order of the walk, their schedules built up front on the threads.
  Status RunAll() {
    if (o_.cache_schedules && threads_ > 1) {
      std::vector<ScheduleCache::Key> keys;
      for (const Group& g : groups_) keys.emplace_back(g.var->engine, g.pp, g.var->vpp, g.mbs);
      cache_.Prefetch(keys, threads_);
    }
    for (const Group& g : groups_) PIPECOORD_RETURN_IF_ERROR(EvaluateGroup(g));
    return Status::Ok();
  }

  static std::vector<std::string> AllNames() {
    std::vector<std::string> names;
    for (const schedules::ScheduleInfo& info : schedules::AllSchedules()) {
      if (std::string(info.name) != "csv") names.push_back(info.name);
    }
    return names;
  }

  static std::string Describe(const Candidate& c) {
    const StrategyShape& s = c.shape;
    return "dp " + std::to_string(s.dp) + " tp " + std::to_string(s.tp) + (s.sp ? "+sp" : "") + " pp " +
           std::to_string(s.pp) + " vpp " + std::to_string(s.vpp) + " " + c.schedule + " mb " +
           std::to_string(s.micro_batch) + " zero " + std::to_string(s.zero) + " recompute " +
           memory::RecomputeName(s.recompute);
  }

  void Prune(const std::string& reason, int64_t subtree, const std::string& example) {
    auto [it, fresh] = pruned_.try_emplace(reason, PrunedReason{reason, 0, example});
    (void)fresh;
    it->second.count += subtree == 0 ? 1 : subtree;
    if (subtree > 0) Tick(subtree);
  }

  void Tick(int64_t n) {
    done_ += n;
    if (o_.progress && done_ - reported_ >= 4096) {
      reported_ = done_;
      o_.progress(done_, res_.candidates);
    }
  }

  Result<const ActivationModel*> Activations(int tp, bool sp, Recompute rc, int b) {
    auto key = std::make_tuple(tp, sp, static_cast<int>(rc), b);
    auto it = acts_.find(key);
    if (it != acts_.end()) return &it->second;
    TrainingSpec t;
    t.tp = tp;
    t.sp = sp;
    t.recompute = rc;
    t.micro_batch = b;
    t.dtype = s_.dtype;
    t.recipe = s_.recipe;
    auto am = memory::ResolveActivations(m_, t);
    if (!am.ok()) return am.status();
    return &acts_.emplace(key, std::move(*am)).first->second;
  }

  // The least peak any candidate with this ZeRO stage and recompute policy can have: the rank with
  // the most blocks holds at least ceil(L/p) of them, and at its first B at least one
  // micro-batch's activations of every block it holds (micro-batch 0 crossed all its chunks).
  Result<int64_t> MemoryLowerBound(int tp, bool sp, int b, int dp, int pp, int zero, Recompute rc) {
    auto am = Activations(tp, sp, rc, b);
    if (!am.ok()) return am.status();
    const memory::ParamCounts& pc = Params(tp);
    TrainingSpec t;
    t.dp = dp;
    t.zero = zero;
    t.dtype = s_.dtype;
    t.optimizer = s_.optimizer;
    const int64_t blocks = (m_.layers + pp - 1) / pp;
    return memory::ParamStateBytes(blocks * pc.per_block, t).total() + blocks * (*am)->block.stored_bytes;
  }

  // The least of MemoryLowerBound over the space's ZeRO stages and recompute policies.
  Result<int64_t> LowerBound(int tp, bool sp, int b, int dp, int pp) {
    int64_t least = -1;
    for (int zero : s_.zero_stages) {
      for (Recompute rc : s_.recompute) {
        auto m = MemoryLowerBound(tp, sp, b, dp, pp, zero, rc);
        if (!m.ok()) return m.status();
        if (least < 0 || *m < least) least = *m;
      }
    }
    return least;
  }

  // memory::CountParams at `tp`, kept for the next call with the same tp (the walk goes tp by tp).
  const memory::ParamCounts& Params(int tp) {
    if (pc_tp_ != tp) {
      pc_ = memory::CountParams(m_, tp);
      pc_tp_ = tp;
    }
    return pc_;
  }

  const Layout& GetLayout(const Variant& var, int pp, const ScheduleProfile& prof) {
    auto key = std::make_tuple(var.schedule, pp, var.vpp);
    auto it = layouts_.find(key);
    if (it != layouts_.end()) return it->second;
    Layout l;
    auto stage_layers = schedules::PartitionLayers(m_.layers, pp, prof.stage_to_rank);
    if (!stage_layers.ok()) {
      l.status = stage_layers.status();
    } else {
      l.ranks.resize(pp);
      l.rank_layers.assign(pp, 0);
      const int n = static_cast<int>(prof.stage_to_rank.size());
      for (int k = 0; k < n; ++k) {
        const int r = prof.stage_to_rank[k];
        l.ranks[r].push_back({(*stage_layers)[k], k == 0, k == n - 1});
        l.rank_layers[r] += (*stage_layers)[k];
      }
    }
    return layouts_.emplace(key, std::move(l)).first->second;
  }

  // Memory per rank exactly as memory::EstimateMemory counts it (for one chunk per rank; with
  // several, each rank's live counts are priced at its largest chunk) and the step time.
  void Evaluate(const ActivationModel& am, const Layout& layout, const ScheduleProfile& prof, Candidate* c) {
    const StrategyShape& s = c->shape;
    const memory::ParamCounts& pc = Params(s.tp);
    TrainingSpec t;
    t.dp = s.dp;
    t.zero = s.zero;
    t.dtype = s_.dtype;
    t.optimizer = s_.optimizer;
    const int64_t param_elem = memory::ActivationBytes(s_.dtype);
    const int64_t grad_elem = 4;
    int64_t max_params = 0;
    double max_cost = -1;
    // A rank's compute and TP time is affine in its blocks, plus the head's where it is.
    const double per_block_s = RankPipelineSeconds(m_, c_, s, 1, false);
    const double head_s = RankPipelineSeconds(m_, c_, s, 0, true);
    const memory::BlockActivations& blk = am.block;
    for (int r = 0; r < s.pp; ++r) {
      int64_t stage_stored = 0, stage_w = 0;
      bool first = false, last = false, one_stage_both = false;
      for (const StageOnRank& st : layout.ranks[r]) {
        const int64_t kCap = int64_t{1} << 50;  // per block: beyond any GPU, far from overflow
        int64_t stored = st.layers * std::min(blk.stored_bytes, kCap), w = st.layers * std::min(blk.w_bytes, kCap);
        if (st.first) {
          stored += am.first.stored_bytes;
          w += am.first.w_bytes;
          first = true;
        }
        if (st.last) {
          stored += am.last.stored_bytes;
          w += am.last.w_bytes;
          last = true;
        }
        one_stage_both = one_stage_both || (st.first && st.last);
        stage_stored = std::max(stage_stored, stored);
        stage_w = std::max(stage_w, w);
      }
      // In 128 bits and capped: absurd sizes must prune as over budget, not overflow.
      const __int128 cap = static_cast<__int128>(1) << 60;
      int64_t act = 0;
      for (const LiveCounts& lc : prof.rank_profile[r]) {
        __int128 live = static_cast<__int128>(lc.stored) * stage_stored + static_cast<__int128>(lc.pending_w) * stage_w;
        act = std::max(act, static_cast<int64_t>(std::min(live, cap)));
      }
      const int layers = layout.rank_layers[r];
      int64_t params = layers * pc.per_block;
      if (first) params += pc.embedding + pc.positions;
      const bool head_here = last;
      if (last) {
        params += pc.final_norm;
        if (!m_.tied_embeddings || !one_stage_both) params += pc.lm_head;  // a copy (memory/estimate.cc)
      }
      const memory::StateBytes states = memory::ParamStateBytes(params, t);
      int64_t transient = layers > 0 ? blk.recompute_bytes : 0;
      if (last) transient = std::max(transient, am.last.transient_bytes);
      if (s.zero >= 3 && layers > 0) transient += pc.per_block * (param_elem + grad_elem);
      const int64_t peak = states.total() + act + transient;
      if (peak > c->peak_bytes || r == 0) {
        c->peak_bytes = peak;
        c->tightest_rank = r;
        c->params_bytes = states.params;
        c->grads_bytes = states.grads;
        c->optimizer_bytes = states.optimizer_side();
        c->activations_bytes = act;
        c->transient_bytes = transient;
      }
      max_params = std::max(max_params, params);
      const double cost = layers * per_block_s + (head_here ? head_s : 0.0);
      if (cost > max_cost) {
        max_cost = cost;
        c->shape.bottleneck_layers = layers;
        c->shape.bottleneck_has_head = head_here;
      }
    }
    c->shape.params_per_rank = max_params;
    c->time = EstimateStepTime(m_, c_, c->shape);
    c->tokens_per_s = static_cast<double>(s_.global_batch) * m_.seq_len / c->time.total_s;
    c->mfu = c->time.model_flops / (c_.gpus * c_.peak_flops * c->time.total_s);
  }

  // Faster first; ties by less memory, then by the strategy itself, so the order never depends
  // on the order of evaluation.
  static bool Faster(const Candidate& a, const Candidate& b) {
    const StrategyShape &x = a.shape, &y = b.shape;
    return std::tie(a.time.total_s, a.peak_bytes, a.schedule, x.dp, x.tp, x.sp, x.pp, x.vpp, x.micro_batch, x.zero,
                    x.recompute) < std::tie(b.time.total_s, b.peak_bytes, b.schedule, y.dp, y.tp, y.sp, y.pp, y.vpp,
                                            y.micro_batch, y.zero, y.recompute);
  }

  void Keep(Candidate c) {
    const size_t k = static_cast<size_t>(std::max(o_.top_k, 0));
    if (k == 0) return;
    if (res_.top.size() < k) {
      res_.top.push_back(std::move(c));
      std::push_heap(res_.top.begin(), res_.top.end(), Faster);  // slowest kept on top
    } else if (Faster(c, res_.top.front())) {
      std::pop_heap(res_.top.begin(), res_.top.end(), Faster);
      res_.top.back() = std::move(c);
      std::push_heap(res_.top.begin(), res_.top.end(), Faster);
    }
  }

  void Finish() {
    std::sort_heap(res_.top.begin(), res_.top.end(), Faster);
    for (auto& [reason, pr] : pruned_) res_.pruned.push_back(pr);
    std::stable_sort(res_.pruned.begin(), res_.pruned.end(),
                     [](const PrunedReason& a, const PrunedReason& b) { return a.count > b.count; });
    res_.schedule_profiles = cache_.misses();
    res_.schedule_cache_hits = cache_.hits();
    if (o_.progress) o_.progress(done_, res_.candidates);
  }

  const ModelSpec& m_;
  const ClusterSpec& c_;
  const SearchSpace& s_;
  const PlanOptions& o_;
  ScheduleCache own_cache_;
  ScheduleCache& cache_;  // own_cache_, or the caller's (PlanOptions::shared_cache)
  std::vector<Variant> variants_;
  const std::vector<Variant> no_schedule_ = {{kNoSchedule, 1, kNoScheduleEngine}};
  std::map<std::tuple<int, bool, int, int>, ActivationModel> acts_;
  std::map<std::tuple<std::string, int, int>, Layout> layouts_;
  std::map<std::string, PrunedReason> pruned_;
  memory::ParamCounts pc_;
  int pc_tp_ = 0;
  PlanResult res_;
  int64_t done_ = 0, reported_ = 0;
  std::vector<Group> groups_;  // what the walk left to evaluate
  int threads_ = 1;
};

}  // namespace

Result<PlanResult> Plan(const ModelSpec& model, const ClusterSpec& cluster, const SearchSpace& space,
                        const PlanOptions& options) {
  PIPECOORD_RETURN_IF_ERROR(memory::ValidateModel(model));
  PIPECOORD_RETURN_IF_ERROR(ValidateCluster(cluster));
  PIPECOORD_RETURN_IF_ERROR(ValidateSearchSpace(space));
  auto recipe = memory::FindRecipe(space.recipe);
  if (!recipe.ok()) return recipe.status();
  Search search(model, cluster, space, options);
  return search.Run();
}

}  // namespace pipecoord::planner
