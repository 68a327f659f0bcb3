// The rank layout against hand-written tables, including the example in
// Megatron-LM's megatron/core/parallel_state.py (initialize_model_parallel
// docstring: 16 GPUs, tensor parallel 2, pipeline parallel 4).
#include "plan/rank_layout.h"

#include <gtest/gtest.h>

#include "core/error.h"
#include "plan/plan_spec.h"

namespace strata {
namespace {

using Groups = std::vector<std::vector<int>>;

RankLayout layout(int tp, int dp, int pp, const char* order = kDefaultRankOrder) {
  RankOrder o;
  EXPECT_TRUE(parse_rank_order(order, o)) << order;
  return RankLayout(RankLayout::Sizes{.tp = tp, .dp = dp, .pp = pp}, o);
}

TEST(RankLayout, MegatronDocstringExample) {
  // "8 tensor model-parallel groups: [g0, g1], [g2, g3], ... 4 pipeline
  // model-parallel groups: [g0, g4, g8, g12], [g1, g5, g9, g13], [g2, g6, g10,
  // g14], [g3, g7, g11, g15]; 8 data-parallel groups: [g0, g2], [g1, g3],
  // [g4, g6], [g5, g7], [g8, g10], [g9, g11], [g12, g14], [g13, g15]".
  const RankLayout s = layout(2, 2, 4);
  EXPECT_EQ(s.all_groups(GroupKind::kTensor),
            (Groups{{0, 1}, {2, 3}, {4, 5}, {6, 7}, {8, 9}, {10, 11}, {12, 13}, {14, 15}}));
  EXPECT_EQ(s.all_groups(GroupKind::kPipeline),
            (Groups{{0, 4, 8, 12}, {1, 5, 9, 13}, {2, 6, 10, 14}, {3, 7, 11, 15}}));
  EXPECT_EQ(s.all_groups(GroupKind::kData),
            (Groups{{0, 2}, {1, 3}, {4, 6}, {5, 7}, {8, 10}, {9, 11}, {12, 14}, {13, 15}}));
  // Megatron's embedding group: first and last stage of each pipeline.
  EXPECT_EQ(s.all_groups(GroupKind::kEmbedding), (Groups{{0, 12}, {1, 13}, {2, 14}, {3, 15}}));
  // Model-parallel groups: every tp x pp rank of one data-parallel replica.
  EXPECT_EQ(s.all_groups(GroupKind::kModel),
            (Groups{{0, 1, 4, 5, 8, 9, 12, 13}, {2, 3, 6, 7, 10, 11, 14, 15}}));
}

TEST(RankLayout, CoordinatesOfEveryRankOfTp2Dp2Pp2) {
  const RankLayout s = layout(2, 2, 2);
  // rank: (tp, dp, pp), TP fastest, then DP, then PP.
  const int table[8][3] = {{0, 0, 0}, {1, 0, 0}, {0, 1, 0}, {1, 1, 0},
                           {0, 0, 1}, {1, 0, 1}, {0, 1, 1}, {1, 1, 1}};
  for (int r = 0; r < 8; ++r) {
    const RankCoord c{.tp = table[r][0], .dp = table[r][1], .pp = table[r][2]};
    EXPECT_EQ(s.coord(r), c) << "rank " << r;
    EXPECT_EQ(s.rank(c), r);
  }
  EXPECT_EQ(s.group(GroupKind::kTensor, 5), (std::vector<int>{4, 5}));
  EXPECT_EQ(s.group(GroupKind::kData, 5), (std::vector<int>{5, 7}));
  EXPECT_EQ(s.group(GroupKind::kPipeline, 5), (std::vector<int>{1, 5}));
  EXPECT_EQ(s.group(GroupKind::kModel, 5), (std::vector<int>{0, 1, 4, 5}));
}

TEST(RankLayout, PipelineNeighboursAndMiddleStagesOfTp2Pp4) {
  const RankLayout s = layout(2, 1, 4);
  EXPECT_EQ(s.all_groups(GroupKind::kPipeline), (Groups{{0, 2, 4, 6}, {1, 3, 5, 7}}));
  EXPECT_EQ(s.all_groups(GroupKind::kData), (Groups{{0}, {1}, {2}, {3}, {4}, {5}, {6}, {7}}));
  EXPECT_EQ(s.pipeline_prev(0), -1);
  EXPECT_EQ(s.pipeline_next(0), 2);
  EXPECT_EQ(s.pipeline_prev(5), 3);
  EXPECT_EQ(s.pipeline_next(5), 7);
  EXPECT_EQ(s.pipeline_next(7), -1);
  EXPECT_TRUE(s.group(GroupKind::kEmbedding, 3).empty());  // stage 1 of 4
  EXPECT_EQ(s.group(GroupKind::kEmbedding, 7), (std::vector<int>{1, 7}));
}

TEST(RankLayout, SingleStageEmbeddingGroupIsTheRankItself) {
  const RankLayout s = layout(1, 4, 1);
  EXPECT_EQ(s.group(GroupKind::kEmbedding, 2), (std::vector<int>{2}));
  EXPECT_EQ(s.all_groups(GroupKind::kData), (Groups{{0, 1, 2, 3}}));
  EXPECT_EQ(s.all_groups(GroupKind::kTensor), (Groups{{0}, {1}, {2}, {3}}));
}

TEST(RankLayout, EveryRankIsInExactlyOneGroupOfEachKind) {
  for (const char* order : {"tp-cp-ep-dp-pp", "tp-cp-ep-pp-dp", "pp-dp-ep-cp-tp"}) {
    const RankLayout s = layout(4, 3, 2, order);
    for (GroupKind kind : {GroupKind::kTensor, GroupKind::kContext, GroupKind::kData, GroupKind::kPipeline,
                           GroupKind::kModel}) {
      std::vector<int> seen(s.world(), 0);
      for (const auto& g : s.all_groups(kind)) {
        for (int r : g) ++seen[r];
      }
      EXPECT_EQ(seen, std::vector<int>(s.world(), 1)) << to_string(kind) << " " << order;
    }
  }
}

// Megatron's --use-tp-pp-dp-mapping order: pipeline before data, so a pipeline
// group strides by tp and a data-parallel group by tp*pp.
TEST(RankLayout, TpPpDpOrder) {
  const RankLayout s = layout(2, 2, 2, "tp-cp-ep-pp-dp");
  EXPECT_EQ(s.all_groups(GroupKind::kPipeline), (Groups{{0, 2}, {1, 3}, {4, 6}, {5, 7}}));
  EXPECT_EQ(s.all_groups(GroupKind::kData), (Groups{{0, 4}, {1, 5}, {2, 6}, {3, 7}}));
  EXPECT_EQ(s.coord(6), (RankCoord{.tp = 0, .dp = 1, .pp = 1}));
}

TEST(RankLayout, RankOrderParsing) {
  RankOrder o;
  EXPECT_TRUE(parse_rank_order("tp-cp-ep-dp-pp", o));
  EXPECT_EQ(o, RankOrder{});
  EXPECT_EQ(to_string(o), "tp-cp-ep-dp-pp");
  EXPECT_TRUE(parse_rank_order("tp-cp-ep-pp-dp", o));
  EXPECT_EQ(o, kTpPpDpRankOrder);  // Megatron's --use-tp-pp-dp-mapping
  EXPECT_TRUE(parse_rank_order("dp-tp-pp-cp-ep", o));
  EXPECT_EQ(to_string(o), "dp-tp-pp-cp-ep");
  for (const char* bad : {"", "tp", "tp-cp-ep-dp", "tp-cp-ep-dp-pp-", "tp-tp-ep-dp-pp", "tp-cp-ep-dp-xx",
                          "tp-cp-ep-dp-pp-tp", "tp--cp-ep-dp"}) {
    RankOrder keep = o;
    EXPECT_FALSE(parse_rank_order(bad, keep)) << bad;
    EXPECT_EQ(keep, o) << bad;
  }
}

TEST(RankLayout, FromAPlanAndOutOfRange) {
  PlanSpec plan;
  plan.tp = 2;
  plan.pp = 2;
  plan.dp = 0;  // unresolved
  EXPECT_THROW(RankLayout{plan}, InternalError);
  plan.dp = 3;
  const RankLayout s(plan);
  EXPECT_EQ(s.world(), 12);
  EXPECT_THROW(s.coord(12), InternalError);
  EXPECT_THROW(s.rank({.tp = 2}), InternalError);
  EXPECT_THROW(RankLayout(RankLayout::Sizes{.tp = 0}), InternalError);
}

}  // namespace
}  // namespace strata
