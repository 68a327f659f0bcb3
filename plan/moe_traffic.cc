#include "plan/moe_traffic.h"

#include <algorithm>
#include <vector>

#include "core/error.h"

namespace strata {
namespace {

// P(none of k draws without replacement from `pool` items is among `marked`).
double miss_probability(int pool, int marked, int k) {
  if (marked <= 0) return 1.0;
  if (pool - marked < k) return 0.0;
  double p = 1.0;
  for (int i = 0; i < k; ++i) p *= static_cast<double>(pool - marked - i) / static_cast<double>(pool - i);
  return p;
}

}  // namespace

double expected_nodes_per_token(const MoeModel& moe, const std::vector<int>& experts_per_node) {
  const int E = moe.num_experts;
  const int k = moe.moe_router_topk;
  int sum = 0;
  for (int n : experts_per_node) sum += n > 0 ? n : E + 1;
  if (E < 1 || experts_per_node.empty() || sum != E || k < 1 || k > E) {
    throw InternalError("expected_nodes_per_token: the nodes do not hold the experts");
  }
  // Unlimited routing is one group chosen from one.
  const int groups = moe.moe_router_num_groups > 0 ? moe.moe_router_num_groups : 1;
  const int chosen = moe.moe_router_num_groups > 0 ? moe.moe_router_group_topk : 1;
  const int per_group = E / groups;
  const int pool = chosen * per_group;  // the experts a token's chosen groups hold
  double expected = 0.0;
  int node_first = 0;
  for (const int on_node : experts_per_node) {
    const int node_end = node_first + on_node;
    // ways[m][c]: choices of m of the groups seen so far holding c of this node's experts.
    std::vector<std::vector<double>> ways(static_cast<std::size_t>(chosen) + 1,
                                          std::vector<double>(static_cast<std::size_t>(on_node) + 1, 0.0));
    ways[0][0] = 1.0;
    for (int g = 0; g < groups; ++g) {
      const int overlap = std::max(0, std::min((g + 1) * per_group, node_end) - std::max(g * per_group, node_first));
      for (int m = std::min(g + 1, chosen); m >= 1; --m) {
        for (int c = on_node; c >= overlap; --c) ways[m][c] += ways[m - 1][c - overlap];
      }
    }
    double total = 0.0, missed = 0.0;
    for (int c = 0; c <= on_node; ++c) {
      total += ways[chosen][c];
      missed += ways[chosen][c] * miss_probability(pool, c, k);
    }
    expected += 1.0 - missed / total;
    node_first = node_end;
  }
  return expected;
}

double expected_nodes_per_token(const MoeModel& moe, int nodes) {
  if (nodes < 1 || moe.num_experts % nodes != 0) {
    throw InternalError("expected_nodes_per_token: the experts do not spread evenly over the nodes");
  }
  return expected_nodes_per_token(moe, std::vector<int>(static_cast<std::size_t>(nodes), moe.num_experts / nodes));
}

}  // namespace strata
