// Which layers each pipeline stage holds (plan/pipeline_split.h), against the
// splits published runs used and Megatron-Core's rule worked by hand.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "core/error.h"
#include "plan/pipeline_split.h"

namespace strata {
namespace {

ModelSpec layers(int n) {
  ModelSpec m;
  // A string, not a literal: GCC 12 at -O2 warns falsely (-Wstringop-overflow,
  // GCC bug 105651) on assigning a literal to a member string here.
  m.name = std::string("m");
  m.num_layers = n;
  return m;
}

PlanSpec pipeline(int pp, int vpp = 1) {
  PlanSpec p;
  p.pp = pp;
  p.vpp = vpp;
  p.dp = 1;
  return p;
}

using Counts = std::vector<int>;

TEST(PipelineSplit, EvenByDefault) {
  const PipelineSplit s = pipeline_split(layers(96), pipeline(8));
  EXPECT_EQ(s.layers, Counts(8, 12));
  EXPECT_EQ(s.first[3], 36);
  EXPECT_TRUE(s.even());
  EXPECT_EQ(s.max_chunk_layers(), 12);
}

// BLOOM 176B (arXiv 2211.05100; Megatron-DeepSpeed with the embedding counted
// on the first and last stage): 70 layers on 12 stages as 5 / 6 x 10 / 5.
TEST(PipelineSplit, BloomCountsTheEmbeddingAndTheLossAsLayers) {
  PlanSpec p = pipeline(12);
  p.account_for_embedding = true;
  p.account_for_loss = true;
  const PipelineSplit s = pipeline_split(layers(70), p);
  Counts want(12, 6);
  want.front() = 5;
  want.back() = 5;
  EXPECT_EQ(s.layers, want);
  EXPECT_EQ(s.first[1], 5);
  EXPECT_EQ(s.first[11], 65);
  EXPECT_FALSE(s.even());
}

// Llama 3 405B (arXiv 2407.21783 section 3.3.2: one layer fewer on the first and
// last stages): 126 layers on 16 stages as 7 / 8 x 14 / 7.
TEST(PipelineSplit, Llama3_405bGivesTheFirstAndLastStagesOneLayerFewer) {
  PlanSpec p = pipeline(16);
  p.first_stage_layers = 7;
  p.last_stage_layers = 7;
  const PipelineSplit s = pipeline_split(layers(126), p);
  Counts want(16, 8);
  want.front() = 7;
  want.back() = 7;
  EXPECT_EQ(s.layers, want);
  EXPECT_EQ(s.stage_layers(15), 7);
  EXPECT_EQ(s.first[15], 119);
}

// With interleaving each stage's layers split over its chunks; virtual stage
// vs = chunk * pp + rank holds the layers after those of vs - 1 (Megatron's
// layer offsets). 8 layers, pp 2, vpp 2, first stage 2: rank 0 [1][1], rank 1 [3][3].
TEST(PipelineSplit, InterleavedChunksSplitEachStageEvenly) {
  PlanSpec p = pipeline(2, 2);
  p.first_stage_layers = 2;
  const PipelineSplit s = pipeline_split(layers(8), p);
  EXPECT_EQ(s.layers, (Counts{1, 3, 1, 3}));
  EXPECT_EQ(s.first, (Counts{0, 1, 4, 5}));
  EXPECT_EQ(s.chunk_layers(1, 1), 3);
  EXPECT_EQ(s.chunk_first(0, 1), 4);
  EXPECT_EQ(s.stage_layers(1), 6);
  EXPECT_EQ(s.max_chunk_layers(), 3);
}

TEST(PipelineSplit, OnlyTheLastStageGivenTheFirstStagesShareTheRest) {
  PlanSpec p = pipeline(4);
  p.last_stage_layers = 3;
  EXPECT_EQ(pipeline_split(layers(12), p).layers, (Counts{3, 3, 3, 3}));
  p.last_stage_layers = 6;
  EXPECT_EQ(pipeline_split(layers(12), p).layers, (Counts{2, 2, 2, 6}));
}

TEST(PipelineSplit, SplitsThatCannotBeMadeNameTheirKey) {
  // 70 layers on 12 stages without counting the embedding and loss.
  auto problem = pipeline_split_problem(layers(70), pipeline(12));
  ASSERT_TRUE(problem);
  EXPECT_EQ(problem->key, "$.pp");
  EXPECT_NE(problem->message.find("decoder_first_pipeline_num_layers"), std::string::npos);
  // 70 - 9 - 10 = 51 over 10 stages.
  PlanSpec p = pipeline(12);
  p.first_stage_layers = 9;
  p.last_stage_layers = 10;
  problem = pipeline_split_problem(layers(70), p);
  ASSERT_TRUE(problem);
  EXPECT_EQ(problem->key, "$.decoder_first_pipeline_num_layers");
  // Both forms at once.
  p.account_for_loss = true;
  problem = pipeline_split_problem(layers(70), p);
  ASSERT_TRUE(problem);
  EXPECT_EQ(problem->key, "$.account_for_loss_in_pipeline_split");
  // A stage's layers that do not split over its chunks.
  PlanSpec v = pipeline(2, 2);
  v.first_stage_layers = 3;
  problem = pipeline_split_problem(layers(8), v);
  ASSERT_TRUE(problem);
  EXPECT_EQ(problem->key, "$.decoder_first_pipeline_num_layers");
  // Counting the embedding as a layer must leave the first stage a layer.
  PlanSpec e = pipeline(4);
  e.account_for_embedding = true;
  problem = pipeline_split_problem(layers(3), e);
  ASSERT_TRUE(problem);
  EXPECT_EQ(problem->key, "$.account_for_embedding_in_pipeline_split");
  // An uneven stage needs a pipeline.
  PlanSpec one = pipeline(1);
  one.first_stage_layers = 4;
  problem = pipeline_split_problem(layers(8), one);
  ASSERT_TRUE(problem);
  EXPECT_EQ(problem->key, "$.decoder_first_pipeline_num_layers");
  EXPECT_THROW(pipeline_split(layers(70), pipeline(12)), InternalError);
}

}  // namespace
}  // namespace strata
