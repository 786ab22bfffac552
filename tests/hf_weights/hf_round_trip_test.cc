// Train, export, load the export into a fresh job: the fresh job's loss at step 0 equals the
// trained model's loss on the same batch, bit for bit; and Hugging Face transformers itself
// (from_pretrained of the exported folder, tests/hf_weights/hf_llama_torch_loss.py) computes that
// loss. The other way: a Llama that transformers wrote (save_pretrained, sharded, random weights;
// write_transformers_llama.py) loaded with spec.init gives transformers' own loss at step 0.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <string>

#include "cli/export_job.h"
#include "data/hf_llama_weights.h"
#include "data/safetensors_file.h"
#include "worker/checkpoint/checkpoint.h"
#include "jobplan/hf_config.h"
#include "jobplan/spec_validation.h"
#include "worker/daemon/assignment_model.h"
#include "worker/daemon/local_run.h"
#include "worker/model/stage_model.h"
#include "worker/model/weight_init.h"
#include "common/rank_layout.h"
#include "jobplan/layout.h"

namespace pipecoord {
namespace {

// Non-default epsilon and rotary base, so the export and PyTorch must carry them; grouped-query
// attention (2 key/value heads of 4), so the export's k_proj and v_proj have their own shape.
const char kConfig[] = R"({"model_type": "llama", "hidden_size": 16, "intermediate_size": 40,
  "num_hidden_layers": 4, "num_attention_heads": 4, "num_key_value_heads": 2, "vocab_size": 32,
  "rms_norm_eps": 1e-06, "rope_theta": 500000.0, "max_position_embeddings": 64, "bos_token_id": 1})";

std::string TmpPath(const std::string& name) {
  const char* tmp = std::getenv("TEST_TMPDIR");
  return std::string(tmp ? tmp : "/tmp") + "/" + name;
}

std::string Dir(const std::string& name) {
  const std::string dir = TmpPath(name);
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  return dir;
}

std::string Read(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

v1::JobSpec Spec(const std::string& hf_config, int pp, int steps, int seq_len = 8, int seed = 11) {
  v1::JobSpec s;
  s.set_schedule("1f1b");
  s.set_pp(pp);
  s.set_microbatches(4);
  s.set_micro_batch_size(2);
  s.set_steps(steps);
  s.set_learning_rate(0.01);
  s.mutable_model()->set_hf_config(hf_config);
  s.mutable_model()->set_seq_len(seq_len);
  s.mutable_model()->set_seed(seed);
  EXPECT_TRUE(jobplan::ValidateJobSpec(s).ok()) << jobplan::ValidateJobSpec(s).ToString();
  return jobplan::WithDefaults(s);
}

// A Mistral with a sliding window of 3 of the 8 tokens: exported as a Mistral config with its window.
const char kMistralWindowConfig[] = R"({"model_type": "mistral", "hidden_size": 16, "intermediate_size": 40,
  "num_hidden_layers": 4, "num_attention_heads": 4, "num_key_value_heads": 2, "vocab_size": 32,
  "rms_norm_eps": 1e-06, "rope_theta": 1000000.0, "max_position_embeddings": 64, "sliding_window": 3})";

