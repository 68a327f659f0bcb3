// The cluster graph: parts and links of the node presets, the fat-tree's shape,
// and clusters the fabric cannot hold.
#include <algorithm>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "core/data_paths.h"
#include "core/error.h"
#include "core/json_reader.h"
#include "test_clusters.h"
#include "topologies/topology.h"

namespace strata::topo {
namespace {

using testing::dgx_a100_cluster;
using testing::shipped;

int count_vertices(const Topology& t, VertexKind kind) {
  int n = 0;
  for (int v = 0; v < t.num_vertices(); ++v) n += t.vertex(v).kind == kind ? 1 : 0;
  return n;
}

int count_links(const Topology& t, LinkKind kind) {
  int n = 0;
  for (LinkId l = 0; l < t.num_links(); ++l) n += t.link(l).kind == kind ? 1 : 0;
  return n;
}

TEST(Graph, DgxA100NodeHasItsParts) {
  Topology t = Topology::build(shipped("dgx-a100-1node"));
  // DGX A100 (system architecture whitepaper): 8 GPUs, NVSwitch fabric (one vertex),
  // 4 PCIe switches, 2 sockets, 8 compute NICs.
  EXPECT_EQ(count_vertices(t, VertexKind::kGpu), 8);
  EXPECT_EQ(count_vertices(t, VertexKind::kNvSwitch), 1);
  EXPECT_EQ(count_vertices(t, VertexKind::kPcieSwitch), 4);
  EXPECT_EQ(count_vertices(t, VertexKind::kCpu), 2);
  EXPECT_EQ(count_vertices(t, VertexKind::kNic), 8);
  // Directed links: 8 GPU-NVSwitch wires, 8 GPU-PCIe, 8 NIC-PCIe, 4 PCIe-CPU, 1 CPU-CPU,
  // two directions each.
  EXPECT_EQ(count_links(t, LinkKind::kNvlink), 16);
  EXPECT_EQ(count_links(t, LinkKind::kPcie), 2 * (8 + 8 + 4));
  EXPECT_EQ(count_links(t, LinkKind::kSocket), 2);
  EXPECT_EQ(t.num_links(), 58);

  auto [up, down] = t.nvswitch_links(3);
  ASSERT_GE(up, 0);
  EXPECT_DOUBLE_EQ(t.link(up).line_rate_bytes_per_s, 300e9);       // A100 datasheet, per direction
  EXPECT_DOUBLE_EQ(t.link(up).bandwidth_bytes_per_s, 240e9);       // x 0.8 (NCCL: 20 of 25 GB/s per link)
  EXPECT_DOUBLE_EQ(t.link(down).bandwidth_bytes_per_s, 240e9);
  EXPECT_EQ(t.vertex(t.link(up).from_vertex).index, 3);
  EXPECT_EQ(t.vertex(t.gpu_vertex(5)).socket, 1);  // GPUs 4-7 on the second socket
  EXPECT_EQ(t.rails(), 0);                         // one node: no fabric
}

// DGX H100 and HGX H200: the same layout as DGX A100 with NVLink4 and PCIe Gen5
// (NVIDIA H100/H200 datasheets), NVSwitch with NVLink SHARP, NDR NICs.
TEST(Graph, HopperNodesHaveNvlinkFourAndNvls) {
  for (const char* name : {"dgx-h100-1node", "hgx-h200-1node"}) {
    SCOPED_TRACE(name);
    Topology t = Topology::build(shipped(name));
    EXPECT_EQ(count_vertices(t, VertexKind::kGpu), 8);
    EXPECT_EQ(count_vertices(t, VertexKind::kNvSwitch), 1);
    EXPECT_EQ(count_vertices(t, VertexKind::kPcieSwitch), 4);
    EXPECT_EQ(count_vertices(t, VertexKind::kCpu), 2);
    EXPECT_EQ(count_vertices(t, VertexKind::kNic), 8);
    EXPECT_EQ(t.num_links(), 58);
    EXPECT_TRUE(t.node_has_nvls(0));
    auto [up, down] = t.nvswitch_links(0);
    ASSERT_GE(down, 0);
    EXPECT_DOUBLE_EQ(t.link(up).line_rate_bytes_per_s, 450e9);         // 18 links x 25 GB/s
    EXPECT_NEAR(t.link(down).bandwidth_bytes_per_s, 370.8e9, 1e3);     // x 0.824 (NCCL: 20.6 of 25)
    for (LinkId l = 0; l < t.num_links(); ++l) {
      const Link& link = t.link(l);
      if (link.kind == LinkKind::kPcie) {
        EXPECT_DOUBLE_EQ(link.line_rate_bytes_per_s, 63e9);             // Gen5 x16
        EXPECT_NEAR(link.bandwidth_bytes_per_s, 48e9, 0.01e9);          // NCCL: 16 x 240 / 80
      }
      if (link.kind == LinkKind::kSocket) {
        EXPECT_NEAR(link.bandwidth_bytes_per_s, 22e9, 1e3);             // NCCL SRP_QPI_BW
      }
    }
    EXPECT_DOUBLE_EQ(t.cluster().node.nic_gbps, 400.0);                 // ConnectX-7 NDR
  }
  // DGX A100 has no NVLink SHARP.
  EXPECT_FALSE(Topology::build(shipped("dgx-a100-1node")).node_has_nvls(0));
}

// The PCIe box: no NVSwitch; 2 sockets, each with 2 PCIe Gen4 switches of 2 GPUs and
// 1 NIC; the sockets joined by UPI at NCCL's 10 GB/s.
TEST(Graph, PcieBoxHasNoNvlink) {
  Topology t = Topology::build(shipped("pcie-8gpu-1node"));
  EXPECT_EQ(count_vertices(t, VertexKind::kGpu), 8);
  EXPECT_EQ(count_vertices(t, VertexKind::kNvSwitch), 0);
  EXPECT_EQ(count_vertices(t, VertexKind::kPcieSwitch), 4);
  EXPECT_EQ(count_vertices(t, VertexKind::kCpu), 2);
  EXPECT_EQ(count_vertices(t, VertexKind::kNic), 4);
  EXPECT_EQ(count_links(t, LinkKind::kNvlink), 0);
  // 8 GPU-PCIe, 4 NIC-PCIe, 4 PCIe-CPU wires and 1 UPI wire, two directions each.
  EXPECT_EQ(count_links(t, LinkKind::kPcie), 2 * (8 + 4 + 4));
  EXPECT_EQ(count_links(t, LinkKind::kSocket), 2);
  EXPECT_EQ(t.nvswitch_of_node(0), -1);
  EXPECT_EQ(t.nvswitch_links(0), (std::pair<LinkId, LinkId>{-1, -1}));
  EXPECT_FALSE(t.node_has_nvls(0));
  for (LinkId l = 0; l < t.num_links(); ++l) {
    if (t.link(l).kind == LinkKind::kSocket) {
      // 33 GB/s x 0.30303 (the preset's efficiency, 10/33 to five digits).
      EXPECT_NEAR(t.link(l).bandwidth_bytes_per_s, 10e9, 1e5);
    }
  }
  EXPECT_EQ(t.vertex(t.gpu_vertex(3)).socket, 0);
  EXPECT_EQ(t.vertex(t.gpu_vertex(4)).socket, 1);
}

TEST(Graph, TwoNodeFatTreeShape) {
  Topology t = Topology::build(shipped("dgx-a100-2node"));
  const FatTreeShape* s = t.fat_tree();
  ASSERT_NE(s, nullptr);
  // 40-port QM8700 at 1:1: 20 down, 20 up; 2 nodes fit one rail group: 8 leaves.
  EXPECT_EQ(s->down, 20);
  EXPECT_EQ(s->up, 20);
  EXPECT_EQ(s->leaves, 8);
  EXPECT_EQ(s->tiers, 2);
  EXPECT_EQ(s->spines(), 20);
  EXPECT_EQ(t.rails(), 8);
  // 2 x 58 node links + 16 NIC-leaf wires + 8 x 20 leaf-spine wires, two directions each.
  EXPECT_EQ(t.num_links(), 2 * 58 + 2 * 16 + 2 * 160);
  EXPECT_EQ(t.num_vertices(), 2 * 23 + 8 + 20);
}

TEST(Graph, SixteenThousandGpusNeedThreeTiers) {
  ClusterSpec c = shipped("dgx-h100-128node");
  c.nodes = 2048;  // 16,384 GPUs on 64-port NDR switches
  Topology t = Topology::build(c);
  const FatTreeShape* s = t.fat_tree();
  ASSERT_NE(s, nullptr);
  // Groups of 32 nodes, 8 rails: 64 groups x 8 = 512 leaves > 64, so three tiers;
  // pods of 32 leaves (4 groups), 16 pods of 32 spines, 32 core groups of 32.
  EXPECT_EQ(s->leaves, 512);
  EXPECT_EQ(s->tiers, 3);
  EXPECT_EQ(s->leaves_per_pod, 32);
  EXPECT_EQ(s->pods, 16);
  EXPECT_EQ(s->spines(), 512);
  EXPECT_EQ(s->cores(), 1024);
  EXPECT_EQ(t.num_gpus(), 16384);
}

TEST(Graph, OversubscriptionSplitsLeafPorts) {
  ClusterSpec c = dgx_a100_cluster(64, R"({"kind": "roce", "nic_gbps": 200, "switch_radix": 64,
                                          "oversubscription": 2})");
  Topology t = Topology::build(c);
  // 64 ports at 2:1: 42 down, 21 up (42 / 21 = 2).
  EXPECT_EQ(t.fat_tree()->down, 42);
  EXPECT_EQ(t.fat_tree()->up, 21);
  // RoCE: Ethernet links at 200 Gb/s x 4096/4178 (header overhead).
  LinkId nic_up = -1;
  for (LinkId l = 0; l < t.num_links() && nic_up < 0; ++l) {
    if (t.link(l).kind == LinkKind::kEthernet) nic_up = l;
  }
  ASSERT_GE(nic_up, 0);
  EXPECT_DOUBLE_EQ(t.link(nic_up).line_rate_bytes_per_s, 25e9);
  EXPECT_NEAR(t.link(nic_up).bandwidth_bytes_per_s, 25e9 * 4096.0 / 4178.0, 1.0);
}

// Any oversubscription, including fractional ones: d = floor(k·o/(1+o)) downlinks,
// u = min(k−d, ceil(d/o)) uplinks.
TEST(Graph, AnyOversubscription) {
  struct Case {
    double o;
    int down, up;
  };
  // 64 ports: 1.5:1 → floor(38.4) = 38 down, ceil(25.33) = 26 up; 3:1 → 48 / 16;
  // 4:1 → floor(51.2) = 51 down, min(13, ceil(12.75)) = 13 up.
  for (Case c : {Case{1.5, 38, 26}, Case{3.0, 48, 16}, Case{4.0, 51, 13}}) {
    SCOPED_TRACE(c.o);
    Topology t = Topology::build(dgx_a100_cluster(
        64, fmt::format(R"({{"kind": "infiniband", "switch_radix": 64, "oversubscription": {}}})", c.o)));
    EXPECT_EQ(t.fat_tree()->down, c.down);
    EXPECT_EQ(t.fat_tree()->up, c.up);
    EXPECT_EQ(t.fat_tree()->tiers, 2);
    // Groups of d nodes, one leaf per rail and group; every leaf has u uplinks.
    const int groups = (64 + c.down - 1) / c.down;
    EXPECT_EQ(t.fat_tree()->leaves, 8 * groups);
    EXPECT_EQ(count_vertices(t, VertexKind::kSpine), c.up);
    EXPECT_EQ(count_links(t, LinkKind::kInfiniband), 2 * (64 * 8 + 8 * groups * c.up));
  }
}

// Three tiers with oversubscription at the leaves: 2,048 DGX H100 on 64-port switches
// at 3:1 → groups of 48 nodes, 43 groups x 8 rails = 344 leaves, pods of 32 leaves
// (4 rail groups): 11 pods of 16 spines; 16 core groups of 32 cores.
TEST(Graph, ThreeTiersWithOversubscription) {
  ClusterSpec c = shipped("dgx-h100-128node");
  c.nodes = 2048;
  c.fabric.oversubscription = 3.0;
  Topology t = Topology::build(c);
  const FatTreeShape* s = t.fat_tree();
  ASSERT_NE(s, nullptr);
  EXPECT_EQ(s->down, 48);
  EXPECT_EQ(s->up, 16);
  EXPECT_EQ(s->leaves, 344);
  EXPECT_EQ(s->tiers, 3);
  EXPECT_EQ(s->leaves_per_pod, 32);
  EXPECT_EQ(s->pods, 11);
  EXPECT_EQ(s->spines(), 176);
  EXPECT_EQ(s->cores(), 512);
  EXPECT_EQ(count_vertices(t, VertexKind::kCore), 512);
}

// Not rail-optimized: a leaf holds whole nodes (all their NICs), floor(d / R) of them.
TEST(Graph, LeavesHoldingWholeNodes) {
  Topology t = Topology::build(dgx_a100_cluster(8, R"({"kind": "infiniband", "switch_radix": 40,
                                                       "rail_optimized": false})"));
  // 40 ports at 1:1: 20 down → 2 nodes (16 NICs) per leaf, 4 leaves, 20 spines.
  EXPECT_EQ(t.fat_tree()->nodes_per_leaf_group, 2);
  EXPECT_EQ(t.fat_tree()->leaves, 4);
  EXPECT_EQ(t.fat_tree()->leaf_of(3, 0), 1);
  EXPECT_EQ(t.fat_tree()->leaf_of(3, 7), 1);
  EXPECT_THROW(Topology::build(dgx_a100_cluster(2, R"({"kind": "infiniband", "switch_radix": 8,
                                                       "rail_optimized": false})")),
               InputError);
}

TEST(Graph, FabricTooSmallIsAnInputError) {
  // 200 nodes in groups of 20: 10 groups x 8 rails = 80 leaves, more than a 40-port spine reaches.
  ClusterSpec c = dgx_a100_cluster(200, R"({"kind": "infiniband", "switch_radix": 40, "tiers": 2})");
  try {
    Topology::build(c);
    FAIL() << "expected InputError";
  } catch (const InputError& e) {
    EXPECT_EQ(e.json_path(), "$.fabric.tiers");
    EXPECT_NE(e.message().find("at most 40 leaves"), std::string::npos) << e.what();
  }
}

TEST(Graph, MoreFabricNicsThanTheNodeHasIsAnInputError) {
  try {
    dgx_a100_cluster(2, R"({"kind": "infiniband", "nics_per_node": 9})");
    FAIL() << "expected InputError";
  } catch (const InputError& e) {
    EXPECT_EQ(e.json_path(), "$.fabric.nics_per_node");
  }
}

TEST(Graph, FabricPresetByName) {
  ClusterSpec c = testing::cluster_from_text(R"({"name": "c", "nodes": 4, "gpus_per_node": 8,
      "node": "dgx-h100", "fabric": "ndr-infiniband", "profile": "h100-sxm5-80gb"})");
  EXPECT_EQ(c.fabric.name, "ndr-infiniband");
  EXPECT_EQ(c.fabric.nics_per_node, 8);
  EXPECT_DOUBLE_EQ(c.fabric.nic_gbps, 400.0);
  EXPECT_EQ(c.fabric.switch_radix, 64);
  try {
    testing::cluster_from_text(R"({"name": "c", "nodes": 4, "gpus_per_node": 8, "node": "dgx-h100",
        "fabric": "omni-path", "profile": "h100-sxm5-80gb"})");
    FAIL() << "expected InputError";
  } catch (const InputError& e) {
    EXPECT_EQ(e.json_path(), "$.fabric");
    EXPECT_NE(e.message().find("ndr-infiniband"), std::string::npos) << e.what();
  }
}

