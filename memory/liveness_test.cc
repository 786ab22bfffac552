#include "memory/liveness.h"

#include <gtest/gtest.h>

#include <fstream>
#include <random>
#include <sstream>

#include "memory/program_json.h"

namespace pipecoord::memory {
namespace {

std::string ReadTestdata(const std::string& name) {
  std::ifstream in("memory/testdata/" + name);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

TEST(LivenessTest, TwoLayerMlpByHand) {
  auto set = ParseProgramJson(ReadTestdata("two_layer_mlp.json"));
  ASSERT_TRUE(set.ok()) << set.status().ToString();
  auto r = SimulateLiveness(*set);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  const int64_t KiB = 1024;
  // Weights: w1, w2 (512 KiB each) and their gradients dw1, dw2 (512 KiB each) from the start.
  EXPECT_EQ(r->persistable_bytes, 4 * 512 * KiB);
  EXPECT_EQ(r->input_bytes, 512 * KiB);  // x
  const int64_t base = 4 * 512 * KiB;
  ASSERT_EQ(r->ops.size(), 7u);
  auto check = [&](int i, int64_t before, int64_t during, int64_t after) {
    EXPECT_EQ(r->ops[i].before - base, before) << r->ops[i].name;
    EXPECT_EQ(r->ops[i].during - base, during) << r->ops[i].name;
    EXPECT_EQ(r->ops[i].after - base, after) << r->ops[i].name;
  };
  // x 512K; h 2M (relu in place: no new storage); y 512K; l 4 B; dy 512K; dh 2M.
  check(0, 512 * KiB, 2560 * KiB, 2560 * KiB);                 // fc1: + h
  check(1, 2560 * KiB, 2560 * KiB, 2560 * KiB);                // relu_ in place
  check(2, 2560 * KiB, 3072 * KiB, 3072 * KiB);                // fc2: + y (h kept for backward)
  check(3, 3072 * KiB, 3072 * KiB + 4, 3072 * KiB + 4);        // loss: + l
  check(4, 3072 * KiB + 4, 3584 * KiB + 4, 3072 * KiB);        // loss_grad: + dy; l, y die
  check(5, 3072 * KiB, 5120 * KiB, 2560 * KiB);                // fc2_grad: + dh; dy, h die
  check(6, 2560 * KiB, 2560 * KiB, 0);                         // fc1_grad: dh, x die
  EXPECT_EQ(r->peak_bytes, base + 5120 * KiB);
  EXPECT_EQ(r->peak_op, 5);
  EXPECT_EQ(r->ops[5].name, "backward/fc2_grad");
  ASSERT_EQ(r->program_end.size(), 2u);
  EXPECT_EQ(r->program_end[0], base + 3072 * KiB + 4);  // what forward leaves for backward
  EXPECT_EQ(r->program_end[1], base);
}

TEST(LivenessTest, KeepHoldsATensor) {
  auto set = ParseProgramJson(R"({"programs": [{"ops": [
      {"name": "a", "inputs": [{"id": "x", "shape": [4], "dtype": "fp32"}], "outputs": [{"id": "y", "shape": [8], "dtype": "fp32"}]},
      {"name": "b", "inputs": ["y"], "outputs": [{"id": "z", "shape": [2], "dtype": "fp32"}]}]}],
      "keep": ["z"]})");
  ASSERT_TRUE(set.ok()) << set.status().ToString();
  auto r = SimulateLiveness(*set);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->ops[0].after, 32);  // x dies after a; y 32 B
  EXPECT_EQ(r->ops[1].during, 40);
  EXPECT_EQ(r->ops[1].after, 8);   // z kept
  EXPECT_EQ(r->peak_bytes, 48);    // during a: x + y
  EXPECT_EQ(r->peak_op, 0);
}

std::string Err(const std::string& json) {
  auto set = ParseProgramJson(json);
  if (!set.ok()) return set.status().message();
  auto r = SimulateLiveness(*set);
  return r.ok() ? "ok" : r.status().message();
}