// Train, export (pipectl export's code), load the export into fresh jobs and into transformers
// (`hf_class`, from_pretrained): every one gives the trained model's loss.
void ExportRoundTrip(const std::string& name, const char* hf_config, const char* hf_class) {
  const std::string dir = Dir(name);
  // Train: pp 2, 3 steps, checkpointed after the last.
  v1::JobSpec trained = Spec(hf_config, 2, 3);
  trained.set_checkpoint_every(3);
  auto run = worker::RunLocally(trained, {}, {dir + "/ckpt", "job-a", 0}, true);
  ASSERT_TRUE(run.ok()) << run.status().ToString();
  const std::vector<double> losses = worker::StepLosses(*run);
  ASSERT_EQ(losses.size(), 3u);
  EXPECT_LT(losses[2], losses[0]);  // it trained

  // Export step 2, as pipectl export does, in shards.
  cli::ExportOptions o;
  o.checkpoint_dir = dir + "/ckpt";
  o.job_id = "job-a";
  o.step = 2;
  o.out_dir = dir + "/export";
  o.max_shard_bytes = 20000;
  auto exported = cli::ExportJob(trained, o);
  ASSERT_TRUE(exported.ok()) << exported.status().ToString();
  EXPECT_EQ(exported->tensors, static_cast<int>(data::HfLlamaTensors(jobplan::LlamaShapeOf(trained.model())).size()));
  EXPECT_TRUE(std::filesystem::exists(o.out_dir + "/model.safetensors.index.json"));

  // The trained model's loss on step 0's batch: one stage holding every layer, its weights the
  // ranks' final state, fed what the job's step 0 fed.
  const model::ModelConfig config = worker::ModelConfigOf(trained.model());
  auto whole = model::StageModel::Create(config, model::WholeModel(config), worker::BatchShapeOf(trained));
  ASSERT_TRUE(whole.ok());
  for (const auto& rank : run->final_state) {
    for (const auto& [name, values] : rank) {
      if (name.size() < 6 || name.substr(name.size() - 6) != "/value") continue;
      const std::string param = name.substr(name.find('/') + 1, name.size() - 6 - name.find('/') - 1);
      if (config.tied_embeddings && param == "output.weight") continue;  // the last stage's copy of the embedding
      auto p = (*whole)->FindParameter(param);
      ASSERT_TRUE(p.ok()) << param;
      std::copy(values.begin(), values.end(), p->value.begin());
    }
  }
  const model::SyntheticData data = worker::SyntheticDataOf(trained);
  double sum = 0;
  std::vector<std::vector<float>> our_logits;  // each micro-batch's, [b s, vocab]
  std::string batch_json = "{\"microbatches\": [";
  for (int mb = 0; mb < trained.microbatches(); ++mb) {
    model::TokenBatch b = data.Batch(0, mb);
    std::string inputs, targets;
    for (int i = 0; i < trained.micro_batch_size(); ++i) {
      inputs += i ? ", [" : "[";
      targets += i ? ", [" : "[";
      for (int t = 0; t < config.seq_len; ++t) {
        inputs += (t ? ", " : "") + std::to_string(b.inputs[i * config.seq_len + t]);
        targets += (t ? ", " : "") + std::to_string(b.targets[i * config.seq_len + t]);
      }
      inputs += "]";
      targets += "]";
    }
    batch_json += std::string(mb ? ", " : "") + "{\"inputs\": [" + inputs + "], \"targets\": [" + targets + "]}";
    auto out = (*whole)->Forward(mb, {kernels::ToHostBuffer(b.inputs), {}, kernels::ToHostBuffer(b.targets)});
    ASSERT_TRUE(out.ok()) << out.status().ToString();
    sum += *out->loss;
    auto logits = (*whole)->Logits(mb);
    ASSERT_TRUE(logits.ok()) << logits.status().ToString();
    our_logits.emplace_back(logits->begin(), logits->end());
    ASSERT_TRUE((*whole)->BackwardFull(mb, {}).ok());  // retires mb (its logits were copied)
  }
  batch_json += "]}";
  const double trained_loss = sum / trained.microbatches();

  // A fresh job from the export: hfConfig is the exported config.json, init the folder; pp 1
  // and pp 2 (another partition reads its own layers).
  for (int pp : {1, 2}) {
    v1::JobSpec fresh = Spec(Read(o.out_dir + "/config.json"), pp, 1);
    fresh.set_init(o.out_dir);
    auto again = worker::RunLocally(fresh);
    ASSERT_TRUE(again.ok()) << again.status().ToString();
    EXPECT_EQ(worker::StepLosses(*again)[0], trained_loss) << "pp " << pp;
  }

  // Hugging Face transformers itself (from_pretrained of the folder) computes the same loss.
  std::ofstream(dir + "/batch.json") << batch_json;
  // The project's Python (tests/python.sh): PyTorch 2 from tools/requirements.txt.
  const char* venv = std::getenv("PIPECOORD_VENV");
  const std::string python = std::string(venv != nullptr ? venv : "/var/cache/pipecoord/venv") + "/bin/python";
  const std::string cmd = python + " tests/hf_weights/hf_llama_torch_loss.py " + o.out_dir + " " + dir +
                          "/batch.json " + hf_class + " " + dir + "/torch_logits.safetensors > " + dir + "/torch_loss.txt";
  ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
  const double torch_loss = std::stod(Read(dir + "/torch_loss.txt"));
  EXPECT_LT(std::fabs(torch_loss - trained_loss) / trained_loss, 1e-5) << torch_loss << " vs " << trained_loss;
  // And its logits: transformers' on the exported folder against the trained model's, each micro-batch.
  auto their_logits = data::SafetensorsFile::Open(dir + "/torch_logits.safetensors");
  ASSERT_TRUE(their_logits.ok()) << their_logits.status().ToString();
  double worst_logits = 0;
  for (size_t mb = 0; mb < our_logits.size(); ++mb) {
    auto theirs = their_logits->Tensor("mb" + std::to_string(mb));
    ASSERT_TRUE(theirs.ok()) << theirs.status().ToString();
    ASSERT_EQ(theirs->info->elements(), static_cast<int64_t>(our_logits[mb].size()));
    std::vector<float> expected(our_logits[mb].size());
    ASSERT_TRUE(theirs->CopyToFloat(expected).ok());
    double diff = 0, norm = 0;
    for (size_t i = 0; i < expected.size(); ++i) {
      diff += (double(our_logits[mb][i]) - expected[i]) * (double(our_logits[mb][i]) - expected[i]);
      norm += double(expected[i]) * expected[i];
    }
    worst_logits = std::max(worst_logits, std::sqrt(diff / norm));
  }
  EXPECT_LT(worst_logits, 1e-5) << name;
  std::printf("%s: trained model's loss on step 0's batch %.10f; transformers' %s from the export %.10f; its logits "
              "against the trained model's, worst relative L2 error %.2e\n", name.c_str(), trained_loss, hf_class, torch_loss,
              worst_logits);
}

