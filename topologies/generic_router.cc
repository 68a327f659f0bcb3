#include "topologies/generic_router.h"

#include <algorithm>
#include <limits>
#include <numeric>

#include <boost/graph/dijkstra_shortest_paths.hpp>
#include <boost/property_map/function_property_map.hpp>
#include <fmt/format.h>

#include "core/error.h"

namespace strata::topo {
namespace {

constexpr std::int64_t kUnreachable = std::numeric_limits<std::int64_t>::max() / 4;
// Distances kept: sources × vertices. 2^24 entries = 128 MiB, e.g. 2,048 GPUs and
// NICs in an 8,192-vertex graph. Larger clusters should use the generated
// presets, whose routing needs no search.
constexpr std::size_t kMaxDistanceEntries = std::size_t{1} << 24;
constexpr double kMaxCount = 9007199254740992.0;  // 2^53

}  // namespace

GenericRouter::GenericRouter(const BuiltGraph& built, const ClusterSpec& cluster) : built_(built) {
  const std::size_t nv = boost::num_vertices(built.graph);
  cost_.reserve(built.links.size());
  for (const Link& l : built.links) cost_.push_back(link_cost(l));

  std::vector<int> sources(built.gpu_vertex.begin(), built.gpu_vertex.end());
  for (const auto& nics : built.node_nics) sources.insert(sources.end(), nics.begin(), nics.end());
  if (sources.size() * nv > kMaxDistanceEntries) {
    throw InputError(cluster.file, "$.graph",
                     fmt::format("an inline graph of {} vertices with {} GPUs and NICs is too large to "
                                 "route exhaustively (limit {} vertex pairs); describe large clusters "
                                 "with a node preset and a fabric instead",
                                 nv, sources.size(), kMaxDistanceEntries));
  }
  source_slot_.assign(nv, -1);
  dist_.resize(sources.size());
  using Edge = Graph::edge_descriptor;
  auto weight = boost::make_function_property_map<Edge>(
      [&](const Edge& e) { return cost_[static_cast<std::size_t>(built.graph[e].link)]; });
  auto index = boost::get(boost::vertex_index, built.graph);
  for (std::size_t i = 0; i < sources.size(); ++i) {
    source_slot_[static_cast<std::size_t>(sources[i])] = static_cast<int>(i);
    dist_[i].assign(nv, kUnreachable);
    boost::dijkstra_shortest_paths(
        built.graph, static_cast<std::size_t>(sources[i]),
        boost::weight_map(weight)
            .distance_map(boost::make_iterator_property_map(dist_[i].begin(), index))
            .distance_inf(kUnreachable));
  }

  // Every GPU must reach every other.
  std::vector<std::string> gpu_path(static_cast<std::size_t>(built.num_gpus));
  {
    std::vector<int> next(static_cast<std::size_t>(cluster.nodes), 0);
    for (const GraphVertexSpec& v : cluster.graph.vertices) {
      if (v.kind != VertexKind::kGpu) continue;
      int gpu = v.node * cluster.gpus_per_node + next[static_cast<std::size_t>(v.node)]++;
      gpu_path[static_cast<std::size_t>(gpu)] = v.json_path;
    }
  }
  for (int a = 0; a < built.num_gpus; ++a) {
    const auto& d = dist_from(built.gpu_vertex[static_cast<std::size_t>(a)]);
    for (int b = 0; b < built.num_gpus; ++b) {
      if (a == b || d[static_cast<std::size_t>(built.gpu_vertex[static_cast<std::size_t>(b)])] < kUnreachable) continue;
      const auto& va = built.graph[static_cast<std::size_t>(built.gpu_vertex[static_cast<std::size_t>(a)])];
      const auto& vb = built.graph[static_cast<std::size_t>(built.gpu_vertex[static_cast<std::size_t>(b)])];
      throw InputError(cluster.file, gpu_path[static_cast<std::size_t>(a)],
                       fmt::format("GPU \"{}\" cannot reach GPU \"{}\": no path over the graph's links "
                                   "(every GPU must reach every other)",
                                   va.name, vb.name));
    }
  }
}

const std::vector<std::int64_t>& GenericRouter::dist_from(int vertex) const {
  int slot = source_slot_[static_cast<std::size_t>(vertex)];
  if (slot < 0) throw InternalError("generic router: distances asked from a vertex that is no source");
  return dist_[static_cast<std::size_t>(slot)];
}

template <typename Fn>
void GenericRouter::for_each_dag_in_edge(const std::vector<std::int64_t>& dist, int v, Fn&& fn) const {
  const std::int64_t dv = dist[static_cast<std::size_t>(v)];
  for (auto [e, end] = boost::in_edges(static_cast<std::size_t>(v), built_.graph); e != end; ++e) {
    auto u = boost::source(*e, built_.graph);
    LinkId l = built_.graph[*e].link;
    if (dist[u] < kUnreachable && dist[u] + cost_[static_cast<std::size_t>(l)] == dv) {
      fn(static_cast<int>(u), l);
    }
  }
}

void GenericRouter::append_path(int from, int to, std::uint64_t key, std::vector<LinkId>& out) const {
  const auto& dist = dist_from(from);
  if (dist[static_cast<std::size_t>(to)] >= kUnreachable) {
    throw InternalError("generic router: no path between two vertices");
  }
  std::vector<LinkId> reversed;
  std::vector<std::pair<int, LinkId>> choices;
  for (int v = to; v != from;) {
    choices.clear();
    for_each_dag_in_edge(dist, v, [&](int u, LinkId l) { choices.emplace_back(u, l); });
    auto h = flow_hash(key, static_cast<std::uint64_t>(from) << 32 | static_cast<std::uint64_t>(to),
                       static_cast<std::uint64_t>(v));
    const auto& [u, l] = choices[h % choices.size()];
    reversed.push_back(l);
    v = u;
  }
  out.insert(out.end(), reversed.rbegin(), reversed.rend());
}

std::vector<LinkId> GenericRouter::route(int src, int dst, std::uint64_t key) const {
  std::vector<LinkId> path;
  append_path(built_.gpu_vertex[static_cast<std::size_t>(src)],
              built_.gpu_vertex[static_cast<std::size_t>(dst)], key, path);
  return path;
}

int GenericRouter::nic_vertex(int gpu, int rail) const {
  const auto& nics = built_.node_nics[static_cast<std::size_t>(gpu / built_.gpus_per_node)];
  return rail >= 0 && rail < static_cast<int>(nics.size()) ? nics[static_cast<std::size_t>(rail)] : -1;
}

std::vector<LinkId> GenericRouter::route_via_rail(int src, int dst, int rail, std::uint64_t key) const {
  const int na = src / built_.gpus_per_node, nb = dst / built_.gpus_per_node;
  const int a = nic_vertex(src, rail), b = nic_vertex(dst, rail);
  if (na == nb || rail < 0 || a < 0 || b < 0) return route(src, dst, key);
  const int vs = built_.gpu_vertex[static_cast<std::size_t>(src)];
  const int vd = built_.gpu_vertex[static_cast<std::size_t>(dst)];
  if (dist_from(vs)[static_cast<std::size_t>(a)] >= kUnreachable ||
      dist_from(a)[static_cast<std::size_t>(b)] >= kUnreachable ||
      dist_from(b)[static_cast<std::size_t>(vd)] >= kUnreachable) {
    return route(src, dst, key);
  }
  std::vector<LinkId> path;
  append_path(vs, a, key, path);
  append_path(a, b, key, path);
  append_path(b, vd, key, path);
  return path;
}

std::int64_t GenericRouter::cost(int src, int dst) const {
  return dist_from(built_.gpu_vertex[static_cast<std::size_t>(src)])
      [static_cast<std::size_t>(built_.gpu_vertex[static_cast<std::size_t>(dst)])];
}

std::int64_t GenericRouter::gpu_to_nic_cost(int gpu, int rail) const {
  int nic = nic_vertex(gpu, rail);
  if (nic < 0) return kUnreachable;
  return dist_from(built_.gpu_vertex[static_cast<std::size_t>(gpu)])[static_cast<std::size_t>(nic)];
}

std::int64_t GenericRouter::nic_to_gpu_cost(int rail, int gpu) const {
  int nic = nic_vertex(gpu, rail);
  if (nic < 0) return kUnreachable;
  return dist_from(nic)[static_cast<std::size_t>(built_.gpu_vertex[static_cast<std::size_t>(gpu)])];
}

double GenericRouter::ecmp_count(int src, int dst) const {
  const int vs = built_.gpu_vertex[static_cast<std::size_t>(src)];
  const int vd = built_.gpu_vertex[static_cast<std::size_t>(dst)];
  const auto& dist = dist_from(vs);
  // Paths into each vertex, in order of distance.
  std::vector<int> order;
  for (std::size_t v = 0; v < dist.size(); ++v) {
    if (dist[v] <= dist[static_cast<std::size_t>(vd)]) order.push_back(static_cast<int>(v));
  }
  std::sort(order.begin(), order.end(), [&](int a, int b) {
    return dist[static_cast<std::size_t>(a)] != dist[static_cast<std::size_t>(b)]
               ? dist[static_cast<std::size_t>(a)] < dist[static_cast<std::size_t>(b)]
               : a < b;
  });
  std::vector<double> count(dist.size(), 0.0);
  count[static_cast<std::size_t>(vs)] = 1;
  for (int v : order) {
    if (v == vs) continue;
    double c = 0;
    for_each_dag_in_edge(dist, v, [&](int u, LinkId) { c += count[static_cast<std::size_t>(u)]; });
    count[static_cast<std::size_t>(v)] = std::min(c, kMaxCount);
  }
  return count[static_cast<std::size_t>(vd)];
}

std::vector<std::vector<LinkId>> GenericRouter::ecmp_routes(int src, int dst, int limit) const {
  const int vs = built_.gpu_vertex[static_cast<std::size_t>(src)];
  const int vd = built_.gpu_vertex[static_cast<std::size_t>(dst)];
  const auto& dist = dist_from(vs);
  std::vector<std::vector<LinkId>> out;
  std::vector<LinkId> reversed;
  // Depth-first over the shortest-path DAG, backwards from the destination.
  std::function<void(int)> walk = [&](int v) {
    if (static_cast<int>(out.size()) >= limit) return;
    if (v == vs) {
      out.emplace_back(reversed.rbegin(), reversed.rend());
      return;
    }
    for_each_dag_in_edge(dist, v, [&](int u, LinkId l) {
      reversed.push_back(l);
      walk(u);
      reversed.pop_back();
    });
  };
  walk(vd);
  return out;
}

void GenericRouter::segment_shares(int from, int to, double weight,
                                   const std::function<void(LinkId, double)>& fn) const {
  const auto& dist = dist_from(from);
  // Paths from `from` into each vertex, and from each vertex on to `to`, over the DAG.
  std::vector<int> order;
  for (std::size_t v = 0; v < dist.size(); ++v) {
    if (dist[v] <= dist[static_cast<std::size_t>(to)]) order.push_back(static_cast<int>(v));
  }
  std::sort(order.begin(), order.end(), [&](int a, int b) {
    return dist[static_cast<std::size_t>(a)] != dist[static_cast<std::size_t>(b)]
               ? dist[static_cast<std::size_t>(a)] < dist[static_cast<std::size_t>(b)]
               : a < b;
  });
  std::vector<double> into(dist.size(), 0.0), onward(dist.size(), 0.0);
  into[static_cast<std::size_t>(from)] = 1;
  for (int v : order) {
    if (v == from) continue;
    double c = 0;
    for_each_dag_in_edge(dist, v, [&](int u, LinkId) { c += into[static_cast<std::size_t>(u)]; });
    into[static_cast<std::size_t>(v)] = std::min(c, kMaxCount);
  }
  onward[static_cast<std::size_t>(to)] = 1;
  for (auto it = order.rbegin(); it != order.rend(); ++it) {
    const int v = *it;
    if (onward[static_cast<std::size_t>(v)] == 0.0) continue;
    for_each_dag_in_edge(dist, v, [&](int u, LinkId) {
      onward[static_cast<std::size_t>(u)] =
          std::min(onward[static_cast<std::size_t>(u)] + onward[static_cast<std::size_t>(v)], kMaxCount);
    });
  }
  const double total = into[static_cast<std::size_t>(to)];
  for (int v : order) {
    if (onward[static_cast<std::size_t>(v)] == 0.0) continue;
    for_each_dag_in_edge(dist, v, [&](int u, LinkId l) {
      double paths = into[static_cast<std::size_t>(u)] * onward[static_cast<std::size_t>(v)];
      if (paths > 0) fn(l, weight * paths / total);
    });
  }
}

void GenericRouter::for_each_ecmp_share(int src, int dst, int rail,
                                        const std::function<void(LinkId, double)>& fn) const {
  const int vs = built_.gpu_vertex[static_cast<std::size_t>(src)];
  const int vd = built_.gpu_vertex[static_cast<std::size_t>(dst)];
  const int a = nic_vertex(src, rail), b = nic_vertex(dst, rail);
  const bool via_rail = rail >= 0 && a >= 0 && b >= 0 &&
                        src / built_.gpus_per_node != dst / built_.gpus_per_node &&
                        dist_from(vs)[static_cast<std::size_t>(a)] < kUnreachable &&
                        dist_from(a)[static_cast<std::size_t>(b)] < kUnreachable &&
                        dist_from(b)[static_cast<std::size_t>(vd)] < kUnreachable;
  if (!via_rail) {
    segment_shares(vs, vd, 1.0, fn);
    return;
  }
  segment_shares(vs, a, 1.0, fn);
  segment_shares(a, b, 1.0, fn);
  segment_shares(b, vd, 1.0, fn);
}

}  // namespace strata::topo
