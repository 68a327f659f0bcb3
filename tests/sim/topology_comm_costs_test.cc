// Collective costs on a real topology: one flow build serves every message size
// that makes the same NCCL choice, and the costs do not depend on which size was
// costed first (a sweep's threads meet sizes in any order).
#include <algorithm>
#include <map>
#include <set>

#include <gtest/gtest.h>

#include "costmodel/cost_model.h"
#include "costmodel/fitting.h"
#include "plan/rank_layout.h"
#include "sim/costs/topology_comm_costs.h"
#include "sim/engine/engine.h"
#include "sim/engine/task_graph.h"
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

// Two DGX A100 nodes (8 HDR NICs each) and a 16-GPU data-parallel group: the
// shape of a 2-node FSDP step, where every collective crosses the network.
Scenario dp16_on_2_dgx_a100(double nic_gbps = 0.0) {
  ScenarioArgs a;
  a.model = "llama3-8b";
  a.plan = "llama3-8b-8";
  a.cluster = "dgx-a100-1node";
  Scenario s = load_scenario(a);
  s.cluster = load_cluster_spec("dgx-a100-2node");
  if (nic_gbps > 0.0) s.cluster.fabric.nic_gbps = nic_gbps;
  s.plan.tp = 1;
  s.plan.dp = 16;
  return s;
}

std::vector<int> first_gpus(int n) {
  std::vector<int> g(static_cast<std::size_t>(n));
  for (int i = 0; i < n; ++i) g[static_cast<std::size_t>(i)] = i;
  return g;
}

// The collective alone in the event engine, its links shared max-min fairly.
double engine_seconds_alone(const topo::Topology& topology, const CommSpec& spec,
                            const std::vector<int>& group) {
  TaskGraph graph(static_cast<int>(group.size()), 1);
  const std::int32_t comm = graph.add_comm(spec);
  std::vector<std::pair<int, int>> slots;
  for (std::size_t r = 0; r < group.size(); ++r) slots.emplace_back(static_cast<int>(r), 0);
  graph.add_comm_task(slots, comm);
  graph.finalize();
  TopologyFlowModel network(topology);
  return ns_to_seconds(run_task_graph(graph, &network).makespan_ns);
}

// A link from one of node 0's NICs onto the fabric (its uplink, not its PCIe side).
bool leaves_node0(const topo::Topology& topology, std::int32_t link) {
  const topo::Link& l = topology.link(link);
  const topo::VertexInfo& from = topology.vertex(l.from_vertex);
  return from.kind == topo::VertexKind::kNic && from.node == 0 && l.kind != topo::LinkKind::kPcie;
}

// The bytes the collective puts on node 0's NIC uplinks, summed: what crosses between the nodes.
double bytes_leaving_node0(const topo::Topology& topology, const CommSpec& spec) {
  double total = 0.0;
  for (std::size_t i = 0; i < spec.links.size(); ++i) {
    if (leaves_node0(topology, spec.links[i])) total += spec.bytes * spec.link_weight(i);
  }
  return total;
}

// A ring over 16 GPUs on 2 nodes: alone on the wires, in both fidelities and in the
// engine, it takes NCCL's predicted time, and the network carries what a ring
// moves between two nodes. All-gather of S bytes (the output): each of the C
// channel rings crosses from node 0 to node 1 once carrying (n-1)/n of its S/C, so
// S(n-1)/n leaves node 0. All-reduce: twice that (reduce-scatter, then all-gather).
TEST(TopologyCommCosts, TwoNodeRingCostsWhatNcclsModelAndTheLinksSay) {
  Fixture f(dp16_on_2_dgx_a100());
  const std::vector<int> group = first_gpus(16);
  const double S = 256.0 * 1024 * 1024;
  struct Case {
    CollectiveOp op;
    double crossing;  // bytes leaving node 0
  };
  for (const Case& c : {Case{CollectiveOp::kAllGather, S * 15 / 16}, Case{CollectiveOp::kAllReduce, 2 * S * 15 / 16}}) {
    SCOPED_TRACE(to_string(c.op));
    const topo::CollectiveEstimate nccl = f.collectives.estimate(c.op, group, S);
    ASSERT_EQ(nccl.algorithm, topo::CollectiveAlgorithm::kRing);
    for (Fidelity fidelity : {Fidelity::kFull, Fidelity::kFolded}) {
      CommCostCache cache;
      TopologyCommCosts costs(f.topology, f.collectives, f.cost_model, f.s.plan, fidelity, cache);
      const CommSpec spec = costs.collective(c.op, group, S);
      const double alone = fidelity == Fidelity::kFull ? engine_seconds_alone(f.topology, spec, group)
                                                       : spec.fixed.seconds() + spec.bytes / spec.rate_cap_bytes_per_s;
      EXPECT_NEAR(alone / nccl.time_s, 1.0, 0.01) << (fidelity == Fidelity::kFull ? "full" : "folded");
    }
    CommCostCache cache;
    TopologyCommCosts costs(f.topology, f.collectives, f.cost_model, f.s.plan, Fidelity::kFull, cache);
    EXPECT_NEAR(bytes_leaving_node0(f.topology, costs.collective(c.op, group, S)) / c.crossing, 1.0, 1e-6);
  }
}

