// The collective model against published nccl-tests figures and hand-computed
// cases: NVLink-limited DGX A100, NIC-limited pairs of nodes, NVLS on DGX H100, the
// socket link of a PCIe box, oversubscribed RoCE, and the flows' contract.
#include <map>

#include <gtest/gtest.h>

#include "core/error.h"
#include "core/units.h"
#include "test_clusters.h"
#include "topologies/collective_model.h"
#include "topologies/nccl_channels.h"

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

// DGX H100: NVLS (NVLink SHARP) all-reduce on 8 GPUs, nccl-tests all_reduce_perf
// in-place busbw 466.35 GB/s at 1 GiB and 478.87 GB/s at 8 GiB on 8 H100 SXM 80GB
// over NVSwitch (Azure ND H100 v5, NCCL 2.18.5; github.com/Azure/AI-benchmarking-guide,
// "Azure Results/ND_H100_v5_results.md"); ring ~370 GB/s (NCCL maintainer,
// github.com/NVIDIA/nccl-tests issue 212, 2024-05-06).
TEST(CollectiveModel, DgxH100NvlsAboveRing) {
  Topology t = Topology::build(shipped("dgx-h100-1node"));
  CollectiveModel m(t, default_nccl_tuning());
  const auto g = first_gpus(8);
  CollectiveEstimate chosen = m.estimate(CollectiveOp::kAllReduce, g, 8 * kGiB);
  CollectiveEstimate ring = m.estimate(CollectiveOp::kAllReduce, g, 8 * kGiB, CollectiveAlgorithm::kRing);
  EXPECT_EQ(chosen.algorithm, CollectiveAlgorithm::kNvls);
  EXPECT_GT(chosen.busbw_bytes_per_s, 1.2 * ring.busbw_bytes_per_s);
  EXPECT_NEAR(chosen.busbw_bytes_per_s / 1e9, 478.87, 0.10 * 478.87);
  EXPECT_NEAR(busbw_gb(m, CollectiveOp::kAllReduce, g, kGiB), 466.35, 0.10 * 466.35);
  EXPECT_NEAR(ring.busbw_bytes_per_s / 1e9, 370.0, 0.10 * 370.0);
  // NCCL 2.7 predates NVLS: ring only.
  CollectiveModel old(t, nccl_tuning("2.7.5"));
  EXPECT_EQ(old.estimate(CollectiveOp::kAllReduce, g, 8 * kGiB).algorithm, CollectiveAlgorithm::kRing);
  EXPECT_THROW(old.estimate(CollectiveOp::kAllReduce, g, kGiB, CollectiveAlgorithm::kNvls), InputError);
}

// HGX H200: NVLS all-reduce busbw 467.58 GB/s at 1 GiB and 479.98 GB/s at 8 GiB on 8
// H200 141GB (Azure ND H200 v5, NCCL 2.20.5; Azure_Results/ND_H200_v5_results.md).
// NCCL's model: 8 NVLS channels of 40 GB/s (9 x 40 <= 370.8), algbw 320 x 5/6,
// busbw x 14/8 = 466.7 GB/s before latency.
TEST(CollectiveModel, HgxH200NvlsMatchesNcclTests) {
  Topology t = Topology::build(shipped("hgx-h200-1node"));
  CollectiveModel m(t, default_nccl_tuning());
  const auto g = first_gpus(8);
  CollectiveEstimate e = m.estimate(CollectiveOp::kAllReduce, g, 8 * kGiB);
  EXPECT_EQ(e.algorithm, CollectiveAlgorithm::kNvls);
  EXPECT_EQ(e.channels, 8);
  EXPECT_NEAR(e.busbw_bytes_per_s / 1e9, 479.98, 0.10 * 479.98);
  EXPECT_NEAR(busbw_gb(m, CollectiveOp::kAllReduce, g, kGiB), 467.58, 0.10 * 467.58);
  // Exactly NCCL's formula: 23 us (NVLS hop) + bytes / (8 x 40 x 5/6 GB/s).
  EXPECT_NEAR(e.time_s, 23e-6 + 8 * kGiB / (320e9 * 5.0 / 6.0), 1e-9 * e.time_s);
}

