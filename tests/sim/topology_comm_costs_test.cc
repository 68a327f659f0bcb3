// Collective costs on a real topology: one flow build serves every message size
// that makes the same NCCL choice, and the costs do not depend on which size was
// costed first (a sweep's threads meet sizes in any order).
#include <gtest/gtest.h>

#include "costmodel/cost_model.h"
#include "costmodel/fitting.h"
#include "plan/rank_layout.h"
#include "sim/costs/topology_comm_costs.h"
#include "sim/scenario.h"
#include "topologies/collective_model.h"
#include "topologies/nccl_tuning.h"
#include "topologies/topology.h"

namespace strata::sim {
namespace {

struct Fixture {
  Scenario s;
  topo::Topology topology;
  topo::CollectiveModel collectives;
  CostModel cost_model;
  explicit Fixture(Scenario scenario)
      : s(std::move(scenario)),
        topology(topo::Topology::build(s.cluster)),
        collectives(topology, topo::default_nccl_tuning()),
        cost_model(s.profile) {}
};

Scenario gpt3_on_128_dgx_a100() {
  ScenarioArgs a;
  a.model = "gpt3-175b";
  a.plan = "gpt3-175b-1024";
  a.cluster = "dgx-a100-128node";
  return load_scenario(a);
}

// GPT-3's data-parallel bucket sizes and its tensor-parallel all-reduce: several
// sizes per (group, algorithm, protocol), some with one choice, some with another.
const std::vector<double> kSizes = {1e3, 64e3, 4e6, 160e6, 161e6, 320e6, 100e6};

std::vector<CommSpec> costs_in_order(Fixture& f, Fidelity fidelity, const std::vector<double>& sizes) {
  CommCostCache cache;
  TopologyCommCosts costs(f.topology, f.collectives, f.cost_model, f.s.plan, fidelity, cache);
  const RankLayout layout(f.s.plan);
  const std::vector<int> dp_group = layout.group(GroupKind::kData, 0);
  const std::vector<int> tp_group = layout.group(GroupKind::kTensor, 0);
  std::vector<CommSpec> out;
  for (double bytes : sizes) {
    out.push_back(costs.collective(CollectiveOp::kAllReduce, dp_group, bytes));
    out.push_back(costs.collective(CollectiveOp::kReduceScatter, dp_group, bytes));
    out.push_back(costs.collective(CollectiveOp::kAllReduce, tp_group, bytes));
  }
  return out;
}

void expect_same(const CommSpec& a, const CommSpec& b) {
  EXPECT_EQ(a.fixed, b.fixed) << a.name;
  EXPECT_EQ(a.bytes, b.bytes) << a.name;  // exact: results are byte-identical whatever the order
  EXPECT_EQ(a.rate_cap_bytes_per_s, b.rate_cap_bytes_per_s) << a.name;
  EXPECT_EQ(a.links, b.links) << a.name;
}

TEST(TopologyCommCosts, CostsDoNotDependOnWhichSizeCameFirst) {
  Fixture f(gpt3_on_128_dgx_a100());
  for (Fidelity fidelity : {Fidelity::kFolded, Fidelity::kFull}) {
    const std::vector<CommSpec> forward = costs_in_order(f, fidelity, kSizes);
    std::vector<double> reversed(kSizes.rbegin(), kSizes.rend());
    const std::vector<CommSpec> backward = costs_in_order(f, fidelity, reversed);
    ASSERT_EQ(forward.size(), backward.size());
    const std::size_t per_size = 3;
    for (std::size_t i = 0; i < kSizes.size(); ++i) {
      for (std::size_t k = 0; k < per_size; ++k) {
        expect_same(forward[i * per_size + k], backward[(kSizes.size() - 1 - i) * per_size + k]);
      }
    }
  }
}

// Each cost, alone on the wires, is NCCL's estimate (CollectiveModel's contract)
// whichever size built the cached flows.
TEST(TopologyCommCosts, UncontendedTimeIsTheNcclEstimateAtEverySize) {
  Fixture f(gpt3_on_128_dgx_a100());
  CommCostCache cache;
  TopologyCommCosts costs(f.topology, f.collectives, f.cost_model, f.s.plan, Fidelity::kFull, cache);
  const std::vector<int> dp_group = RankLayout(f.s.plan).group(GroupKind::kData, 0);
  for (double bytes : kSizes) {
    const CommSpec c = costs.collective(CollectiveOp::kAllReduce, dp_group, bytes);
    const double seconds = c.fixed.seconds() + (c.bytes > 0 ? c.bytes / c.rate_cap_bytes_per_s : 0.0);
    const double nccl = f.collectives.estimate(CollectiveOp::kAllReduce, dp_group, bytes).time_s;
    EXPECT_NEAR(seconds / nccl, 1.0, 0.01) << bytes << " B";
  }
}

// The gradient norm's all-reduce over every GPU: NCCL's estimate as a fixed time,
// no links, and within 1% of what the flow-built cost gives uncontended.
TEST(TopologyCommCosts, LatencyBoundCollectiveIsTheNcclEstimateWithoutLinks) {
  Fixture f(gpt3_on_128_dgx_a100());
  CommCostCache cache;
  TopologyCommCosts costs(f.topology, f.collectives, f.cost_model, f.s.plan, Fidelity::kFull, cache);
  std::vector<int> everyone(static_cast<std::size_t>(f.s.plan.tp * f.s.plan.dp * f.s.plan.pp));
  for (std::size_t g = 0; g < everyone.size(); ++g) everyone[g] = static_cast<int>(g);
  const CommSpec norm = costs.latency_bound(CollectiveOp::kAllReduce, everyone, 4.0);
  const double nccl = f.collectives.estimate(CollectiveOp::kAllReduce, everyone, 4.0).time_s;
  EXPECT_EQ(norm.fixed, Duration::from_seconds(nccl));
  EXPECT_GT(nccl, 10e-6);  // latency of a tree over 128 nodes, not free
  EXPECT_EQ(norm.bytes, 0.0);
  EXPECT_TRUE(norm.links.empty());
  const CommSpec flows = costs.collective(CollectiveOp::kAllReduce, everyone, 4.0);
  const double flow_seconds = flows.fixed.seconds() + flows.bytes / flows.rate_cap_bytes_per_s;
  EXPECT_NEAR(norm.fixed.seconds() / flow_seconds, 1.0, 0.01);
  // One rank: nothing to reduce.
  EXPECT_EQ(costs.latency_bound(CollectiveOp::kAllReduce, {5}, 4.0).fixed, Duration());
}

// Where the profile measured the collective (op, group size, placement), its time
// replaces NCCL's estimate, as it does for flow-built costs.
TEST(TopologyCommCosts, LatencyBoundCollectiveTakesTheMeasuredTime) {
  Scenario s = gpt3_on_128_dgx_a100();
  const int world = s.plan.tp * s.plan.dp * s.plan.pp;
  std::vector<CollectiveMeasurement> measured(1);
  measured[0].op = CollectiveOp::kAllReduce;
  measured[0].group_size = world;
  measured[0].inter_node = true;
  for (double b = 1024; b <= 1024 * 1024; b *= 4) measured[0].points.push_back({b, 40e-6 + b / 5e9, 0});
  s.profile.cost_sections["collectives"] =
      nlohmann::json::parse(to_json(measured_collectives_section(
          measured, 0, 25e9, {{"reference_busbw_gbytes_per_s", "synthetic, for this test"}})).dump());
  Fixture f(std::move(s));
  CommCostCache cache;
  TopologyCommCosts costs(f.topology, f.collectives, f.cost_model, f.s.plan, Fidelity::kFolded, cache);
  std::vector<int> everyone(static_cast<std::size_t>(world));
  for (std::size_t g = 0; g < everyone.size(); ++g) everyone[g] = static_cast<int>(g);
  const CommSpec c = costs.latency_bound(CollectiveOp::kAllReduce, everyone, 4096.0);
  EXPECT_EQ(c.fixed, Duration::from_seconds(40e-6 + 4096 / 5e9));
  EXPECT_NE(c.fixed, Duration::from_seconds(f.collectives.estimate(CollectiveOp::kAllReduce, everyone, 4096.0).time_s));
  EXPECT_TRUE(c.links.empty());
}

}  // namespace
}  // namespace strata::sim