// A ring runs one part per rail instance: the parts' shares sum to 1, their loads
// add up to the union's per link, and each part crosses between the nodes on
// its own rail's NICs only.
TEST(TopologyCommCosts, ARingRunsOnePartPerRail) {
  Fixture f(dp16_on_2_dgx_a100());
  const std::vector<int> group = first_gpus(16);
  const double S = 256.0 * 1024 * 1024;
  CommCostCache cache;
  TopologyCommCosts costs(f.topology, f.collectives, f.cost_model, f.s.plan, Fidelity::kFull, cache);
  const CommSpec spec = costs.collective(CollectiveOp::kAllGather, group, S);
  ASSERT_GE(spec.parts.size(), 2u);
  double shares = 0.0;
  std::map<std::int32_t, double> summed;
  for (const CommPart& part : spec.parts) {
    shares += part.share;
    std::set<int> nics;  // node 0's NICs this part leaves through
    for (std::size_t i = 0; i < part.links.size(); ++i) {
      summed[part.links[i]] += part.share * part.link_weights[i];
      if (leaves_node0(f.topology, part.links[i])) nics.insert(f.topology.link(part.links[i]).from_vertex);
    }
    EXPECT_EQ(nics.size(), 1u);
  }
  EXPECT_NEAR(shares, 1.0, 1e-9);
  ASSERT_EQ(summed.size(), spec.links.size());
  for (std::size_t i = 0; i < spec.links.size(); ++i) {
    EXPECT_NEAR(summed[spec.links[i]], spec.link_weights[i], 1e-9 * spec.link_weights[i]);
  }
}

// A pipeline send from node 0 to node 1 crosses one rail. NCCL's channels progress
// on their own, so it slows the all-gather's part on that rail and the others end
// on time: the all-gather, which ends with that part, is slower than alone but
// faster than as one flow over the union of its links, which the send would slow
// everywhere at once.
TEST(TopologyCommCosts, ASendOnOneRailSlowsOnlyThatRailsPart) {
  Fixture f(dp16_on_2_dgx_a100());
  const std::vector<int> group = first_gpus(16);
  const double S = 256.0 * 1024 * 1024;
  CommCostCache cache;
  TopologyCommCosts costs(f.topology, f.collectives, f.cost_model, f.s.plan, Fidelity::kFull, cache);
  const CommSpec parted = costs.collective(CollectiveOp::kAllGather, group, S);
  CommSpec whole = parted;
  whole.parts.clear();
  const CommSpec send = costs.p2p(0, 8, 4 * S);  // outlasts the all-gather
  auto with_send = [&](const CommSpec& collective) {
    TaskGraph graph(static_cast<int>(group.size()), 2);
    std::vector<std::pair<int, int>> slots;
    for (std::size_t r = 0; r < group.size(); ++r) slots.emplace_back(static_cast<int>(r), 0);
    const TaskId t = graph.add_comm_task(slots, graph.add_comm(collective));
    graph.add_comm_task({{0, 1}, {8, 1}}, graph.add_comm(send));
    graph.finalize();
    TopologyFlowModel network(f.topology);
    return ns_to_seconds(run_task_graph(graph, &network).end_ns[t]);
  };
  const double alone = engine_seconds_alone(f.topology, parted, group);
  const double parts = with_send(parted);
  const double one_flow = with_send(whole);
  EXPECT_GT(parts, 1.05 * alone);
  EXPECT_LT(parts, 0.95 * one_flow);
}

