// Expected nodes per token (plan/moe_traffic.h) against hand-computed
// hypergeometric counts, with and without group-limited routing.
#include <gtest/gtest.h>

#include "core/error.h"
#include "plan/moe_traffic.h"

namespace strata {
namespace {

MoeModel moe(int experts, int topk, int groups = 0, int group_topk = 0) {
  MoeModel m;
  m.num_experts = experts;
  m.moe_router_topk = topk;
  m.moe_router_num_groups = groups;
  m.moe_router_group_topk = group_topk;
  return m;
}

TEST(MoeTraffic, UnlimitedRoutingMissesANodeHypergeometrically) {
  // 8 experts on 2 nodes, top-2: a node is missed with P = C(4,2)/C(8,2) = 6/28.
  EXPECT_NEAR(expected_nodes_per_token(moe(8, 2), 2), 2.0 * (1.0 - 6.0 / 28.0), 1e-12);
  // One node: always one.
  EXPECT_NEAR(expected_nodes_per_token(moe(8, 2), 1), 1.0, 1e-12);
  // Top-1: always one node, however many.
  EXPECT_NEAR(expected_nodes_per_token(moe(64, 1), 8), 1.0, 1e-12);
}

TEST(MoeTraffic, NodeLimitedRoutingBoundsTheNodes) {
  // Two groups = two nodes, one group per token: every token on exactly one node.
  EXPECT_NEAR(expected_nodes_per_token(moe(8, 2, 2, 1), 2), 1.0, 1e-12);
  // Four groups on two nodes (two each), two groups per token, 8 experts top-2:
  // of the 6 choices of 2 groups, 1 puts both on node 0 (node 0 surely hit),
  // 4 split them (node 0 holds 2 of the 4 experts: missed with C(2,2)/C(4,2) =
  // 1/6), 1 puts both on node 1 (node 0 missed): P(miss) = (4/6 + 1) / 6.
  EXPECT_NEAR(expected_nodes_per_token(moe(8, 2, 4, 2), 2), 2.0 * (1.0 - (4.0 / 6.0 + 1.0) / 6.0), 1e-12);
  // DeepSeek-V3 (arXiv 2412.19437): 256 experts, top-8, 8 groups = 8 nodes, 4
  // groups per token. A chosen node (4 of 8) holds 32 of the 128 reachable
  // experts and is missed with C(96,8)/C(128,8); the others never are hit.
  double miss = 1.0;
  for (int i = 0; i < 8; ++i) miss *= (96.0 - i) / (128.0 - i);
  const double limited = expected_nodes_per_token(moe(256, 8, 8, 4), 8);
  EXPECT_NEAR(limited, 4.0 * (1.0 - miss), 1e-9);
  EXPECT_LE(limited, 4.0);  // "each token will be sent to at most M = 4 nodes"
  // Unlimited, the same token would reach more: 8 (1 - C(224,8)/C(256,8)).
  double open_miss = 1.0;
  for (int i = 0; i < 8; ++i) open_miss *= (224.0 - i) / (256.0 - i);
  EXPECT_NEAR(expected_nodes_per_token(moe(256, 8), 8), 8.0 * (1.0 - open_miss), 1e-9);
  EXPECT_GT(8.0 * (1.0 - open_miss), limited + 1.0);
}

TEST(MoeTraffic, UnevenNodesAndBadSpreads) {
  // 12 experts: 8 on one node, 4 on the other, top-1 unlimited: always one node.
  EXPECT_NEAR(expected_nodes_per_token(moe(12, 1), std::vector<int>{8, 4}), 1.0, 1e-12);
  // Top-2 over {8, 4}: the small node missed with C(8,2)/C(12,2), the big one with C(4,2)/C(12,2).
  EXPECT_NEAR(expected_nodes_per_token(moe(12, 2), std::vector<int>{8, 4}), 2.0 - (28.0 + 6.0) / 66.0, 1e-12);
  EXPECT_THROW(expected_nodes_per_token(moe(8, 2), 3), InternalError);
  EXPECT_THROW(expected_nodes_per_token(moe(8, 2), std::vector<int>{4, 3}), InternalError);
}

}  // namespace
}  // namespace strata
