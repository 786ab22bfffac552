#include "worker/model/model_config.h"

#include <gtest/gtest.h>

#include "worker/model/stage_shard.h"

namespace pipecoord::model {
namespace {

ModelConfig Tiny() { return ModelConfig{6, 32, 0, 2, 64, 16, 1}; }

TEST(ModelConfigTest, FfnHiddenDefaultIsEightThirdsRoundedUpTo64) {
  ModelConfig c = Tiny();
  EXPECT_EQ(c.FfnHidden(), 128);  // ceil(8 * 32 / 3) = 86 -> 128
  c.hidden = 4096;
  EXPECT_EQ(c.FfnHidden(), 10944);  // ceil(32768 / 3) = 10923 -> 10944 (Llama rounds to 256)
  c.hidden = 48;
  EXPECT_EQ(c.FfnHidden(), 128);  // exactly 128
  c.ffn_hidden = 100;
  EXPECT_EQ(c.FfnHidden(), 100);  // explicit wins, no rounding
  EXPECT_EQ(Tiny().HeadDim(), 16);
}

TEST(ModelConfigTest, ValidateNamesTheField) {
  EXPECT_TRUE(Tiny().Validate().ok());
  ModelConfig c = Tiny();
  c.layers = 0;
  EXPECT_EQ(c.Validate().message(), "layers: must be > 0, got 0");
  c = Tiny();
  c.heads = 3;
  EXPECT_EQ(c.Validate().message(), "hidden: must be a multiple of heads (3), got 32");
  c = Tiny();
  c.hidden = 30;
  c.heads = 10;
  EXPECT_EQ(c.Validate().message(),
            "heads: hidden / heads must be even for rotary embeddings, got 30 / 10 = 3");
  c = Tiny();
  c.ffn_hidden = -1;
  EXPECT_EQ(c.Validate().code(), Code::kInvalidArgument);
  EXPECT_EQ((BatchShape{0, 4}).Validate().message(), "micro_batch_size: must be > 0, got 0");
  EXPECT_EQ((BatchShape{2, 0}).Validate().message(), "microbatches: must be > 0, got 0");
}

TEST(ModelConfigTest, NormEpsilonAndRopeBaseDefaultToLlamasAndMustBePositive) {
  ModelConfig c = Tiny();
  EXPECT_EQ(c.rms_norm_eps, 1e-5);
  EXPECT_EQ(c.rope_theta, 10000.0);
  c.rms_norm_eps = 0;
  EXPECT_EQ(c.Validate().message(), "rms_norm_eps: must be a finite number > 0, got 0.000000");
  c = Tiny();
  c.rope_theta = -1;
  EXPECT_EQ(c.Validate().message(), "rope_theta: must be a finite number > 0, got -1.000000");
}

TEST(StageShardTest, SplitModelPlacesEmbeddingFirstAndHeadLast) {
  auto shards = SplitModel(Tiny(), {1, 3, 2});
  ASSERT_TRUE(shards.ok()) << shards.status().ToString();
  ASSERT_EQ(shards->size(), 3u);
  EXPECT_EQ((*shards)[1].first_layer, 1);
  EXPECT_EQ((*shards)[2].first_layer, 4);
  EXPECT_EQ((*shards)[2].num_layers, 2);
  EXPECT_TRUE((*shards)[0].has_embedding);
  EXPECT_FALSE((*shards)[0].has_head);
  EXPECT_FALSE((*shards)[1].has_embedding || (*shards)[1].has_head);
  EXPECT_TRUE((*shards)[2].has_head);
  EXPECT_EQ(SplitModel(Tiny(), {1, 3}).status().message(),
            "layers_per_stage: must sum to layers (6), got 4");
  EXPECT_FALSE(SplitModel(Tiny(), {}).ok());
  EXPECT_EQ(ValidateShard(Tiny(), StageShard{2, 4, 3, false, true}).message(),
            "stage 2: layers [4, 7) must lie inside [0, 6)");
  const StageShard whole = WholeModel(Tiny());
  EXPECT_TRUE(whole.has_embedding && whole.has_head);
  EXPECT_EQ(whole.num_layers, 6);
}

}  // namespace
}  // namespace pipecoord::model