// Llama 3.2's tied embeddings: trained at pp 2 (the last stage's copy summed with the embedding),
// exported with tie_word_embeddings true and no lm_head.weight, read back by fresh jobs and by
// transformers' LlamaForCausalLM.
const char kTiedConfig[] = R"({"model_type": "llama", "hidden_size": 16, "intermediate_size": 40,
  "num_hidden_layers": 4, "num_attention_heads": 4, "num_key_value_heads": 2, "vocab_size": 32,
  "rms_norm_eps": 1e-05, "rope_theta": 500000.0, "max_position_embeddings": 64, "tie_word_embeddings": true})";

TEST(HfRoundTripTest, ATiedModelExportsWithoutALmHead) {
  ExportRoundTrip("hf_round_trip_tied", kTiedConfig, "LlamaForCausalLM");
  const std::string out = TmpPath("hf_round_trip_tied/export");
  auto exported = jobplan::ParseHfConfig(Read(out + "/config.json"));
  ASSERT_TRUE(exported.ok()) << exported.status().ToString();
  EXPECT_TRUE(exported->tied_embeddings);
  EXPECT_EQ(Read(out + "/model.safetensors.index.json").find("lm_head"), std::string::npos);
}

// An explicit head_dim (8 for hidden 16 and 4 heads: q and o 32 wide) travels through training at
// pp 2, the export's shapes and config, fresh jobs and transformers.
const char kHeadDimConfig[] = R"({"model_type": "llama", "hidden_size": 16, "intermediate_size": 40,
  "num_hidden_layers": 4, "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 8, "vocab_size": 32,
  "rms_norm_eps": 1e-05, "rope_theta": 500000.0, "max_position_embeddings": 64})";

TEST(HfRoundTripTest, AnExplicitHeadDimExportsItsShapes) {
  ExportRoundTrip("hf_round_trip_head_dim", kHeadDimConfig, "LlamaForCausalLM");
  auto exported = jobplan::ParseHfConfig(Read(TmpPath("hf_round_trip_head_dim/export/config.json")));
  ASSERT_TRUE(exported.ok()) << exported.status().ToString();
  EXPECT_EQ(exported->head_dim, 8);
}

TEST(HfRoundTripTest, TheExportLoadedIntoAFreshJobGivesTheTrainedModelsLoss) {
  ExportRoundTrip("hf_round_trip", kConfig, "LlamaForCausalLM");
}

