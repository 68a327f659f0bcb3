#include "topologies/structured_router.h"

#include <algorithm>
#include <functional>
#include <limits>

#include <boost/graph/dijkstra_shortest_paths.hpp>
#include <boost/graph/filtered_graph.hpp>
#include <boost/property_map/function_property_map.hpp>

#include "core/error.h"

namespace strata::topo {
namespace {

constexpr std::int64_t kUnreachable = std::numeric_limits<std::int64_t>::max() / 4;
// Equal-cost paths kept per pair of a node's endpoints (nodes have a handful).
constexpr std::size_t kMaxSegmentPaths = 256;

}  // namespace

StructuredRouter::StructuredRouter(const BuiltGraph& built) {
  const NodeTemplate& t = *built.node_template;
  gpus_per_node_ = built.gpus_per_node;
  rails_ = built.fabric ? built.fabric->shape.rails : 0;
  endpoints_ = gpus_per_node_ + static_cast<int>(t.nic_vertex.size());
  links_per_node_ = t.links;
  fabric_ = built.fabric ? &*built.fabric : nullptr;
  if (fabric_ != nullptr && !fabric_->nic_up.empty()) {
    fabric_cost_ = link_cost(built.links[static_cast<std::size_t>(fabric_->nic_up[0])]);
  }

  // Dijkstra on node 0 alone (its vertices are [0, t.vertices)).
  using Edge = Graph::edge_descriptor;
  auto in_node0 = [&](std::size_t v) { return v < static_cast<std::size_t>(t.vertices); };
  boost::filtered_graph<Graph, boost::keep_all, std::function<bool(std::size_t)>> node0(
      built.graph, boost::keep_all(), std::function<bool(std::size_t)>(in_node0));
  auto weight = boost::make_function_property_map<Edge>(
      [&](const Edge& e) { return link_cost(built.links[static_cast<std::size_t>(built.graph[e].link)]); });

  std::vector<int> endpoint_vertex = t.gpu_vertex;
  endpoint_vertex.insert(endpoint_vertex.end(), t.nic_vertex.begin(), t.nic_vertex.end());
  const std::size_t nv = boost::num_vertices(built.graph);
  segments_.resize(static_cast<std::size_t>(endpoints_ * endpoints_));
  std::vector<std::int64_t> dist(nv);
  auto index = boost::get(boost::vertex_index, built.graph);
  for (int from = 0; from < endpoints_; ++from) {
    std::fill(dist.begin(), dist.end(), kUnreachable);
    auto src = static_cast<std::size_t>(endpoint_vertex[static_cast<std::size_t>(from)]);
    boost::dijkstra_shortest_paths(
        node0, src,
        boost::weight_map(weight)
            .distance_map(boost::make_iterator_property_map(dist.begin(), index))
            .distance_inf(kUnreachable));
    for (int to = 0; to < endpoints_; ++to) {
      Segment& seg = segments_[static_cast<std::size_t>(from * endpoints_ + to)];
      auto dst = static_cast<std::size_t>(endpoint_vertex[static_cast<std::size_t>(to)]);
      if (from == to) continue;
      if (dist[dst] >= kUnreachable) {
        seg.cost = kUnreachable;
        continue;
      }
      seg.cost = dist[dst];
      // Every shortest path: depth-first backwards over the edges on one
      // (dist[u] + cost(u → v) = dist[v]), inside node 0.
      std::vector<LinkId> reversed;
      std::function<void(std::size_t)> walk = [&](std::size_t v) {
        if (seg.paths.size() >= kMaxSegmentPaths) return;
        if (v == src) {
          seg.paths.emplace_back(reversed.rbegin(), reversed.rend());
          return;
        }
        for (auto [e, end] = boost::in_edges(v, built.graph); e != end; ++e) {
          const std::size_t u = boost::source(*e, built.graph);
          const LinkId l = built.graph[*e].link;
          if (!in_node0(u) || dist[u] >= kUnreachable ||
              dist[u] + link_cost(built.links[static_cast<std::size_t>(l)]) != dist[v]) {
            continue;
          }
          reversed.push_back(l);
          walk(u);
          reversed.pop_back();
        }
      };
      walk(dst);
    }
  }
  for (int a = 0; a < gpus_per_node_; ++a) {
    for (int b = 0; b < gpus_per_node_; ++b) {
      if (a != b && segment(a, b).cost >= kUnreachable) {
        throw InternalError("structured router: GPUs of a generated node cannot reach each other");
      }
    }
  }
}

void StructuredRouter::append_intra(int node, int from, int to, std::vector<LinkId>& out,
                                    long long index) const {
  const LinkId base = node * links_per_node_;
  const Segment& seg = segment(from, to);
  for (LinkId l : seg.paths[static_cast<std::size_t>(index) % seg.paths.size()]) out.push_back(base + l);
}

void StructuredRouter::fabric_hop(int node_a, int rail_a, int node_b, int rail_b,
                                  std::int64_t* cost, double* multiplicity) const {
  const FatTreeShape& s = fabric_->shape;
  const int la = s.leaf_of(node_a, rail_a);
  const int lb = s.leaf_of(node_b, rail_b);
  if (la == lb) {
    *cost = 2 * fabric_cost_;
    *multiplicity = 1;
  } else if (s.pod_of_leaf(la) == s.pod_of_leaf(lb)) {
    *cost = 4 * fabric_cost_;
    *multiplicity = s.up;
  } else {
    *cost = 6 * fabric_cost_;
    *multiplicity = static_cast<double>(s.up) * s.cores_per_group;
  }
}

std::vector<StructuredRouter::Candidate> StructuredRouter::candidates(int src, int dst, int rail,
                                                                      std::int64_t* best) const {
  const int na = node_of(src), nb = node_of(dst);
  const int ls = local_of(src), ld = local_of(dst);
  std::vector<Candidate> out;
  *best = kUnreachable;
  const int first = rail < 0 ? 0 : rail;
  const int last = rail < 0 ? rails_ - 1 : rail;
  for (int ra = first; ra <= last; ++ra) {
    for (int rb = first; rb <= last; ++rb) {
      if (rail >= 0 && ra != rb) continue;
      std::int64_t up = segment(ls, gpus_per_node_ + ra).cost;
      std::int64_t down = segment(gpus_per_node_ + rb, ld).cost;
      if (up >= kUnreachable || down >= kUnreachable) continue;
      std::int64_t fab = 0;
      double mult = 1;
      fabric_hop(na, ra, nb, rb, &fab, &mult);
      std::int64_t c = up + fab + down;
      if (c < *best) {
        *best = c;
        out.clear();
      }
      if (c == *best) {
        const double inside = segment(ls, gpus_per_node_ + ra).count() * segment(gpus_per_node_ + rb, ld).count();
        out.push_back(Candidate{ra, rb, mult, mult * inside});
      }
    }
  }
  if (out.empty()) throw InternalError("structured router: no path between nodes");
  return out;
}

void StructuredRouter::append_fabric(int node_a, int rail_a, int node_b, int rail_b,
                                     long long index, std::vector<LinkId>& out) const {
  const FatTreeShape& s = fabric_->shape;
  const int la = s.leaf_of(node_a, rail_a);
  const int lb = s.leaf_of(node_b, rail_b);
  out.push_back(fabric_->nic_up[static_cast<std::size_t>(node_a * s.rails + rail_a)]);
  if (la != lb) {
    const int j = static_cast<int>(index % s.up);
    out.push_back(fabric_->leaf_up[static_cast<std::size_t>(la * s.up + j)]);
    const int pa = s.pod_of_leaf(la), pb = s.pod_of_leaf(lb);
    if (pa != pb) {
      const int c = static_cast<int>(index / s.up);
      out.push_back(fabric_->spine_up[static_cast<std::size_t>((pa * s.up + j) * s.cores_per_group + c)]);
      out.push_back(fabric_->spine_down[static_cast<std::size_t>((pb * s.up + j) * s.cores_per_group + c)]);
    }
    out.push_back(fabric_->leaf_down[static_cast<std::size_t>(lb * s.up + j)]);
  }
  out.push_back(fabric_->nic_down[static_cast<std::size_t>(node_b * s.rails + rail_b)]);
}

std::vector<LinkId> StructuredRouter::nth_path(int src, int dst, const std::vector<Candidate>& cands,
                                               double index) const {
  std::vector<LinkId> path;
  path.reserve(16);
  for (const Candidate& c : cands) {
    if (index < c.multiplicity) {
      // index = fabric + F · (up + U · down): the fabric choice varies fastest.
      const auto i = static_cast<long long>(index);
      const auto fabric_paths = static_cast<long long>(c.fabric_paths);
      const auto up_paths = static_cast<long long>(segment(local_of(src), gpus_per_node_ + c.rail_a).count());
      append_intra(node_of(src), local_of(src), gpus_per_node_ + c.rail_a, path, (i / fabric_paths) % up_paths);
      append_fabric(node_of(src), c.rail_a, node_of(dst), c.rail_b, i % fabric_paths, path);
      append_intra(node_of(dst), gpus_per_node_ + c.rail_b, local_of(dst), path, i / fabric_paths / up_paths);
      return path;
    }
    index -= c.multiplicity;
  }
  throw InternalError("structured router: ECMP index out of range");
}

std::vector<LinkId> StructuredRouter::route(int src, int dst, std::uint64_t key) const {
  return route_via_rail(src, dst, -1, key);
}

std::vector<LinkId> StructuredRouter::route_via_rail(int src, int dst, int rail,
                                                     std::uint64_t key) const {
  if (node_of(src) == node_of(dst)) {
    std::vector<LinkId> path;
    const Segment& seg = segment(local_of(src), local_of(dst));
    const auto h = flow_hash(key, static_cast<std::uint64_t>(src), static_cast<std::uint64_t>(dst));
    append_intra(node_of(src), local_of(src), local_of(dst), path,
                 static_cast<long long>(h % static_cast<std::uint64_t>(seg.paths.size())));
    return path;
  }
  std::int64_t best = 0;
  std::vector<Candidate> cands = candidates(src, dst, rail, &best);
  double total = 0;
  for (const Candidate& c : cands) total += c.multiplicity;
  auto h = flow_hash(key, static_cast<std::uint64_t>(src), static_cast<std::uint64_t>(dst));
  double index = static_cast<double>(h % static_cast<std::uint64_t>(total));
  return nth_path(src, dst, cands, index);
}

std::int64_t StructuredRouter::cost(int src, int dst) const {
  if (node_of(src) == node_of(dst)) return segment(local_of(src), local_of(dst)).cost;
  std::int64_t best = 0;
  candidates(src, dst, -1, &best);
  return best;
}

std::int64_t StructuredRouter::gpu_to_nic_cost(int gpu, int rail) const {
  return segment(local_of(gpu), gpus_per_node_ + rail).cost;
}

std::int64_t StructuredRouter::nic_to_gpu_cost(int rail, int gpu) const {
  return segment(gpus_per_node_ + rail, local_of(gpu)).cost;
}

double StructuredRouter::ecmp_count(int src, int dst) const {
  if (node_of(src) == node_of(dst)) return segment(local_of(src), local_of(dst)).count();
  std::int64_t best = 0;
  double total = 0;
  for (const Candidate& c : candidates(src, dst, -1, &best)) total += c.multiplicity;
  return total;
}

std::vector<std::vector<LinkId>> StructuredRouter::ecmp_routes(int src, int dst, int limit) const {
  std::vector<std::vector<LinkId>> out;
  if (node_of(src) == node_of(dst)) {
    const Segment& seg = segment(local_of(src), local_of(dst));
    for (std::size_t i = 0; i < seg.paths.size() && static_cast<int>(out.size()) < limit; ++i) {
      out.emplace_back();
      append_intra(node_of(src), local_of(src), local_of(dst), out.back(), static_cast<long long>(i));
    }
    return out;
  }
  std::int64_t best = 0;
  std::vector<Candidate> cands = candidates(src, dst, -1, &best);
  double total = 0;
  for (const Candidate& c : cands) total += c.multiplicity;
  for (double i = 0; i < total && static_cast<int>(out.size()) < limit; i += 1) {
    out.push_back(nth_path(src, dst, cands, i));
  }
  return out;
}

void StructuredRouter::for_each_ecmp_share(int src, int dst, int rail,
                                           const std::function<void(LinkId, double)>& fn) const {
  // Spreads `weight` evenly over a segment's paths.
  auto spread_intra = [&](int node, int from, int to, double weight) {
    const Segment& seg = segment(from, to);
    const LinkId base = node * links_per_node_;
    for (const auto& p : seg.paths) {
      for (LinkId l : p) fn(base + l, weight / seg.count());
    }
  };
  if (node_of(src) == node_of(dst)) {
    spread_intra(node_of(src), local_of(src), local_of(dst), 1.0);
    return;
  }
  std::int64_t best = 0;
  std::vector<Candidate> cands = candidates(src, dst, rail, &best);
  double total = 0;
  for (const Candidate& c : cands) total += c.multiplicity;
  const FatTreeShape& s = fabric_->shape;
  const int na = node_of(src), nb = node_of(dst);
  for (const Candidate& c : cands) {
    const double w = c.multiplicity / total;
    spread_intra(na, local_of(src), gpus_per_node_ + c.rail_a, w);
    spread_intra(nb, gpus_per_node_ + c.rail_b, local_of(dst), w);
    fn(fabric_->nic_up[static_cast<std::size_t>(na * s.rails + c.rail_a)], w);
    fn(fabric_->nic_down[static_cast<std::size_t>(nb * s.rails + c.rail_b)], w);
    const int la = s.leaf_of(na, c.rail_a), lb = s.leaf_of(nb, c.rail_b);
    if (la == lb) continue;
    const int pa = s.pod_of_leaf(la), pb = s.pod_of_leaf(lb);
    for (int j = 0; j < s.up; ++j) {
      fn(fabric_->leaf_up[static_cast<std::size_t>(la * s.up + j)], w / s.up);
      fn(fabric_->leaf_down[static_cast<std::size_t>(lb * s.up + j)], w / s.up);
      if (pa == pb) continue;
      const double wc = w / (static_cast<double>(s.up) * s.cores_per_group);
      for (int k = 0; k < s.cores_per_group; ++k) {
        fn(fabric_->spine_up[static_cast<std::size_t>((pa * s.up + j) * s.cores_per_group + k)], wc);
        fn(fabric_->spine_down[static_cast<std::size_t>((pb * s.up + j) * s.cores_per_group + k)], wc);
      }
    }
  }
}

}  // namespace strata::topo
