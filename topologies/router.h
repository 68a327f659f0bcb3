// Routing between GPUs: shortest paths by link cost (femtoseconds per byte, see
// link_cost), with equal-cost multipath (ECMP) sets and a deterministic choice by
// a flow key. Internal to topologies/; Topology is the public face.
//
// Two implementations: StructuredRouter for generated clusters (identical nodes
// joined by a fat-tree: one node's paths computed once, the fabric routed by its
// structure, no search per call) and GenericRouter for inline graphs (Dijkstra
// from every GPU and NIC, kept in memory; inline graphs are small).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "topologies/graph.h"
#include "topologies/graph_builder.h"

namespace strata::topo {

class Router {
 public:
  virtual ~Router() = default;

  // A shortest path src → dst (src != dst); among equal-cost paths, the one the flow
  // key picks.
  virtual std::vector<LinkId> route(int src_gpu, int dst_gpu, std::uint64_t key) const = 0;
  // Between nodes, the shortest path that leaves src's node through NIC `rail` and
  // enters dst's node through NIC `rail` (rail-aligned traffic, as NCCL's rings use).
  // Within a node, route().
  virtual std::vector<LinkId> route_via_rail(int src_gpu, int dst_gpu, int rail,
                                             std::uint64_t key) const = 0;
  // Cost of the shortest path (link_cost units).
  virtual std::int64_t cost(int src_gpu, int dst_gpu) const = 0;
  // Cost from a GPU to NIC `rail` of its own node, and back.
  virtual std::int64_t gpu_to_nic_cost(int gpu, int rail) const = 0;
  virtual std::int64_t nic_to_gpu_cost(int rail, int gpu) const = 0;
  // Number of equal-cost shortest paths (saturating at 2^53).
  virtual double ecmp_count(int src_gpu, int dst_gpu) const = 0;
  // Up to `limit` of the equal-cost paths, in a fixed order.
  virtual std::vector<std::vector<LinkId>> ecmp_routes(int src_gpu, int dst_gpu, int limit) const = 0;
  // Spreads one unit of traffic evenly over the equal-cost paths (rail < 0: all
  // shortest paths; else the rail-aligned ones) and reports each link's share.
  virtual void for_each_ecmp_share(int src_gpu, int dst_gpu, int rail,
                                   const std::function<void(LinkId, double)>& fn) const = 0;
};

// Throws InputError for inline graphs whose GPUs cannot all reach each other
// (naming the GPU's JSON path) or that are too large to route exhaustively.
std::unique_ptr<Router> make_router(const BuiltGraph& built, const ClusterSpec& cluster);

// A 64-bit mix of the flow key and the endpoints (splitmix64), for ECMP choices.
std::uint64_t flow_hash(std::uint64_t key, std::uint64_t a, std::uint64_t b);

}  // namespace strata::topo
