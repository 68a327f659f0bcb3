// The shape of a rail-optimized fat-tree fabric: how many leaves, spines and
// cores a cluster needs and which leaf each NIC plugs into.
//
// Leaf ports split into d downlinks and u uplinks with d / u = oversubscription
// (d = floor(k·o / (1 + o)), u = min(k - d, ceil(d / o)) for radix k).
// Rail-optimized: nodes form groups of d; rail r of every node in group g goes to
// leaf g·R + r. Otherwise a leaf holds floor(d / R) whole nodes.
// Two tiers: every leaf has one link to each of u spines (so at most k leaves).
// Three tiers: pods of P leaves (P = k/2, rounded down to whole rail groups) with
// u spines each; spine j of every pod links to the k/2 cores of core group j
// (so at most k pods). The spine and core layers are non-blocking.
#pragma once

#include <string>

#include "topologies/cluster_spec.h"

namespace strata::topo {

struct FatTreeShape {
  int rails = 0;              // NICs per node on the fabric (R)
  int radix = 0;              // k
  int down = 0;               // leaf downlinks (d)
  int up = 0;                 // leaf uplinks = spines per pod (u)
  bool rail_optimized = true;
  int nodes_per_leaf_group = 0;  // rail-optimized: d; else floor(d / R)
  int leaves = 0;
  int tiers = 2;              // 1 when one leaf holds the whole cluster
  int leaves_per_pod = 0;     // P (3 tiers); = leaves with 2 tiers
  int pods = 1;
  int cores_per_group = 0;    // k/2 (3 tiers)

  int leaf_of(int node, int rail) const;
  int pod_of_leaf(int leaf) const { return leaf / leaves_per_pod; }
  int spines() const { return tiers >= 2 ? up * pods : 0; }
  int cores() const { return tiers == 3 ? up * cores_per_group : 0; }
};

// Sizes the fabric for `cluster`. Throws InputError (cluster.file, "$.fabric...")
// when the radix cannot hold the cluster in the requested (or any) number of tiers.
FatTreeShape plan_fat_tree(const ClusterSpec& cluster);

// "2-tier rail-optimized fat-tree, 64-port switches, 32 leaves, 32 spines, 1:1".
std::string describe(const FatTreeShape& shape, double oversubscription);

}  // namespace strata::topo
