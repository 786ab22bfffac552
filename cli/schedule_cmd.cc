// pipectl schedule: build a schedule by name (or import a CSV), validate and simulate it, and
// print it as a text grid, JSON, PyTorch CSV or a Perfetto trace.
#include <cstdio>
#include <numeric>
#include <string>
#include <vector>

#include "cli/cli_io.h"
#include "cli/verbs.h"
#include "common/flags.h"
#include "schedules/best_schedule.h"
#include "schedules/csv_format.h"
#include "schedules/json_format.h"
#include "schedules/partition.h"
#include "schedules/registry.h"
#include "schedules/simulator.h"
#include "schedules/text_grid.h"
#include "schedules/trace_format.h"

namespace pipecoord::cli {
namespace {

namespace s = ::pipecoord::schedules;

constexpr const char* kVerb = "schedule";
constexpr size_t kMaxCsvBytes = size_t{256} << 20;
constexpr int kMaxLayers = 1'000'000;

struct Options {
  std::string schedule, csv, format = "text", out;
  int pp = 0, vpp = 0, microbatches = 0, layers = 0;
  std::vector<int> stage_layers;
  double cost_f = 1, cost_b = 1, cost_w = 1, cost_comm = 0, w_share = 0.5, mem_limit = 0;
  double cost_unshard = 0, cost_reshard = 0, cost_reduce_grad = 0, overlap = 0;
};

std::string KnownNames() {
  std::string names;
  for (const s::ScheduleInfo& info : s::AllSchedules()) names += (names.empty() ? "" : ", ") + std::string(info.name);
  return names + ", or best (every schedule that fits the shape, the shortest within --mem-limit runs)";
}

bool IsBest(const std::string& name) { return name == s::kBestSchedule; }

void Declare(FlagSet& f, Options& o) {
  f.String("schedule", &o.schedule, "schedule name, required: " + KnownNames() + " (see `pipectl schedules`)");
  f.Int("pp", &o.pp, "pipeline degree: ranks (GPUs), >= 1; required (with csv: read from the file)");
  f.Int("vpp", &o.vpp, "model chunks (virtual stages) per rank, >= 1; default: the schedule's own "
                       "(1; 2 for interleaved, looped-bfs and the V shapes)");
  f.Int("microbatches", &o.microbatches, "micro-batches per training step, >= 1; required (with csv: "
                                         "read from the file)");
  f.Int("layers", &o.layers, "transformer blocks in the model, spread evenly over the ranks and their "
                             "chunks; each stage then costs in proportion to its blocks. Default: none, "
                             "every chunk costs 1/vpp of its rank's share");
  f.IntList("stage-layers", &o.stage_layers,
            "blocks per rank (dealt round-robin over its chunks) or per virtual stage in model "
            "order, e.g. 5,3; each >= 1; must sum to --layers when both are given");
  f.Double("cost-f", &o.cost_f, "forward time of one micro-batch through one rank's whole share, in "
                                "time units (a chunk of v takes 1/v); default 1");
  f.Double("cost-b", &o.cost_b, "input-gradient backward time, same units; default 1 (a full backward "
                                "BW takes cost-b + cost-w)");
  f.Double("cost-w", &o.cost_w, "weight-gradient backward time, same units; default 1");
  f.Double("cost-comm", &o.cost_comm, "one point-to-point transfer between ranks, same units; default 0");
  f.Double("cost-unshard", &o.cost_unshard, "UNSHARD (gathering a stage's FSDP-sharded parameters, in an "
                                            "imported CSV) per rank's whole share, same units; holds the rank, "
                                            "counts as idle; default 0");
  f.Double("cost-reshard", &o.cost_reshard, "RESHARD (freeing them), the same way; default 0");
  f.Double("cost-reduce-grad", &o.cost_reduce_grad, "REDUCE_GRAD (a stage's gradient all-reduce across "
                                                    "data-parallel replicas) per rank's whole share, same units; "
                                                    "runs in the background on the rank's reduction lane, OPT and "
                                                    "the rank's step end wait for it; default 0");
  f.Double("overlap", &o.overlap, "OVERLAP_F_B (an imported CSV's overlapped forward and backward): the share of the "
                                  "shorter half hidden under the longer, 0..1; the slot lasts F + B - overlap x "
                                  "min(F, B); default 0: one after the other, as PyTorch's runtime runs them");
  f.Double("w-share", &o.w_share, "share of a stage's activations that B keeps alive until W, 0..1; "
                                  "default 0.5");
  f.Double("mem-limit", &o.mem_limit, "peak activations allowed per rank, in micro-batches of one "
                                      "rank's whole share; read by the memory-aware searches (zb-auto, v-auto) "
                                      "and by best (a schedule above it on any rank is refused); "
                                      "default 0: the schedule's own");
  f.String("csv", &o.csv, "with --schedule csv: the PyTorch-format CSV file to import (I input-gradient "
                          "backward, B full backward, W weight gradient; a file with W and no I is "
                          "read with B as the input gradient; PyTorch's (F;B)OVERLAP_F_B, UNSHARD, RESHARD "
                          "and REDUCE_GRAD too)");
  f.Format(&o.format, {"text", "json", "csv", "perfetto"}, "output: text (a time grid per rank), json, csv (PyTorch format, with "
                                "sends and receives) or perfetto (Chrome trace JSON, 1 time unit = "
                                "1 ms); default text");
  f.String("out", &o.out, "write the output to this file and print where; default: stdout");
}

// Names the flag in a library message: "pp: must be >= 1" -> "--pp: must be >= 1".
std::string WithFlag(const std::string& message) {
  static const char* const kFlags[] = {"schedule",     "pp",           "vpp",         "microbatches",
                                       "layers",       "stage-layers", "cost-f",      "cost-b",
                                       "cost-w",       "cost-comm",    "cost-unshard", "cost-reshard",
                                       "cost-reduce-grad", "overlap",  "w-share",     "mem-limit"};
  for (const char* flag : kFlags) {
    const std::string prefix = std::string(flag) + ":";
    if (message.rfind(prefix, 0) == 0) return "--" + message;
  }
  return message;
}

Status Flagged(const Status& st) { return Status(st.code(), WithFlag(st.message())); }

Status CheckOptions(const FlagSet& f, const Options& o) {
  if (!f.Given("schedule")) return InvalidArgument("--schedule: required; one of " + KnownNames());
  if (!IsBest(o.schedule)) {
    auto info = s::FindSchedule(o.schedule);
    if (!info.ok()) return InvalidArgument(WithFlag(info.status().message()) + ", or best");
  }
  const bool csv = o.schedule == "csv";
  if (!csv && !f.Given("pp")) return InvalidArgument("--pp: required (pipeline ranks, >= 1)");
  if (!csv && !f.Given("microbatches")) return InvalidArgument("--microbatches: required (micro-batches per step, >= 1)");
  if (f.Given("vpp") && o.vpp < 1) return InvalidArgument("--vpp: must be >= 1, got " + std::to_string(o.vpp));
  if (csv && !f.Given("csv")) return InvalidArgument("--csv: required with --schedule csv (the CSV file to import)");
  if (!csv && f.Given("csv")) return InvalidArgument("--csv: only read with --schedule csv");
  if (f.Given("layers") && (o.layers < 1 || o.layers > kMaxLayers)) {
    return InvalidArgument("--layers: must be in 1.." + std::to_string(kMaxLayers) + ", got " + std::to_string(o.layers));
  }
  if (f.Given("stage-layers")) {
    if (o.stage_layers.empty()) return InvalidArgument("--stage-layers: needs at least one count, e.g. 5,3");
    for (int n : o.stage_layers) {
      if (n < 1 || n > kMaxLayers) {
        return InvalidArgument("--stage-layers: every count must be in 1.." + std::to_string(kMaxLayers) +
                               ", got " + std::to_string(n));
      }
    }
  }
  return Status::Ok();
}

// Blocks per virtual stage from --layers / --stage-layers for a placement (stage -> rank) of pp ranks.
Result<std::vector<int>> StageLayers(const FlagSet& f, const Options& o, int pp, const std::vector<int>& stage_to_rank) {
  if (!f.Given("stage-layers")) return s::PartitionLayers(o.layers, pp, stage_to_rank);
  const long long sum = std::accumulate(o.stage_layers.begin(), o.stage_layers.end(), 0LL);
  if (sum > kMaxLayers) {
    return InvalidArgument("--stage-layers: counts must sum to at most " + std::to_string(kMaxLayers) + ", got " +
                           std::to_string(sum));
  }
  const int layers = f.Given("layers") ? o.layers : static_cast<int>(sum);
  const int n = static_cast<int>(o.stage_layers.size());
  const int stages = static_cast<int>(stage_to_rank.size());
  if (n == pp) return s::PartitionLayers(layers, pp, stage_to_rank, o.stage_layers);
  if (n == stages) {
    if (sum != layers) {
      return InvalidArgument("--stage-layers: counts must sum to --layers (" + std::to_string(layers) + "), got " +
                             std::to_string(sum));
    }
    return o.stage_layers;
  }
  return InvalidArgument("--stage-layers: must have one count per rank (--pp = " + std::to_string(pp) +
                         ") or per virtual stage (" + std::to_string(stages) + "), got " + std::to_string(n));
}

// A CSV import must agree with the shape flags the user gave.
Status CheckImportedShape(const FlagSet& f, const Options& o, const s::Schedule& sched) {
  auto agree = [&](const char* flag, int given, int found, const char* what) -> Status {
    if (f.Given(flag) && given != found) {
      return InvalidArgument("--" + std::string(flag) + ": " + std::to_string(given) + " given, but the CSV has " +
                             std::to_string(found) + " " + what);
    }
    return Status::Ok();
  };
  PIPECOORD_RETURN_IF_ERROR(agree("pp", o.pp, sched.pp, "rows (ranks)"));
  PIPECOORD_RETURN_IF_ERROR(agree("vpp", o.vpp, sched.vpp, "stages per rank"));
  return agree("microbatches", o.microbatches, sched.microbatches, "micro-batches");
}

std::string Num(double v) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.6g", v);
  return buf;
}

std::string TextReport(const s::Schedule& sched, const s::Simulation& sim, const s::CostModel& c,
                       const std::vector<int>& stage_layers, double mem_limit) {
  std::string out = s::ScheduleToTextGrid(sched, sim);
  out += "costs (time units, one rank's whole share): f=" + Num(c.f) + " b=" + Num(c.b) + " w=" + Num(c.w) +
         " comm=" + Num(c.comm);
  if (c.unshard > 0) out += " unshard=" + Num(c.unshard);
  if (c.reshard > 0) out += " reshard=" + Num(c.reshard);
  if (c.reduce_grad > 0) out += " reduce-grad=" + Num(c.reduce_grad);
  if (c.overlap > 0) out += " overlap=" + Num(c.overlap);
  out += "\n";
  out += "peak activations per rank (micro-batches of one rank's mean share):";
  for (size_t r = 0; r < sim.ranks.size(); ++r) out += (r == 0 ? " " : ", ") + Num(sim.ranks[r].peak_activations);
  out += "\n";
  if (!stage_layers.empty()) {
    out += "layers per stage:";
    for (size_t k = 0; k < stage_layers.size(); ++k) out += (k == 0 ? " " : ", ") + std::to_string(stage_layers[k]);
    out += "\n";
  }
  for (size_t r = 0; mem_limit > 0 && r < sim.ranks.size(); ++r) {
    if (!s::WithinMemLimit(sim.ranks[r].peak_activations, mem_limit)) {
      out += "note: rank " + std::to_string(r) + " peaks at " + Num(sim.ranks[r].peak_activations) +
             ", above --mem-limit " + Num(mem_limit) + "\n";
    }
  }
  return out;
}

// BuildSchedule with the CLI's messages: flags named, UNIMPLEMENTED said plainly.
Result<s::Schedule> Build(const std::string& name, const s::ScheduleSpec& spec) {
  auto sched = s::BuildSchedule(name, spec);
  if (sched.ok()) return sched;
  const Status& st = sched.status();
  if (st.code() == Code::kUnimplemented) {
    return Status(Code::kUnimplemented, "schedule \"" + name + "\" is not available yet (" + st.message() + ")");
  }
  return Flagged(st);
}

std::string Padded(std::string text, size_t width) {
  if (text.size() < width) text.resize(width, ' ');
  return text;
}

// How best chose: the winner, every schedule that fits ranked, and the refused with the reason.
std::string BestText(const s::BestResult& best, double mem_limit) {
  const std::string limit = mem_limit > 0 ? "within --mem-limit " + Num(mem_limit)
                                          : "with no --mem-limit (each schedule at its own memory)";
  std::string out = "best: " + best.ranked.front().schedule + ", the shortest " + s::kBestMeasure + " of " +
                    std::to_string(best.ranked.size()) + " schedule(s) " + limit + "\n";
  out += "  schedule     vpp  makespan  rank span  bubble  peak activations\n";
  for (const s::BestCandidate& c : best.ranked) {
    char bubble[16];
    std::snprintf(bubble, sizeof bubble, "%.1f%%", c.bubble_rate * 100);
    out += "  " + Padded(c.schedule, 13) + Padded(std::to_string(c.vpp), 5) + Padded(Num(c.makespan), 10) +
           Padded(Num(c.rank_span), 11) + Padded(bubble, 8) + Num(c.peak_activations) + " (rank " +
           std::to_string(c.peak_rank) + ")\n";
  }
  if (!best.refused.empty()) out += "refused\n";
  for (const s::BestRefusal& r : best.refused) out += "  " + Padded(r.schedule, 13) + WithFlag(r.reason) + "\n";
  return out;
}

// --schedule best: every registered schedule (and the searches) built, simulated and ranked.
int RunBest(const FlagSet& flags, const Options& o, const s::ScheduleSpec& spec) {
  s::BestSpec best;
  best.spec = spec;
  if (flags.Given("layers") || flags.Given("stage-layers")) {
    best.place_layers = [&](const std::vector<int>& stage_to_rank) -> Result<std::vector<int>> {
      auto layers = StageLayers(flags, o, spec.pp, stage_to_rank);
      if (!layers.ok()) return Flagged(layers.status());
      return layers;
    };
  }
  auto chosen = s::ChooseBestSchedule(best);
  if (!chosen.ok()) return Fail(kVerb, Flagged(chosen.status()));
  if (chosen->ranked.empty()) {
    return Fail(kVerb, FailedPrecondition("--schedule best: " + s::BestFailure(*chosen, o.mem_limit, WithFlag)));
  }
  const std::vector<int>& stage_layers = chosen->stage_layers;
  std::string text;
  if (o.format == "json") {
    text = s::ScheduleToJson(chosen->schedule, chosen->simulation, stage_layers,
                             s::BestRankingToJson(*chosen, o.mem_limit));
  } else if (o.format == "csv") {
    text = s::ScheduleToCsv(chosen->schedule);
  } else if (o.format == "perfetto") {
    text = s::ScheduleToTrace(chosen->schedule, chosen->simulation);
  } else {
    text = BestText(*chosen, o.mem_limit) +
           TextReport(chosen->schedule, chosen->simulation, chosen->costs, stage_layers, o.mem_limit);
  }
  return EmitOutput(kVerb, text, o.out, o.format);
}

}  // namespace