// The large-message end of the published curves (nccl-tests all_reduce_perf,
// in-place busbw in GB/s at 256 MiB, 512 MiB, 1, 2, 4 and 8 GiB; Azure
// AI-benchmarking-guide, the files cited above): every point within 10%. Below
// 256 MiB NCCL runs fewer channels than its model assumes and measured busbw falls
// further below the model (docs/topologies.md, "Validation").
TEST(CollectiveModel, LargeMessageCurvesMatchNcclTests) {
  const double sizes[] = {256 * kMiB, 512 * kMiB, kGiB, 2 * kGiB, 4 * kGiB, 8 * kGiB};
  struct Curve {
    const char* cluster;
    double busbw[6];
  };
  const Curve curves[] = {
      {"dgx-a100-1node", {213.87, 221.58, 228.10, 230.22, 230.48, 231.58}},  // ND A100 v4
      {"dgx-h100-1node", {423.38, 438.46, 466.35, 472.36, 475.54, 478.87}},  // ND H100 v5
      {"hgx-h200-1node", {432.24, 442.72, 467.58, 472.57, 477.41, 479.98}},  // ND H200 v5
  };
  for (const Curve& c : curves) {
    Topology t = Topology::build(shipped(c.cluster));
    CollectiveModel m(t, default_nccl_tuning());
    for (int i = 0; i < 6; ++i) {
      EXPECT_NEAR(busbw_gb(m, CollectiveOp::kAllReduce, first_gpus(8), sizes[i]), c.busbw[i], 0.10 * c.busbw[i])
          << c.cluster << " at " << sizes[i] << " bytes";
    }
  }
}

// The double binary tree on 2 DGX A100, 8 GiB, NCCL 2.20.3, by hand from tuning.cc:
// 8 channels of 24 GB/s; tree busBw = min(192 x 0.92, 8 x 23.6 (perChMaxTreeBws,
// Ampere, 2 nodes)) = 176.64, algbw half of it; Simple latency 2 x (7 x 28 (NVLink
// hop) + log2(2) x 28 (network hop)) = 448 us; at 8 GiB no tree correction applies.
TEST(CollectiveModel, TwoNodeTreeByHand) {
  Topology t = Topology::build(shipped("dgx-a100-2node"));
  CollectiveModel m(t, nccl_tuning("2.20.3"));
  const double s = 8 * kGiB;
  CollectiveEstimate e = m.estimate(CollectiveOp::kAllReduce, first_gpus(16), s, CollectiveAlgorithm::kTree);
  EXPECT_EQ(e.protocol, Protocol::kSimple);
  EXPECT_EQ(e.channels, 8);
  EXPECT_NEAR(e.latency_s, 448e-6, 1e-12);
  EXPECT_NEAR(e.time_s, 448e-6 + s / (176.64e9 * 0.5), 1e-9 * e.time_s);
  // NCCL's choice at 8 GiB is the ring (192 x 16/30 algbw beats the tree's 88.3).
  EXPECT_EQ(m.estimate(CollectiveOp::kAllReduce, first_gpus(16), s).algorithm, CollectiveAlgorithm::kRing);
}