// The window travels: the export is a Mistral config with sliding_window 3, which transformers
// applies (the job's 8-token sequences are cut by it) and fresh jobs read back.
TEST(HfRoundTripTest, ASlidingWindowModelExportsAsMistral) {
  ExportRoundTrip("hf_round_trip_window", kMistralWindowConfig, "MistralForCausalLM");
  auto exported = jobplan::ParseHfConfig(Read(TmpPath("hf_round_trip_window/export/config.json")));
  ASSERT_TRUE(exported.ok()) << exported.status().ToString();
  EXPECT_EQ(exported->sliding_window, 3);
}

// A tensor-parallel job with ZeRO-1 exports whole tensors: tp 2 x pp 2 x dp 2 trains and
// checkpoints; the export (each tensor's slices put back together) loaded into a fresh tp 1 job
// gives the loss of a whole model holding the trained slices joined, bit for bit. (Joining the
// row-parallel wo and w2 as row blocks instead of column blocks fails it: 3.545 against 2.450.)
TEST(HfRoundTripTest, ATensorParallelJobExportsWholeTensors) {
  const std::string dir = Dir("hf_round_trip_tp");
  v1::JobSpec trained = Spec(kConfig, 2, 2);
  trained.set_tp(2);
  trained.set_zero(1);
  trained.set_dp(2);
  trained.set_checkpoint_every(2);
  ASSERT_TRUE(jobplan::ValidateJobSpec(trained).ok()) << jobplan::ValidateJobSpec(trained).ToString();
  auto run = worker::RunLocally(trained, {}, {dir + "/ckpt", "job-tp", 0}, true);
  ASSERT_TRUE(run.ok()) << run.status().ToString();
  cli::ExportOptions o;
  o.checkpoint_dir = dir + "/ckpt";
  o.job_id = "job-tp";
  o.step = 1;
  o.out_dir = dir + "/export";
  auto exported = cli::ExportJob(trained, o);
  ASSERT_TRUE(exported.ok()) << exported.status().ToString();
  EXPECT_EQ(exported->tensors, 2 + 4 * 9 + 1);

  // The whole model from replica 0's slices, each joined as tensor parallelism split it.
  const model::ModelConfig config = worker::ModelConfigOf(trained.model());
  auto whole = model::StageModel::Create(config, model::WholeModel(config), worker::BatchShapeOf(trained));
  ASSERT_TRUE(whole.ok());
  const RankLayout layout = jobplan::LayoutOf(trained);
  std::map<std::string, std::vector<std::vector<float>>> slices;
  for (int g = 0; g < layout.world(); ++g) {
    if (layout.DataRank(g) != 0) continue;
    for (const auto& [name, values] : run->final_state[g]) {
      if (name.size() < 6 || name.substr(name.size() - 6) != "/value") continue;
      auto& per = slices[name.substr(name.find('/') + 1, name.size() - 6 - name.find('/') - 1)];
      per.resize(layout.tp());
      per[layout.TensorRank(g)] = values;
    }
  }
  ASSERT_EQ(slices.size(), 2u + 4 * 9 + 1);
  for (const auto& [param, per] : slices) {
    auto p = (*whole)->FindParameter(param);
    ASSERT_TRUE(p.ok()) << param;
    const auto [rows, cols] = model::RowsCols(p->shape);
    auto joined = model::TensorParallelJoin(per, rows, cols, model::TpSplitOf(param));
    ASSERT_TRUE(joined.ok()) << param << ": " << joined.status().ToString();
    std::copy(joined->begin(), joined->end(), p->value.begin());
  }
  const model::SyntheticData data = worker::SyntheticDataOf(trained);
  double sum = 0;
  for (int mb = 0; mb < trained.microbatches(); ++mb) {
    model::TokenBatch b = data.Batch(0, mb);
    auto out = (*whole)->Forward(mb, {kernels::ToHostBuffer(b.inputs), {}, kernels::ToHostBuffer(b.targets)});
    ASSERT_TRUE(out.ok()) << out.status().ToString();
    sum += *out->loss;
  }
  v1::JobSpec fresh = Spec(Read(o.out_dir + "/config.json"), 1, 1);
  fresh.set_init(o.out_dir);
  auto again = worker::RunLocally(fresh);
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  EXPECT_EQ(worker::StepLosses(*again)[0], sum / trained.microbatches());
  // And into a tp 2 job (with sequence parallelism): each rank cuts its slices from the export;
  // the same loss up to the group's summation order.
  fresh.set_tp(2);
  fresh.set_pp(2);
  fresh.set_sequence_parallel(true);
  ASSERT_TRUE(jobplan::ValidateJobSpec(fresh).ok()) << jobplan::ValidateJobSpec(fresh).ToString();
  auto sliced = worker::RunLocally(fresh);
  ASSERT_TRUE(sliced.ok()) << sliced.status().ToString();
  EXPECT_NEAR(worker::StepLosses(*sliced)[0], sum / trained.microbatches(), 1e-6 * sum / trained.microbatches());
}

