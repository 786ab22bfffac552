// Hugging Face Llama weights in and out: a checkpoint written by an independent numpy script
// (testdata/write_hf_llama.py, which also states the rotary row permutation its own way) loads
// into pipecoord's names and layout exactly, single-file and sharded; every bad tensor is
// refused by name; export writes what import reads back bit for bit.
#include "data/hf_llama_weights.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "data/test_files.h"

namespace pipecoord::data {
namespace {

const LlamaShape kShape{2, 8, 2, 12, 10};  // layers, hidden, heads, ffn, vocab (the script's model)
const std::string kDir = "data/python_hf_llama/";

std::vector<float> Expected(const SafetensorsFile& file, const std::string& name) {
  auto view = file.Tensor(name);
  EXPECT_TRUE(view.ok()) << view.status().ToString();
  std::vector<float> v(view->info->elements());
  EXPECT_TRUE(view->CopyToFloat(v).ok());
  return v;
}

TEST(HfLlamaLayoutTest, NamesMapBothWaysAndOnlyModelWeights) {
  EXPECT_EQ(*HfNameOf("layers.12.attention.wq.weight"), "model.layers.12.self_attn.q_proj.weight");
  EXPECT_EQ(*HfNameOf("layers.0.feed_forward.w2.weight"), "model.layers.0.mlp.down_proj.weight");
  EXPECT_EQ(*HfNameOf("output.weight"), "lm_head.weight");
  EXPECT_EQ(*OurNameOf("model.layers.3.post_attention_layernorm.weight"), "layers.3.ffn_norm.weight");
  EXPECT_EQ(*OurNameOf("model.embed_tokens.weight"), "tok_embeddings.weight");
  EXPECT_EQ(*OurNameOf("model.layers.0.self_attn.q_proj.bias"), "layers.0.attention.wq.bias");  // Qwen2's
  EXPECT_EQ(OurNameOf("model.layers.0.self_attn.o_proj.bias").status().message(),
            "tensor \"model.layers.0.self_attn.o_proj.bias\": not a weight of the Llama model (a Hugging Face "
            "LlamaForCausalLM untied, biases on q, k, v only)");
  EXPECT_FALSE(OurNameOf("model.layers.01.mlp.up_proj.weight").ok());
  EXPECT_FALSE(HfNameOf("layers.x.attention.wq.weight").ok());
  EXPECT_TRUE(IsDerivedHfBuffer("model.layers.4.self_attn.rotary_emb.inv_freq"));
  EXPECT_TRUE(HasRotaryRows("model.layers.4.self_attn.k_proj.weight"));
  EXPECT_FALSE(HasRotaryRows("model.layers.4.self_attn.v_proj.weight"));
  const auto all = HfLlamaTensors(kShape);
  ASSERT_EQ(all.size(), 2u + 2 * 9 + 1);
  for (const HfTensorInfo& t : all) {
    EXPECT_EQ(*HfNameOf(t.our_name), t.hf_name);
    EXPECT_EQ(*OurNameOf(t.hf_name), t.our_name);
  }
}

TEST(HfLlamaLayoutTest, RotaryPermutationIsTheInterleavedPairing) {
  // 2 heads of head_dim 4, one column: HF rows per head [x0 x1 y0 y1] -> ours [x0 y0 x1 y1].
  const std::vector<float> hf = {0, 1, 2, 3, 10, 11, 12, 13};
  std::vector<float> ours(8), back(8);
  HfRotaryToInterleaved(hf, ours, 4, 1);
  EXPECT_EQ(ours, (std::vector<float>{0, 2, 1, 3, 10, 12, 11, 13}));
  InterleavedRotaryToHf(ours, back, 4, 1);
  EXPECT_EQ(back, hf);
}

TEST(HfLlamaWeightsTest, PythonWrittenCheckpointsLoadAsTheScriptSays) {
  auto expected = SafetensorsFile::Open(kDir + "expected.safetensors");
  ASSERT_TRUE(expected.ok()) << expected.status().ToString();
  for (const std::string& path : {kDir + "single", kDir + "sharded/model.safetensors.index.json", kDir + "sharded"}) {
    auto w = HfLlamaWeights::Open(path, kShape);
    ASSERT_TRUE(w.ok()) << path << ": " << w.status().ToString();
    for (const HfTensorInfo& t : HfLlamaTensors(kShape)) {
      const std::vector<float> want = Expected(*expected, t.our_name);
      std::vector<float> got(want.size());
      ASSERT_TRUE(w->Read(t.our_name, got).ok()) << t.our_name;
      EXPECT_EQ(got, want) << path << ": " << t.our_name;
    }
  }
}

// Writes a checkpoint from the script's single file with one change.
std::string Altered(const std::string& name, void (*change)(std::vector<TensorToWrite>*, std::vector<float>*)) {
  auto src = SafetensorsFile::Open(kDir + "single/model.safetensors");
  EXPECT_TRUE(src.ok());
  std::vector<TensorToWrite> ts;
  for (const SafetensorsTensor& t : src->layout().tensors) {
    ts.push_back({t.name, t.dtype, t.shape, src->bytes().subspan(src->layout().data_start + t.begin, t.bytes())});
  }
  static std::vector<float> extra;
  extra.assign(64, 0.5f);
  change(&ts, &extra);
  const std::string dir = testing::FreshDir(name);
  EXPECT_TRUE(WriteSafetensorsFile(dir + "/model.safetensors", ts).ok());
  return dir;
}

TEST(HfLlamaWeightsTest, BadCheckpointsAreRefusedNamingTheTensor) {
  auto error = [](const std::string& dir, LlamaShape shape = kShape) {
    return HfLlamaWeights::Open(dir, shape).status().message();
  };
  const std::string missing = Altered("missing", [](std::vector<TensorToWrite>* ts, std::vector<float>*) {
    std::erase_if(*ts, [](const TensorToWrite& t) { return t.name == "model.layers.1.mlp.up_proj.weight"; });
  });
  EXPECT_EQ(error(missing), missing + "/model.safetensors: tensor \"model.layers.1.mlp.up_proj.weight\": missing; "
                                      "the model (2 layers) needs it with shape [12, 8]");
  const std::string bias = Altered("bias", [](std::vector<TensorToWrite>* ts, std::vector<float>* extra) {
    ts->push_back({"model.layers.0.self_attn.q_proj.bias", SafetensorsDtype::kF32, {8},
                   std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(extra->data()), 32)});
  });
  EXPECT_EQ(error(bias), bias + "/model.safetensors: tensor \"model.layers.0.self_attn.q_proj.bias\": not a weight "
                                "of this model (its q, k, v projections have no biases: a Qwen2 config's have); a "
                                "checkpoint of another model?");
  const std::string ints = Altered("ints", [](std::vector<TensorToWrite>* ts, std::vector<float>*) {
    for (TensorToWrite& t : *ts) {
      if (t.name == "model.layers.0.self_attn.v_proj.weight") t.dtype = SafetensorsDtype::kI32;
    }
  });
  EXPECT_EQ(error(ints), ints + "/model.safetensors: tensor \"model.layers.0.self_attn.v_proj.weight\": dtype I32, "
                                "must be F32, BF16 or F16");
  // The same file against a model of another shape: the first tensor that differs is named.
  LlamaShape wider = kShape;
  wider.ffn = 16;
  EXPECT_EQ(error(kDir + "single", wider), kDir + "single/model.safetensors: tensor "
                                                  "\"model.layers.0.mlp.gate_proj.weight\": shape [12, 8], the model "
                                                  "needs [16, 8]");
  LlamaShape shallower = kShape;
  shallower.layers = 1;
  EXPECT_EQ(error(kDir + "single", shallower),
            kDir + "single/model.safetensors: tensor \"model.layers.1.input_layernorm.weight\": not a weight of this "
                   "model (it has 1 layers); a checkpoint of another model?");
  EXPECT_NE(HfLlamaWeights::Open(kDir + "nowhere", kShape).status().message().find(kDir + "nowhere"), std::string::npos);
}

TEST(HfLlamaWeightsTest, ExportWritesWhatImportReadsBackOneFileOrShards) {
  auto expected = SafetensorsFile::Open(kDir + "expected.safetensors");
  ASSERT_TRUE(expected.ok());
  std::vector<std::vector<float>> values;
  std::vector<ModelTensor> model;
  for (const HfTensorInfo& t : HfLlamaTensors(kShape)) values.push_back(Expected(*expected, t.our_name));
  size_t k = 0;
  for (const HfTensorInfo& t : HfLlamaTensors(kShape)) model.push_back({t.our_name, values[k++]});
  const std::string dir = testing::FreshDir("export");
  for (uint64_t shard_bytes : {uint64_t{0}, uint64_t{3000}}) {
    ASSERT_TRUE(WriteHfLlamaFolder(dir, "{\"model_type\": \"llama\"}\n", kShape, model, shard_bytes).ok());
    EXPECT_EQ(testing::ReadBytes(dir + "/config.json"), "{\"model_type\": \"llama\"}\n");
    EXPECT_EQ(std::filesystem::exists(dir + "/model.safetensors"), shard_bytes == 0);
    EXPECT_EQ(std::filesystem::exists(dir + "/model.safetensors.index.json"), shard_bytes != 0);
    auto back = HfLlamaWeights::Open(dir, kShape);
    ASSERT_TRUE(back.ok()) << back.status().ToString();
    k = 0;
    for (const HfTensorInfo& t : HfLlamaTensors(kShape)) {
      std::vector<float> got(values[k].size());
      ASSERT_TRUE(back->Read(t.our_name, got).ok());
      EXPECT_EQ(got, values[k++]) << t.our_name;
    }
  }
  // The sharded export's files: HF's names for them, the index listing every tensor.
  // 3000 bytes: the embedding and layer 0 (2560 bytes), then layer 1, the norm and the head.
  EXPECT_TRUE(std::filesystem::exists(dir + "/model-00001-of-00002.safetensors"));
  EXPECT_TRUE(std::filesystem::exists(dir + "/model-00002-of-00002.safetensors"));
  model.pop_back();
  EXPECT_EQ(WriteHfLlamaFolder(dir, "{}", kShape, model, 0).message(),
            "tensor \"output.weight\": missing (every weight is exported)");
}

// Tied embeddings: the files hold no lm_head.weight (as save_pretrained writes a tied model), a
// head stage's output.weight reads the embedding, and a file of the other kind is refused naming
// the tensor.
TEST(HfLlamaWeightsTest, TiedModelsHaveNoLmHeadAndTheirHeadReadsTheEmbedding) {
  auto expected = SafetensorsFile::Open(kDir + "expected.safetensors");
  ASSERT_TRUE(expected.ok());
  LlamaShape tied = kShape;
  tied.tied_embeddings = true;
  std::vector<std::vector<float>> values;
  for (const HfTensorInfo& t : HfLlamaTensors(tied)) values.push_back(Expected(*expected, t.our_name));
  ASSERT_EQ(values.size() + 1, HfLlamaTensors(kShape).size());
  std::vector<ModelTensor> model;
  size_t k = 0;
  for (const HfTensorInfo& t : HfLlamaTensors(tied)) {
    EXPECT_NE(t.hf_name, "lm_head.weight");
    model.push_back({t.our_name, values[k++]});
  }
  const std::string dir = testing::FreshDir("tied");
  ASSERT_TRUE(WriteHfLlamaFolder(dir, "{}", tied, model, 0).ok());
  auto back = HfLlamaWeights::Open(dir, tied);
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  std::vector<float> head(values[0].size());
  ASSERT_TRUE(back->Read("output.weight", head).ok());
  EXPECT_EQ(head, values[0]);  // the embedding
  EXPECT_EQ(HfLlamaWeights::Open(dir, kShape).status().message(),
            dir + "/model.safetensors: tensor \"lm_head.weight\": missing; the model (2 layers) needs it with shape "
                  "[10, 8] (a checkpoint of a tied model? its config's tie_word_embeddings: true ties ours too)");
  EXPECT_EQ(HfLlamaWeights::Open(kDir + "single", tied).status().message(),
            kDir + "single/model.safetensors: tensor \"lm_head.weight\": not a weight of this model, whose LM head is "
                   "model.embed_tokens.weight (tied embeddings); a checkpoint of an untied model?");
}

}  // namespace
}  // namespace pipecoord::data