// The other collectives on 8 A100, NCCL 2.20.3, by hand: the ring runs 12 channels of
// 20 GB/s (6 x 40 fit NVLink's 240, duplicated); Simple wins at 1 GiB.
//  all_gather / reduce_scatter: algbw 240 x 8/7, latency 8.4 + 7 x 3.4 = 32.2 us;
//  broadcast: algbw 240 x 8/8, latency 8.4 + 3.4 (one hop: NCCL's identical channels);
//  send_recv 0 → 1: one NVSwitch path at 240 GB/s, latency 8.4 + 3.4 us.
TEST(CollectiveModel, OtherCollectivesByHand) {
  Topology t = Topology::build(shipped("dgx-a100-1node"));
  CollectiveModel m(t, nccl_tuning("2.20.3"));
  const double s = kGiB;
  const auto g = first_gpus(8);
  for (CollectiveOp op : {CollectiveOp::kAllGather, CollectiveOp::kReduceScatter}) {
    CollectiveEstimate e = m.estimate(op, g, s);
    EXPECT_EQ(e.algorithm, CollectiveAlgorithm::kRing) << to_string(op);
    EXPECT_EQ(e.protocol, Protocol::kSimple) << to_string(op);
    EXPECT_EQ(e.channels, 12) << to_string(op);
    EXPECT_NEAR(e.time_s, 32.2e-6 + s / (240e9 * 8.0 / 7.0), 1e-9 * e.time_s) << to_string(op);
    EXPECT_NEAR(e.busbw_bytes_per_s / 1e9, 240.0, 0.01 * 240.0) << to_string(op);
  }
  CollectiveEstimate b = m.estimate(CollectiveOp::kBroadcast, g, s);
  EXPECT_EQ(b.protocol, Protocol::kSimple);
  EXPECT_NEAR(b.time_s, 11.8e-6 + s / 240e9, 1e-9 * b.time_s);
  CollectiveEstimate p = m.estimate(CollectiveOp::kSendRecv, {0, 1}, s);
  EXPECT_EQ(p.algorithm, CollectiveAlgorithm::kDirect);
  EXPECT_NEAR(p.time_s, 11.8e-6 + s / 240e9, 1e-9 * p.time_s);
  // Between nodes a send leaves through the GPU's PCIe switch (24.003 GB/s, NCCL's
  // 24), spread over the switch's two NICs; latency 8.4 + 14.0 (network hop) us.
  Topology t2 = Topology::build(shipped("dgx-a100-2node"));
  CollectiveModel m2(t2, nccl_tuning("2.20.3"));
  CollectiveEstimate x = m2.estimate(CollectiveOp::kSendRecv, {0, 8}, s);
  EXPECT_NEAR(x.time_s, 22.4e-6 + s / (31.5e9 * 0.762), 1e-9 * x.time_s);
}

