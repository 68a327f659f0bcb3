// A step simulated for its numbers alone (keep_timeline false, as each plan of a
// sweep) keeps only the totals of its collapsed stretches' ops, not the ops
// (WorkloadOptions::detail_ops): its metrics are the traced run's, bit for bit,
// on plans whose blocks hold tensor-parallel collectives, context-parallel ring
// steps (the zb-v plan with its W passes, Llama 3 405B at 128K tokens) and
// expert exchanges (Mixtral).
#include <gtest/gtest.h>

#include "sim/scenario.h"
#include "sim/simulate.h"

namespace strata::sim {
namespace {

Scenario shipped(const std::string& model, const std::string& plan, const std::string& cluster) {
  ScenarioArgs a;
  a.model = model;
  a.plan = plan;
  a.cluster = cluster;
  return load_scenario(a);
}

void expect_same_metrics(const StepMetrics& a, const StepMetrics& b) {
  EXPECT_EQ(a.step_time_s, b.step_time_s);
  EXPECT_EQ(a.bubble_ratio, b.bubble_ratio);
  EXPECT_EQ(a.compute_s, b.compute_s);
  EXPECT_EQ(a.host_s, b.host_s);
  EXPECT_EQ(a.peer_wait_s, b.peer_wait_s);
  for (std::size_t k = 0; k < a.exposed_s.size(); ++k) EXPECT_EQ(a.exposed_s[k], b.exposed_s[k]) << "comm kind " << k;
  ASSERT_EQ(a.ranks.size(), b.ranks.size());
  for (std::size_t r = 0; r < a.ranks.size(); ++r) {
    EXPECT_EQ(a.ranks[r].compute_s, b.ranks[r].compute_s) << "rank " << r;
    for (std::size_t k = 0; k < a.ranks[r].exposed_s.size(); ++k) {
      EXPECT_EQ(a.ranks[r].exposed_s[k], b.ranks[r].exposed_s[k]) << "rank " << r << ", comm kind " << k;
    }
  }
}

TEST(MetricsWithoutTimeline, FoldedStepKeepsTheTotalsItsMetricsRead) {
  struct Case {
    Scenario s;
    // Kinds of collective in the collapsed blocks whose time the step exposes (the
    // zb-v plan hides its ring steps).
    std::vector<CommKind> exposed;
  };
  const std::vector<Case> cases = {
      {shipped("llama3-70b", "llama3-70b-64-zbv", "dgx-h100-8node"), {CommKind::kTp}},
      {shipped("mixtral-8x7b", "mixtral-8x7b-64", "dgx-h100-8node"), {CommKind::kEp}},
      {shipped("gpt3-175b", "gpt3-175b-1024", "dgx-a100-128node"), {CommKind::kTp}},
      {shipped("llama3-405b", "llama3-405b-16384-128k", "meta-h100-2048node"), {CommKind::kTp, CommKind::kCp}}};
  for (const Case& c : cases) {
    SCOPED_TRACE(c.s.model.name);
    SimulationOptions traced;
    traced.fidelity = Fidelity::kFolded;
    SimulationOptions numbers = traced;
    numbers.keep_timeline = false;
    const Simulator simulator(c.s.cluster, c.s.profile);
    const SimulationResult with = simulator.run(c.s.model, c.s.plan, traced);
    const SimulationResult without = simulator.run(c.s.model, c.s.plan, numbers);
    expect_same_metrics(with.metrics, without.metrics);
    for (CommKind k : c.exposed) EXPECT_GT(without.metrics.exposed_s[static_cast<int>(k)], 0.0) << to_string(k);
    // The traced run keeps the stretches' ops.
    std::size_t ops = 0;
    for (TaskId t : with.workload.stream(0, StreamKind::kCompute)) {
      const std::int32_t detail = with.workload.notes.info(t).detail;
      if (detail >= 0) ops += with.workload.notes.detail(detail).size();
    }
    EXPECT_GT(ops, 100u);
  }
}

}  // namespace
}  // namespace strata::sim
