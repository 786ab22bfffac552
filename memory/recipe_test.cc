// Every shipped recipe resolves for every preset, and the eager recipe's totals are exact.
#include <gtest/gtest.h>

#include "memory/activations.h"
#include "memory/presets.h"

namespace pipecoord::memory {
namespace {

TEST(RecipeTest, EveryRecipeResolvesForEveryPresetAndVariant) {
  for (const Recipe* r : AllRecipes()) {
    for (ModelSpec m : ModelPresets()) {
      for (Attention at : {Attention::kEager, Attention::kFlash}) {
        for (Mlp mlp : {Mlp::kGelu, Mlp::kSwiGlu}) {
          for (Norm n : {Norm::kRmsNorm, Norm::kLayerNorm}) {
            m.attention = at;
            m.mlp = mlp;
            m.norm = n;
            TrainingSpec t;
            t.recipe = r->name;
            t.tp = 8;
            t.sp = true;
            auto am = ResolveActivations(m, t);
            ASSERT_TRUE(am.ok()) << r->name << " " << m.name << ": " << am.status().ToString();
            EXPECT_GT(am->block.stored_bytes, 0);
            // Without recompute F keeps everything it saves, and W's share is part of a step.
            EXPECT_EQ(am->block.stored_bytes, am->block.saved_bytes);
          }
        }
      }
    }
  }
}

TEST(RecipeTest, UnknownConditionIsAnError) {
  ModelSpec m = *FindModelPreset("llama2-7b");
  auto r = ConditionsHold("attention=flash,moe", m);
  EXPECT_EQ(r.status().message(),
            "recipe condition \"moe\": unknown (known: " + std::string(kKnownConditions) + ")");
  EXPECT_TRUE(*ConditionsHold("", m));
  EXPECT_TRUE(*ConditionsHold("attention=flash,nodropout", m));
  EXPECT_FALSE(*ConditionsHold("attention=flash,dropout", m));
}

TEST(EagerRecipeTest, Llama2EagerAttentionExact) {
  // Per block (bf16, t = 1, g = a): norms 2 x (6sbh + 4sb); attention 10sbh + 6as^2b (the
  // projections' input, q after RoPE, k and v repeated, the context; the fp32 softmax and its
  // bf16 copy); MLP 2sbh + 8sbf. What autograd saves in transformers' LlamaDecoderLayer, to the
  // byte (tests/memory_peers:torch_eager_test).
  ModelSpec m = *FindModelPreset("llama2-7b");
  m.attention = Attention::kEager;
  TrainingSpec t;
  t.recipe = "eager";
  t.micro_batch = 2;
  const int64_t s = 4096, b = 2, h = 4096, f = 11008, a = 32;
  auto am = ResolveActivations(m, t);
  ASSERT_TRUE(am.ok()) << am.status().ToString();
  EXPECT_EQ(am->block.saved_bytes, 24 * s * b * h + 8 * s * b * f + 6 * a * s * s * b + 8 * s * b);
  // Selective recompute drops the two s x s tensors.
  t.recompute = Recompute::kSelective;
  am = ResolveActivations(m, t);
  ASSERT_TRUE(am.ok());
  EXPECT_EQ(am->block.stored_bytes, 24 * s * b * h + 8 * s * b * f + 8 * s * b);
  EXPECT_EQ(am->block.recompute_bytes, 6 * a * s * s * b);
}

TEST(EagerRecipeTest, Llama3FlashWithGqaExact) {
  // Flash (sdpa) path with g = 8 of a = 32 heads: attention (6 + 4g/a) sbh + 4abs (the
  // projections' input, q after RoPE, k and v at g/a of the width, the output o_proj saves; the
  // fp32 log-sum-exp); norms 2 x (6sbh + 4sb); MLP 2sbh + 8sbf.
  ModelSpec m = *FindModelPreset("llama3-8b");
  TrainingSpec t;
  t.recipe = "eager";
  const int64_t s = 8192, b = 1, h = 4096, f = 14336, a = 32, g = 8;
  auto am = ResolveActivations(m, t);
  ASSERT_TRUE(am.ok());
  EXPECT_EQ(am->block.saved_bytes,
            (20 * s * b * h + 4 * g * s * b * h / a) + 8 * s * b * f + 8 * s * b + 4 * a * b * s);
  // The megatron recipe on the same model: 2 + 12 + 2 + 2 sbh without dropout, with k and v at
  // g/a of the width, and the unfused SwiGLU's 8sbf.
  t.recipe = "megatron";
  am = ResolveActivations(m, t);
  ASSERT_TRUE(am.ok());
  EXPECT_EQ(am->block.saved_bytes, 14 * s * b * h + 4 * g * s * b * h / a + 8 * s * b * f);
}

}  // namespace
}  // namespace pipecoord::memory
