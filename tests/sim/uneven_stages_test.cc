// Uneven pipeline stages in the simulator (plan/pipeline_split.h): the slowest
// stage sets the pipeline's pace, the others wait in their bubble, and both
// fidelities build the same step. Llama 3 8B, pp 2, dp 4 on one DGX H100, with
// full recompute and the distributed optimizer.
#include <gtest/gtest.h>

#include "costmodel/profile.h"
#include "plan/plan_spec.h"
#include "sim/simulate.h"
#include "topologies/cluster_spec.h"

namespace strata::sim {
namespace {

struct OneNode {
  ModelSpec model = load_model_spec("llama3-8b");
  ClusterSpec cluster = load_cluster_spec("dgx-h100-1node");
  Profile profile = load_profile(cluster.profile);
  // first: layers of the first stage (0: the even 16 / 16).
  PlanSpec plan(int first) const {
    PlanSpec p;
    p.pp = 2;
    p.micro_batch_size = 1;
    p.global_batch_size = 32;
    p.zero_stage = 1;
    p.recompute = Recompute::kFull;
    p.flash_attention = true;
    p.first_stage_layers = first;
    resolve_and_check_plan(p, model, {cluster.num_gpus(), cluster.gpus_per_node, false}, "plan.json");
    return p;
  }
  SimulationResult run(int first, Fidelity fidelity = Fidelity::kFolded) const {
    SimulationOptions o;
    o.fidelity = fidelity;
    return Simulator(cluster, profile).run(model, plan(first), o);
  }
};

TEST(UnevenStages, TheSlowestStageSetsThePace) {
  const OneNode s;
  const StepMetrics even = s.run(0).metrics;
  // 14 / 18: the last stage has 4 more layers and the logits; the first waits.
  const StepMetrics heavy_last = s.run(14).metrics;
  EXPECT_GT(heavy_last.step_time_s, 1.05 * even.step_time_s);
  ASSERT_EQ(heavy_last.bubble_ratio_per_stage.size(), 2u);
  EXPECT_GT(heavy_last.bubble_ratio_per_stage[0], 2.0 * heavy_last.bubble_ratio_per_stage[1]);
  // 17 / 15: the last stage's 128K-vocabulary logits and loss (2·s·h·V FLOPs per
  // sequence forward, about 2.4 layers of Llama 3 8B) make one layer fewer
  // there the balanced split: faster than the even one, bubbles closer.
  const StepMetrics balanced = s.run(17).metrics;
  EXPECT_LT(balanced.step_time_s, even.step_time_s);
  const auto spread = [](const StepMetrics& m) {
    return std::abs(m.bubble_ratio_per_stage[0] - m.bubble_ratio_per_stage[1]);
  };
  EXPECT_LT(spread(balanced), spread(even));
}

TEST(UnevenStages, FullAndFoldedFidelityAgree) {
  const OneNode s;
  for (int first : {14, 17}) {
    const double full = s.run(first, Fidelity::kFull).metrics.step_time_s;
    const double folded = s.run(first, Fidelity::kFolded).metrics.step_time_s;
    EXPECT_NEAR(folded, full, 0.01 * full) << "first stage " << first;
  }
}

}  // namespace
}  // namespace strata::sim
