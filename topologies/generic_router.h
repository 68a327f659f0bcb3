// Routing on an inline graph of any shape: Boost's Dijkstra from every GPU and
// every fabric NIC, distances kept in memory; a route walks back from the
// destination along edges on a shortest path, choosing among equal ones by the flow
// key. Meant for the small clusters people write by hand (limit in the .cc).
#pragma once

#include <vector>

#include "topologies/router.h"

namespace strata::topo {

class GenericRouter final : public Router {
 public:
  // Throws InputError when a GPU cannot reach another (naming the GPU vertex's JSON
  // path in cluster.graph) or when the graph is too large to route exhaustively.
  GenericRouter(const BuiltGraph& built, const ClusterSpec& cluster);

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
  const std::vector<std::int64_t>& dist_from(int vertex) const;
  // Shortest path between two vertices (either must be a source), by key.
  void append_path(int from_vertex, int to_vertex, std::uint64_t key, std::vector<LinkId>& out) const;
  // Edges (u → v) on a shortest path from `dist`'s source into v.
  template <typename Fn>
  void for_each_dag_in_edge(const std::vector<std::int64_t>& dist, int v, Fn&& fn) const;
  void segment_shares(int from_vertex, int to_vertex, double weight,
                      const std::function<void(LinkId, double)>& fn) const;
  int nic_vertex(int gpu, int rail) const;

  const BuiltGraph& built_;
  std::vector<std::int64_t> cost_;            // per link
  std::vector<int> source_slot_;              // vertex → row in dist_, or -1
  std::vector<std::vector<std::int64_t>> dist_;
};

}  // namespace strata::topo
