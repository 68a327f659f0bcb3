// Routing on a generated cluster: identical nodes joined by a fat-tree.
// A node's own shortest paths (GPU/NIC to GPU/NIC) are computed once with
// Boost's Dijkstra on node 0 and reused for every node by offset (all equal-cost
// paths of each endpoint pair are kept); between nodes
// the path is intra(src → NIC a) + fabric(NIC a → NIC b) + intra(NIC b → dst),
// minimised over the NIC pairs, the fabric part taken from the fat-tree's
// structure (same leaf, same pod, other pod). A route costs O(rails²), no search.
#pragma once

#include <vector>

#include "topologies/router.h"

namespace strata::topo {

class StructuredRouter final : public Router {
 public:
  explicit StructuredRouter(const BuiltGraph& built);

  std::vector<LinkId> route(int src_gpu, int dst_gpu, std::uint64_t key) const override;
  std::vector<LinkId> route_via_rail(int src_gpu, int dst_gpu, int rail,
                                     std::uint64_t key) const override;
  std::int64_t cost(int src_gpu, int dst_gpu) const override;
  std::int64_t gpu_to_nic_cost(int gpu, int rail) const override;
  std::int64_t nic_to_gpu_cost(int rail, int gpu) const override;
  double ecmp_count(int src_gpu, int dst_gpu) const override;
  std::vector<std::vector<LinkId>> ecmp_routes(int src_gpu, int dst_gpu, int limit) const override;
  void for_each_ecmp_share(int src_gpu, int dst_gpu, int rail,
                           const std::function<void(LinkId, double)>& fn) const override;

 private:
  // A template endpoint: local GPU l is l, NIC r is gpus + r.
  struct Segment {
    std::int64_t cost = 0;
    // Every shortest path within the node (link offsets from the node's first
    // link), in a fixed order; e.g. a GPU reaches a NIC on another PCIe switch
    // over NVLink through either GPU of that switch.
    std::vector<std::vector<LinkId>> paths;
    double count() const { return static_cast<double>(paths.size()); }
  };
  struct Candidate {
    int rail_a = 0;
    int rail_b = 0;
    double fabric_paths = 1;  // fabric paths for this NIC pair
    double multiplicity = 1;  // whole paths: fabric × inside the source node × inside the destination node
  };

  const Segment& segment(int from, int to) const {
    return segments_[static_cast<std::size_t>(from * endpoints_ + to)];
  }
  int node_of(int gpu) const { return gpu / gpus_per_node_; }
  int local_of(int gpu) const { return gpu % gpus_per_node_; }
  // Fabric cost and path count from NIC rail_a of node a to NIC rail_b of node b.
  void fabric_hop(int node_a, int rail_a, int node_b, int rail_b, std::int64_t* cost,
                  double* multiplicity) const;
  // The minimal-cost NIC pairs (rail < 0: any pair; else only (rail, rail)).
  std::vector<Candidate> candidates(int src_gpu, int dst_gpu, int rail, std::int64_t* cost) const;
  // The index-th shortest path inside `node` (index < segment(from, to).count()).
  void append_intra(int node, int from, int to, std::vector<LinkId>& out, long long index = 0) const;
  // The index-th path of candidate c (index < c.multiplicity).
  void append_fabric(int node_a, int rail_a, int node_b, int rail_b, long long index,
                     std::vector<LinkId>& out) const;
  std::vector<LinkId> nth_path(int src_gpu, int dst_gpu, const std::vector<Candidate>& cands,
                               double index) const;

  int gpus_per_node_ = 0;
  int rails_ = 0;
  int endpoints_ = 0;
  int links_per_node_ = 0;
  std::vector<Segment> segments_;  // [from * endpoints + to]
  const FabricLayout* fabric_ = nullptr;
  std::int64_t fabric_cost_ = 0;   // one fabric link
};

}  // namespace strata::topo
