// A JobSpec's errors in one voice: "spec.FIELD: RULE, got VALUE", the field as the user wrote it
// (protobuf's JSON name), numbers in %g; the same for what planning the spec refuses.
#include "jobplan/spec_validation.h"

#include <gtest/gtest.h>

#include <limits>
#include <string>

#include "jobplan/plan_job.h"
#include "jobplan/tiny_spec_for_tests.h"

namespace pipecoord::jobplan {
namespace {

std::string Error(const v1::JobSpec& s) { return ValidateJobSpec(s).message(); }

// spec.worker: the program that runs the job; what torch workers do not do is refused by name.
TEST(SpecValidationTest, WorkerKindAndModule) {
  auto s = TinySpec();
  s.mutable_worker()->set_kind("builtin");
  EXPECT_EQ(Error(s), "");
  s.mutable_worker()->set_kind("jax");
  EXPECT_EQ(Error(s), "spec.worker.kind: must be \"builtin\" or \"torch\", got \"jax\"");
  s.mutable_worker()->set_kind("");
  s.mutable_worker()->set_module("m:f");
  EXPECT_EQ(Error(s), "spec.worker.module: only for spec.worker.kind \"torch\"");
  s.mutable_worker()->set_kind("torch");
  EXPECT_EQ(Error(s), "");
  s.mutable_worker()->set_module("pkg.sub_2.mod:build_stage");
  EXPECT_EQ(Error(s), "");
  for (const char* bad : {"", "pkg.mod", "pkg.mod:", ":f", "pkg..mod:f", ".pkg:f", "pkg.:f", "pkg:f.g", "p-k:f",
                          "pkg:f:g", "1pkg:f"}) {
    s.mutable_worker()->set_module(bad);
    EXPECT_EQ(Error(s), std::string("spec.worker.module: must be \"package.module:function\" (a function "
                                    "(StageShard, ModelSpec) -> torch.nn.Module), got \"") + bad + "\"")
        << bad;
  }
  s.mutable_worker()->set_module("pkg.mod:f");
  s.set_dp(2);  // data parallel: each replica's stages average their gradients (docs/pytorch.md)
  EXPECT_EQ(Error(s), "");
  s.set_dp(1);
  s.set_checkpoint_every(2);  // written and resumed as the C++ workers do (python/pipecoord/torch_checkpoint.py)
  s.set_max_restarts(1);
  EXPECT_EQ(Error(s), "");
  s.set_checkpoint_every(0);
  s.set_max_restarts(0);
  s.set_recompute("full");  // PyTorch's activation checkpointing of the module's blocks
  EXPECT_EQ(Error(s), "");
  s.set_recompute("selective");
  EXPECT_EQ(Error(s), "spec.recompute: torch workers run \"none\" or \"full\" (selective recompute of the attention "
                      "core runs on the C++ workers)");
  s.clear_recompute();
  s.set_init("/weights");  // the builder makes the module's weights: refused, never ignored
  EXPECT_EQ(Error(s), "spec.init: torch workers do not load it (the stage builder makes each module's weights: "
                      "load them there, e.g. with safetensors.torch.load_file); leave init empty");
  s.clear_init();
  s.mutable_data()->set_path("d/train");  // read as the C++ workers read it (token_data.py)
  EXPECT_EQ(Error(s), "");
  s.set_eval_every(1);  // validation as the C++ workers run it (python/pipecoord/torch_eval.py)
  EXPECT_EQ(Error(s), "");
  s.set_eval_every(0);
  s.clear_data();
  s.set_device("cuda");
  s.set_precision("bf16");
  EXPECT_EQ(Error(s), "spec.precision: torch workers train in \"fp32\" (bf16 on them is not implemented)");
  s.set_precision("fp32");
  EXPECT_EQ(Error(s), "");
}

TEST(SpecValidationTest, EveryFieldNamesItsRule) {
  EXPECT_TRUE(ValidateJobSpec(TinySpec()).ok());
  auto s = TinySpec();
  s.set_pp(0);
  EXPECT_EQ(Error(s), "spec.pp: must be in 1..4096, got 0");
  s = TinySpec();
  s.mutable_model()->set_heads(5);
  EXPECT_EQ(Error(s), "spec.model.heads: must divide spec.model.hidden (32), got 5");
  s = TinySpec();
  s.set_schedule("2f2b");
  EXPECT_EQ(Error(s).rfind("spec.schedule: unknown name \"2f2b\" (known: fthenb, 1f1b", 0), 0u);
  s = TinySpec();
  s.set_microbatches(-3);
  EXPECT_EQ(Error(s), "spec.microbatches: must be in 1..65536, got -3");
  s = TinySpec();
  s.set_steps(0);
  EXPECT_EQ(Error(s), "spec.steps: must be in 1..10000000, got 0");
  s = TinySpec();
  s.set_checkpoint_every(-1);
  EXPECT_EQ(Error(s), "spec.checkpointEvery: must be in 0..10000000, got -1");
  s = TinySpec();
  s.set_max_restarts(101);
  EXPECT_EQ(Error(s), "spec.maxRestarts: must be in 0..100, got 101");
  s = TinySpec();
  s.set_learning_rate(-1);
  EXPECT_EQ(Error(s), "spec.learningRate: must be in [0, 10], got -1");
  s = TinySpec();
  s.set_device("tpu");
  EXPECT_EQ(Error(s), "spec.device: must be \"cpu\" or \"cuda\", got \"tpu\"");
  s.set_device("cpu");
  s.set_precision("fp16");
  EXPECT_EQ(Error(s), "spec.precision: must be \"fp32\" or \"bf16\", got \"fp16\"");
  s.set_precision("bf16");
  EXPECT_EQ(Error(s), "spec.precision: \"bf16\" needs device \"cuda\" (the CPU backend trains in fp32)");
  s.set_device("cuda");
  EXPECT_EQ(Error(s), "");
  s = TinySpec();
  s.set_recovery("spare");
  EXPECT_EQ(Error(s), "spec.recovery: must be \"auto\" or \"restart\", got \"spare\"");
  s.set_recovery("restart");
  EXPECT_EQ(Error(s), "");
  s = TinySpec();
  s.add_stage_layers(3);
  s.add_stage_layers(2);
  EXPECT_EQ(Error(s), "spec.stageLayers: counts must sum to spec.model.layers (4), got 5");
  s = TinySpec(4, "interleaved");
  EXPECT_EQ(Error(s), "spec.model.layers: must be >= spec.pp x spec.vpp = 8 (a layer for each stage), got 4");
  s = TinySpec(2, "zbv");
  s.set_vpp(3);
  EXPECT_EQ(Error(s), "spec.vpp: schedule zbv places exactly 2 chunk(s) per rank, got 3");
  s = TinySpec();
  s.mutable_costs()->set_b(-1);
  EXPECT_EQ(Error(s), "spec.costs.b: must be a finite number >= 0, got -1");
  s = TinySpec();
  s.mutable_costs()->set_f(0);
  EXPECT_EQ(Error(s), "spec.costs: f + b + w must be > 0, got 0");
  s = TinySpec();
  s.set_csv_schedule("0F0");
  EXPECT_EQ(Error(s), "spec.csvSchedule: only allowed when spec.schedule is \"csv\"");
  s = TinySpec();
  s.clear_model();
  EXPECT_EQ(Error(s), "spec.model: required");
  s = TinySpec();
  s.set_name(std::string("a\nb"));
  EXPECT_EQ(Error(s), "spec.name: must not contain control characters");
  s = TinySpec();
  s.set_name(std::string(201, 'x'));
  EXPECT_EQ(Error(s), "spec.name: must be at most 200 characters, got 201");
  s = TinySpec();
  s.set_dp(3000);
  s.set_tp(4);
  s.mutable_model()->set_heads(4);
  EXPECT_EQ(Error(s), "spec.pp x spec.dp x spec.tp: must be at most 16384 workers, got 24000");
}

// spec.tp and spec.sequenceParallel: every slice equal, then (until the workers run it) a refusal
// that says so instead of a job run without tensor parallelism.
TEST(SpecValidationTest, TensorParallelShapes) {
  auto s = TinySpec();  // heads 4, ffn 0 (128 by default), vocab 64, seqLen 8
  s.set_tp(1);
  EXPECT_EQ(Error(s), "");
  s.set_tp(-1);
  EXPECT_EQ(Error(s), "spec.tp: must be in 0..1024, got -1");
  s.set_tp(3);
  EXPECT_EQ(Error(s), "spec.tp: must divide spec.model.heads (4: each tensor-parallel rank holds an equal slice), got 3");
  s.set_tp(4);
  s.mutable_model()->set_ffn_hidden(90);
  EXPECT_EQ(Error(s), "spec.tp: must divide spec.model.ffnHidden (90: each tensor-parallel rank holds an equal slice), got 4");
  s.mutable_model()->set_ffn_hidden(0);
  s.mutable_model()->set_vocab(66);
  EXPECT_EQ(Error(s), "spec.tp: must divide spec.model.vocab (66: each tensor-parallel rank holds an equal slice), got 4");
  s.mutable_model()->set_vocab(64);
  s.set_sequence_parallel(true);
  s.mutable_model()->set_seq_len(6);
  EXPECT_EQ(Error(s), "spec.sequenceParallel: spec.tp (4) must divide spec.model.seqLen (6)");
  s.mutable_model()->set_seq_len(8);
  EXPECT_EQ(Error(s), "");  // the CPU backend runs it
  s.set_sequence_parallel(false);
  EXPECT_EQ(Error(s), "");  // tp 4 on the CPU backend
  s.set_device("cuda");
  EXPECT_EQ(Error(s), "");  // tp 4 on the CUDA backend
  s.set_sequence_parallel(true);
  EXPECT_EQ(Error(s), "");  // with sequence parallelism
  s.set_sequence_parallel(false);
  s.set_device("cpu");
  s.set_checkpoint_every(2);
  s.set_max_restarts(1);
  EXPECT_EQ(Error(s), "");  // each rank checkpoints its slices
  s.set_init("/weights");
  EXPECT_EQ(Error(s), "");  // cut into each rank's slices
  s.clear_init();
  s.set_checkpoint_every(0);
  s.set_max_restarts(0);
  s.mutable_worker()->set_kind("torch");
  s.mutable_worker()->set_module("m:f");
  EXPECT_EQ(Error(s), "");  // the stage builder gets the tensor-parallel group
  s.set_sequence_parallel(true);
  EXPECT_EQ(Error(s), "spec.sequenceParallel: torch workers run tp without sequence parallelism (it runs on the C++ workers)");
  s.set_sequence_parallel(false);
  s.set_zero(1);
  EXPECT_EQ(Error(s), "");  // ZeroRedundancyOptimizer over each parameter's local shard
  s.set_zero(2);
  EXPECT_NE(Error(s).find("spec.zero"), std::string::npos) << Error(s);
  s.set_zero(0);
  s.set_checkpoint_every(2);
  EXPECT_EQ(Error(s), "");  // each rank its DTensors' local shards
  s.set_checkpoint_every(0);
  s.clear_worker();
  s.set_sequence_parallel(true);
  s.set_tp(0);
  EXPECT_EQ(Error(s), "spec.sequenceParallel: needs spec.tp > 1 (it splits the sequence over the tensor-parallel group)");
}

// spec.zero: 0 | 1 (and 2 once the workers run it); where the distributed optimizer does not run,
// a refusal that says so.
TEST(SpecValidationTest, ZeroStages) {
  auto s = TinySpec();
  s.set_dp(2);
  s.set_zero(1);
  EXPECT_EQ(Error(s), "");
  s.set_zero(3);
  EXPECT_EQ(Error(s), "spec.zero: must be in 0..2, got 3");
  s.set_zero(-1);
  EXPECT_EQ(Error(s), "spec.zero: must be in 0..2, got -1");
  s.set_zero(2);
  EXPECT_EQ(Error(s), "");  // the CPU backend's ZeRO-2
  s.set_device("cuda");
  EXPECT_EQ(Error(s), "");  // the CUDA backend's ZeRO-2
  s.set_zero(1);
  EXPECT_EQ(Error(s), "");  // the CUDA backend's ZeRO-1
  s.set_device("cpu");
  s.mutable_worker()->set_kind("torch");
  s.mutable_worker()->set_module("m:f");
  EXPECT_EQ(Error(s), "");  // PyTorch's ZeroRedundancyOptimizer
  s.set_zero(2);
  EXPECT_EQ(Error(s), "spec.zero: torch workers run zero 0 or 1 (ZeRO-2 runs on the C++ workers)");
  s.set_zero(1);
  s.set_checkpoint_every(2);
  s.set_max_restarts(1);
  EXPECT_EQ(Error(s), "");  // each rank the moments it steps (python/pipecoord/torch_checkpoint.py)
}

// spec.model.tiedEmbeddings: the C++ workers (CPU and CUDA); ZeRO only where one stage holds both ends.
TEST(SpecValidationTest, TiedEmbeddings) {
  auto s = TinySpec();
  s.set_dp(2);
  s.mutable_model()->set_tied_embeddings(true);
  EXPECT_EQ(Error(s), "");
  s.set_zero(1);
  EXPECT_EQ(Error(s), "spec.zero: must be 0 with spec.model.tiedEmbeddings when pp > 1 (the embedding and the LM head "
                      "on different stages), got 1");
  s.set_pp(1);
  EXPECT_EQ(Error(s), "");  // one stage holds the one matrix: ZeRO shards it like any other
  s.set_zero(0);
  s.set_pp(2);
  s.set_device("cuda");
  EXPECT_EQ(Error(s), "");
  s.set_zero(1);
  EXPECT_EQ(Error(s), "spec.zero: must be 0 with spec.model.tiedEmbeddings when pp > 1 (the embedding and the LM head "
                      "on different stages), got 1");
  s.set_zero(0);
  s.set_device("cpu");
  s.mutable_worker()->set_kind("torch");
  s.mutable_worker()->set_module("m:f");
  EXPECT_EQ(Error(s), "spec.model.tiedEmbeddings: torch workers train the module they are given (tie it there); the "
                      "built-in model's tied embeddings run on the C++ workers");
}

// spec.model.headDim: even; heads need not divide hidden then; the CUDA backend runs it up to
// flash attention's 128 features per head (given or hidden / heads).
TEST(SpecValidationTest, HeadDim) {
  auto s = TinySpec();
  s.mutable_model()->set_head_dim(16);  // 4 heads of 16 for hidden 32
  EXPECT_EQ(Error(s), "");
  s.mutable_model()->set_head_dim(7);
  EXPECT_EQ(Error(s), "spec.model.headDim: must be even (RoPE rotates pairs of features), got 7");
  s.mutable_model()->set_head_dim(12);
  s.mutable_model()->set_heads(3);  // 3 does not divide 32: fine with heads of 12
  EXPECT_EQ(Error(s), "");
  s.set_device("cuda");
  EXPECT_EQ(Error(s), "");
  s.mutable_model()->set_head_dim(130);
  EXPECT_EQ(Error(s), "spec.model.headDim: the CUDA backend's flash attention runs up to 128 features per head, got "
                      "130; more heads, or the CPU backend, run it");
  s.mutable_model()->set_head_dim(128);
  EXPECT_EQ(Error(s), "");
  s.mutable_model()->set_head_dim(0);
  s.mutable_model()->set_hidden(258);
  s.mutable_model()->set_heads(1);
  EXPECT_EQ(Error(s), "spec.model.headDim: the CUDA backend's flash attention runs up to 128 features per head, got "
                      "258 (hidden / heads); more heads, or the CPU backend, run it");
}

// Grouped-query attention runs on every backend (kvHeads dividing heads).
TEST(SpecValidationTest, KvHeadsRunOnCuda) {
  auto s = TinySpec();
  s.mutable_model()->set_kv_heads(2);
  s.set_device("cuda");
  EXPECT_EQ(Error(s), "");
  s.mutable_model()->set_kv_heads(3);
  EXPECT_EQ(Error(s), "spec.model.kvHeads: must divide spec.model.heads (4), got 3");
}

TEST(SpecValidationTest, FieldsAreTheirJsonNames) {
  auto s = TinySpec();
  s.set_micro_batch_size(0);
  EXPECT_EQ(Error(s), "spec.microBatchSize: must be in 1..65536, got 0");
  s = TinySpec();
  s.mutable_model()->set_ffn_hidden(-1);
  EXPECT_EQ(Error(s), "spec.model.ffnHidden: must be in 0..1048576, got -1");
  s = TinySpec();
  s.mutable_model()->set_seq_len(0);
  EXPECT_EQ(Error(s), "spec.model.seqLen: must be in 1..1048576, got 0");
  s = TinySpec();
  s.mutable_model()->set_hidden(65537);
  EXPECT_EQ(Error(s), "spec.model.hidden: must be in 1..65536, got 65537");
  s = TinySpec();
  s.set_mem_limit(-0.5);
  EXPECT_EQ(Error(s), "spec.memLimit: must be a finite number >= 0, got -0.5");
  s = TinySpec();
  s.mutable_health()->set_straggler_min_delta_s(-2);
  EXPECT_EQ(Error(s), "spec.health.stragglerMinDeltaS: must be in [0, 3600], got -2");
  s = TinySpec(2, "interleaved");
  s.mutable_model()->set_layers(6);
  s.add_stage_layers(5);
  s.add_stage_layers(1);
  EXPECT_EQ(Error(s), "spec.stageLayers[1]: must be >= 2 (a layer for each of rank 1's 2 chunk(s)), got 1");
  s = TinySpec();
  s.add_stage_layers(4);
  EXPECT_EQ(Error(s), "spec.stageLayers: must have one count per rank (spec.pp = 2), got 1");
}

TEST(SpecValidationTest, NumbersAreEchoedShort) {
  auto s = TinySpec();
  s.set_learning_rate(1e308);
  EXPECT_EQ(Error(s), "spec.learningRate: must be in [0, 10], got 1e+308");
  s.set_learning_rate(std::numeric_limits<double>::quiet_NaN());
  EXPECT_EQ(Error(s), "spec.learningRate: must be in [0, 10], got nan");
  s = TinySpec();
  s.mutable_costs()->set_comm(-std::numeric_limits<double>::infinity());
  EXPECT_EQ(Error(s), "spec.costs.comm: must be a finite number >= 0, got -inf");
}

// Found with fuzz/jobspec_fuzz: a CSV whose shape differed from the spec's (pp 1, two rows) was
// refused only later, as "stage_fraction: needs one value per virtual stage (1), got 2".
TEST(JobPlanTest, ImportedCsvMustHaveTheSpecsShape) {
  auto s = TinySpec(1, "csv");
  s.set_microbatches(1);
  s.set_csv_schedule("0F0,0B0\n1F0,1B0\n");
  ASSERT_TRUE(ValidateJobSpec(s).ok());
  EXPECT_EQ(PlanJob(WithDefaults(s)).status().message(), "spec.pp: 1, but spec.csvSchedule has 2 rows (ranks)");
  s.set_pp(2);
  s.set_microbatches(1);
  s.set_csv_schedule("0F0,0F1,0B0,0B1\n1F0,1B0,1F1,1B1\n");
  EXPECT_EQ(PlanJob(WithDefaults(s)).status().message(), "spec.microbatches: 1, but spec.csvSchedule has 2 micro-batches");
  s.set_microbatches(2);
  EXPECT_TRUE(PlanJob(WithDefaults(s)).ok());
}

// What the schedule engine refuses is said about the JobSpec's field, not pipectl's flag.
TEST(JobPlanTest, EngineErrorsNameTheSpecField) {
  auto s = TinySpec(2, "dualpipev");
  ASSERT_TRUE(ValidateJobSpec(s).ok());
  s.set_microbatches(3);
  EXPECT_EQ(PlanJob(WithDefaults(s)).status().message(),
            "spec.microbatches: dualpipev needs at least 2 x pp = 4 micro-batches, got 3");
  s = TinySpec(2, "zb-auto");
  s.set_mem_limit(0.1);
  ASSERT_TRUE(ValidateJobSpec(s).ok());
  EXPECT_EQ(PlanJob(WithDefaults(s)).status().message().rfind("spec.memLimit: must be >= ", 0), 0u)
      << PlanJob(WithDefaults(s)).status().message();
  s = TinySpec(2, "csv");
  s.set_microbatches(1);
  s.set_csv_schedule("0F0,0X0\n");
  EXPECT_EQ(PlanJob(WithDefaults(s)).status().message(),
            "spec.csvSchedule: row 0 (rank 0), column 1 (\"0X0\"): unknown op \"X\" (expected F, I, B, W, BW, SEND_F, "
            "RECV_F, SEND_B, RECV_B, PROBE, OPT, OVERLAP_F_B, UNSHARD, RESHARD or REDUCE_GRAD)");
  s.set_csv_schedule("0F0,0F1,0B0\n");
  s.set_pp(1);
  s.set_microbatches(2);
  EXPECT_EQ(PlanJob(WithDefaults(s)).status().message(),
            "spec.csvSchedule: schedule csv is invalid: stage 0 micro-batch 1 has no B or BW");
}

// globalBatch: 0 or exactly dp x microbatches x microBatchSize; schedule "auto" requires it and
// lets pp, vpp, dp, microbatches and microBatchSize be 0 (chosen), fixed ones still checked.
TEST(SpecValidationTest, GlobalBatchAndAuto) {
  auto s = TinySpec();  // dp 0 (1) x 4 x 2
  s.set_global_batch(8);
  EXPECT_TRUE(ValidateJobSpec(s).ok());
  s.set_global_batch(12);
  EXPECT_EQ(Error(s), "spec.globalBatch: must be 0 or spec.dp x spec.microbatches x spec.microBatchSize = 1 x 4 x 2 = 8, got 12");
  s.set_global_batch(-1);
  EXPECT_EQ(Error(s), "spec.globalBatch: must be in 0..2147483647, got -1");
  s = TinySpec();
  s.set_dp(0);
  s.set_pp(0);
  EXPECT_EQ(Error(s), "spec.pp: must be in 1..4096, got 0");  // 0 only under "auto"

  s = TinySpec(0, "auto");
  s.set_microbatches(0);
  s.set_micro_batch_size(0);
  EXPECT_EQ(Error(s), "spec.globalBatch: required when spec.schedule is \"auto\" (samples per step: the coordinator "
                      "chooses dp x microbatches x microBatchSize equal to it)");
  s.set_global_batch(8);
  EXPECT_TRUE(ValidateJobSpec(s).ok()) << Error(s);
  EXPECT_EQ(WithDefaults(s).dp(), 0);   // the coordinator's to choose
  EXPECT_EQ(WithDefaults(s).vpp(), 0);
  s.set_micro_batch_size(3);
  EXPECT_EQ(Error(s), "spec.globalBatch: must be a multiple of spec.microBatchSize = 3 = 3 (fixed in the spec), got 8");
  s.set_micro_batch_size(2);
  s.set_dp(2);
  s.set_microbatches(4);
  EXPECT_EQ(Error(s), "spec.globalBatch: must be spec.dp x spec.microbatches x spec.microBatchSize = 2 x 4 x 2 = 16 "
                      "(fixed in the spec), got 8");
  s.set_microbatches(2);
  EXPECT_TRUE(ValidateJobSpec(s).ok()) << Error(s);
  s.set_pp(5);  // fixed ones still follow their rules: 4 layers cannot fill 5 ranks
  EXPECT_EQ(Error(s), "spec.model.layers: must be >= spec.pp x spec.vpp = 5 (a layer for each stage), got 4");
  s.set_pp(0);
  s.add_stage_layers(1);
  s.add_stage_layers(1);
  EXPECT_EQ(Error(s), "spec.stageLayers: counts must sum to spec.model.layers (4), got 2");
  s.set_stage_layers(1, 3);
  EXPECT_TRUE(ValidateJobSpec(s).ok()) << Error(s);
  s.set_pp(3);
  EXPECT_EQ(Error(s), "spec.stageLayers: one count per rank, spec.pp = 3, got 2");
  s = TinySpec(2, "auto");
  s.set_global_batch(8);
  s.set_csv_schedule("0F0");
  EXPECT_EQ(Error(s), "spec.csvSchedule: only allowed when spec.schedule is \"csv\"");
  s = TinySpec(2, "autox");
  const std::string tail =
      "dualpipev, v-auto, csv), \"auto\" (the coordinator chooses) or \"best\" (the registered schedule with the "
      "shortest predicted step within spec.memLimit)";
  EXPECT_EQ(Error(s).substr(Error(s).size() - tail.size()), tail) << Error(s);
}

}  // namespace
}  // namespace pipecoord::jobplan
