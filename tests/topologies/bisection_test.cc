// The fabric's bisection bandwidth (topologies/report.h): a max flow over the
// fabric's links in whole bytes per second, so exact, against clusters whose
// bisection is known by hand. (In doubles, with an "unlimited" source edge of
// DBL_MAX / 4, Boost's own check that the result conserves flow failed, and a
// build with assertions, the sanitizer suite's, aborted.)
#include <gtest/gtest.h>

#include "test_clusters.h"
#include "topologies/report.h"
#include "topologies/topology.h"

namespace strata::topo {
namespace {

using testing::shipped;

// An HDR InfiniBand NIC: 200 Gb/s = 25 GB/s x 4096/4122, the payload share of a
// 4096-byte packet (topologies/cluster_spec.cc), in whole bytes per second.
constexpr double kHdrNicBytesPerS = 24'842'309'558.0;
// NDR: 400 Gb/s = 50 GB/s x 4096/4122.
constexpr double kNdrNicBytesPerS = 49'684'619'117.0;

TEST(Bisection, TwoDgxA100NodesAreNodeZerosEightNics) {
  EXPECT_EQ(bisection_bandwidth(Topology::build(shipped("dgx-a100-2node"))), 8 * kHdrNicBytesPerS);
}

TEST(Bisection, NonBlockingFatTreeCarriesHalfTheNodesNics) {
  // 8 DGX H100 on a non-blocking two-tier fat-tree: 4 nodes x 8 NDR NICs a side.
  EXPECT_EQ(bisection_bandwidth(Topology::build(shipped("dgx-h100-8node"))), 32 * kNdrNicBytesPerS);
}

TEST(Bisection, SingleNodeHasNone) {
  EXPECT_EQ(bisection_bandwidth(Topology::build(shipped("dgx-h100-1node"))), 0.0);
}

}  // namespace
}  // namespace strata::topo
