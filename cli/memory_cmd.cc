// pipectl memory: per-rank memory of a training configuration (analytic model, peaks from the
// schedule engine), one block side by side with the op-level liveness simulator, or the replay
// of a program file.
#include <cstdio>
#include <string>

#include "cli/cli_io.h"
#include "cli/model_flags.h"
#include "cli/verbs.h"
#include "common/flags.h"
#include "memory/block_program.h"
#include "memory/estimate.h"
#include "memory/liveness.h"
#include "memory/liveness_report.h"
#include "memory/program_json.h"
#include "memory/recipe.h"
#include "memory/report.h"
#include "schedules/registry.h"

namespace pipecoord::cli {
namespace {

constexpr const char* kVerb = "memory";
constexpr size_t kMaxProgramBytes = size_t{256} << 20;

struct Options {
  ModelFlags model;
  int micro_batch = 1, microbatches = 0, dp = 1, tp = 1, pp = 1, vpp = 0, zero = 0;
  bool sp = false, fp32_grads = true, liveness = false, emit_program = false;
  std::string recompute = "none", dtype = "bf16", optimizer = "adamw", recipe = "megatron", schedule = "1f1b";
  std::string format = "text", program, out;
};

std::string Names(bool recipes) {
  std::string s;
  if (recipes) {
    for (const memory::Recipe* r : memory::AllRecipes()) s += (s.empty() ? "" : ", ") + std::string(r->name);
  } else {
    for (const schedules::ScheduleInfo& i : schedules::AllSchedules()) {
      if (std::string(i.name) != "csv") s += (s.empty() ? "" : ", ") + std::string(i.name);
    }
  }
  return s;
}

void Declare(FlagSet& f, Options& o) {
  DeclareModelFlags(f, &o.model);
  f.Int("micro-batch", &o.micro_batch, "samples per micro-batch b; default 1");
  f.Int("microbatches", &o.microbatches, "micro-batches per step m; default 4 x pp");
  f.Int("dp", &o.dp, "data-parallel degree (the group ZeRO shards over); default 1");
  f.Int("tp", &o.tp, "tensor-parallel degree; default 1");
  f.Bool("sp", &o.sp, "sequence parallelism: split the tensors outside the TP regions along s");
  f.Int("pp", &o.pp, "pipeline degree (ranks); default 1");
  f.Int("vpp", &o.vpp, "chunks per rank; default: the schedule's own");
  f.Int("zero", &o.zero, "ZeRO stage 0-3 over dp (1: optimizer states, as Megatron's distributed "
                         "optimizer; 2: + gradients; 3: + weights); default 0");
  f.String("recompute", &o.recompute, "none, selective (the attention core) or full (whole blocks); default none");
  f.String("dtype", &o.dtype, "fp32, bf16 or fp16 (16-bit: fp32 master weights); default bf16");
  f.Bool("fp32-grads", &o.fp32_grads, "16-bit training keeps fp32 gradients (Megatron's main_grad); default "
                                      "true, =false keeps them in the weights' dtype");
  f.String("optimizer", &o.optimizer, "adamw or sgd (with momentum); default adamw");
  f.String("recipe", &o.recipe, "which tensors a block saves: " + Names(true) + "; default megatron");
  f.String("schedule", &o.schedule, "pipeline schedule: " + Names(false) + "; default 1f1b");
  f.Bool("liveness", &o.liveness, "also replay one block's forward, B and W programs op by op and show "
                                  "them next to the analytic numbers");
  f.Bool("emit-program", &o.emit_program, "print one block's programs as JSON (the --program format) and stop");
  f.String("program", &o.program, "replay this JSON program file op by op instead (no --model needed)");
  f.Format(&o.format, {"text", "json"}, "text or json; default text");
  f.String("out", &o.out, "write the output to this file instead of stdout");
}

Result<memory::TrainingSpec> Training(const FlagSet& f, const Options& o) {
  memory::TrainingSpec t;
  t.micro_batch = o.micro_batch;
  t.dp = o.dp;
  t.tp = o.tp;
  t.sp = o.sp;
  t.pp = o.pp;
  t.vpp = o.vpp;
  t.zero = o.zero;
  t.schedule = o.schedule;
  t.recipe = o.recipe;
  t.fp32_grads = o.fp32_grads;
  if (f.Given("vpp") && o.vpp < 1) return InvalidArgument("--vpp: must be >= 1, got " + std::to_string(o.vpp));
  if (o.pp < 1 || o.pp > 4096) return InvalidArgument("--pp: must be in [1, 4096], got " + std::to_string(o.pp));
  t.microbatches = f.Given("microbatches") ? o.microbatches : 4 * o.pp;
  auto rc = memory::ParseRecompute(o.recompute);
  if (!rc.ok()) return InvalidArgument("--" + rc.status().message());
  t.recompute = *rc;
  auto dt = memory::ParseDtypePolicy(o.dtype);
  if (!dt.ok()) return InvalidArgument("--" + dt.status().message());
  t.dtype = *dt;
  auto opt = memory::ParseOptimizer(o.optimizer);
  if (!opt.ok()) return InvalidArgument("--" + opt.status().message());
  t.optimizer = *opt;
  return t;
}

int ReplayProgram(const Options& o) {
  auto text = ReadInputFile("--program", o.program, kMaxProgramBytes);
  if (!text.ok()) return Fail(kVerb, text.status());
  auto set = memory::ParseProgramJson(*text);
  if (!set.ok()) return Fail(kVerb, InvalidArgument("--program: " + set.status().message()));
  auto live = memory::SimulateLiveness(*set);
  if (!live.ok()) return Fail(kVerb, InvalidArgument("--program: " + live.status().message()));
  const std::string out = o.format == "json" ? memory::LivenessJson(*live) + "\n" : memory::LivenessText(*live);
  return EmitOutput(kVerb, out, o.out, "the liveness replay");
}

}  // namespace

int RunMemory(int argc, char** argv) {
  FlagSet flags("pipectl memory --model NAME [--layers N] [--seq-len S] [--micro-batch B] [--microbatches M] "
                "[--dp D] [--tp T] [--sp] [--pp P] [--vpp V] [--zero 0|1|2|3] [--recompute none|selective|full] "
                "[--dtype fp32|bf16|fp16] [--optimizer adamw|sgd] [--recipe megatron|eager] "
                "[--attention eager|flash] [--schedule NAME] [--format text|json]",
                "Per pipeline rank: weights, gradients, optimizer states (fp32 master weights and moments), "
                "activations at the schedule's peak and the peak, in bytes; the first rank holds the "
                "embedding, the last the final norm, LM head and loss. Activations come from a recipe of "
                "the tensors each block saves (see docs/memory.md). --liveness replays one block op by op "
                "next to it; --program FILE replays any program.");
  Options o;
  Declare(flags, o);
  if (int rc = ParseFlagsOrExit(flags, argc, argv, kVerb); rc >= 0) return rc;
  if (flags.Given("program")) return ReplayProgram(o);

  auto model = ResolveModel(flags, o.model);
  if (!model.ok()) return Fail(kVerb, model.status());
  auto training = Training(flags, o);
  if (!training.ok()) return Fail(kVerb, training.status());
  if (o.emit_program) {
    auto set = memory::TransformerBlockProgram(*model, *training);
    if (!set.ok()) return Fail(kVerb, set.status());
    return EmitOutput(kVerb, memory::ProgramSetToJson(*set), o.out, "the block's programs");
  }
  auto report = memory::EstimateMemory(*model, *training);
  if (!report.ok()) return Fail(kVerb, report.status());
  std::string out;
  if (o.liveness) {
    auto cmp = memory::CompareBlock(*model, report->training);
    if (!cmp.ok()) return Fail(kVerb, cmp.status());
    out = o.format == "json" ? memory::MemoryReportJson(*report, "\"liveness\": " + memory::BlockComparisonJson(*cmp))
                             : memory::MemoryReportText(*report) + "\n" + memory::BlockComparisonText(*cmp);
  } else {
    out = o.format == "json" ? memory::MemoryReportJson(*report) : memory::MemoryReportText(*report);
  }
  return EmitOutput(kVerb, out, o.out, "the memory report");
}

}  // namespace pipecoord::cli