// A cluster written back as JSON (result.json echoes it) reads back to the same
// cluster: for every shipped cluster, to_json(read(to_json(c))) == to_json(c).
TEST(Graph, ClusterJsonRoundTrips) {
  for (const std::string& name : shipped_names("scenarios/clusters")) {
    SCOPED_TRACE(name);
    ClusterSpec c = shipped(name);
    const nlohmann::ordered_json once = to_json(c);
    ClusterSpec again = read_cluster_spec(nlohmann::json::parse(once.dump()), "echo.json");
    EXPECT_EQ(to_json(again).dump(), once.dump());
    EXPECT_EQ(Topology::build(again).num_links(), Topology::build(c).num_links());
  }
}

// Every shipped figure carries its source.
TEST(Graph, PresetsCarrySources) {
  for (const std::string& name : shipped_names("topologies/presets/nodes")) {
    NodeSpec n = load_node_preset(name);
    EXPECT_FALSE(n.source.empty()) << name;
    EXPECT_FALSE(n.pcie.source.empty()) << name;
    if (n.nvlink_kind != "none") {
      EXPECT_FALSE(n.nvlink.source.empty()) << name;
    }
    if (n.sockets > 1) {
      EXPECT_FALSE(n.socket_link.source.empty()) << name;
    }
    for (const LinkParams* l : {&n.nvlink, &n.pcie, &n.socket_link}) {
      EXPECT_GT(l->efficiency, 0.0) << name;
      EXPECT_LE(l->efficiency, 1.0) << name;
      // A latency says where it comes from (a datasheet, or that it is an assumption).
      if (l->latency_ns > 0.0) {
        EXPECT_NE(l->source.find("Latency"), std::string::npos) << name << ": " << l->source;
      }
    }
  }
  NodeSpec node = load_node_preset("dgx-a100");
  for (const std::string& name : shipped_names("topologies/presets/fabrics")) {
    FabricSpec f = load_fabric_preset(name, node);
    EXPECT_FALSE(f.source.empty()) << name;
    EXPECT_EQ(f.name, name);
    EXPECT_NE(f.source.find("atency"), std::string::npos) << name << ": " << f.source;
  }
}

}  // namespace
// A slowed NIC (simulate --slow-nic): both directions of its fabric link carry
// 1/factor of their bandwidth; the NIC's PCIe side and every other link stay.
TEST(SlowNic, HalvesBothDirectionsOfItsFabricLinkOnly) {
  Topology t = Topology::build(shipped("dgx-h100-8node"));
  std::vector<double> before;
  for (int l = 0; l < t.num_links(); ++l) before.push_back(t.link(l).bandwidth_bytes_per_s);
  const std::vector<LinkId> slowed = t.slow_nic(3, 5, 2.0);
  ASSERT_EQ(slowed.size(), 2u);
  for (int l = 0; l < t.num_links(); ++l) {
    const bool is_slowed = std::find(slowed.begin(), slowed.end(), l) != slowed.end();
    EXPECT_DOUBLE_EQ(t.link(l).bandwidth_bytes_per_s, is_slowed ? before[l] / 2.0 : before[l]) << l;
  }
  for (LinkId l : slowed) {
    const Link& link = t.link(l);
    const int nic = t.vertex(link.from_vertex).kind == VertexKind::kNic ? link.from_vertex : link.to_vertex;
    EXPECT_EQ(t.vertex(nic).node, 3);
    EXPECT_EQ(t.vertex(nic).index, 5);
  }
  // A single node has no fabric link to slow.
  Topology one = Topology::build(shipped("dgx-h100-1node"));
  EXPECT_TRUE(one.slow_nic(0, 0, 2.0).empty());
}

}  // namespace strata::topo