int RunSchedule(int argc, char** argv) {
  Options o;
  FlagSet flags("pipectl schedule --schedule NAME --pp P [--vpp V] --microbatches M [options]",
                "Computes a pipeline schedule, validates it, simulates it against the cost model and "
                "prints it. Times are in time units of your choice (costs default to 1: one "
                "micro-batch's forward through one rank's share); activations in micro-batches of "
                "one rank's share. --schedule csv imports a PyTorch-format CSV file instead; "
                "--schedule best builds every schedule that accepts the shape and prints the one with "
                "the shortest makespan within --mem-limit, after the ranking. Exit "
                "codes: 0 done, 1 failed, 2 bad usage or input.");
  Declare(flags, o);
  if (int rc = ParseFlagsOrExit(flags, argc, argv, kVerb); rc >= 0) return rc;
  Status st = CheckOptions(flags, o);
  if (!st.ok()) return Fail(kVerb, st);

  s::ScheduleSpec spec;
  spec.pp = flags.Given("pp") ? o.pp : 1;
  spec.vpp = o.vpp;
  spec.microbatches = flags.Given("microbatches") ? o.microbatches : 1;
  spec.mem_limit = o.mem_limit;
  spec.costs.f = o.cost_f;
  spec.costs.b = o.cost_b;
  spec.costs.w = o.cost_w;
  spec.costs.comm = o.cost_comm;
  spec.costs.w_share = o.w_share;
  spec.costs.unshard = o.cost_unshard;
  spec.costs.reshard = o.cost_reshard;
  spec.costs.reduce_grad = o.cost_reduce_grad;
  spec.costs.overlap = o.overlap;
  if (o.schedule == "csv") {
    auto text = ReadInputFile("--csv", o.csv, kMaxCsvBytes);
    if (!text.ok()) return Fail(kVerb, text.status());
    spec.csv = std::move(text).value();
  }
  if (IsBest(o.schedule)) return RunBest(flags, o, spec);

  auto sched = Build(o.schedule, spec);
  if (!sched.ok()) {
    const Status& bad = sched.status();
    if (o.schedule == "csv" && bad.message().rfind("--", 0) != 0) {
      return Fail(kVerb, Status(bad.code(), "--csv \"" + o.csv + "\": " + bad.message()));
    }
    return Fail(kVerb, bad);
  }
  if (o.schedule == "csv") {
    st = CheckImportedShape(flags, o, *sched);
    if (!st.ok()) return Fail(kVerb, st);
  }

  std::vector<int> stage_layers;
  if (flags.Given("layers") || flags.Given("stage-layers")) {
    auto layers = StageLayers(flags, o, sched->pp, sched->stage_to_rank);
    if (!layers.ok()) return Fail(kVerb, Flagged(layers.status()));
    stage_layers = std::move(layers).value();
    spec.costs.stage_fraction = s::StageFractions(std::vector<double>(stage_layers.begin(), stage_layers.end()), sched->pp);
    spec.pp = sched->pp;
    spec.vpp = sched->vpp;
    spec.microbatches = sched->microbatches;
    sched = Build(o.schedule, spec);  // the order may depend on the stage costs
    if (!sched.ok()) return Fail(kVerb, sched.status());
  }

  auto sim = s::Simulate(*sched, spec.costs);
  if (!sim.ok()) return Fail(kVerb, Status(Code::kFailedPrecondition, "simulation failed: " + sim.status().message()));

  std::string text;
  if (o.format == "json") {
    text = s::ScheduleToJson(*sched, *sim, stage_layers);
  } else if (o.format == "csv") {
    text = s::ScheduleToCsv(*sched);
  } else if (o.format == "perfetto") {
    text = s::ScheduleToTrace(*sched, *sim);
  } else {
    text = TextReport(*sched, *sim, spec.costs, stage_layers, o.mem_limit);
  }
  return EmitOutput(kVerb, text, o.out, o.format);
}

}  // namespace pipecoord::cli