// ZeRO with sharded masters (the CUDA backend in bf16) writes each replica's piece of a rank's
// values ("NAME/value@B": elements [B, B + n) of the rank's tensor, flattened); export joins the
// replicas' pieces. A pp 2 x dp 2 checkpoint, rewritten so that replica d keeps the d-th half of
// each value only, exports the very bytes of the whole files' export; with a piece missing it is
// refused, naming the tensor and the first element no file holds.
TEST(HfRoundTripTest, ShardedValuesExportAsTheWholeOnes) {
  const std::string dir = Dir("hf_round_trip_sharded");
  v1::JobSpec trained = Spec(kConfig, 2, 2);
  trained.set_dp(2);
  trained.set_zero(1);
  trained.set_checkpoint_every(2);
  ASSERT_TRUE(jobplan::ValidateJobSpec(trained).ok()) << jobplan::ValidateJobSpec(trained).ToString();
  auto run = worker::RunLocally(trained, {}, {dir + "/ckpt", "job-z", 0}, true);
  ASSERT_TRUE(run.ok()) << run.status().ToString();
  cli::ExportOptions o;
  o.checkpoint_dir = dir + "/ckpt";
  o.job_id = "job-z";
  o.step = 1;
  o.out_dir = dir + "/whole";
  ASSERT_TRUE(cli::ExportJob(trained, o).ok());

  // Each rank's file again, its values cut to this replica's half.
  const RankLayout layout = jobplan::LayoutOf(trained);
  auto rewrite = [&](const std::string& to, const std::string& drop) {
    for (int g = 0; g < layout.world(); ++g) {
      auto file = worker::CheckpointFile::Read(worker::CheckpointPath(dir + "/ckpt", "job-z", g, 1));
      ASSERT_TRUE(file.ok()) << file.status().ToString();
      std::vector<std::vector<float>> kept;
      std::vector<std::string> names;
      for (const std::string& name : file->Names()) {
        std::span<const float> v = file->Find(name);
        if (!name.ends_with("/value")) {
          names.push_back(name);
          kept.emplace_back(v.begin(), v.end());
          continue;
        }
        const size_t d = static_cast<size_t>(layout.DataRank(g)), n = v.size();
        const size_t begin = d * n / 2, end = (d + 1) * n / 2;
        const std::string piece = name + "@" + std::to_string(begin);
        if (piece == drop) continue;
        names.push_back(piece);
        kept.emplace_back(v.begin() + begin, v.begin() + end);
      }
      std::vector<worker::StateTensor> tensors;
      for (size_t i = 0; i < names.size(); ++i) tensors.push_back({names[i], kept[i]});
      ASSERT_TRUE(worker::WriteCheckpointFile(to, "job-z", g, file->info(), tensors).ok());
    }
  };
  rewrite(dir + "/sharded", "");
  o.checkpoint_dir = dir + "/sharded";
  o.out_dir = dir + "/joined";
  auto joined = cli::ExportJob(trained, o);
  ASSERT_TRUE(joined.ok()) << joined.status().ToString();
  EXPECT_EQ(joined->tensors, 2 + 4 * 9 + 1);
  const std::string want = Read(dir + "/whole/model.safetensors");
  EXPECT_FALSE(want.empty());
  EXPECT_EQ(Read(dir + "/joined/model.safetensors"), want);

  // Replica 1 of pipeline rank 0 loses its half of layer 1's wq (16 x 16: elements 128 on).
  rewrite(dir + "/gap", "stage0/layers.1.attention.wq.weight/value@128");
  o.checkpoint_dir = dir + "/gap";
  o.out_dir = dir + "/gap_export";
  auto gap = cli::ExportJob(trained, o);
  ASSERT_FALSE(gap.ok());
  EXPECT_NE(gap.status().message().find("layers.1.attention.wq.weight (tensor-parallel rank 0): element 128 is in none"),
            std::string::npos)
      << gap.status().ToString();
}