// The network, not NVLink, bounds a 2-node all-gather: twice the NIC rate makes it
// faster, by as much as NCCL's model says, in the engine as alone. HDR100 against
// HDR: a DGX A100's NICs sit on PCIe Gen4 x16 switches (~25 GB/s), so a 400 Gb/s
// NIC would be PCIe-bound and no faster than HDR; 100 Gb/s is the NIC's own limit.
TEST(TopologyCommCosts, DoublingNicBandwidthShortensAnInterNodeBoundCollective) {
  const std::vector<int> group = first_gpus(16);
  const double S = 256.0 * 1024 * 1024;
  std::vector<double> engine, nccl;
  for (double gbps : {100.0, 200.0}) {
    Fixture f(dp16_on_2_dgx_a100(gbps));
    CommCostCache cache;
    TopologyCommCosts costs(f.topology, f.collectives, f.cost_model, f.s.plan, Fidelity::kFull, cache);
    engine.push_back(engine_seconds_alone(f.topology, costs.collective(CollectiveOp::kAllGather, group, S), group));
    nccl.push_back(f.collectives.estimate(CollectiveOp::kAllGather, group, S).time_s);
  }
  EXPECT_LT(nccl[1], 0.75 * nccl[0]);  // the model's own premise: inter-node bound
  EXPECT_LT(engine[1], 0.75 * engine[0]);
  EXPECT_NEAR(engine[1] / nccl[1], 1.0, 0.01);
}

// ZeRO-3's reduce-scatter and the next gather, on their own streams, run at the
// same time: the full engine shares their links as they run; the folded fidelity,
// which costs each statically, solves the same sharing up front
// (collective_beside). Both of S bytes over the same 16 GPUs start together and,
// being symmetric, end together: the engine's time is the folded cost of either.
TEST(TopologyCommCosts, FoldedCollectivesBesideEachOtherCostWhatTheEngineGivesThemTogether) {
  const std::vector<int> group = first_gpus(16);
  const double S = 256.0 * 1024 * 1024;
  Fixture f(dp16_on_2_dgx_a100());
  CommCostCache cache;
  const TopologyCommCosts full(f.topology, f.collectives, f.cost_model, f.s.plan, Fidelity::kFull, cache);
  const TopologyCommCosts folded(f.topology, f.collectives, f.cost_model, f.s.plan, Fidelity::kFolded, cache);
  // Full fidelity: the engine shares the links, so the spec is the collective's own.
  const CommSpec ag = full.collective(CollectiveOp::kAllGather, group, S);
  const CommSpec beside = full.collective_beside(CollectiveOp::kAllGather, group, S, CollectiveOp::kReduceScatter, S);
  EXPECT_EQ(beside.links, ag.links);
  EXPECT_EQ(beside.rate_cap_bytes_per_s, ag.rate_cap_bytes_per_s);
  // Both in the engine at once, on two streams.
  TaskGraph graph(static_cast<int>(group.size()), 2);
  std::vector<std::pair<int, int>> on0, on1;
  for (std::size_t r = 0; r < group.size(); ++r) {
    on0.emplace_back(static_cast<int>(r), 0);
    on1.emplace_back(static_cast<int>(r), 1);
  }
  graph.add_comm_task(on0, graph.add_comm(ag));
  graph.add_comm_task(on1, graph.add_comm(full.collective(CollectiveOp::kReduceScatter, group, S)));
  graph.finalize();
  TopologyFlowModel network(f.topology);
  const double together = ns_to_seconds(run_task_graph(graph, &network).makespan_ns);
  const double alone = engine_seconds_alone(f.topology, ag, group);
  EXPECT_GT(together, 1.5 * alone);  // they share the NICs: inter-node bound
  const auto seconds = [](const CommSpec& c) { return c.fixed.seconds() + c.bytes / c.rate_cap_bytes_per_s; };
  const CommSpec folded_ag =
      folded.collective_beside(CollectiveOp::kAllGather, group, S, CollectiveOp::kReduceScatter, S);
  const CommSpec folded_rs =
      folded.collective_beside(CollectiveOp::kReduceScatter, group, S, CollectiveOp::kAllGather, S);
  EXPECT_NEAR(seconds(folded_ag) / together, 1.0, 0.01);
  EXPECT_NEAR(seconds(folded_rs) / together, 1.0, 0.01);
  // Alone, folded costs what the engine gives the collective alone.
  EXPECT_NEAR(seconds(folded.collective(CollectiveOp::kAllGather, group, S)) / alone, 1.0, 0.01);
}

