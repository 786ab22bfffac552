// The coordinator checks a job's datasets at submit (spec.data), before any worker starts: each
// rule a bad dataset breaks is INVALID_ARGUMENT naming the file and the rule, no job is stored
// and the free workers get no command; good data is planned and dispatched as usual.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include "coordinator/coordinator.h"
#include "data/hf_llama_weights.h"
#include "jobplan/tiny_spec_for_tests.h"

namespace pipecoord::coordinator {
namespace {

std::string FreshDir(const std::string& name) {
  const char* tmp = std::getenv("TEST_TMPDIR");
  const std::string dir = std::string(tmp ? tmp : "/tmp") + "/" + name;
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  return dir;
}

// A flat uint16 dataset of `tokens` ids (i mod 50), sidecar with `vocab` and `sidecar_extra`.
void WriteFlat(const std::string& prefix, int tokens, int vocab, const std::string& sidecar_extra = "",
               int bad_at = -1) {
  std::string bin;
  for (int i = 0; i < tokens; ++i) {
    const int id = i == bad_at ? 70 : i % 50;
    bin.push_back(static_cast<char>(id));
    bin.push_back(0);
  }
  std::ofstream(prefix + ".bin", std::ios::binary) << bin;
  std::ofstream(prefix + ".json") << "{\"dtype\": \"uint16\", \"vocab_size\": " << vocab << sidecar_extra << "}";
}

v1::RegisterRequest Worker(int port) {
  v1::RegisterRequest r;
  r.set_device_kind("cpu");
  r.set_host("localhost");
  r.set_data_endpoint("127.0.0.1:" + std::to_string(port));
  return r;
}

// TinySpec: pp 2, 4 micro-batches of 2 sequences of 8 tokens, vocabulary 64.
v1::JobSpec WithData(const std::string& path) {
  v1::JobSpec s = jobplan::TinySpec();
  s.mutable_data()->set_path(path);
  return s;
}

TEST(DataCheckTest, BadDataIsRefusedAtSubmitBeforeAnyWorkerStarts) {
  const std::string dir = FreshDir("coordinator-data");
  Coordinator c;
  auto w0 = c.Register(Worker(7100));
  auto w1 = c.Register(Worker(7101));
  ASSERT_TRUE(w0.ok() && w1.ok());
  WriteFlat(dir + "/big_vocab", 200, 100);
  WriteFlat(dir + "/bad_id", 200, 64, "", 33);
  WriteFlat(dir + "/disagree", 200, 64, ", \"tokens\": 250");
  WriteFlat(dir + "/short", 60, 64);  // one step reads 8 sequences of 9 tokens: 65 at least
  WriteFlat(dir + "/good", 400, 64);
  const std::vector<std::pair<std::string, std::string>> cases = {
      {dir + "/missing", dir + "/missing: no dataset: neither " + dir + "/missing.json (flat token sidecar) nor " +
                             dir + "/missing.idx (Megatron-LM index) exists"},
      {dir + "/big_vocab", dir + "/big_vocab.json: vocab_size 100 is larger than the model's vocabulary (64)"},
      {dir + "/bad_id", dir + "/bad_id.bin: token 70 at offset 33"},
      {dir + "/disagree", dir + "/disagree"},
      {dir + "/short", dir + "/short.bin: sampling: the range of 60 tokens holds 7 windows of 9 tokens, fewer than "
                           "one step's 8 sequences (dp 1 x 4 micro-batches x 2)"},
  };
  for (const auto& [path, want] : cases) {
    auto r = c.SubmitJob(WithData(path));
    ASSERT_FALSE(r.ok()) << path;
    EXPECT_EQ(r.status().code(), Code::kInvalidArgument) << path;
    EXPECT_NE(r.status().message().find(want), std::string::npos) << r.status().message();
  }
  // The sidecar that disagrees with the file's size names both numbers.
  const std::string disagree = c.SubmitJob(WithData(dir + "/disagree")).status().message();
  EXPECT_NE(disagree.find("250"), std::string::npos) << disagree;
  // Validation asked for without a split; a format that is not the file's.
  v1::JobSpec no_split = WithData(dir + "/good");
  no_split.set_eval_every(1);
  EXPECT_NE(c.SubmitJob(no_split).status().message().find("spec.evalEvery: validation needs a split"),
            std::string::npos);
  v1::JobSpec wrong_format = WithData(dir + "/good");
  wrong_format.mutable_data()->set_format("megatron");
  EXPECT_NE(c.SubmitJob(wrong_format).status().message().find("spec.data.format is \"megatron\", but " + dir +
                                                               "/good is flat"),
            std::string::npos);
  // A dry run checks the data too.
  EXPECT_EQ(c.SubmitJob(WithData(dir + "/short"), /*dry_run=*/true).status().code(), Code::kInvalidArgument);
  // Nothing was stored and no worker was told anything.
  EXPECT_TRUE(c.ListJobs().empty());
  for (const auto& w : {w0->worker_id(), w1->worker_id()}) {
    std::vector<v1::WorkerCommand> cmds;
    ASSERT_TRUE(c.WaitCommands(w, &cmds, Clock::now() + std::chrono::milliseconds(10)).ok());
    EXPECT_TRUE(cmds.empty());
  }
  // Good data with a validation tail: planned and dispatched, the workers' spec carrying it.
  v1::JobSpec good = WithData(dir + "/good");
  good.set_eval_every(1);
  good.mutable_data()->set_val_fraction(0.25);
  auto job = c.SubmitJob(good);
  ASSERT_TRUE(job.ok()) << job.status().ToString();
  EXPECT_EQ(c.GetJob(job->job_id())->state(), v1::RUNNING);
  std::vector<v1::WorkerCommand> cmds;
  ASSERT_TRUE(c.WaitCommands(w0->worker_id(), &cmds, Clock::now() + std::chrono::milliseconds(10)).ok());
  ASSERT_EQ(cmds.size(), 1u);
  EXPECT_EQ(cmds[0].assign().spec().data().path(), dir + "/good");
  EXPECT_EQ(cmds[0].assign().spec().eval_every(), 1);
}

// spec.init is checked at submit as well (a client other than pipectl may send it): weights of
// another shape or a missing folder are refused naming spec.init and the tensor; matching ones
// pass.
TEST(DataCheckTest, InitialWeightsAreCheckedAtSubmit) {
  const std::string dir = FreshDir("init");
  auto write = [&](const std::string& name, int64_t vocab) {
    const data::LlamaShape shape{4, 32, 4, 128, vocab};  // TinySpec's model; ffn: 8h/3 rounded up to 64
    std::vector<std::vector<float>> values;
    std::vector<data::ModelTensor> tensors;
    for (const data::HfTensorInfo& t : data::HfLlamaTensors(shape)) {
      uint64_t n = 1;
      for (uint64_t d : t.shape) n *= d;
      values.emplace_back(n, 0.5f);
    }
    size_t i = 0;
    for (const data::HfTensorInfo& t : data::HfLlamaTensors(shape)) tensors.push_back({t.our_name, values[i++]});
    ASSERT_TRUE(data::WriteHfLlamaFolder(dir + "/" + name, "{}", shape, tensors, 0).ok());
  };
  write("good", 64);
  write("other_vocab", 65);
  Coordinator c;
  ASSERT_TRUE(c.Register(Worker(7200)).ok());
  ASSERT_TRUE(c.Register(Worker(7201)).ok());
  v1::JobSpec spec = jobplan::TinySpec();
  spec.set_init(dir + "/other_vocab");
  auto bad = c.SubmitJob(spec);
  EXPECT_EQ(bad.status().code(), Code::kInvalidArgument);
  EXPECT_EQ(bad.status().message().rfind("spec.init: ", 0), 0u) << bad.status().message();
  EXPECT_NE(bad.status().message().find("model.embed_tokens.weight"), std::string::npos) << bad.status().message();
  spec.set_init(dir + "/missing");
  EXPECT_EQ(c.SubmitJob(spec).status().code(), Code::kInvalidArgument);
  EXPECT_TRUE(c.ListJobs().empty());
  spec.set_init(dir + "/good");
  auto job = c.SubmitJob(spec);
  ASSERT_TRUE(job.ok()) << job.status().ToString();
}

}  // namespace
}  // namespace pipecoord::coordinator