TEST(LivenessTest, ErrorsNameTheOpAndTheField) {
  EXPECT_EQ(Err(R"({"programs": [{"ops": [{"inputs": [{"id": "x", "shape": [2, -1]}]}]}]})"),
            "programs[0].ops[0].inputs[0].shape: expected an array of non-negative integers");
  EXPECT_EQ(Err(R"({"programs": [{"ops": [{}, {"outputs": [{"id": "y", "dtype": "fp12", "shape": []}]}]}]})"),
            "programs[0].ops[1].outputs[0].dtype: unknown dtype \"fp12\" (known: fp32, bf16, fp16, fp8, fp64, "
            "int64, int32, int8, u8, bool)");
  EXPECT_EQ(Err(R"({"programs": [{"ops": [{"outputs": [{"shape": [1]}]}]}]})"), "programs[0].ops[0].outputs[0].id: missing");
  EXPECT_EQ(Err(R"({"programs": [{"ops": [{"inputs": 3}]}]})"), "programs[0].ops[0].inputs: expected an array, got number");
  EXPECT_EQ(Err(R"({"programs": [{"ops": [{"inputs": ["x"]}]}]})"),
            "programs[0].ops[0].inputs[0]: tensor \"x\" first appears here without a shape");
  EXPECT_EQ(Err(R"({"programs": [{"ops": [{"outputs": [{"id": "y", "shape": [1]}]},
                                          {"outputs": [{"id": "y", "shape": [1]}]}]}]})"),
            "programs[0].ops[1].outputs[0]: tensor \"y\" is produced twice (or read before the op that produces it)");
  EXPECT_EQ(Err(R"({"programs": [{"ops": [{"inputs": [{"id": "x", "shape": [2]}]},
                                          {"inputs": [{"id": "x", "shape": [3]}]}]}]})"),
            "programs[0].ops[1].inputs[0].shape: tensor \"x\" was declared [2], here [3]");
  EXPECT_EQ(Err(R"({"programs": [{"ops": [{"inputs": [{"id": "x", "shape": [2]}],
                                           "outputs": [{"id": "y", "inplace_of": "z"}]}]}]})"),
            "programs[0].ops[0].outputs[0].inplace_of: \"z\" is not an input of this op");
  EXPECT_EQ(Err(R"({"programs": [], "keep": ["q"]})"), "keep[0]: no tensor \"q\" in the programs");
  EXPECT_EQ(Err(R"({"programs": [{"name": 5, "ops": []}]})"), "programs[0].name: expected a string, got number");
  EXPECT_EQ(Err(R"({"programs": {}})"), "programs: expected an array");
  EXPECT_EQ(Err(R"({"programs": [{"ops": [{"inputs": [{"id": "x", "shape": [4294967296, 4294967296]}]}]}]})"),
            "programs[0].ops[0].inputs[0].shape: tensor larger than 2^56 bytes");
  EXPECT_EQ(Err("[]"), "program: expected a JSON object with \"programs\"");
}

TEST(LivenessTest, MutatedProgramsNeverCrash) {
  const std::string seed = ReadTestdata("two_layer_mlp.json");
  ASSERT_FALSE(seed.empty());
  std::mt19937 rng(11);
  const std::string alphabet = "{}[]\":,0123456789-.e xyhw";
  int parsed = 0;
  for (int i = 0; i < 3000; ++i) {
    std::string s = seed;
    for (int e = 0, n = 1 + static_cast<int>(rng() % 3); e < n; ++e) {
      size_t pos = rng() % s.size();
      if (rng() % 2) {
        s[pos] = alphabet[rng() % alphabet.size()];
      } else {
        s.erase(pos, 1);
      }
    }
    auto set = ParseProgramJson(s);
    if (!set.ok()) continue;
    ++parsed;
    auto r = SimulateLiveness(*set);
    if (r.ok()) {
      EXPECT_GE(r->peak_bytes, 0);
    } else {
      EXPECT_FALSE(r.status().message().empty());
    }
  }
  EXPECT_GT(parsed, 0);
}

TEST(LivenessTest, JsonRoundTrip) {
  auto set = ParseProgramJson(ReadTestdata("two_layer_mlp.json"));
  ASSERT_TRUE(set.ok());
  auto again = ParseProgramJson(ProgramSetToJson(*set));
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  auto a = SimulateLiveness(*set);
  auto b = SimulateLiveness(*again);
  ASSERT_TRUE(a.ok() && b.ok());
  ASSERT_EQ(a->ops.size(), b->ops.size());
  for (size_t i = 0; i < a->ops.size(); ++i) EXPECT_EQ(a->ops[i].during, b->ops[i].during);
  EXPECT_EQ(ProgramSetToJson(*set), ProgramSetToJson(*again));
}

}  // namespace
}  // namespace pipecoord::memory
