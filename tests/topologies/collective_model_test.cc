// The collective model against published nccl-tests figures and hand-computed
// cases: NVLink-limited DGX A100, NIC-limited pairs of nodes, NVLS on DGX H100, the
// socket link of a PCIe box, oversubscribed RoCE, and the flows' contract.
#include <gtest/gtest.h>

#include "core/error.h"
#include "core/units.h"
#include "test_clusters.h"
#include "topologies/collective_model.h"

namespace strata::topo {
namespace {

using testing::shipped;

std::vector<int> first_gpus(int n) {
  std::vector<int> g;
  for (int i = 0; i < n; ++i) g.push_back(i);
  return g;
}

double busbw_gb(const CollectiveModel& m, CollectiveOp op, const std::vector<int>& group, double bytes) {
  return m.estimate(op, group, bytes).busbw_bytes_per_s / 1e9;
}

// Published: nccl-tests all_reduce_perf on 8 A100-SXM4-80GB over NVSwitch (Azure ND
// A100 v4, NCCL 2.18.5), in-place busbw 228.10 GB/s at 1 GiB and 231.58 GB/s at 8 GiB
// (github.com/Azure/AI-benchmarking-guide, Azure_Results/ND_A100_v4_results.md).
TEST(CollectiveModel, DgxA100AllReduceMatchesNcclTests) {
  Topology t = Topology::build(shipped("dgx-a100-1node"));
  for (const NcclTuning& tuning : nccl_tuning_table()) {
    SCOPED_TRACE(tuning.version);
    CollectiveModel m(t, tuning);
    const double at_1g = busbw_gb(m, CollectiveOp::kAllReduce, first_gpus(8), kGiB);
    const double at_8g = busbw_gb(m, CollectiveOp::kAllReduce, first_gpus(8), 8 * kGiB);
    EXPECT_NEAR(at_1g, 228.10, 0.10 * 228.10);
    EXPECT_NEAR(at_8g, 231.58, 0.10 * 231.58);
    // Limited by NVLink: never above NCCL's 240 GB/s of NVLink per GPU.
    EXPECT_LE(at_8g, 240.0);
    EXPECT_GT(at_8g, 0.95 * 240.0 * (tuning.sm80_busbw_cap > 0 ? 235.0 / 240.0 : 1.0));
    CollectiveEstimate e = m.estimate(CollectiveOp::kAllReduce, first_gpus(8), 8 * kGiB);
    EXPECT_EQ(e.algorithm, CollectiveAlgorithm::kRing);
    EXPECT_EQ(e.protocol, Protocol::kSimple);
    EXPECT_FALSE(e.calibrated);
  }
}

// Two DGX A100 nodes: a ring leaves each node through the 8 NICs (HDR 200 Gb/s, 24 GB/s
// a channel, NCCL's speed list), so busbw is 8 x 24 = 192 GB/s, far below NVLink's 240;
// halving the NICs' rate halves it (8 x 12).
TEST(CollectiveModel, TwoDgxA100NodesAreLimitedByTheNics) {
  Topology hdr = Topology::build(shipped("dgx-a100-2node"));
  CollectiveModel m(hdr, default_nccl_tuning());
  const double busbw = busbw_gb(m, CollectiveOp::kAllReduce, first_gpus(16), 8 * kGiB);
  EXPECT_NEAR(busbw, 8 * 24.0, 0.02 * 192.0);
  EXPECT_EQ(m.estimate(CollectiveOp::kAllReduce, first_gpus(16), 8 * kGiB).channels, 8);

  Topology slow = Topology::build(testing::dgx_a100_cluster(2, R"({"kind": "infiniband", "nic_gbps": 100})"));
  CollectiveModel ms(slow, default_nccl_tuning());
  EXPECT_NEAR(busbw_gb(ms, CollectiveOp::kAllReduce, first_gpus(16), 8 * kGiB), 8 * 12.0, 0.02 * 96.0);
}

// DGX H100: NVLS (NVLink SHARP) all-reduce reaches ~480 GB/s busbw on 8 GPUs, ring
// ~370 GB/s (NCCL maintainer, github.com/NVIDIA/nccl-tests issue 212, 2024-05-06;
// Azure ND H200 v5 measures 479.98 GB/s at 8 GiB, Azure_Results/ND_H200_v5_results.md).
TEST(CollectiveModel, DgxH100NvlsAboveRing) {
  Topology t = Topology::build(shipped("dgx-h100-1node"));
  CollectiveModel m(t, default_nccl_tuning());
  const auto g = first_gpus(8);
  CollectiveEstimate chosen = m.estimate(CollectiveOp::kAllReduce, g, 8 * kGiB);
  CollectiveEstimate ring = m.estimate(CollectiveOp::kAllReduce, g, 8 * kGiB, CollectiveAlgorithm::kRing);
  EXPECT_EQ(chosen.algorithm, CollectiveAlgorithm::kNvls);
  EXPECT_GT(chosen.busbw_bytes_per_s, 1.2 * ring.busbw_bytes_per_s);
  EXPECT_NEAR(chosen.busbw_bytes_per_s / 1e9, 480.0, 0.10 * 480.0);
  EXPECT_NEAR(ring.busbw_bytes_per_s / 1e9, 370.0, 0.10 * 370.0);
  // NCCL 2.7 predates NVLS: ring only.
  CollectiveModel old(t, nccl_tuning("2.7.5"));
  EXPECT_EQ(old.estimate(CollectiveOp::kAllReduce, g, 8 * kGiB).algorithm, CollectiveAlgorithm::kRing);
  EXPECT_THROW(old.estimate(CollectiveOp::kAllReduce, g, kGiB, CollectiveAlgorithm::kNvls), InputError);
}

// An 8-GPU PCIe box: a ring over both sockets crosses the UPI link, which carries GPU
// peer traffic at 10 GB/s (NCCL's SKL_QPI_BW); within one socket the ring runs at the
// PCIe Gen4 rate NCCL assumes, 24 GB/s.
TEST(CollectiveModel, PcieBoxCrossSocketRingIsLimitedBySocketLink) {
  Topology t = Topology::build(shipped("pcie-8gpu-1node"));
  CollectiveModel m(t, default_nccl_tuning());
  const double both_sockets = busbw_gb(m, CollectiveOp::kAllReduce, first_gpus(8), 8 * kGiB);
  const double one_socket = busbw_gb(m, CollectiveOp::kAllReduce, first_gpus(4), 8 * kGiB);
  EXPECT_NEAR(both_sockets, 10.0, 0.02 * 10.0);
  EXPECT_NEAR(one_socket, 24.0, 0.02 * 24.0);
}

// All-to-all over RoCE, DGX A100 nodes with 8 x 100 GbE on 16-port switches. At 1:1
// (8 nodes per rail group) every NIC sends 8·S/n to each of the 29 other nodes and the
// leaves' uplinks keep up. At 2:1 (10 down, 5 up) a group of 10 nodes sends 20/29 of
// its NIC traffic over 5 uplinks: 10 x 20/29 / 5 = 1.3793 times the NIC's time.
TEST(CollectiveModel, RoceOversubscriptionSlowsAllToAllByTheUplinkRatio) {
  auto cluster = [](double oversubscription) {
    return testing::dgx_a100_cluster(30, fmt::format(R"({{"kind": "roce", "nic_gbps": 100,
        "switch_radix": 16, "oversubscription": {}}})", oversubscription));
  };
  Topology full = Topology::build(cluster(1.0));
  Topology over = Topology::build(cluster(2.0));
  ASSERT_EQ(over.fat_tree()->down, 10);
  ASSERT_EQ(over.fat_tree()->up, 5);
  CollectiveModel mf(full, default_nccl_tuning());
  CollectiveModel mo(over, default_nccl_tuning());
  const auto all = first_gpus(240);
  CollectiveEstimate ef = mf.estimate(CollectiveOp::kAllToAll, all, kGiB);
  CollectiveEstimate eo = mo.estimate(CollectiveOp::kAllToAll, all, kGiB);
  const double bw_full = ef.time_s - ef.latency_s;
  const double bw_over = eo.time_s - eo.latency_s;
  EXPECT_NEAR(bw_over / bw_full, 10.0 * 20.0 / 29.0 / 5.0, 1e-6);
  // At 1:1 the NIC is the limit: 29 nodes x 8·S/240 bytes over 100 GbE x 4096/4178.
  const double nic_s = 29.0 * 8.0 * kGiB / 240.0 / (12.5e9 * 4096.0 / 4178.0);
  EXPECT_NEAR(bw_full, nic_s, 1e-6 * nic_s);
  EXPECT_EQ(ef.algorithm, CollectiveAlgorithm::kDirect);
}

// nccl-tests' definitions: algbw = bytes / time; busbw = algbw x 2(n-1)/n for
// all-reduce, (n-1)/n for all-gather, 1 for broadcast.
TEST(CollectiveModel, BusBandwidthFollowsNcclTests) {
  Topology t = Topology::build(shipped("dgx-a100-2node"));
  CollectiveModel m(t, default_nccl_tuning());
  const auto g = first_gpus(16);
  for (auto [op, factor] : {std::pair{CollectiveOp::kAllReduce, 2.0 * 15 / 16},
                            std::pair{CollectiveOp::kAllGather, 15.0 / 16},
                            std::pair{CollectiveOp::kBroadcast, 1.0}}) {
    CollectiveEstimate e = m.estimate(op, g, 256 * kMiB);
    EXPECT_DOUBLE_EQ(e.algbw_bytes_per_s, 256 * kMiB / e.time_s);
    EXPECT_DOUBLE_EQ(e.busbw_bytes_per_s, e.algbw_bytes_per_s * factor);
  }
  // One GPU: nothing to do.
  EXPECT_EQ(m.estimate(CollectiveOp::kAllReduce, {3}, kGiB).time_s, 0.0);
}

// CONTRACT of flows(): alone, every flow at min(rate cap, path bottleneck) plus the
// fixed latency gives the estimate's time (within 1%).
void expect_flows_match(const Topology& t, const CollectiveModel& m, CollectiveOp op,
                        const std::vector<int>& group, double bytes,
                        std::optional<CollectiveAlgorithm> forced = std::nullopt) {
  CollectiveEstimate e = forced ? m.estimate(op, group, bytes, *forced) : m.estimate(op, group, bytes);
  CollectiveFlows f = forced ? m.flows(op, group, bytes, *forced) : m.flows(op, group, bytes);
  EXPECT_EQ(f.algorithm, e.algorithm);
  ASSERT_FALSE(f.flows.empty());
  double slowest = 0.0;
  for (const FlowSpec& flow : f.flows) {
    double rate = std::min(flow.rate_cap_bytes_per_s, t.path_bandwidth_bytes_per_s(flow.path));
    slowest = std::max(slowest, flow.bytes / rate);
  }
  EXPECT_NEAR(slowest + f.fixed_latency_ns * 1e-9, e.time_s, 0.01 * e.time_s)
      << to_string(op) << " " << to_string(e.algorithm);
}

TEST(CollectiveModel, FlowsReproduceTheEstimate) {
  Topology a2 = Topology::build(shipped("dgx-a100-2node"));
  CollectiveModel ma2(a2, default_nccl_tuning());
  expect_flows_match(a2, ma2, CollectiveOp::kAllReduce, first_gpus(16), kGiB);
  expect_flows_match(a2, ma2, CollectiveOp::kAllReduce, first_gpus(16), kGiB, CollectiveAlgorithm::kTree);
  expect_flows_match(a2, ma2, CollectiveOp::kAllReduce, first_gpus(16), kGiB, CollectiveAlgorithm::kHierarchical);
  expect_flows_match(a2, ma2, CollectiveOp::kAllGather, first_gpus(16), kGiB);
  expect_flows_match(a2, ma2, CollectiveOp::kBroadcast, first_gpus(16), kGiB);
  expect_flows_match(a2, ma2, CollectiveOp::kAllToAll, first_gpus(16), kGiB);
  expect_flows_match(a2, ma2, CollectiveOp::kSendRecv, {3, 11}, 64 * kMiB);

  Topology h = Topology::build(shipped("dgx-h100-1node"));
  CollectiveModel mh(h, default_nccl_tuning());
  expect_flows_match(h, mh, CollectiveOp::kAllReduce, first_gpus(8), kGiB);
  expect_flows_match(h, mh, CollectiveOp::kReduceScatter, first_gpus(8), kGiB);

  Topology h8 = Topology::build(shipped("dgx-h100-8node"));
  CollectiveModel mh8(h8, default_nccl_tuning());
  expect_flows_match(h8, mh8, CollectiveOp::kAllReduce, first_gpus(64), 64 * kMiB, CollectiveAlgorithm::kNvlsTree);

  Topology p = Topology::build(shipped("pcie-8gpu-4node"));
  CollectiveModel mp(p, default_nccl_tuning());
  expect_flows_match(p, mp, CollectiveOp::kAllReduce, first_gpus(32), kGiB);
  expect_flows_match(p, mp, CollectiveOp::kAllToAll, first_gpus(32), kGiB);
}

// The hierarchical all-reduce, hand-computed on 2 DGX A100: reduce-scatter inside each
// node (NCCL ring: 12 channels x 20 GB/s x 8/7), an all-reduce of S/8 between the
// nodes on every GPU's own NIC (one edge of S/8 each way, limited by the GPU's PCIe
// link: 31.5 GB/s x 0.762), all-gather inside.
TEST(CollectiveModel, HierarchicalAllReduceAddsItsPhases) {
  Topology t = Topology::build(shipped("dgx-a100-2node"));
  CollectiveModel m(t, default_nccl_tuning());
  const double s = kGiB;
  CollectiveEstimate e = m.estimate(CollectiveOp::kAllReduce, first_gpus(16), s, CollectiveAlgorithm::kHierarchical);
  const double intra = s / (240e9 * 8.0 / 7.0);
  const double inter = s / 8.0 / (31.5e9 * 0.762);
  EXPECT_NEAR(e.time_s - e.latency_s, 2 * intra + inter, 1e-9 * e.time_s);
  EXPECT_THROW(m.estimate(CollectiveOp::kAllReduce, {0, 1, 2, 8}, s, CollectiveAlgorithm::kHierarchical),
               InputError);
}

// A measured efficiency replaces the datasheet one: NVLink at 0.5 x 300 = 150 GB/s
// carries 10 channels of 15 GB/s (NCCL's search: 5 x 30, duplicated).
TEST(CollectiveModel, CalibratedEfficiencyScalesTheWire) {
  Topology t = Topology::build(shipped("dgx-a100-1node"));
  CollectiveEfficiency eff;
  eff.factor[{CollectiveOp::kAllReduce, Scope::kIntraNode}] = 0.5;
  eff.source = "profile.json";
  CollectiveModel m(t, default_nccl_tuning(), eff);
  CollectiveEstimate e = m.estimate(CollectiveOp::kAllReduce, first_gpus(8), 8 * kGiB);
  EXPECT_TRUE(e.calibrated);
  EXPECT_EQ(e.channels, 10);
  EXPECT_NEAR(e.busbw_bytes_per_s / 1e9, 150.0, 0.01 * 150.0);
  // No measurement for all-gather: datasheet figures, and the estimate says so.
  EXPECT_FALSE(m.estimate(CollectiveOp::kAllGather, first_gpus(8), kGiB).calibrated);
}

TEST(CollectiveModel, GroupsNamingMissingGpusAreInputErrors) {
  Topology t = Topology::build(shipped("dgx-a100-1node"));
  CollectiveModel m(t, default_nccl_tuning());
  try {
    m.estimate(CollectiveOp::kAllReduce, {0, 99}, kGiB);
    FAIL() << "expected InputError";
  } catch (const InputError& e) {
    EXPECT_EQ(e.json_path(), "group");
    EXPECT_NE(e.message().find("GPU 99 does not exist"), std::string::npos) << e.what();
  }
  EXPECT_THROW(m.estimate(CollectiveOp::kAllReduce, {1, 1}, kGiB), InputError);
  EXPECT_THROW(nccl_tuning("1.0"), InputError);
}

}  // namespace
}  // namespace strata::topo
