// The cluster as a graph, and the paths between its GPUs.
//
// Topology::build turns a ClusterSpec into a Boost.Graph (GPUs, NVSwitches, PCIe
// switches, CPU sockets, NICs, leaf/spine/core switches; NVLink, PCIe, UPI/xGMI,
// InfiniBand and Ethernet links, one Link per direction) and prepares routing.
// GPUs are numbered node by node: GPU g is local GPU g % gpus_per_node of node
// g / gpus_per_node.
//
// Thread safety: immutable after build; every const method may be called from
// several threads at once.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "topologies/cluster_spec.h"
#include "topologies/fat_tree.h"
#include "topologies/graph.h"

namespace strata::topo {

class Router;
struct BuiltGraph;

class Topology {
 public:
  // Builds the graph of `cluster`. Throws InputError (file = cluster.file, with the
  // JSON path) for clusters that cannot be built: disconnected GPUs, a fabric too
  // small for the nodes, more fabric NICs than the node has.
  static Topology build(const ClusterSpec& cluster);

  Topology(Topology&&) noexcept;
  Topology& operator=(Topology&&) noexcept;
  ~Topology();

  int num_gpus() const;
  int gpus_per_node() const;
  int num_nodes() const;
  int node_of(int gpu) const { return gpu / gpus_per_node(); }
  int local_index(int gpu) const { return gpu % gpus_per_node(); }

  int num_links() const;
  const Link& link(LinkId id) const;
  int num_vertices() const;
  const VertexInfo& vertex(int v) const;
  const Graph& graph() const;
  int gpu_vertex(int gpu) const;

  // Directed links from GPU src to GPU dst (src != dst): a shortest path by link
  // cost (see link_cost). Among equal-cost paths (ECMP) the one picked by flow_key,
  // deterministically. Cost: O(rails²) on generated clusters, no search.
  std::vector<LinkId> route(int src_gpu, int dst_gpu, std::uint64_t flow_key = 0) const;
  // Between nodes: the shortest path leaving src's node through NIC `rail` and
  // entering dst's node through NIC `rail` (NCCL keeps ring traffic on one rail).
  // Within a node: route().
  std::vector<LinkId> route_via_rail(int src_gpu, int dst_gpu, int rail,
                                     std::uint64_t flow_key = 0) const;
  // The number of equal-cost shortest paths from src to dst, and up to `limit` of them.
  double ecmp_width(int src_gpu, int dst_gpu) const;
  std::vector<std::vector<LinkId>> ecmp_routes(int src_gpu, int dst_gpu, int limit) const;
  // Spreads one unit of traffic evenly over the equal-cost paths (rail < 0: all of
  // them; else the rail-aligned ones) and calls fn(link, share) for every link used.
  void for_each_ecmp_share(int src_gpu, int dst_gpu, int rail,
                           const std::function<void(LinkId, double)>& fn) const;

  // A shortest path between two vertices of the same node that stays inside the
  // node (Boost Dijkstra; for reports, not for hot paths). Empty if none.
  std::vector<LinkId> path_within_node(int from_vertex, int to_vertex) const;

  // Sum of the links' latencies.
  double path_latency_ns(const std::vector<LinkId>& path) const;
  // The path's bottleneck: the smallest achievable bandwidth along it.
  double path_bandwidth_bytes_per_s(const std::vector<LinkId>& path) const;
  // Routing cost of the shortest path (link_cost units), and from a GPU to NIC
  // `rail` of its node and back.
  std::int64_t path_cost(int src_gpu, int dst_gpu) const;
  std::int64_t gpu_to_nic_cost(int gpu, int rail) const;
  std::int64_t nic_to_gpu_cost(int rail, int gpu) const;

  // NICs per node on the fabric (0 for a single node or no fabric).
  int rails() const;
  // A what-if: NIC `rail` of `node` carries 1/factor of its bandwidth on the
  // fabric, both directions (a NIC negotiated down, or a degraded cable). Routes
  // stay as built (NCCL keeps its rails). Returns the links slowed; none when the
  // node has no such NIC on a fabric.
  std::vector<LinkId> slow_nic(int node, int rail, double factor);
  // A what-if: the links between vertices `a` and `b` (names as result.json's
  // link_utilization prints them, "n0.gpu3", "n0.nvswitch", "leaf2")
  // carry 1/factor of their bandwidth, both directions (a degraded NVLink, PCIe
  // or switch cable). Routes stay as built. Throws InputError(file, json_path)
  // naming what is allowed when a name is unknown or no link joins the two.
  std::vector<LinkId> slow_link(const std::string& a, const std::string& b, double factor, const std::string& file,
                                const std::string& json_path);
  // The NVSwitch vertex of a node, or -1.
  int nvswitch_of_node(int node) const;
  // The links between a GPU and its node's NVSwitch: {GPU → switch, switch → GPU},
  // or {-1, -1}.
  std::pair<LinkId, LinkId> nvswitch_links(int gpu) const;
  // True when the node's NVSwitch does in-switch reductions (NVLink SHARP).
  bool node_has_nvls(int node) const;

  const ClusterSpec& cluster() const;
  const std::string& file() const;
  // Set for generated clusters with more than one node.
  const FatTreeShape* fat_tree() const;

  // Throws InputError(file, json_path) unless `group` names distinct, existing GPUs.
  void check_group(const std::vector<int>& group, const std::string& file,
                   const std::string& json_path) const;

 private:
  Topology();
  struct State;
  std::unique_ptr<State> state_;
};

}  // namespace strata::topo
