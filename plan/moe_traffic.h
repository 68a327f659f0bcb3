// Where an MoE layer's routed tokens go, in expectation: how many of the nodes of
// an expert-parallel group a token's top-k experts sit on, with or without
// group-limited routing (Megatron-Core's moe_router_num_groups /
// moe_router_group_topk: DeepSeek-V3's node-limited routing, arXiv 2412.19437
// section 2.1.2, "each token will be sent to at most M nodes"). The flex
// (DeepEP) dispatcher sends a token over the network once per such node, so this
// is what sets its inter-node bytes; the alltoall dispatcher sends every copy,
// whatever the nodes.
//
// The expectation is over routing that favours no expert (each token's groups,
// then its experts within them, equally likely), the balance the load-balancing
// loss aims at: the experts lie on the nodes in consecutive ranges, as the
// expert-parallel ranks hold them (experts [j E/N, (j+1) E/N) on node j when even),
// and P(node j holds none of a token's k experts) is summed over how many of
// node j's experts its chosen groups hold.
#pragma once

#include <vector>

#include "plan/model_spec.h"

namespace strata {

// Expected number of distinct nodes among a token's moe_router_topk experts when
// node j holds the next experts_per_node[j] experts (in expert order; they sum to
// num_experts). InternalError otherwise.
double expected_nodes_per_token(const MoeModel& moe, const std::vector<int>& experts_per_node);
// The same over `nodes` nodes holding num_experts / nodes experts each (nodes must divide it).
double expected_nodes_per_token(const MoeModel& moe, int nodes);

}  // namespace strata
