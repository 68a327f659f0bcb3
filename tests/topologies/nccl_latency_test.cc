// The latency side of NCCL's model, hand-computed from the tuning tables
// (src/graph/tuning.cc at each version; figures in topologies/nccl_tuning.cc).
#include <gtest/gtest.h>

#include "test_clusters.h"
#include "topologies/collective_model.h"

namespace strata::topo {
namespace {

std::vector<int> first_gpus(int n) {
  std::vector<int> g;
  for (int i = 0; i < n; ++i) g.push_back(i);
  return g;
}

// 8 A100 on NVLink, all-reduce of 8 bytes: the ring with LL wins. Latency = base +
// 2(n-1) steps x the NVLink LL hop: 2.20.3: 6.6 + 14 x 0.6 = 15.0 us (tree LL: 6.8 +
// 2 x 7 x 0.6 = 15.2 us); 2.7.5: 3.6 + 14 x 0.47 = 10.18 us.
TEST(NcclLatency, SingleNodeRingLL) {
  Topology t = Topology::build(testing::shipped("dgx-a100-1node"));
  CollectiveModel now(t, nccl_tuning("2.20.3"));
  CollectiveEstimate e = now.estimate(CollectiveOp::kAllReduce, first_gpus(8), 8);
  EXPECT_EQ(e.algorithm, CollectiveAlgorithm::kRing);
  EXPECT_EQ(e.protocol, Protocol::kLL);
  EXPECT_NEAR(e.latency_s, 15.0e-6, 1e-12);
  CollectiveEstimate tree = now.estimate(CollectiveOp::kAllReduce, first_gpus(8), 8, CollectiveAlgorithm::kTree);
  EXPECT_NEAR(tree.latency_s, 15.2e-6, 1e-12);
  CollectiveModel old(t, nccl_tuning("2.7.5"));
  EXPECT_NEAR(old.estimate(CollectiveOp::kAllReduce, first_gpus(8), 8).latency_s, 10.18e-6, 1e-12);
}

// Two DGX A100 (AMD CPUs), all-reduce of 8 bytes forced to the ring, NCCL 2.20.3:
// 30 steps, 2 x 2 of them on the network. LL's NVLink hop (0.6 us) is raised to the
// AMD network proxy overhead (2 us): 6.6 + 26 x 2.0 + 4 x 2.7 = 69.4 us. The tree: 6.8
// + 2 x (7 x 0.6 + log2(2) x 5.0) = 25.2 us, and NCCL picks it.
TEST(NcclLatency, TwoNodeRingAndTree) {
  Topology t = Topology::build(testing::shipped("dgx-a100-2node"));
  CollectiveModel m(t, nccl_tuning("2.20.3"));
  CollectiveEstimate ring = m.estimate(CollectiveOp::kAllReduce, first_gpus(16), 8, CollectiveAlgorithm::kRing);
  EXPECT_EQ(ring.protocol, Protocol::kLL);
  EXPECT_NEAR(ring.latency_s, 69.4e-6, 1e-12);
  CollectiveEstimate chosen = m.estimate(CollectiveOp::kAllReduce, first_gpus(16), 8);
  EXPECT_EQ(chosen.algorithm, CollectiveAlgorithm::kTree);
  EXPECT_EQ(chosen.protocol, Protocol::kLL);
  EXPECT_NEAR(chosen.latency_s, 25.2e-6, 1e-12);
}

// NVLS on one H100 node: NCCL 2.20.3 charges the NVLink NVLS hop alone, 23 us.
TEST(NcclLatency, NvlsLatency) {
  Topology t = Topology::build(testing::shipped("dgx-h100-1node"));
  CollectiveModel m(t, nccl_tuning("2.20.3"));
  CollectiveEstimate e = m.estimate(CollectiveOp::kAllReduce, first_gpus(8), 8, CollectiveAlgorithm::kNvls);
  EXPECT_NEAR(e.latency_s, 23e-6, 1e-12);
}

}  // namespace
}  // namespace strata::topo
