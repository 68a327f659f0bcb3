#include "topologies/fat_tree.h"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "core/error.h"

namespace strata::topo {

int FatTreeShape::leaf_of(int node, int rail) const {
  if (rail_optimized) return (node / nodes_per_leaf_group) * rails + rail;
  return node / nodes_per_leaf_group;
}

FatTreeShape plan_fat_tree(const ClusterSpec& c) {
  const FabricSpec& f = c.fabric;
  FatTreeShape s;
  s.rails = f.nics_per_node;
  s.radix = f.switch_radix;
  s.rail_optimized = f.rail_optimized;
  const int k = f.switch_radix;
  const double o = f.oversubscription;
  s.down = static_cast<int>(std::floor(k * o / (1.0 + o) + 1e-9));
  s.up = std::min(k - s.down, static_cast<int>(std::ceil(s.down / o - 1e-9)));
  if (s.down < 1 || s.up < 1) {
    throw InputError(c.file, "$.fabric.switch_radix",
                     fmt::format("a {}-port switch cannot split into downlinks and uplinks at {}:1",
                                 k, o));
  }
  if (s.rail_optimized) {
    s.nodes_per_leaf_group = s.down;
    const int groups = (c.nodes + s.down - 1) / s.down;
    s.leaves = groups * s.rails;
  } else {
    s.nodes_per_leaf_group = s.down / s.rails;
    if (s.nodes_per_leaf_group < 1) {
      throw InputError(c.file, "$.fabric.rail_optimized",
                       fmt::format("a leaf with {} downlinks cannot hold a whole node's {} NICs; use "
                                   "rail_optimized true or a larger switch_radix",
                                   s.down, s.rails));
    }
    s.leaves = (c.nodes + s.nodes_per_leaf_group - 1) / s.nodes_per_leaf_group;
  }

  int tiers = f.tiers;
  if (tiers == 0) tiers = s.leaves <= k ? 2 : 3;
  if (tiers == 2 && s.leaves > k) {
    throw InputError(c.file, "$.fabric.tiers",
                     fmt::format("a 2-tier fat-tree of {}-port switches holds at most {} leaves; this "
                                 "cluster needs {} (use tiers 3 or a larger switch_radix)",
                                 k, k, s.leaves));
  }
  if (s.leaves == 1) tiers = 1;
  s.tiers = tiers;
  if (tiers <= 2) {
    s.leaves_per_pod = s.leaves;
    s.pods = 1;
    return s;
  }
  // Three tiers: a spine splits its ports half down (to the pod's leaves), half up.
  int per_pod = k / 2;
  if (s.rail_optimized) per_pod = (per_pod / s.rails) * s.rails;
  if (per_pod < std::max(1, s.rail_optimized ? s.rails : 1)) {
    throw InputError(c.file, "$.fabric.switch_radix",
                     fmt::format("a pod of {}-port spines cannot hold the {} rail leaves of a node group",
                                 k, s.rails));
  }
  s.leaves_per_pod = per_pod;
  s.pods = (s.leaves + per_pod - 1) / per_pod;
  s.cores_per_group = k / 2;
  if (s.pods > k) {
    throw InputError(c.file, "$.fabric.switch_radix",
                     fmt::format("{} nodes need {} pods, more than a 3-tier fat-tree of {}-port "
                                 "switches connects ({}); use a larger switch_radix",
                                 c.nodes, s.pods, k, k));
  }
  return s;
}

std::string describe(const FatTreeShape& s, double oversubscription) {
  std::string tiers = s.tiers == 1 ? "single-switch" : fmt::format("{}-tier", s.tiers);
  std::string layout = s.rail_optimized ? "rail-optimized " : "";
  std::string parts = fmt::format("{} leaves", s.leaves);
  if (s.tiers >= 2) parts += fmt::format(", {} spines", s.spines());
  if (s.tiers == 3) parts += fmt::format(", {} cores in {} pods", s.cores(), s.pods);
  return fmt::format("{} {}fat-tree of {}-port switches ({}), leaf {}:{} ({} down, {} up)", tiers,
                     layout, s.radix, parts, fmt::format("{:g}", oversubscription), 1, s.down,
                     s.up);
}

}  // namespace strata::topo