// NCCL's rings follow NVLink and cross each node boundary once, whatever the rank
// order: GPUs interleaved over 2 DGX A100 nodes give rings with exactly 2 inter-node
// edges and the busbw of the sorted group; on the PCIe box, ranks alternating between
// the sockets give rings that cross the socket link once each way (10 GB/s, not 2.5).
TEST(CollectiveModel, RingOrderFollowsTheWires) {
  auto cap = [](const Topology& t) { return [&t](LinkId l) { return t.link(l).bandwidth_bytes_per_s; }; };
  Topology t = Topology::build(shipped("dgx-a100-2node"));
  std::vector<int> interleaved;
  for (int i = 0; i < 8; ++i) {
    interleaved.push_back(i);
    interleaved.push_back(8 + i);
  }
  RingGraph ring = search_ring(t, default_nccl_tuning(), make_group_shape(t, interleaved), cap(t));
  ASSERT_EQ(ring.instances.size(), 8u);  // one per rail
  for (const RingInstance& inst : ring.instances) {
    int crossings = 0;
    for (std::size_t i = 0; i < inst.order.size(); ++i) {
      crossings += t.node_of(inst.order[i]) != t.node_of(inst.order[(i + 1) % inst.order.size()]) ? 1 : 0;
    }
    EXPECT_EQ(crossings, 2) << "rail " << inst.rail;
  }
  CollectiveModel m(t, default_nccl_tuning());
  EXPECT_DOUBLE_EQ(m.estimate(CollectiveOp::kAllReduce, interleaved, 8 * kGiB).time_s,
                   m.estimate(CollectiveOp::kAllReduce, first_gpus(16), 8 * kGiB).time_s);

  Topology p = Topology::build(shipped("pcie-8gpu-1node"));
  const std::vector<int> alternating = {0, 4, 1, 5, 2, 6, 3, 7};
  RingGraph pr = search_ring(p, default_nccl_tuning(), make_group_shape(p, alternating), cap(p));
  ASSERT_EQ(pr.instances.size(), 1u);
  int socket_edges = 0;
  for (const auto& path : pr.instances[0].edge_paths) {
    for (LinkId l : path) socket_edges += p.link(l).kind == LinkKind::kSocket ? 1 : 0;
  }
  EXPECT_EQ(socket_edges, 2);  // out and back
  CollectiveModel mp(p, default_nccl_tuning());
  EXPECT_NEAR(busbw_gb(mp, CollectiveOp::kAllReduce, alternating, 8 * kGiB), 10.0, 0.02 * 10.0);
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

// A ring over one GPU of each of 30 nodes on 16-port RoCE switches crosses leaves
// through spines that ECMP picks by hashing each connection. With one queue pair per
// connection every ring edge takes one path (two edges may land on the same uplink);
// NCCL_IB_QPS_PER_CONNECTION = 4 hashes four queue pairs per edge, each a quarter
// of the bytes: the same bytes cross between the switches, over more links, never
// more on one link than before; alone, the collective still takes NCCL's time.
TEST(CollectiveModel, QueuePairsSpreadAConnectionOverTheFabricsPaths) {
  auto cluster = [](int qps) {
    return testing::dgx_a100_cluster(30, fmt::format(R"({{"kind": "roce", "nic_gbps": 100,
        "switch_radix": 16, "qps_per_connection": {}}})", qps));
  };
  std::vector<int> ring;
  for (int node = 0; node < 30; ++node) ring.push_back(node * 8);
  struct Load {
    double total = 0.0;
    double most = 0.0;
    std::size_t links = 0;
  };
  auto switch_load = [&](const Topology& t, const CollectiveFlows& f) {
    std::map<LinkId, double> on;
    for (const FlowSpec& flow : f.flows) {
      for (LinkId l : flow.path) {
        auto is_switch = [&](int v) {
          const VertexKind k = t.vertex(v).kind;
          return k == VertexKind::kLeaf || k == VertexKind::kSpine || k == VertexKind::kCore;
        };
        if (is_switch(t.link(l).from_vertex) && is_switch(t.link(l).to_vertex)) on[l] += flow.bytes;
      }
    }
    Load load;
    for (const auto& [l, bytes] : on) {
      load.total += bytes;
      load.most = std::max(load.most, bytes);
    }
    load.links = on.size();
    return load;
  };
  std::vector<Load> loads;
  for (int qps : {1, 4}) {
    Topology t = Topology::build(cluster(qps));
    CollectiveModel m(t, default_nccl_tuning());
    ASSERT_EQ(m.estimate(CollectiveOp::kAllGather, ring, kGiB).algorithm, CollectiveAlgorithm::kRing);
    loads.push_back(switch_load(t, m.flows(CollectiveOp::kAllGather, ring, kGiB)));
    expect_flows_match(t, m, CollectiveOp::kAllGather, ring, kGiB);
  }
  ASSERT_GT(loads[0].total, 0.0);
  EXPECT_NEAR(loads[1].total / loads[0].total, 1.0, 1e-9);
  EXPECT_GT(loads[1].links, loads[0].links);
  EXPECT_LE(loads[1].most, loads[0].most * (1.0 + 1e-9));
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
  expect_flows_match(h, mh, CollectiveOp::kAllGather, first_gpus(8), kGiB, CollectiveAlgorithm::kNvls);
  expect_flows_match(h, mh, CollectiveOp::kAllReduce, first_gpus(8), kGiB, CollectiveAlgorithm::kRing);

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
