#include "topologies/topology.h"

#include <algorithm>
#include <limits>
#include <set>

#include <boost/graph/dijkstra_shortest_paths.hpp>
#include <boost/graph/filtered_graph.hpp>
#include <boost/property_map/function_property_map.hpp>
#include <fmt/format.h>

#include "core/error.h"
#include "topologies/graph_builder.h"
#include "topologies/router.h"

namespace strata::topo {

struct Topology::State {
  ClusterSpec cluster;
  BuiltGraph built;
  std::unique_ptr<Router> router;
  std::vector<std::pair<LinkId, LinkId>> gpu_nvswitch;  // per GPU
};

Topology::Topology() : state_(std::make_unique<State>()) {}
Topology::Topology(Topology&&) noexcept = default;
Topology& Topology::operator=(Topology&&) noexcept = default;
Topology::~Topology() = default;

Topology Topology::build(const ClusterSpec& cluster) {
  Topology t;
  State& s = *t.state_;
  s.cluster = cluster;
  build_graph(s.cluster, s.built);
  s.router = make_router(s.built, s.cluster);
  s.gpu_nvswitch.assign(static_cast<std::size_t>(s.built.num_gpus), {-1, -1});
  for (int gpu = 0; gpu < s.built.num_gpus; ++gpu) {
    const int node = gpu / s.built.gpus_per_node;
    const int nvs = s.built.node_nvswitch[static_cast<std::size_t>(node)];
    if (nvs < 0) continue;
    const auto v = static_cast<std::size_t>(s.built.gpu_vertex[static_cast<std::size_t>(gpu)]);
    LinkId up = -1, down = -1;
    for (auto [e, end] = boost::out_edges(v, s.built.graph); e != end; ++e) {
      if (static_cast<int>(boost::target(*e, s.built.graph)) == nvs && up < 0) up = s.built.graph[*e].link;
    }
    for (auto [e, end] = boost::in_edges(v, s.built.graph); e != end; ++e) {
      if (static_cast<int>(boost::source(*e, s.built.graph)) == nvs && down < 0) down = s.built.graph[*e].link;
    }
    if (up >= 0 && down >= 0) s.gpu_nvswitch[static_cast<std::size_t>(gpu)] = {up, down};
  }
  return t;
}

int Topology::num_gpus() const { return state_->built.num_gpus; }
int Topology::gpus_per_node() const { return state_->built.gpus_per_node; }
int Topology::num_nodes() const { return state_->built.nodes; }
int Topology::num_links() const { return static_cast<int>(state_->built.links.size()); }

const Link& Topology::link(LinkId id) const {
  return state_->built.links[static_cast<std::size_t>(id)];
}

std::vector<LinkId> Topology::slow_nic(int node, int rail, double factor) {
  std::vector<LinkId> slowed;
  auto is_the_nic = [&](int v) {
    const VertexInfo& info = vertex(v);
    return info.kind == VertexKind::kNic && info.node == node && info.index == rail;
  };
  for (std::size_t id = 0; id < state_->built.links.size(); ++id) {
    Link& l = state_->built.links[id];
    const bool fabric = l.kind == LinkKind::kInfiniband || l.kind == LinkKind::kEthernet;
    if (fabric && (is_the_nic(l.from_vertex) || is_the_nic(l.to_vertex))) {
      l.bandwidth_bytes_per_s /= factor;
      l.line_rate_bytes_per_s /= factor;
      slowed.push_back(static_cast<LinkId>(id));
    }
  }
  return slowed;
}

std::vector<LinkId> Topology::slow_link(const std::string& a, const std::string& b, double factor,
                                        const std::string& file, const std::string& json_path) {
  auto find = [&](const std::string& name) {
    for (int v = 0; v < num_vertices(); ++v) {
      if (vertex(v).name == name) return v;
    }
    throw InputError(file, json_path,
                     fmt::format("no vertex \"{}\" in the cluster (names as result.json's link_utilization gives them: "
                                 "\"{}\", \"{}\", ...)",
                                 name, vertex(0).name, num_vertices() > 1 ? vertex(num_vertices() - 1).name : ""));
  };
  const int va = find(a), vb = find(b);
  std::vector<LinkId> slowed;
  for (std::size_t id = 0; id < state_->built.links.size(); ++id) {
    Link& l = state_->built.links[id];
    if ((l.from_vertex == va && l.to_vertex == vb) || (l.from_vertex == vb && l.to_vertex == va)) {
      l.bandwidth_bytes_per_s /= factor;
      l.line_rate_bytes_per_s /= factor;
      slowed.push_back(static_cast<LinkId>(id));
    }
  }
  if (slowed.empty()) {
    throw InputError(file, json_path, fmt::format("no link joins \"{}\" and \"{}\" (give the two ends of one link, "
                                                  "as link_utilization's from and to name them)",
                                                  a, b));
  }
  return slowed;
}

int Topology::num_vertices() const { return static_cast<int>(boost::num_vertices(state_->built.graph)); }
const VertexInfo& Topology::vertex(int v) const { return state_->built.graph[static_cast<std::size_t>(v)]; }
const Graph& Topology::graph() const { return state_->built.graph; }
int Topology::gpu_vertex(int gpu) const { return state_->built.gpu_vertex[static_cast<std::size_t>(gpu)]; }

std::vector<LinkId> Topology::route(int src, int dst, std::uint64_t key) const {
  return state_->router->route(src, dst, key);
}

std::vector<LinkId> Topology::route_via_rail(int src, int dst, int rail, std::uint64_t key) const {
  return state_->router->route_via_rail(src, dst, rail, key);
}

double Topology::ecmp_width(int src, int dst) const { return state_->router->ecmp_count(src, dst); }

std::vector<std::vector<LinkId>> Topology::ecmp_routes(int src, int dst, int limit) const {
  return state_->router->ecmp_routes(src, dst, limit);
}

void Topology::for_each_ecmp_share(int src, int dst, int rail,
                                   const std::function<void(LinkId, double)>& fn) const {
  state_->router->for_each_ecmp_share(src, dst, rail, fn);
}

std::vector<LinkId> Topology::path_within_node(int from, int to) const {
  const Graph& g = state_->built.graph;
  const int node = vertex(from).node;
  using Edge = Graph::edge_descriptor;
  std::function<bool(std::size_t)> in_node = [&](std::size_t v) { return g[v].node == node; };
  boost::filtered_graph<Graph, boost::keep_all, std::function<bool(std::size_t)>> sub(g, boost::keep_all(), in_node);
  const std::size_t nv = boost::num_vertices(g);
  const std::int64_t unreachable = std::numeric_limits<std::int64_t>::max() / 4;
  std::vector<std::int64_t> dist(nv, unreachable);
  std::vector<Edge> pred(nv);
  std::vector<char> reached(nv, 0);
  auto index = boost::get(boost::vertex_index, g);
  auto weight = boost::make_function_property_map<Edge>(
      [&](const Edge& e) { return link_cost(link(g[e].link)); });
  boost::dijkstra_shortest_paths(
      sub, static_cast<std::size_t>(from),
      boost::weight_map(weight)
          .distance_map(boost::make_iterator_property_map(dist.begin(), index))
          .distance_inf(unreachable)
          .visitor(boost::make_dijkstra_visitor(boost::record_edge_predecessors(
              boost::make_iterator_property_map(pred.begin(), index), boost::on_edge_relaxed()))));
  std::vector<LinkId> path;
  if (dist[static_cast<std::size_t>(to)] >= unreachable || from == to) return path;
  for (std::size_t v = static_cast<std::size_t>(to); v != static_cast<std::size_t>(from);) {
    path.push_back(g[pred[v]].link);
    v = boost::source(pred[v], g);
  }
  std::reverse(path.begin(), path.end());
  return path;
}

double Topology::path_latency_ns(const std::vector<LinkId>& path) const {
  double ns = 0.0;
  for (LinkId l : path) ns += link(l).latency_ns;
  return ns;
}

double Topology::path_bandwidth_bytes_per_s(const std::vector<LinkId>& path) const {
  double bw = std::numeric_limits<double>::infinity();
  for (LinkId l : path) bw = std::min(bw, link(l).bandwidth_bytes_per_s);
  return bw;
}

std::int64_t Topology::path_cost(int src, int dst) const { return state_->router->cost(src, dst); }
std::int64_t Topology::gpu_to_nic_cost(int gpu, int rail) const {
  return state_->router->gpu_to_nic_cost(gpu, rail);
}
std::int64_t Topology::nic_to_gpu_cost(int rail, int gpu) const {
  return state_->router->nic_to_gpu_cost(rail, gpu);
}

int Topology::rails() const {
  int r = std::numeric_limits<int>::max();
  for (const auto& nics : state_->built.node_nics) r = std::min(r, static_cast<int>(nics.size()));
  return num_nodes() > 1 && r != std::numeric_limits<int>::max() ? r : 0;
}

int Topology::nvswitch_of_node(int node) const {
  return state_->built.node_nvswitch[static_cast<std::size_t>(node)];
}

std::pair<LinkId, LinkId> Topology::nvswitch_links(int gpu) const {
  return state_->gpu_nvswitch[static_cast<std::size_t>(gpu)];
}

bool Topology::node_has_nvls(int node) const {
  return state_->cluster.node.nvls && nvswitch_of_node(node) >= 0;
}

const ClusterSpec& Topology::cluster() const { return state_->cluster; }
const std::string& Topology::file() const { return state_->cluster.file; }

const FatTreeShape* Topology::fat_tree() const {
  return state_->built.fabric ? &state_->built.fabric->shape : nullptr;
}

void Topology::check_group(const std::vector<int>& group, const std::string& file,
                           const std::string& json_path) const {
  if (group.empty()) throw InputError(file, json_path, "a group needs at least one GPU");
  std::set<int> seen;
  for (int g : group) {
    if (g < 0 || g >= num_gpus()) {
      throw InputError(file, json_path,
                       fmt::format("GPU {} does not exist: the cluster has GPUs 0 to {}", g,
                                   num_gpus() - 1));
    }
    if (!seen.insert(g).second) {
      throw InputError(file, json_path, fmt::format("GPU {} appears twice in the group", g));
    }
  }
}

}  // namespace strata::topo
