// The loss curve of a pipelined run equals the single-process reference run's, for every
// schedule, including uneven micro-batches and layers and data parallelism.
#include <gtest/gtest.h>

#include <cmath>

#include "worker/daemon/local_run.h"
#include "worker/model/reference_trainer.h"

namespace pipecoord::worker {
namespace {

struct Case {
  std::string schedule;
  int pp, vpp, dp, microbatches, layers;
  std::vector<int> stage_layers;
};

v1::JobSpec Spec(const Case& c) {
  v1::JobSpec s;
  s.set_name(c.schedule);
  s.set_schedule(c.schedule);
  s.set_pp(c.pp);
  s.set_vpp(c.vpp);
  s.set_dp(c.dp);
  s.set_microbatches(c.microbatches);
  s.set_micro_batch_size(2);
  s.set_steps(3);
  s.set_learning_rate(0.01);
  for (int n : c.stage_layers) s.add_stage_layers(n);
  auto* m = s.mutable_model();
  m->set_layers(c.layers);
  m->set_hidden(16);
  m->set_heads(2);
  m->set_vocab(32);
  m->set_seq_len(8);
  m->set_seed(11);
  return s;
}

std::vector<double> Reference(const v1::JobSpec& spec, std::vector<double>* grad_norms = nullptr) {
  model::ModelConfig config;
  config.layers = spec.model().layers();
  config.hidden = spec.model().hidden();
  config.heads = spec.model().heads();
  config.vocab = spec.model().vocab();
  config.seq_len = spec.model().seq_len();
  config.seed = spec.model().seed();
  config.tied_embeddings = spec.model().tied_embeddings();
  model::TrainOptions options;
  options.batch.micro_batch_size = spec.micro_batch_size();
  options.batch.microbatches = spec.microbatches() * std::max(1, spec.dp());
  options.adamw.lr = spec.learning_rate();
  options.clip_grad_norm = spec.optimizer().clip_grad_norm();
  auto trainer = model::ReferenceTrainer::Create(config, options);
  EXPECT_TRUE(trainer.ok()) << trainer.status().ToString();
  auto losses = (*trainer)->Train(spec.steps());
  EXPECT_TRUE(losses.ok()) << losses.status().ToString();
  if (grad_norms != nullptr) *grad_norms = (*trainer)->grad_norms();
  return *losses;
}

// The pipelined run's loss per step (mean over data-parallel replicas), checking every replica
// reported one.
std::vector<double> Pipelined(const v1::JobSpec& spec) {
  auto run = RunLocally(spec);
  EXPECT_TRUE(run.ok()) << run.status().ToString();
  if (!run.ok()) return {};
  for (int step = 0; step < spec.steps(); ++step) {
    int n = 0;
    for (const auto& rank : run->reports) n += rank.at(step).summary.has_loss() ? 1 : 0;
    EXPECT_EQ(n, std::max(1, spec.dp())) << "one loss per replica at step " << step;
  }
  return StepLosses(*run);
}

class PipelinedTrainingTest : public ::testing::TestWithParam<Case> {};

TEST_P(PipelinedTrainingTest, LossCurveEqualsTheSingleProcessRun) {
  const v1::JobSpec spec = Spec(GetParam());
  const std::vector<double> want = Reference(spec);
  const std::vector<double> got = Pipelined(spec);
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i) {
    EXPECT_NEAR(got[i], want[i], 1e-5 * std::abs(want[i])) << "step " << i;
  }
  EXPECT_LT(want.back(), want.front());  // it trains
}

INSTANTIATE_TEST_SUITE_P(
    Schedules, PipelinedTrainingTest,
    ::testing::Values(Case{"fthenb", 2, 0, 1, 4, 4, {}},
                      Case{"1f1b", 3, 0, 1, 5, 6, {1, 3, 2}},
                      Case{"eager-1f1b", 2, 0, 1, 4, 4, {}},
                      Case{"interleaved", 2, 2, 1, 5, 7, {}},  // m % p != 0, layers % chunks != 0
                      Case{"interleaved", 3, 2, 1, 4, 8, {3, 3, 2}},
                      Case{"looped-bfs", 2, 2, 1, 3, 4, {}},
                      Case{"zbh1", 3, 0, 1, 6, 6, {}},
                      Case{"zbh2", 3, 0, 1, 6, 6, {}},
                      Case{"zb-auto", 3, 0, 1, 6, 6, {}},
                      Case{"zbv", 2, 2, 1, 4, 8, {}},
                      Case{"zbv", 3, 2, 1, 7, 7, {}},  // layers % chunks != 0
                      Case{"v-half", 2, 2, 1, 4, 4, {}},
                      Case{"v-min", 3, 2, 1, 6, 6, {}},
                      Case{"dualpipev", 2, 2, 1, 4, 8, {}},
                      Case{"1f1b", 2, 0, 2, 3, 4, {}}),  // data parallel: one all-reduce per step
    [](const auto& info) {
      const Case& c = info.param;
      std::string n = c.schedule + "_pp" + std::to_string(c.pp) + "_dp" + std::to_string(c.dp) + "_m" +
                       std::to_string(c.microbatches);
      for (char& ch : n) {
        if (ch == '-') ch = '_';
      }
      return n;
    });

// Tied input and output embeddings (Llama 3.2): the single-process run holds one tensor for both;
// a pipeline holds the embedding on stage 0 and a copy on the last stage and sums their gradients
// after the data-parallel reduction, across ranks (1f1b, interleaved) or on one rank (zbv: rank 0
// holds both ends of the V). With clipping on, the loss curve and every step's gradient norm are
// the single-process run's (the norm counts the tied matrix once), the copy ends equal to the
// embedding bit for bit, and tying changes the run (the untied head starts elsewhere).
class TiedEmbeddingsTest : public ::testing::TestWithParam<Case> {};

TEST_P(TiedEmbeddingsTest, LossCurveEqualsTheSingleProcessRunAndTheCopyStaysEqual) {
  v1::JobSpec spec = Spec(GetParam());
  spec.mutable_model()->set_tied_embeddings(true);
  spec.mutable_optimizer()->set_clip_grad_norm(0.5);
  std::vector<double> norms;
  const std::vector<double> want = Reference(spec, &norms);
  ASSERT_EQ(norms.size(), static_cast<size_t>(spec.steps()));
  EXPECT_GT(norms.front(), 0.5) << "clipping must bind for the norm to matter";
  auto run = RunLocally(spec, {}, {}, /*keep_final_state=*/true);
  ASSERT_TRUE(run.ok()) << run.status().ToString();
  const std::vector<double> got = StepLosses(*run);
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i) EXPECT_NEAR(got[i], want[i], 1e-5 * std::abs(want[i])) << "step " << i;
  EXPECT_LT(want.back(), want.front());
  for (const auto& rank : run->reports) {
    for (int step = 0; step < spec.steps(); ++step) {
      const auto& summary = rank.at(step).summary;
      ASSERT_TRUE(summary.has_grad_norm());
      EXPECT_NEAR(summary.grad_norm(), norms[step], 1e-5 * norms[step]) << "step " << step;
    }
  }

