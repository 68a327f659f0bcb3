// A cluster given as an inline graph, and the errors bad graphs produce (each naming
// the JSON path at fault).
#include <gtest/gtest.h>

#include "core/error.h"
#include "test_clusters.h"
#include "topologies/collective_model.h"
#include "topologies/report.h"

namespace strata::topo {
namespace {

// Two nodes of two GPUs joined by a direct NVLink bridge (no NVSwitch), each GPU with
// its own NIC on one InfiniBand switch.
std::string cluster_json(const std::string& vertices_extra = "", const std::string& links_extra = "") {
  return R"({"name": "bridged", "nodes": 2, "gpus_per_node": 2, "profile": "a100-sxm4-80gb",
    "node": {"gpus": 2, "pcie": {"bandwidth_gbytes_per_s": 31.5}, "gpus_per_pcie_switch": 2},
    "graph": {
      "vertices": [
        {"name": "a0", "kind": "gpu", "node": 0}, {"name": "a1", "kind": "gpu", "node": 0},
        {"name": "b0", "kind": "gpu", "node": 1}, {"name": "b1", "kind": "gpu", "node": 1},
        {"name": "na0", "kind": "nic", "node": 0}, {"name": "na1", "kind": "nic", "node": 0},
        {"name": "nb0", "kind": "nic", "node": 1}, {"name": "nb1", "kind": "nic", "node": 1},
        {"name": "ib", "kind": "leaf"})" + vertices_extra + R"(],
      "links": [
        {"from": "a0", "to": "a1", "kind": "nvlink", "bandwidth_gbytes_per_s": 100, "efficiency": 0.8},
        {"from": "b0", "to": "b1", "kind": "nvlink", "bandwidth_gbytes_per_s": 100, "efficiency": 0.8},
        {"from": "a0", "to": "na0", "kind": "pcie", "bandwidth_gbytes_per_s": 31.5},
        {"from": "a1", "to": "na1", "kind": "pcie", "bandwidth_gbytes_per_s": 31.5},
        {"from": "b0", "to": "nb0", "kind": "pcie", "bandwidth_gbytes_per_s": 31.5},
        {"from": "b1", "to": "nb1", "kind": "pcie", "bandwidth_gbytes_per_s": 31.5},
        {"from": "na0", "to": "ib", "kind": "infiniband", "bandwidth_gbytes_per_s": 25},
        {"from": "na1", "to": "ib", "kind": "infiniband", "bandwidth_gbytes_per_s": 25},
        {"from": "nb0", "to": "ib", "kind": "infiniband", "bandwidth_gbytes_per_s": 25},
        {"from": "nb1", "to": "ib", "kind": "infiniband", "bandwidth_gbytes_per_s": 25})" +
         links_extra + R"(]}})";
}

TEST(InlineGraph, RoutesAndCollectives) {
  Topology t = Topology::build(testing::cluster_from_text(cluster_json()));
  EXPECT_EQ(t.num_gpus(), 4);
  EXPECT_EQ(t.rails(), 2);
  EXPECT_EQ(t.fat_tree(), nullptr);
  // a0 → a1: the bridge, 100 x 0.8 GB/s.
  std::vector<LinkId> p = t.route(0, 1);
  ASSERT_EQ(p.size(), 1u);
  EXPECT_EQ(t.link(p[0]).kind, LinkKind::kNvlink);
  EXPECT_DOUBLE_EQ(t.path_bandwidth_bytes_per_s(p), 80e9);
  // a0 → b0: PCIe, NIC, switch, NIC, PCIe; the 25 GB/s network is the bottleneck.
  std::vector<LinkId> q = t.route(0, 2);
  EXPECT_EQ(q.size(), 4u);
  EXPECT_DOUBLE_EQ(t.path_bandwidth_bytes_per_s(q), 25e9);
  // The ring over 4 GPUs leaves each node over both NICs: 2 rails x 24 GB/s (NCCL's
  // speed list below 25) = 48 GB/s busbw.
  CollectiveModel m(t, default_nccl_tuning());
  CollectiveEstimate e = m.estimate(CollectiveOp::kAllReduce, {0, 1, 2, 3}, 8.0 * (1 << 30));
  EXPECT_NEAR(e.busbw_bytes_per_s / 1e9, 48.0, 0.02 * 48.0);
  // The fabric's bisection: node 0's two NICs, 25 GB/s each.
  EXPECT_DOUBLE_EQ(bisection_bandwidth(t), 50e9);
}

void expect_input_error(const std::string& text, const std::string& path, const std::string& fragment,
                        bool at_build) {
  try {
    ClusterSpec c = testing::cluster_from_text(text);
    if (!at_build) FAIL() << "expected InputError on reading";
    Topology::build(c);
    FAIL() << "expected InputError on building";
  } catch (const InputError& e) {
    EXPECT_EQ(e.file(), "cluster.json");
    EXPECT_EQ(e.json_path(), path) << e.what();
    EXPECT_NE(e.message().find(fragment), std::string::npos) << e.what();
  }
}

TEST(InlineGraph, EdgeToUnknownVertex) {
  expect_input_error(cluster_json("", R"(, {"from": "a0", "to": "nowhere", "kind": "pcie",
                                            "bandwidth_gbytes_per_s": 10})"),
                     "$.graph.links[10].to", "unknown vertex \"nowhere\"", false);
}

TEST(InlineGraph, ZeroOrNegativeBandwidth) {
  for (const char* bw : {"0", "-5"}) {
    expect_input_error(cluster_json("", std::string(R"(, {"from": "a0", "to": "ib", "kind": "pcie",
                                                       "bandwidth_gbytes_per_s": )") + bw + "}"),
                       "$.graph.links[10].bandwidth_gbytes_per_s", "expected a number in", false);
  }
}

// The same rules for generated clusters: a zero or negative figure in an inline node
// or fabric, and nodes that cannot reach each other (no NICs), name their JSON path.
TEST(InlineGraph, BadGeneratedClusters) {
  auto cluster = [](const std::string& node, const std::string& fabric) {
    return R"({"name": "c", "nodes": 2, "gpus_per_node": 2, "profile": "a100-sxm4-80gb", "node": )" + node +
           R"(, "fabric": )" + fabric + "}";
  };
  const std::string ib = R"({"kind": "infiniband"})";
  for (const char* bw : {"0", "-31.5"}) {
    expect_input_error(cluster(std::string(R"({"gpus": 2, "pcie": {"bandwidth_gbytes_per_s": )") + bw +
                                   R"(}, "nics": 2, "nic_gbps": 200})",
                               ib),
                       "$.node.pcie.bandwidth_gbytes_per_s", "expected a number in", false);
  }
  expect_input_error(cluster(R"({"gpus": 2, "pcie": {"bandwidth_gbytes_per_s": 31.5}, "nics": 2, "nic_gbps": 200})",
                             R"({"kind": "infiniband", "nic_gbps": 0})"),
                     "$.fabric.nic_gbps", "expected a number in", false);
  // Two nodes without NICs: their GPUs cannot reach each other.
  expect_input_error(cluster(R"({"gpus": 2, "pcie": {"bandwidth_gbytes_per_s": 31.5}})", ib),
                     "$.fabric.nics_per_node", "needs NICs", false);
}

TEST(InlineGraph, DisconnectedGpu) {
  // b1 loses its only links: a0 cannot reach it.
  std::string text = cluster_json();
  for (const char* cut : {R"(
        {"from": "b0", "to": "b1", "kind": "nvlink", "bandwidth_gbytes_per_s": 100, "efficiency": 0.8},)",
                          R"(
        {"from": "b1", "to": "nb1", "kind": "pcie", "bandwidth_gbytes_per_s": 31.5},)"}) {
    text.erase(text.find(cut), std::string(cut).size());
  }
  expect_input_error(text, "$.graph.vertices[0]", "cannot reach GPU \"b1\"", true);
}

TEST(InlineGraph, NodeWithoutItsGpus) {
  expect_input_error(cluster_json(R"(, {"name": "a2", "kind": "gpu", "node": 0})"), "$.graph.vertices",
                     "node 0 has 3 GPU vertices", false);
}

TEST(InlineGraph, DuplicateName) {
  expect_input_error(cluster_json(R"(, {"name": "ib", "kind": "spine"})"), "$.graph.vertices[9].name",
                     "duplicate vertex name", false);
}

TEST(InlineGraph, SwitchWithANode) {
  expect_input_error(cluster_json(R"(, {"name": "sp", "kind": "spine", "node": 1})"),
                     "$.graph.vertices[9].node", "belongs to the fabric", false);
}

}  // namespace
}  // namespace strata::topo
