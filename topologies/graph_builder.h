// Builds the cluster graph from a ClusterSpec: either generated (node preset
// repeated `nodes` times, joined by a rail-optimized fat-tree) or given inline.
//
// Generated graphs keep a layout that routing exploits: every node's vertices and
// links occupy the same offsets within consecutive blocks, and the fabric's links
// are indexed by (node, rail), (leaf, spine) and (spine, core).
#pragma once

#include <optional>
#include <utility>
#include <vector>

#include "topologies/cluster_spec.h"
#include "topologies/fat_tree.h"
#include "topologies/graph.h"

namespace strata::topo {

// Offsets of one node's parts, the same for every node of a generated graph.
struct NodeTemplate {
  int vertices = 0;                    // vertices per node
  int links = 0;                       // links per node
  std::vector<int> gpu_vertex;         // per local GPU
  std::vector<int> gpu_socket;         // per local GPU
  int nvswitch_vertex = -1;            // -1: no NVSwitch
  std::vector<int> pcie_vertex;
  std::vector<int> cpu_vertex;
  std::vector<int> nic_vertex;         // per NIC (rail)
  std::vector<int> nic_socket;
  std::vector<std::pair<LinkId, LinkId>> gpu_nvlink;  // (GPU→NVSwitch, NVSwitch→GPU); -1 none
};

struct FabricLayout {
  FatTreeShape shape;
  int first_vertex = 0;                // leaves, then spines, then cores
  std::vector<LinkId> nic_up;          // [node * rails + rail]: NIC → leaf
  std::vector<LinkId> nic_down;        // leaf → NIC
  std::vector<LinkId> leaf_up;         // [leaf * up + j]: leaf → spine j of its pod
  std::vector<LinkId> leaf_down;       // spine j → leaf
  std::vector<LinkId> spine_up;        // [spine * cores_per_group + c]: spine → core c of its group
  std::vector<LinkId> spine_down;      // core → spine
};

struct BuiltGraph {
  Graph graph;
  std::vector<Link> links;
  int num_gpus = 0;
  int gpus_per_node = 0;
  int nodes = 0;
  std::vector<int> gpu_vertex;         // global GPU index → vertex
  std::vector<std::vector<int>> node_nics;  // per node: NIC vertices on the fabric, by rail
  std::vector<int> node_nvswitch;      // per node: an NVSwitch vertex or -1
  // Generated graphs only.
  std::optional<NodeTemplate> node_template;
  std::optional<FabricLayout> fabric;
};

// Throws InputError (cluster.file, JSON path) for clusters that cannot be built.
// Builds into `out` (empty): Boost's adjacency_list has no cheap move, so a
// returned graph assigned to a member would be copied edge by edge.
void build_graph(const ClusterSpec& cluster, BuiltGraph& out);

}  // namespace strata::topo
