#include "jobplan/auto_plan.h"

#include <algorithm>
#include <map>
#include <optional>
#include <set>
#include <tuple>
#include <utility>
#include <vector>

#include "jobplan/plan_job.h"
#include "jobplan/spec_validation.h"
#include "memory/pipecoord_cpu.h"
#include "memory/units.h"
#include "planner/planner.h"
#include "proto/worker_kinds.h"
#include "schedules/registry.h"

namespace pipecoord::jobplan {
namespace {

// Strategies shown beside the chosen one.
constexpr size_t kNextBest = 4;
// Fastest strategies the planner keeps per world size: the first that fits as a job wins, and
// the planner has already pruned what its own estimate puts over the memory.
constexpr int kTopPerWorld = 32;
// The bounded searches' depths (AutoPlanOptions): the fastest 8 usually hold the choice and the
// next best (every one fitting as a job), then 32.
constexpr int kBoundedDepths[] = {8, kTopPerWorld};
// Where nothing fits, the leanest strategies (by the planner's estimate) planned as jobs to find
// the smallest shortfall.
constexpr size_t kLeanestTried = 64;
// "No memory reported": a budget no planner estimate reaches.
constexpr int64_t kUnlimited = int64_t{1} << 60;

// The machines' figures for the planner. Only the ranking of strategies matters here, and only
// roughly: a CPU worker is a few cores of fp32 matmuls and loopback or LAN TCP. The job's
// calibration (its measured steps) corrects the step time once it runs.
planner::ClusterSpec DeviceCluster(const std::string& kind, int workers, uint64_t memory_bytes) {
  planner::ClusterSpec c;  // "cuda": the planner's defaults (H100 SXM, NVLink, 200 Gb/s NICs)
  c.gpus = workers;
  c.gpu_memory_bytes = memory_bytes == 0 ? kUnlimited : static_cast<int64_t>(std::min<uint64_t>(memory_bytes, kUnlimited));
  c.reserved_bytes = 0;
  if (kind != "cuda") {
    c.gpus_per_node = std::max(1, workers);
    c.intra_node_bandwidth = c.inter_node_bandwidth = 1e9;
    c.link_latency_s = 50e-6;
    c.peak_flops = 100e9;
    c.efficiency = 0.3;
    c.memory_bandwidth = 10e9;
  }
  return c;
}

// The schedules the workers run (not the CSV importer: it needs a file), those a fixed vpp allows.
std::vector<std::string> Schedules(int fixed_vpp) {
  std::vector<std::string> names;
  for (const schedules::ScheduleInfo& info : schedules::AllSchedules()) {
    if (std::string(info.name) == "csv") continue;
    if (fixed_vpp > 0) {
      if (info.required_vpp != 0 && info.required_vpp != fixed_vpp) continue;
      if (info.required_vpp == 0 && fixed_vpp < 2) continue;  // a looped schedule at vpp 1 is 1F1B's
    }
    names.push_back(info.name);
  }
  return names;
}

planner::SearchSpace Space(const v1::JobSpec& spec) {
  planner::SearchSpace s;
  s.global_batch = spec.global_batch();
  s.micro_batches.clear();
  if (spec.micro_batch_size() > 0) {
    s.micro_batches.push_back(spec.micro_batch_size());
  } else {
    for (int b = 1; b <= std::min(spec.global_batch(), 1 << 16); ++b) {
      if (spec.global_batch() % b == 0) s.micro_batches.push_back(b);
    }
  }
  // ZeRO-1 runs on the C++ workers (CPU and CUDA); a spec that sets zero keeps it.
  const bool cpu_workers = spec.device() != "cuda" && spec.worker().kind() != v1::kTorchWorker;
  // Tied embeddings: ZeRO only where one stage holds both ends (spec validation); auto, which may
  // choose pp > 1, leaves it out.
  const bool zero_runs = spec.worker().kind() != v1::kTorchWorker && !spec.model().tied_embeddings();
  s.zero_stages = spec.has_zero() ? std::vector<int>{spec.zero()} : zero_runs ? std::vector<int>{0, 1} : std::vector<int>{0};
  // Activation recompute runs on the C++ workers (on CUDA selective keeps what none keeps: flash
  // attention); a spec that sets it keeps it.
  if (spec.has_recompute()) {
    auto r = memory::ParseRecompute(spec.recompute().empty() ? "none" : spec.recompute());
    s.recompute = {r.ok() ? *r : memory::Recompute::kNone};
  } else if (cpu_workers) {
    s.recompute = {memory::Recompute::kNone, memory::Recompute::kSelective, memory::Recompute::kFull};
  } else if (zero_runs) {
    s.recompute = {memory::Recompute::kNone, memory::Recompute::kFull};
  } else {
    s.recompute = {memory::Recompute::kNone};
  }
  s.schedules = Schedules(spec.vpp());
  if (spec.vpp() >= 2) s.vpps = {spec.vpp()};
  s.max_tp = 1;  // set by RunPlanner: the workers' largest host, or the spec's tp
  // Sequence parallelism runs with tp on the C++ workers (CPU and CUDA): auto tries it beside
  // plain tp unless the spec asks for it (then tp > 1 only would be kept by validation) or the
  // workers cannot (torch workers).
  s.sequence_parallel = spec.worker().kind() != v1::kTorchWorker;
  // What the workers' backend keeps: the CPU StageModel (fp32), or the CUDA one in the spec's
  // precision (the chosen plan's budgets then come from the same recipe, jobplan/memory_budget).
  const bool cuda = spec.device() == "cuda";
  s.dtype = cuda && spec.precision() == "bf16" ? memory::DtypePolicy::kBf16 : memory::DtypePolicy::kFp32;
  s.optimizer = memory::Optimizer::kAdamW;
  s.recipe = cuda ? "pipecoord-cuda" : "pipecoord-cpu";
  s.pp = spec.pp() > 0 ? spec.pp() : spec.stage_layers_size();
  s.dp = spec.dp();
  s.microbatches = spec.microbatches();
  return s;
}

std::string ScheduleOf(const planner::Candidate& c) {
  return c.schedule == planner::kNoSchedule ? planner::kNoScheduleEngine : c.schedule;
}

// A schedule's place in the registry, which lists the simpler ones first (1F1B before ZB-H1
// before zb-auto's search).
int RegistryOrder(const std::string& schedule) {
  const auto& all = schedules::AllSchedules();
  for (size_t i = 0; i < all.size(); ++i) {
    if (schedule == all[i].name) return static_cast<int>(i);
  }
  return -1;  // kNoSchedule: no pipeline at all
}

// Fastest first; ties by the planner's memory, then the simpler schedule, then the strategy, so
// the order never depends on the order of the world sizes.
bool Faster(const planner::Candidate& a, const planner::Candidate& b) {
  const planner::StrategyShape &x = a.shape, &y = b.shape;
  const int sa = RegistryOrder(a.schedule), sb = RegistryOrder(b.schedule);
  return std::tie(a.time.total_s, a.peak_bytes, sa, x.tp, x.dp, x.pp, x.vpp, x.micro_batch, x.zero, x.recompute, x.sp) <
         std::tie(b.time.total_s, b.peak_bytes, sb, y.tp, y.dp, y.pp, y.vpp, y.micro_batch, y.zero, y.recompute, y.sp);
}

// The planner's results over every world size the space allows, merged.
struct Search {
  int64_t candidates = 0, feasible = 0;
  std::vector<planner::Candidate> ranked;             // fastest first
  std::map<std::string, planner::PrunedReason> pruned;  // by reason
};

}  // namespace

std::vector<int> WorldSizes(int free_workers) {
  std::vector<int> out;
  if (free_workers <= kEveryWorldSizeUpTo) {
    for (int w = 1; w <= free_workers; ++w) out.push_back(w);
    return out;
  }
  std::set<int> sizes = {free_workers};
  for (int odd : {1, 3, 5, 7}) {
    for (int64_t w = odd; w <= free_workers; w *= 2) sizes.insert(static_cast<int>(w));
  }
  return {sizes.begin(), sizes.end()};
}

namespace {

// The planner over every world size, the largest first. With `bound`, a world size's groups that
// cannot beat the top_k fastest found so far on the others are pruned unbuilt
// (PlanOptions::time_to_beat): the first top_k of `ranked` are what the unbounded search gives
// (each is at or under every bound used); what follows them may differ.
// `shapes` carries the schedule profiles from one call to the next (null: the call's own).
Result<Search> RunPlanner(const v1::JobSpec& spec, const FreeWorkers& workers, uint64_t memory, int top_k, bool bound,
                          planner::ScheduleCache* shapes = nullptr) {
  const v1::ModelSpec& m = spec.model();
  const memory::ModelSpec model =
      memory::PipecoordCpuModel(m.layers(), m.hidden(), m.ffn_hidden(), m.heads(), m.vocab(), m.seq_len(), m.kv_heads(),
                                m.qkv_bias(), m.tied_embeddings(), m.head_dim());
  planner::SearchSpace space = Space(spec);
  // Tensor parallelism runs on the C++ workers, CPU and CUDA (torch workers run it only for
  // modules that ask for it: auto leaves their tp alone).
  const bool tp_runs = spec.worker().kind() != v1::kTorchWorker;
  space.max_tp = spec.tp() > 0 ? spec.tp() : tp_runs ? std::max(1, workers.largest_host > 0 ? workers.largest_host : workers.count) : 1;
  planner::PlanOptions options;
  options.top_k = top_k;
  // One cache for every world size: their searches simulate the same schedule shapes.
  planner::ScheduleCache own;
  options.shared_cache = shapes != nullptr ? shapes : &own;
  options.bound_by_step_time = bound;
  Search out;
  std::vector<int> worlds = WorldSizes(workers.count);
  std::reverse(worlds.begin(), worlds.end());  // more workers tend to be faster: a tight bound early
  std::vector<double> times;  // every kept candidate's step time so far
  for (int w : worlds) {
    if ((space.pp > 0 && w % space.pp) || (space.dp > 0 && w % space.dp)) continue;
    if (bound && times.size() >= static_cast<size_t>(top_k)) {
      std::nth_element(times.begin(), times.begin() + (top_k - 1), times.end());
      options.time_to_beat = times[top_k - 1];
    }
    auto res = planner::Plan(model, DeviceCluster(workers.device_kind, w, memory), space, options);
    if (!res.ok()) return Status(res.status().code(), "spec: the strategy search refused the job: " + res.status().message());
    out.candidates += res->candidates;
    out.feasible += res->feasible;
    for (planner::Candidate& c : res->top) {
      times.push_back(c.time.total_s);
      out.ranked.push_back(std::move(c));
    }
    for (const planner::PrunedReason& p : res->pruned) {
      auto [it, fresh] = out.pruned.try_emplace(p.reason, p);
      if (!fresh) it->second.count += p.count;
    }
  }
  std::stable_sort(out.ranked.begin(), out.ranked.end(), Faster);
  return out;
}

// One candidate planned as the job would run it.
struct Tried {
  Status status;  // the spec or the job plan refused it
  v1::JobSpec spec;
  v1::Plan plan;
  v1::StrategyChoice choice;
};

Tried TryCandidate(const v1::JobSpec& raw, const planner::Candidate& c) {
  Tried t;
  v1::JobSpec s = raw;
  if (raw.tp() > 0 && c.shape.tp != raw.tp()) {
    t.status = InvalidArgument("spec.tp fixes tp " + std::to_string(raw.tp()) + ", the candidate has tp " +
                               std::to_string(c.shape.tp));
    return t;
  }
  s.set_tp(c.shape.tp);
  s.set_zero(c.shape.zero);
  s.set_recompute(memory::RecomputeName(c.shape.recompute));
  if (raw.sequence_parallel() && !c.shape.sp) {
    t.status = InvalidArgument("spec.sequenceParallel is set, the candidate runs without it");
    return t;
  }
  s.set_sequence_parallel(c.shape.sp);
  s.set_schedule(ScheduleOf(c));
  s.set_pp(c.shape.pp);
  s.set_vpp(c.shape.vpp);
  s.set_dp(c.shape.dp);
  s.set_microbatches(c.shape.microbatches);
  s.set_micro_batch_size(c.shape.micro_batch);
  t.status = ValidateJobSpec(s);
  if (!t.status.ok()) return t;
  t.spec = WithDefaults(s);
  auto plan = PlanJob(t.spec);
  if (!plan.ok()) {
    t.status = plan.status();
    return t;
  }
  t.plan = std::move(plan).value();
  v1::StrategyChoice& ch = t.choice;
  ch.set_schedule(t.spec.schedule());
  ch.set_pp(t.spec.pp());
  ch.set_vpp(t.spec.vpp());
  ch.set_dp(t.spec.dp());
  ch.set_tp(std::max(1, t.spec.tp()));
  ch.set_zero(t.spec.zero());
  ch.set_sequence_parallel(t.spec.sequence_parallel());
  ch.set_recompute(t.spec.recompute().empty() ? "none" : t.spec.recompute());
  ch.set_microbatches(t.spec.microbatches());
  ch.set_micro_batch_size(t.spec.micro_batch_size());
  std::vector<int> rank_layers(t.spec.pp(), 0);
  for (const v1::StageShard& sh : t.plan.shards()) rank_layers[t.plan.stage_to_rank(sh.stage())] += sh.num_layers();
  for (int n : rank_layers) ch.add_stage_layers(n);
  ch.set_predicted_step_s(c.time.total_s);
  ch.set_predicted_bubble_rate(t.plan.predicted_bubble_rate());
  for (int r = 0; r < t.plan.memory_budget_bytes_size(); ++r) {
    if (r == 0 || t.plan.memory_budget_bytes(r) > ch.peak_bytes()) {
      ch.set_peak_bytes(t.plan.memory_budget_bytes(r));
      ch.set_tightest_rank(r);
    }
  }
  return t;
}

bool Fits(const v1::StrategyChoice& c, uint64_t memory) { return memory == 0 || c.peak_bytes() <= memory; }

void AddPruned(std::map<std::string, planner::PrunedReason>& pruned, const std::string& reason,
               const std::string& example) {
  auto [it, fresh] = pruned.try_emplace(reason, planner::PrunedReason{reason, 0, example});
  (void)fresh;
  ++it->second.count;
}

constexpr char kPlannerMemory[] = "memory over budget";
constexpr char kJobMemory[] = "a rank's job budget over the workers' memory";

void FillReport(const Search& search, const FreeWorkers& workers, int64_t over_memory, int64_t refused,
                v1::AutoPlanReport* r) {
  r->set_candidates(search.candidates);
  r->set_feasible(search.feasible - over_memory - refused);
  auto it = search.pruned.find(kPlannerMemory);
  r->set_pruned_for_memory((it == search.pruned.end() ? 0 : it->second.count) + over_memory);
  std::vector<planner::PrunedReason> reasons;
  for (const auto& [reason, p] : search.pruned) reasons.push_back(p);
  std::stable_sort(reasons.begin(), reasons.end(),
                   [](const auto& a, const auto& b) { return a.count > b.count; });
  for (const planner::PrunedReason& p : reasons) {
    r->add_pruned(std::to_string(p.count) + ": " + p.reason + " (" + p.example + ")");
  }
  r->set_workers(workers.count);
  r->set_worker_memory_bytes(workers.memory_bytes);
  r->set_device_kind(workers.device_kind);
}

}  // namespace

std::string DescribeStrategy(const v1::StrategyChoice& c) {
  return c.schedule() + ", pp " + std::to_string(c.pp()) + ", vpp " + std::to_string(c.vpp()) + ", dp " +
         std::to_string(c.dp()) + (c.tp() > 1 ? ", tp " + std::to_string(c.tp()) + (c.sequence_parallel() ? "+sp" : "") : "") +
         (c.zero() > 0 ? ", zero " + std::to_string(c.zero()) : "") +
         (!c.recompute().empty() && c.recompute() != "none" ? ", recompute " + c.recompute() : "") + ", " +
         std::to_string(c.microbatches()) + " micro-batches of " + std::to_string(c.micro_batch_size());
}

Result<AutoPlan> PlanAuto(const v1::JobSpec& raw, const FreeWorkers& workers, const AutoPlanOptions& options) {
  const std::string kind = workers.device_kind.empty() ? "cpu" : workers.device_kind;
  if (workers.count < 1) {
    return FailedPrecondition("spec.schedule: \"auto\" plans for the free workers, and no " + kind +
                              " worker is free now (pipectl workers)");
  }
  // Only the model's defaults matter to the search (ffnHidden); the strategy fields stay 0.
  const v1::JobSpec spec = WithDefaults(raw);
  const int fixed_pp = spec.pp() > 0 ? spec.pp() : std::max(1, spec.stage_layers_size());
  const int fixed_world = fixed_pp * std::max(1, spec.dp()) * std::max(1, spec.tp());
  if (fixed_world > workers.count) {
    return FailedPrecondition("spec.pp x spec.dp x spec.tp: the spec fixes " + std::to_string(fixed_pp) + " x " +
                              std::to_string(std::max(1, spec.dp())) + " x " + std::to_string(std::max(1, spec.tp())) +
                              " = " + std::to_string(fixed_world) + " worker(s), and " + std::to_string(workers.count) +
                              " " + kind + " worker(s) are free");
  }
  // The fastest first, each planned as a job: the first that fits is chosen, the next few shown.
  std::vector<Tried> fits;
  int64_t over_memory = 0, refused = 0;
  std::map<std::string, planner::PrunedReason> job_pruned;
  // Whether the choice came from the first `depth` strategies of `ranked`, which a search bounded
  // at that depth finds as the unbounded one does.
  auto choose = [&](const Search& search, size_t depth) {
    fits.clear();
    job_pruned.clear();
    over_memory = refused = 0;
    size_t looked = 0;
    for (const planner::Candidate& c : search.ranked) {
      if (fits.size() > kNextBest) break;
      ++looked;
      Tried t = TryCandidate(raw, c);
      if (!t.status.ok()) {
        ++refused;
        AddPruned(job_pruned, "the job plan refused it", t.status.message());
        continue;
      }
      if (!Fits(t.choice, workers.memory_bytes)) {
        ++over_memory;
        AddPruned(job_pruned, kJobMemory,
                  DescribeStrategy(t.choice) + ": rank " + std::to_string(t.choice.tightest_rank()) + " needs " +
                      memory::FormatBytes(static_cast<int64_t>(t.choice.peak_bytes())));
        continue;
      }
      fits.push_back(std::move(t));
    }
    return looked <= depth && fits.size() > kNextBest;
  };
  planner::ScheduleCache own;  // every pass below builds a schedule shape once
  planner::ScheduleCache& shapes = options.shapes != nullptr ? *options.shapes : own;
  std::optional<Search> search;
  if (options.bound_across_world_sizes) {
    for (int depth : kBoundedDepths) {
      auto bounded = RunPlanner(spec, workers, workers.memory_bytes, depth, /*bound=*/true, &shapes);
      if (!bounded.ok()) return bounded.status();
      search = std::move(bounded).value();
      if (choose(*search, static_cast<size_t>(depth))) break;
      search.reset();
    }
  }
  if (!search) {
    // Past what the bounds keep exact (or asked): every world size in full, as it would choose.
    auto full = RunPlanner(spec, workers, workers.memory_bytes, kTopPerWorld, /*bound=*/false, &shapes);
    if (!full.ok()) return full.status();
    search = std::move(full).value();
    choose(*search, search->ranked.size());
  }
  for (auto& [reason, p] : job_pruned) {
    auto [it, fresh] = search->pruned.try_emplace(reason, p);
    if (!fresh) it->second.count += p.count;
  }

  if (fits.empty()) {
    const bool memory_pruned = over_memory > 0 || search->pruned.count(kPlannerMemory) > 0;
    if (!memory_pruned) {
      std::string why;
      int shown = 0;
      std::vector<planner::PrunedReason> reasons;
      for (const auto& [reason, p] : search->pruned) reasons.push_back(p);
      std::stable_sort(reasons.begin(), reasons.end(), [](const auto& a, const auto& b) { return a.count > b.count; });
      for (const planner::PrunedReason& p : reasons) {
        if (shown++ == 3) break;
        why += (why.empty() ? "" : "; ") + p.reason + " (" + p.example + ")";
      }
      return FailedPrecondition("spec.schedule: \"auto\" found no strategy for " + std::to_string(workers.count) +
                                " free " + kind + " worker(s) that can run this job: " +
                                (why.empty() ? "the search space is empty" : why));
    }
    // Nothing fits: the leanest strategies, planned as jobs, name the smallest shortfall. (Should
    // the planner's estimate have been stricter than a job's budget, one of them fits: it runs.)
    auto all = RunPlanner(spec, workers, 0, 1 << 20, /*bound=*/false, &shapes);
    if (!all.ok()) return all.status();
    std::vector<planner::Candidate> lean = all->ranked;
    std::stable_sort(lean.begin(), lean.end(),
                     [](const auto& a, const auto& b) { return a.peak_bytes < b.peak_bytes; });
    if (lean.size() > kLeanestTried) lean.resize(kLeanestTried);
    std::stable_sort(lean.begin(), lean.end(), Faster);
    std::optional<Tried> least;
    for (const planner::Candidate& c : lean) {
      Tried t = TryCandidate(raw, c);
      if (!t.status.ok()) continue;
      if (Fits(t.choice, workers.memory_bytes)) {
        fits.push_back(std::move(t));
        if (fits.size() > kNextBest) break;
        continue;
      }
      if (!least || t.choice.peak_bytes() < least->choice.peak_bytes()) least = std::move(t);
    }
    if (fits.empty()) {
      if (!least) {
        return FailedPrecondition("spec.schedule: \"auto\" found no strategy that fits the " + std::to_string(workers.count) +
                                  " free " + kind + " worker(s)' memory (" +
                                  memory::FormatBytes(static_cast<int64_t>(workers.memory_bytes)) + ")");
      }
      const v1::StrategyChoice& c = least->choice;
      return FailedPrecondition("spec.schedule: \"auto\" found no strategy that fits in memory: rank " +
                                std::to_string(c.tightest_rank()) + " needs " +
                                memory::FormatBytes(static_cast<int64_t>(c.peak_bytes())) + ", workers report " +
                                memory::FormatBytes(static_cast<int64_t>(workers.memory_bytes)) + " (the leanest of " +
                                std::to_string(all->candidates) + " strategies for " + std::to_string(workers.count) +
                                " " + kind + " worker(s): " + DescribeStrategy(c) + ")");
    }
  }

  AutoPlan out;
  out.spec = std::move(fits.front().spec);
  out.plan = std::move(fits.front().plan);
  *out.report.mutable_chosen() = fits.front().choice;
  for (size_t i = 1; i < fits.size(); ++i) *out.report.add_next_best() = fits[i].choice;
  FillReport(*search, workers, over_memory, refused, &out.report);
  return out;
}

}  // namespace pipecoord::jobplan
