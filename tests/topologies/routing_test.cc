// Routing: the paths a transfer takes inside a node and across the fat-tree, the
// equal-cost (ECMP) sets, and the structured router of generated clusters against
// an exhaustive Dijkstra router on the same graph given inline.
#include <algorithm>
#include <limits>
#include <map>
#include <set>

#include <gtest/gtest.h>

#include "test_clusters.h"
#include "topologies/topology.h"

namespace strata::topo {
namespace {

using testing::shipped;

std::vector<LinkKind> kinds(const Topology& t, const std::vector<LinkId>& path) {
  std::vector<LinkKind> out;
  for (LinkId l : path) out.push_back(t.link(l).kind);
  return out;
}

bool passes(const Topology& t, const std::vector<LinkId>& path, VertexKind kind) {
  for (LinkId l : path) {
    if (t.vertex(t.link(l).to_vertex).kind == kind) return true;
  }
  return false;
}

// The path is connected and runs from src's vertex to dst's.
void expect_valid(const Topology& t, const std::vector<LinkId>& path, int src, int dst) {
  ASSERT_FALSE(path.empty());
  EXPECT_EQ(t.link(path.front()).from_vertex, t.gpu_vertex(src));
  EXPECT_EQ(t.link(path.back()).to_vertex, t.gpu_vertex(dst));
  for (std::size_t i = 1; i < path.size(); ++i) {
    EXPECT_EQ(t.link(path[i - 1]).to_vertex, t.link(path[i]).from_vertex);
  }
}

std::int64_t cost_of(const Topology& t, const std::vector<LinkId>& path) {
  std::int64_t c = 0;
  for (LinkId l : path) c += link_cost(t.link(l));
  return c;
}

TEST(Routing, NvlinkInsideADgxNode) {
  Topology t = Topology::build(shipped("dgx-a100-1node"));
  std::vector<LinkId> p = t.route(0, 5);
  expect_valid(t, p, 0, 5);
  EXPECT_EQ(kinds(t, p), (std::vector<LinkKind>{LinkKind::kNvlink, LinkKind::kNvlink}));
  EXPECT_DOUBLE_EQ(t.path_bandwidth_bytes_per_s(p), 240e9);
  EXPECT_DOUBLE_EQ(t.path_latency_ns(p), 700.0);  // 0.35 us per link (preset)
  EXPECT_EQ(t.ecmp_width(0, 5), 1.0);
}

TEST(Routing, PcieBoxCrossesTheSocketLink) {
  Topology t = Topology::build(shipped("pcie-8gpu-1node"));
  // GPU 0 and GPU 1 share a PCIe switch.
  std::vector<LinkId> near = t.route(0, 1);
  EXPECT_EQ(kinds(t, near), (std::vector<LinkKind>{LinkKind::kPcie, LinkKind::kPcie}));
  // GPU 0 (socket 0) to GPU 4 (socket 1): switch, CPU 0, UPI, CPU 1, switch.
  std::vector<LinkId> far = t.route(0, 4);
  expect_valid(t, far, 0, 4);
  EXPECT_EQ(kinds(t, far), (std::vector<LinkKind>{LinkKind::kPcie, LinkKind::kPcie, LinkKind::kSocket,
                                                  LinkKind::kPcie, LinkKind::kPcie}));
  // The socket link is the bottleneck: 33 GB/s x 0.30303 (NCCL's 10 GB/s).
  EXPECT_NEAR(t.path_bandwidth_bytes_per_s(far), 10e9, 1e6);
}

TEST(Routing, SameRailBetweenNodesStaysOnTheLeaf) {
  Topology t = Topology::build(shipped("dgx-a100-2node"));
  std::vector<LinkId> p = t.route(0, 8, 0);
  expect_valid(t, p, 0, 8);
  EXPECT_EQ(kinds(t, p), (std::vector<LinkKind>{LinkKind::kPcie, LinkKind::kPcie, LinkKind::kInfiniband,
                                                LinkKind::kInfiniband, LinkKind::kPcie, LinkKind::kPcie}));
  EXPECT_FALSE(passes(t, p, VertexKind::kSpine));
  // GPU 0 sits on a PCIe switch with NICs 0 and 1: two equally short paths.
  EXPECT_EQ(t.ecmp_width(0, 8), 2.0);
  std::set<std::vector<LinkId>> seen;
  for (std::uint64_t key = 0; key < 32; ++key) seen.insert(t.route(0, 8, key));
  EXPECT_EQ(seen.size(), 2u);
  EXPECT_EQ(t.route(0, 8, 7), t.route(0, 8, 7));  // deterministic
}

TEST(Routing, CrossRailTrafficTakesNvlinkToTheRightRail) {
  Topology t = Topology::build(shipped("dgx-a100-2node"));
  // GPU 0 to GPU 12 (node 1, on the PCIe switch of NICs 4 and 5): NVLink to a local
  // GPU on that rail, then one leaf, is shorter than going through a spine.
  std::vector<LinkId> p = t.route(0, 12, 3);
  expect_valid(t, p, 0, 12);
  EXPECT_FALSE(passes(t, p, VertexKind::kSpine));
  EXPECT_TRUE(passes(t, p, VertexKind::kNvSwitch));
  EXPECT_EQ(cost_of(t, p), t.path_cost(0, 12));
}

TEST(Routing, EcmpAcrossSpinesBetweenLeafGroups) {
  // Radix 16 at 1:1: 8 nodes per rail group, 16 leaves, 8 spines; nodes 0 and 8 are in
  // different groups.
  ClusterSpec c = testing::dgx_a100_cluster(16, R"({"kind": "infiniband", "switch_radix": 16})");
  Topology t = Topology::build(c);
  ASSERT_EQ(t.fat_tree()->up, 8);
  ASSERT_EQ(t.fat_tree()->tiers, 2);
  const int src = 0, dst = 8 * 8;  // GPU 0 of node 0 and of node 8: same rail, other group
  std::set<int> spines;
  for (std::uint64_t key = 0; key < 64; ++key) {
    std::vector<LinkId> p = t.route(src, dst, key);
    expect_valid(t, p, src, dst);
    EXPECT_EQ(cost_of(t, p), t.path_cost(src, dst));
    for (LinkId l : p) {
      if (t.vertex(t.link(l).to_vertex).kind == VertexKind::kSpine) spines.insert(t.link(l).to_vertex);
    }
  }
  EXPECT_EQ(spines.size(), static_cast<std::size_t>(t.fat_tree()->spines()));
  // Fluid ECMP: the NIC's uplink carries everything, each leaf uplink an eighth.
  double nic_share = 0.0;
  std::vector<double> leaf_up;
  t.for_each_ecmp_share(src, dst, 0, [&](LinkId l, double share) {
    const VertexInfo& from = t.vertex(t.link(l).from_vertex);
    const VertexInfo& to = t.vertex(t.link(l).to_vertex);
    if (from.kind == VertexKind::kNic && to.kind == VertexKind::kLeaf) nic_share += share;
    if (from.kind == VertexKind::kLeaf && to.kind == VertexKind::kSpine) leaf_up.push_back(share);
  });
  EXPECT_DOUBLE_EQ(nic_share, 1.0);
  ASSERT_EQ(leaf_up.size(), 8u);
  for (double s : leaf_up) EXPECT_DOUBLE_EQ(s, 0.125);
}

// The generated graph, given back as an inline graph (every link, one direction each).
ClusterSpec as_inline(const Topology& t) {
  ClusterSpec c = t.cluster();
  c.graph = GraphSpec{};
  for (int v = 0; v < t.num_vertices(); ++v) {
    const VertexInfo& info = t.vertex(v);
    c.graph.vertices.push_back(GraphVertexSpec{info.name, info.kind, info.node, "$.graph.vertices"});
  }
  for (LinkId l = 0; l < t.num_links(); ++l) {
    const Link& link = t.link(l);
    GraphLinkSpec s;
    s.from = link.from_vertex;
    s.to = link.to_vertex;
    s.kind = link.kind;
    s.line_rate_bytes_per_s = link.line_rate_bytes_per_s;
    s.efficiency = link.bandwidth_bytes_per_s / link.line_rate_bytes_per_s;
    s.latency_ns = link.latency_ns;
    s.bidirectional = false;
    c.graph.links.push_back(s);
  }
  return c;
}

TEST(Routing, StructuredRoutesAreShortestOnAThreeTierFabric) {
  // 6 nodes of 2 GPUs and 2 NICs on one PCIe switch, 4-port switches: groups of 2
  // nodes, 6 leaves, 3 pods, 6 spines, 4 cores.
  ClusterSpec c = testing::cluster_from_text(R"({"name": "small", "nodes": 6, "gpus_per_node": 2,
      "node": {"gpus": 2, "nvlink_kind": "nvswitch",
               "nvlink": {"bandwidth_gbytes_per_s": 300, "efficiency": 0.8},
               "pcie": {"bandwidth_gbytes_per_s": 31.5, "efficiency": 0.762},
               "gpus_per_pcie_switch": 2, "nics_per_pcie_switch": 2, "nics": 2, "nic_gbps": 200},
      "fabric": {"kind": "infiniband", "switch_radix": 4}, "profile": "a100-sxm4-80gb"})");
  Topology structured = Topology::build(c);
  ASSERT_EQ(structured.fat_tree()->tiers, 3);
  ASSERT_EQ(structured.fat_tree()->pods, 3);
  Topology exhaustive = Topology::build(as_inline(structured));
  ASSERT_EQ(exhaustive.fat_tree(), nullptr);
  for (int a = 0; a < structured.num_gpus(); ++a) {
    for (int b = 0; b < structured.num_gpus(); ++b) {
      if (a == b) continue;
      SCOPED_TRACE(::testing::Message() << a << " -> " << b);
      EXPECT_EQ(structured.path_cost(a, b), exhaustive.path_cost(a, b));
      EXPECT_EQ(structured.ecmp_width(a, b), exhaustive.ecmp_width(a, b));
      for (std::uint64_t key : {0u, 1u, 2u, 3u}) {
        std::vector<LinkId> p = structured.route(a, b, key);
        expect_valid(structured, p, a, b);
        EXPECT_EQ(cost_of(structured, p), structured.path_cost(a, b));
        std::vector<LinkId> q = exhaustive.route(a, b, key);
        expect_valid(exhaustive, q, a, b);
        EXPECT_EQ(cost_of(exhaustive, q), exhaustive.path_cost(a, b));
      }
      // Every ECMP path the structured router lists is one of the exhaustive router's.
      auto all = exhaustive.ecmp_routes(a, b, 1000);
      std::set<std::vector<LinkId>> set(all.begin(), all.end());
      for (const auto& p : structured.ecmp_routes(a, b, 1000)) EXPECT_TRUE(set.count(p));
    }
  }
}

// An independent reference: Floyd–Warshall over every vertex pair of the graph, and
// the number of shortest paths counted by dynamic programming over the edges that
// lie on one (u → v with dist(s, u) + cost(u → v) = dist(s, v)). No Boost, no router
// code: plain loops over the links.
struct BruteForce {
  std::vector<std::vector<std::int64_t>> dist;
  explicit BruteForce(const Topology& t) {
    const int n = t.num_vertices();
    const std::int64_t inf = std::numeric_limits<std::int64_t>::max() / 4;
    dist.assign(static_cast<std::size_t>(n), std::vector<std::int64_t>(static_cast<std::size_t>(n), inf));
    for (int v = 0; v < n; ++v) dist[static_cast<std::size_t>(v)][static_cast<std::size_t>(v)] = 0;
    for (LinkId l = 0; l < t.num_links(); ++l) {
      auto& d = dist[static_cast<std::size_t>(t.link(l).from_vertex)][static_cast<std::size_t>(t.link(l).to_vertex)];
      d = std::min(d, link_cost(t.link(l)));
    }
    for (int k = 0; k < n; ++k) {
      for (int i = 0; i < n; ++i) {
        const std::int64_t ik = dist[static_cast<std::size_t>(i)][static_cast<std::size_t>(k)];
        if (ik >= inf) continue;
        for (int j = 0; j < n; ++j) {
          auto& ij = dist[static_cast<std::size_t>(i)][static_cast<std::size_t>(j)];
          ij = std::min(ij, ik + dist[static_cast<std::size_t>(k)][static_cast<std::size_t>(j)]);
        }
      }
    }
  }
  std::int64_t d(int a, int b) const { return dist[static_cast<std::size_t>(a)][static_cast<std::size_t>(b)]; }
  // Shortest paths from vertex s to vertex e.
  double count(const Topology& t, int s, int e) const {
    std::vector<int> order;
    for (int v = 0; v < t.num_vertices(); ++v) {
      if (d(s, v) <= d(s, e)) order.push_back(v);
    }
    std::sort(order.begin(), order.end(), [&](int a, int b) { return d(s, a) < d(s, b); });
    std::vector<double> paths(static_cast<std::size_t>(t.num_vertices()), 0.0);
    paths[static_cast<std::size_t>(s)] = 1.0;
    for (int v : order) {
      for (LinkId l = 0; l < t.num_links(); ++l) {
        const Link& link = t.link(l);
        if (link.to_vertex == v && link.from_vertex != v &&
            d(s, link.from_vertex) + link_cost(link) == d(s, v)) {
          paths[static_cast<std::size_t>(v)] += paths[static_cast<std::size_t>(link.from_vertex)];
        }
      }
    }
    return paths[static_cast<std::size_t>(e)];
  }
};

// Every GPU pair of a 3-tier fabric and of two DGX A100 nodes: both routers' costs
// and ECMP widths equal the brute force's, and every path they return costs that.
TEST(Routing, RoutersAgreeWithFloydWarshall) {
  ClusterSpec small = testing::cluster_from_text(R"({"name": "small", "nodes": 6, "gpus_per_node": 2,
      "node": {"gpus": 2, "nvlink_kind": "nvswitch",
               "nvlink": {"bandwidth_gbytes_per_s": 300, "efficiency": 0.8},
               "pcie": {"bandwidth_gbytes_per_s": 31.5, "efficiency": 0.762},
               "gpus_per_pcie_switch": 2, "nics_per_pcie_switch": 2, "nics": 2, "nic_gbps": 200},
      "fabric": {"kind": "infiniband", "switch_radix": 4}, "profile": "a100-sxm4-80gb"})");
  for (const ClusterSpec& c : {small, shipped("dgx-a100-2node"), shipped("pcie-8gpu-4node")}) {
    SCOPED_TRACE(c.name);
    Topology structured = Topology::build(c);
    Topology exhaustive = Topology::build(as_inline(structured));
    BruteForce bf(structured);
    for (int a = 0; a < structured.num_gpus(); ++a) {
      for (int b = 0; b < structured.num_gpus(); ++b) {
        if (a == b) continue;
        const int va = structured.gpu_vertex(a), vb = structured.gpu_vertex(b);
        const std::int64_t best = bf.d(va, vb);
        ASSERT_EQ(structured.path_cost(a, b), best) << a << " -> " << b;
        ASSERT_EQ(exhaustive.path_cost(a, b), best) << a << " -> " << b;
        const double width = bf.count(structured, va, vb);
        EXPECT_EQ(structured.ecmp_width(a, b), width) << a << " -> " << b;
        EXPECT_EQ(exhaustive.ecmp_width(a, b), width) << a << " -> " << b;
        EXPECT_EQ(cost_of(structured, structured.route(a, b, 5)), best);
        // The same ECMP set, and the same fluid spreading over it.
        auto listed = structured.ecmp_routes(a, b, 1000);
        auto all = exhaustive.ecmp_routes(a, b, 1000);
        EXPECT_EQ(std::set<std::vector<LinkId>>(listed.begin(), listed.end()),
                  std::set<std::vector<LinkId>>(all.begin(), all.end()));
        std::map<LinkId, double> ss, es;
        structured.for_each_ecmp_share(a, b, -1, [&](LinkId l, double w) { ss[l] += w; });
        exhaustive.for_each_ecmp_share(a, b, -1, [&](LinkId l, double w) { es[l] += w; });
        ASSERT_EQ(ss.size(), es.size());
        for (const auto& [l, w] : ss) EXPECT_NEAR(w, es[l], 1e-12) << a << " -> " << b << " link " << l;
      }
    }
  }
}

TEST(Routing, DgxClusterCostsMatchExhaustiveSearch) {
  Topology structured = Topology::build(shipped("dgx-a100-2node"));
  Topology exhaustive = Topology::build(as_inline(structured));
  for (int a = 0; a < structured.num_gpus(); ++a) {
    for (int b = 0; b < structured.num_gpus(); ++b) {
      if (a != b) {
        EXPECT_EQ(structured.path_cost(a, b), exhaustive.path_cost(a, b)) << a << " -> " << b;
      }
    }
  }
}

}  // namespace
}  // namespace strata::topo