TEST(HfRoundTripTest, BadInitIsRefusedNamingTheTensor) {
  const std::string dir = Dir("hf_bad_init");
  v1::JobSpec s = Spec(kConfig, 1, 1);
  s.set_init(dir + "/nothing-here");
  auto run = worker::RunLocally(s);
  ASSERT_FALSE(run.ok());
  EXPECT_NE(run.status().message().find("spec.init: "), std::string::npos) << run.status().message();
}

TEST(HfRoundTripTest, ALlamaTransformersWroteGivesTransformersLoss) {
  // transformers_llama3: Llama 3's grouped-query attention (2 key/value heads of 4) and rope
  // scaling (rope_parameters.rope_type "llama3", which the writer checked changes the loss);
  // transformers_llama32: the same with tied embeddings (no lm_head.weight in the files; at pp 2
  // the last stage's copy is read from the embedding and the two gradients summed);
  // transformers_llama_head_dim: head_dim 16 for hidden 32 and 4 heads (q and o 64 wide);
  // transformers_mistral: a MistralForCausalLM (model_type "mistral", GQA, rotary base 1e6);
  // transformers_mistral_window: the same with a sliding window of 4 of the 16 tokens;
  // transformers_qwen2: a Qwen2ForCausalLM (biases on q, k, v); transformers_qwen2_window: with
  // use_sliding_window, a 4-token window on every layer (max_window_layers 0).
  for (const std::string name :
       {"transformers_llama", "transformers_llama3", "transformers_llama32", "transformers_llama_head_dim",
        "transformers_mistral", "transformers_mistral_window", "transformers_qwen2", "transformers_qwen2_window"}) {
  const std::string dir = "tests/hf_weights/" + name;
  const double want = std::stod(Read(dir + "/loss.txt"));
  for (int pp : {1, 2}) {
    // write_transformers_llama.py's batch: seed 5, 4 micro-batches of 2 x 16 tokens.
    v1::JobSpec s = Spec(Read(dir + "/config.json"), pp, 1, /*seq_len=*/16, /*seed=*/5);
    s.set_init(dir);
    auto run = worker::RunLocally(s);
    ASSERT_TRUE(run.ok()) << run.status().ToString();
    const double got = worker::StepLosses(*run)[0];
    EXPECT_LT(std::fabs(got - want) / want, 1e-5) << name << " pp " << pp << ": " << got << " vs transformers' " << want;
    std::printf("%s, pp %d: our step-0 loss %.10f, transformers' %.10f\n", name.c_str(), pp, got, want);
  }
  }
}