  v1::JobSpec untied = spec;
  untied.mutable_model()->set_tied_embeddings(false);
  EXPECT_GT(std::abs(Reference(untied).front() - want.front()), 1e-3) << "tying must change the model";

  // Every (replica, shard)'s copy on the last stage equals the embedding on stage 0.
  const int stages = GetParam().pp * std::max(1, GetParam().vpp);
  const std::string emb = "stage0/tok_embeddings.weight/value",
                    copy = "stage" + std::to_string(stages - 1) + "/output.weight/value";
  int compared = 0;
  for (const auto& a : run->final_state) {
    if (!a.count(emb)) continue;
    for (const auto& b : run->final_state) {
      if (!b.count(copy)) continue;
      if (a.at(emb).size() != b.at(copy).size()) continue;
      EXPECT_EQ(a.at(emb), b.at(copy));
      ++compared;
    }
  }
  EXPECT_GE(compared, std::max(1, spec.dp()));
  for (const auto& state : run->final_state) {
    for (const auto& [name, values] : state) {
      (void)values;
      EXPECT_EQ(name.find("stage0/output.weight"), std::string::npos) << name;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Schedules, TiedEmbeddingsTest,
                         ::testing::Values(Case{"1f1b", 2, 0, 2, 3, 4, {}},  // across ranks, after the all-reduce
                                           Case{"interleaved", 2, 2, 1, 4, 4, {}},
                                           Case{"zbv", 2, 2, 1, 4, 4, {}}),  // rank 0 holds both ends
                         [](const auto& info) {
                           const Case& c = info.param;
                           return c.schedule + "_pp" + std::to_string(c.pp) + "_dp" + std::to_string(c.dp);
                         });

}  // namespace
}  // namespace pipecoord::worker
