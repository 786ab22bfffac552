#include "jobplan/memory_budget.h"

#include <gtest/gtest.h>

#include <string>

#include "jobplan/plan_expectations.h"
#include "jobplan/probe_placement.h"
#include "jobplan/test_spec.h"
#include "memory/live_peak.h"
#include "memory/pipecoord_cuda.h"

namespace pipecoord::jobplan {
namespace {

TEST(MemoryBudget, TinyModelByHand) {
  // h 32, f 128 (8h/3 rounded up to 64), a 4, s 8, V 64, b 2: 16 tokens per micro-batch.
  const v1::JobSpec spec = TestSpec();
  const v1::Plan plan = PlanJob(spec).value();
  // Rank 0: 2 blocks and the embedding. A block holds 8h + 3f + as + 2 = 674 floats a token
  // after F, 12h + 3f + 2 = 770 after B; the embedding 1 id after F, 1 id + h floats after B.
  const SavedBytes s0 = StageSavedBytes(spec, plan.shards(0));
  EXPECT_EQ(s0.after_f, 2u * 16 * 674 * 4 + 16 * 4);
  EXPECT_EQ(s0.after_b, 2u * 16 * 770 * 4 + 16 * 4 + 16 * 32 * 4);
  // Rank 1: 2 blocks and the head: 2h + 1 + V floats and a target a token after F, 3h + 1 + V
  // floats after B.
  const SavedBytes s1 = StageSavedBytes(spec, plan.shards(1));
  EXPECT_EQ(s1.after_f, 2u * 16 * 674 * 4 + 16 * (96 + 1 + 64 - 32) * 4 + 16 * 4);
  EXPECT_EQ(s1.after_b, 2u * 16 * 770 * 4 + 16 * (96 + 1 + 64) * 4);

  const auto e = EstimateRankMemory(spec, plan);
  ASSERT_EQ(e.size(), 2u);
  // Parameters: 2 blocks (4h^2 + 3hf + 2h = 16448 each) and the embedding (Vh = 2048), 16 B each.
  EXPECT_EQ(e[0].parameter_bytes, 16u * (2 * 16448 + 2048));
  // 1f1b, rank 0: F0 F1 BW0 F2 BW1 ...: the most is the replay probe (in the bubble where two
  // micro-batches are stored): its copied ids, the embedding's output and one block's F (674
  // floats a token, dropped after).
  EXPECT_EQ(e[0].activation_bytes, 2 * s0.after_f + 16 * 4 * (1 + 32 + 674));
  EXPECT_EQ(e[0].budget_bytes, 777024u);  // memory_budget_run_test: what the CPU backend reports
  // Rank 1: 2 blocks and the head (h + Vh params); F0 BW0 F1 BW1 ...: one micro-batch at a time,
  // the most inside B: the head's B leaves 2h floats less the target a token, the last block's B
  // 3h more (770 - 674), and the first block's B then holds dz, dgate and dup (3f) at once.
  EXPECT_EQ(e[1].parameter_bytes, 16u * (2 * 16448 + 32 + 2048));
  EXPECT_EQ(e[1].activation_bytes, s1.after_f + 16 * 4 * (2 * 32 - 1 + 96 + 3 * 128));
  EXPECT_EQ(e[1].budget_bytes, 688960u);
  EXPECT_EQ(plan.memory_budget_bytes(0), 777024u);
  EXPECT_EQ(plan.memory_budget_bytes(1), 688960u);
}

// A stage's peak counts what its micro-batches hold between B and W: ZB-H2 defers W, so the
// last rank holds several micro-batches after B, each more than after F (the probabilities a s
// are under 4h floats a token). The schedule's activation count (B frees all but W's share)
// undercounted this and raised false alarms.
// A torch job runs the user's module, which the recipes do not describe: no budget (the memory
// check then reads the device's memory only).
TEST(MemoryBudget, TorchJobsHaveNone) {
  v1::JobSpec spec = TestSpec("1f1b", 2);
  ASSERT_EQ(PlanJob(spec).value().memory_budget_bytes_size(), 2);
  spec.mutable_worker()->set_kind("torch");
  spec.mutable_worker()->set_module("pkg.mod:f");
  EXPECT_EQ(PlanJob(spec).value().memory_budget_bytes_size(), 0);
}

TEST(MemoryBudget, MicroBatchesWaitingForTheirWCountInFull) {
  const v1::JobSpec spec = TestSpec("zbh2");
  const v1::Plan plan = PlanJob(spec).value();
  const auto e = EstimateRankMemory(spec, plan);
  const SavedBytes last = StageSavedBytes(spec, plan.shards(1));
  // Walk rank 1's list by hand: the most micro-batches past B and not yet past W at once.
  int after_b = 0, most = 0;
  for (const v1::Action& a : plan.ranks(1).actions()) {
    if (a.op() == v1::B) most = std::max(most, ++after_b);
    if (a.op() == v1::W) --after_b;
  }
  ASSERT_GE(most, 2);
  EXPECT_GE(e[1].activation_bytes, static_cast<uint64_t>(most) * last.after_b);
}

// A rank holding two chunks (V shapes) is budgeted the peak of its total, not the sum of each
// chunk's own peak (which the CPU backend once reported): each chunk's own is the same walk over
// rank 0's list with the other chunk's actions taken out. And never below memory/'s own live-peak
// walk of the saved tensors (the budget adds the ops' temporaries and the tensors between stages;
// worker/daemon:memory_budget_run_test holds it to the allocator's peak).
TEST(MemoryBudget, TwoChunksPeakTogetherNotSummed) {
  for (const char* schedule : {"v-min", "v-half", "zbv"}) {
    SCOPED_TRACE(schedule);
    const v1::JobSpec spec = TestSpec(schedule);
    const v1::Plan plan = PlanJob(spec).value();
    const auto e = EstimateRankMemory(spec, plan);
    std::vector<std::vector<int>> index;
    const schedules::Schedule sched = PlanSchedule(spec, plan, &index);
    std::vector<memory::StageBytes> stages;
    for (const v1::StageShard& shard : plan.shards()) {
      const SavedBytes b = StageSavedBytes(spec, shard);
      stages.push_back({static_cast<int64_t>(b.after_f), static_cast<int64_t>(b.after_b)});
    }
    const std::vector<memory::LivePeak> live = memory::PeakLiveActivations(sched, stages);
    ASSERT_EQ(live.size(), e.size());
    for (size_t r = 0; r < e.size(); ++r) {
      EXPECT_GE(e[r].activation_bytes, static_cast<uint64_t>(live[r].bytes)) << "rank " << r;
    }
    uint64_t summed_rank0 = 0;  // rank 0's chunks, each walked alone
    int chunks = 0;
    for (const v1::StageShard& shard : plan.shards()) {
      if (plan.stage_to_rank(shard.stage()) != 0) continue;
      ++chunks;
      v1::Plan alone = plan;
      v1::RankJobs* jobs = alone.mutable_ranks(0);
      ASSERT_EQ(jobs->rank(), 0);
      google::protobuf::RepeatedPtrField<v1::Action> kept;
      for (const v1::Action& a : jobs->actions()) {
        if (a.stage() == shard.stage()) *kept.Add() = a;
      }
      jobs->mutable_actions()->Swap(&kept);
      summed_rank0 += EstimateRankMemory(spec, alone)[0].activation_bytes;
    }
    ASSERT_EQ(chunks, 2);
    EXPECT_LE(e[0].activation_bytes, summed_rank0);
    // v-min's two chunks on rank 0 peak at different moments.
    if (std::string(schedule) == "v-min") {
      EXPECT_LT(e[0].activation_bytes, summed_rank0);
    }
  }
}

TEST(MemoryBudget, CudaJobsArePricedFromThePipecoordCudaRecipe) {
  const v1::JobSpec cpu = TestSpec();
  for (const char* precision : {"fp32", "bf16"}) {
    SCOPED_TRACE(precision);
    v1::JobSpec raw = TestSpec();
    raw.set_device("cuda");
    raw.set_precision(precision);
    const v1::JobSpec spec = WithDefaults(raw);
    const v1::Plan plan = PlanJob(spec).value();
    const memory::ModelSpec model = memory::PipecoordCudaModel(4, 32, 128, 4, 64, 8);
    const memory::TrainingSpec training = memory::PipecoordCudaTraining(
        2, std::string(precision) == "bf16" ? memory::DtypePolicy::kBf16 : memory::DtypePolicy::kFp32);
    const auto e = EstimateRankMemory(spec, plan);
    ASSERT_EQ(e.size(), 2u);
    std::vector<memory::CudaStageMemory> stages;
    for (const v1::StageShard& shard : plan.shards()) {
      auto st = memory::PipecoordCudaStage(model, training, shard.num_layers(), shard.has_embedding(),
                                           shard.has_head());
      ASSERT_TRUE(st.ok()) << st.status().ToString();
      const SavedBytes b = StageSavedBytes(spec, shard);
      EXPECT_EQ(b.after_f, static_cast<uint64_t>(st->per_microbatch.stored));
      EXPECT_EQ(b.after_b, static_cast<uint64_t>(st->per_microbatch.kept_for_w));
      EXPECT_NE(b.after_f, StageSavedBytes(cpu, shard).after_f);
      const int r = plan.stage_to_rank(shard.stage());
      EXPECT_EQ(e[r].parameter_bytes, static_cast<uint64_t>(st->parameter_bytes));
      // The stage's constants, and the replay probe's hash slots where the rank's PROBE replays
      // an F (8 bytes per F named, 8 for the replay's output: one 512-byte pool block here).
      uint64_t hashes = 0;
      for (const v1::Action& a : plan.ranks(r).actions()) {
        if (a.op() == v1::PROBE && (a.microbatch() >= 0 || a.microbatch() == kSeededReplay)) hashes = 512;
      }
      EXPECT_EQ(e[r].constant_bytes, static_cast<uint64_t>(st->constant_bytes) + hashes);
      stages.push_back(*st);
    }
    // Rank 1 (2 blocks and the head) runs F, BW, SEND_B for one micro-batch after the other: its
    // most is F's peak (what F keeps and the loss scalar), or B's above what F stored (the
    // gradient handed on included; it is sent before the next F).
    const v1::RankJobs& last = plan.ranks(1);
    int in_flight = 0;
    for (const v1::Action& a : last.actions()) {
      if (a.op() == v1::F) {
        EXPECT_EQ(in_flight++, 0) << "rank 1 runs one micro-batch at a time";
      }
      if (a.op() == v1::SEND_B) --in_flight;
    }
    const memory::CudaStageMemory& head = stages[1];
    EXPECT_EQ(e[1].activation_bytes, static_cast<uint64_t>(std::max(
                                         head.forward_peak, head.per_microbatch.stored + head.backward_peak)));
    for (const RankMemoryEstimate& x : e) {
      EXPECT_EQ(x.budget_bytes, x.parameter_bytes + x.constant_bytes + x.activation_bytes);
    }
    EXPECT_EQ(plan.memory_budget_bytes(1), e[1].budget_bytes);
  }
}

}  // namespace
}  // namespace pipecoord::jobplan