// One training step's logits and gradients against transformers': the model loaded from the files
// transformers wrote, step 0's micro-batches forward (each one's logits, [b s, vocab], against
// transformers' logits/model.safetensors) and backward (the step loss, the mean of the
// micro-batches' mean token losses), every weight's gradient against the one transformers' own
// backward gave (grads/model.safetensors, read through the same name and rotary-row mapping as
// the weights). Relative L2 error per micro-batch's logits and per tensor.
TEST(HfRoundTripTest, ALlamaTransformersWroteGivesTransformersLogitsAndGradients) {
  for (const std::string name :
       {"transformers_llama", "transformers_llama3", "transformers_llama32", "transformers_llama_head_dim",
        "transformers_mistral", "transformers_mistral_window", "transformers_qwen2", "transformers_qwen2_window"}) {
    const std::string dir = "tests/hf_weights/" + name;
    const v1::JobSpec spec = Spec(Read(dir + "/config.json"), 1, 1, /*seq_len=*/16, /*seed=*/5);
    const model::ModelConfig config = worker::ModelConfigOf(spec.model());
    const data::LlamaShape shape = jobplan::LlamaShapeOf(spec.model());
    auto weights = data::HfLlamaWeights::Open(dir, shape);
    ASSERT_TRUE(weights.ok()) << weights.status().ToString();
    auto want = data::HfLlamaWeights::Open(dir + "/grads", shape);
    ASSERT_TRUE(want.ok()) << want.status().ToString();
    auto whole = model::StageModel::Create(config, model::WholeModel(config), worker::BatchShapeOf(spec));
    ASSERT_TRUE(whole.ok()) << whole.status().ToString();
    for (const model::ParameterRef& p : (*whole)->Parameters()) {
      ASSERT_TRUE(weights->Read(p.name, p.value).ok()) << p.name;
    }
    const model::SyntheticData data = worker::SyntheticDataOf(spec);
    auto their_logits = data::SafetensorsFile::Open(dir + "/logits/model.safetensors");
    ASSERT_TRUE(their_logits.ok()) << their_logits.status().ToString();
    double loss = 0, worst_logits = 0;
    for (int mb = 0; mb < spec.microbatches(); ++mb) {
      model::TokenBatch b = data.Batch(0, mb);
      auto out = (*whole)->Forward(mb, {kernels::ToHostBuffer(b.inputs), {}, kernels::ToHostBuffer(b.targets)});
      ASSERT_TRUE(out.ok()) << out.status().ToString();
      loss += *out->loss / spec.microbatches();
      auto ours = (*whole)->Logits(mb);
      ASSERT_TRUE(ours.ok()) << ours.status().ToString();
      auto theirs = their_logits->Tensor("mb" + std::to_string(mb));
      ASSERT_TRUE(theirs.ok()) << theirs.status().ToString();
      ASSERT_EQ(theirs->info->elements(), static_cast<int64_t>(ours->size())) << name << " mb " << mb;
      std::vector<float> expected(ours->size());
      ASSERT_TRUE(theirs->CopyToFloat(expected).ok());
      double diff = 0, norm = 0;
      for (size_t i = 0; i < expected.size(); ++i) {
        diff += (double((*ours)[i]) - expected[i]) * (double((*ours)[i]) - expected[i]);
        norm += double(expected[i]) * expected[i];
      }
      const double rel = std::sqrt(diff / norm);
      EXPECT_LT(rel, 1e-5) << name << " logits of micro-batch " << mb;
      worst_logits = std::max(worst_logits, rel);
      auto dx = (*whole)->BackwardFull(mb, {});
      ASSERT_TRUE(dx.ok()) << dx.status().ToString();
    }
    const double want_loss = std::stod(Read(dir + "/loss.txt"));
    EXPECT_LT(std::fabs(loss - want_loss) / want_loss, 1e-5) << name;
    double worst = 0;
    std::string worst_name;
    int tensors = 0;
    for (const model::ParameterRef& p : (*whole)->Parameters()) {
      std::vector<float> expected(p.grad.size());
      ASSERT_TRUE(want->Read(p.name, expected).ok()) << p.name;
      double diff = 0, norm = 0;
      for (size_t i = 0; i < expected.size(); ++i) {
        diff += (double(p.grad[i]) - expected[i]) * (double(p.grad[i]) - expected[i]);
        norm += double(expected[i]) * expected[i];
      }
      const double rel = std::sqrt(diff / norm);
      EXPECT_LT(rel, 1e-5) << name << " " << p.name;
      if (rel > worst) worst = rel, worst_name = std::string(p.name);
      ++tensors;
    }
    // Tied: one tensor for the embedding and the head, its gradient the sum over both uses.
    EXPECT_EQ(tensors, (config.tied_embeddings ? 1 : 2) + 2 * (config.qkv_bias ? 12 : 9) + 1);
    std::printf("%s: logits of %d micro-batches against transformers', worst relative L2 error %.2e; %d gradients "
                "against transformers' autograd, worst %.2e (%s)\n",
                name.c_str(), spec.microbatches(), worst_logits, tensors, worst, worst_name.c_str());
  }
}

}  // namespace
}  // namespace pipecoord