// A folded collective's contended rate is solved once per set of NCCL choices
// and reused for every size that makes them (CommCostCache's rates): each size
// costed after the others in one cache gets, to the bit, what it gets costed
// alone in a fresh one, whichever order the sizes come in, though the sizes make
// different choices (LL at 64 KB, Simple at 256 MB) and the copies' sharing binds
// (the all-gather beside the reduce-scatter on the same NICs).
TEST(TopologyCommCosts, FoldedContendedRateIsTheFreshSolvesAtEverySize) {
  Fixture f(dp16_on_2_dgx_a100());
  const std::vector<int> group = first_gpus(16);
  const std::vector<double> sizes = {64e3, 256.0 * 1024 * 1024, 1e6, 100e6, 512.0 * 1024 * 1024};
  // The i-th of four costings of a size.
  constexpr std::size_t kCostings = 4;
  auto cost_one = [&](const TopologyCommCosts& c, double bytes, std::size_t i) {
    switch (i) {
      case 0: return c.collective_beside(CollectiveOp::kAllGather, group, bytes, CollectiveOp::kReduceScatter, bytes);
      case 1:
        return c.collective_beside(CollectiveOp::kReduceScatter, group, bytes, CollectiveOp::kAllGather, 2 * bytes);
      case 2: return c.collective(CollectiveOp::kAllGather, group, bytes);
      // The same collective beside a partner that makes another choice.
      default: return c.collective_beside(CollectiveOp::kAllGather, group, bytes, CollectiveOp::kReduceScatter, 64e3);
    }
  };
  auto cost = [&](const TopologyCommCosts& c, double bytes) {
    std::vector<CommSpec> out;
    for (std::size_t i = 0; i < kCostings; ++i) out.push_back(cost_one(c, bytes, i));
    return out;
  };
  for (const bool reversed : {false, true}) {
    std::vector<double> order = sizes;
    if (reversed) std::reverse(order.begin(), order.end());
    CommCostCache shared;
    const TopologyCommCosts one(f.topology, f.collectives, f.cost_model, f.s.plan, Fidelity::kFolded, shared);
    for (double bytes : order) {
      const std::vector<CommSpec> cached = cost(one, bytes);
      for (std::size_t i = 0; i < kCostings; ++i) {
        CommCostCache fresh_cache;  // each costing alone
        const TopologyCommCosts fresh(f.topology, f.collectives, f.cost_model, f.s.plan, Fidelity::kFolded,
                                      fresh_cache);
        expect_same(cached[i], cost_one(fresh, bytes, i));
      }
    }
  }
  // The sharing binds: beside the reduce-scatter the all-gather runs slower than alone.
  CommCostCache cache;
  const TopologyCommCosts folded(f.topology, f.collectives, f.cost_model, f.s.plan, Fidelity::kFolded, cache);
  const std::vector<CommSpec> big = cost(folded, 256.0 * 1024 * 1024);
  EXPECT_LT(big[0].rate_cap_bytes_per_s, 0.8 * big[2].rate_cap_bytes_per_s);
  // A partner of another size takes another share.
  EXPECT_GT(big[3].rate_cap_bytes_per_s, 1.1 * big[0].rate_cap_bytes_per_s);
  // And the choices differ: 64 KB moves at a lower rate than 256 MB alone.
  EXPECT_LT(cost(folded, 64e3)[2].rate_cap_bytes_per_s, 0.5 * big[2].rate_cap_bytes_per_s);
}

}  // namespace
}  // namespace strata::sim
