// Process-group mapping against hand-written tables, including the example in
// Megatron-LM's megatron/core/parallel_state.py (initialize_model_parallel
// docstring: 16 GPUs, tensor parallel 2, pipeline parallel 4).
#include <gtest/gtest.h>

#include "core/error.h"
#include "runtime/process_groups.h"

namespace strata::rt {
namespace {

using Groups = std::vector<std::vector<int>>;

TEST(ProcessGroups, MegatronDocstringExample) {
  // "8 tensor model-parallel groups: [g0, g1], [g2, g3], ... 4 pipeline
  // model-parallel groups: [g0, g4, g8, g12], [g1, g5, g9, g13], [g2, g6, g10,
  // g14], [g3, g7, g11, g15]; 8 data-parallel groups: [g0, g2], [g1, g3],
  // [g4, g6], [g5, g7], [g8, g10], [g9, g11], [g12, g14], [g13, g15]".
  const ParallelSizes s{2, 2, 4};
  EXPECT_EQ(all_groups(s, GroupKind::kTensor),
            (Groups{{0, 1}, {2, 3}, {4, 5}, {6, 7}, {8, 9}, {10, 11}, {12, 13}, {14, 15}}));
  EXPECT_EQ(all_groups(s, GroupKind::kPipeline),
            (Groups{{0, 4, 8, 12}, {1, 5, 9, 13}, {2, 6, 10, 14}, {3, 7, 11, 15}}));
  EXPECT_EQ(all_groups(s, GroupKind::kData),
            (Groups{{0, 2}, {1, 3}, {4, 6}, {5, 7}, {8, 10}, {9, 11}, {12, 14}, {13, 15}}));
  // Megatron's embedding group: first and last stage of each pipeline.
  EXPECT_EQ(all_groups(s, GroupKind::kEmbedding), (Groups{{0, 12}, {1, 13}, {2, 14}, {3, 15}}));
  // Model-parallel groups: every tp x pp rank of one data-parallel replica.
  EXPECT_EQ(all_groups(s, GroupKind::kModel),
            (Groups{{0, 1, 4, 5, 8, 9, 12, 13}, {2, 3, 6, 7, 10, 11, 14, 15}}));
}

TEST(ProcessGroups, CoordinatesOfEveryRankOfTp2Dp2Pp2) {
  const ParallelSizes s{2, 2, 2};
  // rank: (tp, dp, pp), TP fastest, then DP, then PP.
  const std::vector<RankCoord> table = {{0, 0, 0}, {1, 0, 0}, {0, 1, 0}, {1, 1, 0},
                                        {0, 0, 1}, {1, 0, 1}, {0, 1, 1}, {1, 1, 1}};
  for (int r = 0; r < 8; ++r) {
    EXPECT_EQ(rank_coord(s, r), table[r]) << "rank " << r;
    EXPECT_EQ(global_rank(s, table[r]), r);
  }
  EXPECT_EQ(group_members(s, GroupKind::kTensor, 5), (std::vector<int>{4, 5}));
  EXPECT_EQ(group_members(s, GroupKind::kData, 5), (std::vector<int>{5, 7}));
  EXPECT_EQ(group_members(s, GroupKind::kPipeline, 5), (std::vector<int>{1, 5}));
  EXPECT_EQ(group_members(s, GroupKind::kModel, 5), (std::vector<int>{0, 1, 4, 5}));
}

TEST(ProcessGroups, PipelineNeighboursAndMiddleStagesOfTp2Pp4) {
  const ParallelSizes s{2, 1, 4};
  EXPECT_EQ(all_groups(s, GroupKind::kPipeline), (Groups{{0, 2, 4, 6}, {1, 3, 5, 7}}));
  EXPECT_EQ(all_groups(s, GroupKind::kData), (Groups{{0}, {1}, {2}, {3}, {4}, {5}, {6}, {7}}));
  EXPECT_EQ(pipeline_prev_rank(s, 0), -1);
  EXPECT_EQ(pipeline_next_rank(s, 0), 2);
  EXPECT_EQ(pipeline_prev_rank(s, 5), 3);
  EXPECT_EQ(pipeline_next_rank(s, 5), 7);
  EXPECT_EQ(pipeline_next_rank(s, 7), -1);
  EXPECT_TRUE(group_members(s, GroupKind::kEmbedding, 3).empty());  // stage 1 of 4
  EXPECT_EQ(group_members(s, GroupKind::kEmbedding, 7), (std::vector<int>{1, 7}));
}

TEST(ProcessGroups, SingleStageEmbeddingGroupIsTheRankItself) {
  const ParallelSizes s{1, 4, 1};
  EXPECT_EQ(group_members(s, GroupKind::kEmbedding, 2), (std::vector<int>{2}));
  EXPECT_EQ(all_groups(s, GroupKind::kData), (Groups{{0, 1, 2, 3}}));
  EXPECT_EQ(all_groups(s, GroupKind::kTensor), (Groups{{0}, {1}, {2}, {3}}));
}

TEST(ProcessGroups, EveryRankIsInExactlyOneGroupOfEachKind) {
  const ParallelSizes s{4, 3, 2};
  for (GroupKind kind : {GroupKind::kTensor, GroupKind::kData, GroupKind::kPipeline,
                         GroupKind::kModel}) {
    std::vector<int> seen(s.world(), 0);
    for (const auto& g : all_groups(s, kind)) {
      for (int r : g) ++seen[r];
    }
    EXPECT_EQ(seen, std::vector<int>(s.world(), 1)) << to_string(kind);
  }
}

TEST(ProcessGroups, FromAPlanAndOutOfRange) {
  PlanSpec plan;
  plan.tp = 2;
  plan.pp = 2;
  plan.dp = 0;  // unresolved
  EXPECT_THROW(parallel_sizes(plan), InternalError);
  plan.dp = 3;
  const ParallelSizes s = parallel_sizes(plan);
  EXPECT_EQ(s.world(), 12);
  EXPECT_THROW(rank_coord(s, 12), InternalError);
  EXPECT_THROW(global_rank(s, {2, 0, 0}), InternalError);
}

}  // namespace
}  // namespace strata::rt
