// Gradient buckets against hand-counted ones, and against the parameter counts
// a GPU holds. The model: GPT-style, h 32, 4 layers, ffn 128, vocabulary 64,
// 16 learned positions, LayerNorm and biases, tied embeddings. A layer holds
// 12,704 parameters (QKV 32x96 + 96, projection 32x32 + 32, fc1 32x128 + 128,
// fc2 128x32 + 32, two norms of 2x32), the word embedding 2,048, the positions
// 512, the final norm 64.
#include "plan/bucket_plan.h"

#include <gtest/gtest.h>

#include "plan/params.h"
#include "test_models.h"

namespace strata {
namespace {

using testing::gpt_small;

PlanSpec plan_of(int pp, int dp, int zero, int vpp = 1) {
  PlanSpec p;
  p.pp = pp;
  p.vpp = vpp;
  p.dp = dp;
  p.zero_stage = zero;
  p.schedule = vpp > 1 ? Schedule::kInterleaved : Schedule::kOneFOneB;
  p.global_batch_size = 4 * dp;
  return p;
}

constexpr BlockRef kWord{ParamBlock::kWordEmbedding};
constexpr BlockRef kPos{ParamBlock::kPositionEmbedding};
constexpr BlockRef kNorm{ParamBlock::kFinalNorm};
constexpr BlockRef kOut{ParamBlock::kOutputLayer};
BlockRef layer(int j) { return {ParamBlock::kLayer, j}; }

TEST(GradBuckets, CloseAtTheBucketSizeAndTheLowestLayerTakesTheRest) {
  PlanSpec p = plan_of(1, 2, 1);
  p.ddp_bucket_size = 20000;  // between one and two layers
  const std::vector<GradBucket> b = grad_buckets(gpt_small(), p, 0);
  ASSERT_EQ(b.size(), 2u);
  EXPECT_EQ(b[0].blocks, (std::vector<BlockRef>{kNorm, layer(3), layer(2)}));
  EXPECT_EQ(b[0].params, 64 + 2 * 12704);
  EXPECT_EQ(b[1].blocks, (std::vector<BlockRef>{layer(1), layer(0), kPos, kWord}));
  EXPECT_EQ(b[1].params, 2 * 12704 + 512 + 2048);
  EXPECT_FALSE(b[0].shared_embedding || b[1].shared_embedding);  // tied with pp 1: nothing shared
}

TEST(GradBuckets, DistributedOptimizerPutsTheSharedEmbeddingAlone) {
  const PlanSpec p = plan_of(2, 2, 1);
  const std::vector<GradBucket> last = grad_buckets(gpt_small(), p, 1);
  ASSERT_EQ(last.size(), 2u);
  EXPECT_EQ(last[0].blocks, (std::vector<BlockRef>{kOut}));
  EXPECT_TRUE(last[0].shared_embedding);
  EXPECT_EQ(last[0].params, 2048);
  EXPECT_EQ(last[1].blocks, (std::vector<BlockRef>{kNorm, layer(1), layer(0)}));
  EXPECT_FALSE(last[1].shared_embedding);
  const std::vector<GradBucket> first = grad_buckets(gpt_small(), p, 0);
  ASSERT_EQ(first.size(), 2u);
  EXPECT_EQ(first[0].blocks, (std::vector<BlockRef>{layer(1), layer(0), kPos}));
  EXPECT_EQ(first[1].blocks, (std::vector<BlockRef>{kWord}));
  EXPECT_TRUE(first[1].shared_embedding);
}

TEST(GradBuckets, AllReduceKeepsTheSharedEmbeddingWithItsNeighbours) {
  const PlanSpec p = plan_of(2, 2, 0);
  const std::vector<GradBucket> last = grad_buckets(gpt_small(), p, 1);
  ASSERT_EQ(last.size(), 1u);
  EXPECT_EQ(last[0].blocks, (std::vector<BlockRef>{kOut, kNorm, layer(1), layer(0)}));
  EXPECT_EQ(last[0].params, 2048 + 64 + 2 * 12704);
  EXPECT_TRUE(last[0].shared_embedding);
}

TEST(GradBuckets, ZeroThreeMakesEveryBlockABucket) {
  const std::vector<GradBucket> b = grad_buckets(gpt_small(), plan_of(1, 2, 3), 0);
  ASSERT_EQ(b.size(), 7u);
  const std::vector<BlockRef> order = {kNorm, layer(3), layer(2), layer(1), layer(0), kPos, kWord};
  for (std::size_t i = 0; i < order.size(); ++i) {
    ASSERT_EQ(b[i].blocks.size(), 1u);
    EXPECT_EQ(b[i].blocks[0], order[i]) << i;
  }
  // Without data parallelism nothing is sharded: one bucket.
  EXPECT_EQ(grad_buckets(gpt_small(), plan_of(1, 1, 3), 0).size(), 1u);
}

TEST(GradBuckets, InterleavedChunksInTheOrderTheirBackwardEnds) {
  // pp 2, vpp 2: rank 0 holds virtual stages 0 and 2, one layer each; chunk 0's
  // last backward is the rank's last op, so chunk 1's buckets come first.
  const PlanSpec p = plan_of(2, 2, 1, 2);
  const std::vector<PipelineOp> program =
      pipeline_program(p.schedule, p.pp, p.vpp, p.num_microbatches(), 0);
  EXPECT_EQ(chunks_by_last_backward(program, p.vpp), (std::vector<int>{1, 0}));
  const std::vector<GradBucket> b = grad_buckets(gpt_small(), p, 0);
  ASSERT_EQ(b.size(), 3u);
  EXPECT_EQ(b[0].chunk, 1);
  EXPECT_EQ(b[0].blocks, (std::vector<BlockRef>{layer(0)}));
  EXPECT_EQ(b[1].chunk, 0);
  EXPECT_EQ(b[1].blocks, (std::vector<BlockRef>{layer(0), kPos}));
  EXPECT_EQ(b[2].blocks, (std::vector<BlockRef>{kWord}));
}

TEST(GradBuckets, HoldWhatAGpuOfTheStageHolds) {
  ModelSpec untied = gpt_small();
  untied.untie_embeddings_and_output_weights = true;
  // Multi-token prediction's layers on the last stage, untied (with their copy
  // of the word embedding when pp > 1) and tied.
  ModelSpec mtp_untied = untied;
  mtp_untied.mtp_num_layers = 1;
  ModelSpec mtp_tied = gpt_small();
  mtp_tied.mtp_num_layers = 2;
  for (const ModelSpec& m : {gpt_small(), untied, mtp_untied, mtp_tied}) {
    for (int tp : {1, 2}) {
      for (int pp : {1, 2, 4}) {
        for (int zero : {0, 1, 3}) {
          PlanSpec p = plan_of(pp, 2, zero);
          p.tp = tp;
          p.ddp_bucket_size = 15000;
          for (int stage = 0; stage < pp; ++stage) {
            std::int64_t sum = 0;
            for (const GradBucket& b : grad_buckets(m, p, stage)) sum += b.params;
            EXPECT_EQ(sum, stage_params_per_gpu(m, p, stage)) << "tp " << tp << " pp " << pp << " zero " << zero;
          }
        }
      }
    }
  }
}

// With untied embeddings and pp > 1, multi-token prediction reads the word
// embedding on the last stage from a copy that is shared with the first stage
// (their gradients all-reduced as Megatron's tied copy's are); its layers come
// last; the output layer is the last stage's own.
TEST(GradBuckets, MultiTokenPredictionOnTheLastStage) {
  ModelSpec m = gpt_small();
  m.untie_embeddings_and_output_weights = true;
  m.mtp_num_layers = 1;
  const PlanSpec p = plan_of(2, 2, 1);
  EXPECT_EQ(chunk_blocks(m, p, 1, 0).back().kind, ParamBlock::kMtp);
  bool shared_copy = false;
  for (const GradBucket& b : grad_buckets(m, p, 1)) {
    if (b.holds(ParamBlock::kWordEmbedding)) shared_copy = b.shared_embedding;
    if (b.holds(ParamBlock::kOutputLayer)) {
      EXPECT_FALSE(b.shared_embedding);
    }
  }
  EXPECT_TRUE(shared_copy);
  EXPECT_TRUE(is_shared_embedding(m, p, {ParamBlock::kWordEmbedding}));
  ModelSpec without = m;
  without.mtp_num_layers = 0;
  EXPECT_EQ(stage_params_per_gpu(m, p, 1) - stage_params_per_gpu(without, p, 1),
            mtp_layer_params(m) + word_embedding_params(m));  // tp 1: whole
  EXPECT_EQ(stage_params_per_gpu(m, p, 0), stage_params_per_gpu(without, p, 0));
}

}  // namespace
}  // namespace strata
