#include "schedules/partition.h"

#include <gtest/gtest.h>

#include "schedules/schedule.h"

namespace pipecoord::schedules {
namespace {

TEST(PartitionTest, EvenSplit) {
  EXPECT_EQ(*PartitionLayers(8, 4, LoopedPlacement(4, 1)), (std::vector<int>{2, 2, 2, 2}));
  EXPECT_EQ(*PartitionLayers(8, 2, LoopedPlacement(2, 2)), (std::vector<int>{2, 2, 2, 2}));
}

TEST(PartitionTest, LayersNotAMultipleOfTheChunks) {
  // 10 layers, p=2, v=2: each rank 5, dealt 3 then 2 over its chunks; stages 0,1 are the
  // ranks' first chunks.
  EXPECT_EQ(*PartitionLayers(10, 2, LoopedPlacement(2, 2)), (std::vector<int>{3, 3, 2, 2}));
  // 11 layers over p=3: rank 0 and 1 get 4, rank 2 gets 3.
  EXPECT_EQ(*PartitionLayers(11, 3, LoopedPlacement(3, 1)), (std::vector<int>{4, 4, 3}));
}

TEST(PartitionTest, UserChosenLayersPerRank) {
  // --stage-layers 5,3 with v=2: rank 0 chunks 3,2; rank 1 chunks 2,1.
  EXPECT_EQ(*PartitionLayers(8, 2, LoopedPlacement(2, 2), {5, 3}), (std::vector<int>{3, 2, 2, 1}));
  // V placement p=2: stages 0,1,2,3 on ranks 0,1,1,0.
  EXPECT_EQ(*PartitionLayers(8, 2, VPlacement(2), {5, 3}), (std::vector<int>{3, 2, 1, 2}));
}

TEST(PartitionTest, Refusals) {
  // Named as pipectl's flags by default.
  EXPECT_EQ(PartitionLayers(8, 2, LoopedPlacement(2, 2), {5, 2}).status().message(),
            "--stage-layers: counts must sum to --layers (8), got 7");
  EXPECT_EQ(PartitionLayers(8, 2, LoopedPlacement(2, 2), {7, 1}).status().message(),
            "--stage-layers[1]: must be >= 2 (a layer for each of rank 1's 2 chunk(s)), got 1");
  EXPECT_EQ(PartitionLayers(8, 2, LoopedPlacement(2, 1), {8}).status().message(),
            "--stage-layers: must have one count per rank (--pp = 2), got 1");
  EXPECT_EQ(PartitionLayers(3, 4, LoopedPlacement(4, 1)).status().message(),
            "--layers: must be >= the 4 stages (a layer for each), got 3");
  EXPECT_EQ(PartitionLayers(0, 4, LoopedPlacement(4, 1)).status().message(), "--layers: must be >= 1, got 0");
  // As a JobSpec names them.
  const PartitionFields spec{"spec.stageLayers", "spec.model.layers", "spec.pp"};
  EXPECT_EQ(PartitionLayers(8, 2, LoopedPlacement(2, 2), {9, -1}, spec).status().message(),
            "spec.stageLayers[1]: must be >= 2 (a layer for each of rank 1's 2 chunk(s)), got -1");
  EXPECT_EQ(PartitionLayers(4, 2, LoopedPlacement(2, 1), {3, 2}, spec).status().message(),
            "spec.stageLayers: counts must sum to spec.model.layers (4), got 5");
  EXPECT_EQ(PartitionLayers(4, 2, LoopedPlacement(2, 1), {1, 1, 2}, spec).status().message(),
            "spec.stageLayers: must have one count per rank (spec.pp = 2), got 3");
}

TEST(PartitionTest, CostBalancedPlacementMovesBlocksOffTheHeavyEnds) {
  // 8 equal blocks, embedding worth 1 block, head worth 3: the last stage gets fewer blocks.
  std::vector<double> costs(8, 1.0);
  auto layers = BalanceLayers(costs, 1.0, 3.0, 4);
  ASSERT_TRUE(layers.ok());
  // Total 12 over 4 stages; with at least one block per stage the least possible maximum is 4
  // (a last stage of 2 blocks would cost 5), e.g. {3, 2, 2, 1}.
  std::vector<double> sc = StageCostsOf(*layers, costs, 1.0, 3.0);
  double mx = 0;
  for (double c : sc) mx = std::max(mx, c);
  EXPECT_DOUBLE_EQ(mx, 4.0);
  EXPECT_EQ(layers->back(), 1);
  int sum = 0;
  for (int n : *layers) sum += n;
  EXPECT_EQ(sum, 8);
  // Without the heavy ends the split is even.
  EXPECT_EQ(*BalanceLayers(costs, 0, 0, 4), (std::vector<int>{2, 2, 2, 2}));
}

TEST(PartitionTest, StageFractionsAreRelativeToTheMeanRankShare) {
  // Two stages per rank on two ranks, all equal: 1/2 each.
  EXPECT_EQ(StageFractions({1, 1, 1, 1}, 2), (std::vector<double>{0.5, 0.5, 0.5, 0.5}));
  EXPECT_EQ(StageFractions({3, 1}, 2), (std::vector<double>{1.5, 0.5}));
}

}  // namespace
}  // namespace pipecoord::schedules
