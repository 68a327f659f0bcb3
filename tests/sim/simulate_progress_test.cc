// What a simulation reports while it runs (SimulationOptions::progress): the
// building, then the engine's share by tasks finished with its event count, then
// the results; never going back; and a progress function that asks to stop stops it.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "costmodel/profile.h"
#include "plan/plan_spec.h"
#include "sim/engine/engine.h"
#include "sim/simulate.h"
#include "topologies/cluster_spec.h"

namespace strata::sim {
namespace {

struct Report {
  std::int64_t done;
  std::string what;
};

// Llama 3 8B, tp 2 pp 2 dp 2 on one DGX H100, 512 micro-batches at full fidelity:
// several hundred thousand events, so the engine reports several times.
SimulationResult run(const ProgressFn& progress) {
  const ModelSpec model = load_model_spec("llama3-8b");
  const ClusterSpec cluster = load_cluster_spec("dgx-h100-1node");
  const Profile profile = load_profile(cluster.profile);
  PlanSpec p;
  p.tp = 2;
  p.pp = 2;
  p.micro_batch_size = 1;
  p.global_batch_size = 1024;
  p.zero_stage = 1;
  p.flash_attention = true;
  resolve_and_check_plan(p, model, {cluster.num_gpus(), cluster.gpus_per_node, false}, "plan.json");
  SimulationOptions o;
  o.fidelity = Fidelity::kFull;
  o.keep_timeline = false;
  o.progress = progress;
  return Simulator(cluster, profile).run(model, p, o);
}

TEST(SimulateProgress, BuildingThenEventsThenResults) {
  std::vector<Report> reports;
  const SimulationResult r = run([&](std::int64_t done, std::int64_t total, std::string_view what) {
    EXPECT_EQ(total, kSimulationWork);
    reports.push_back({done, std::string(what)});
    return true;
  });
  ASSERT_GT(r.events, 4 * kEngineProgressEvents);
  ASSERT_GE(reports.size(), 4u + 2u);
  EXPECT_EQ(reports.front().done, 0);
  EXPECT_EQ(reports.front().what, "building the step");
  EXPECT_EQ(reports.back().done, kSimulationWork);
  int engine_reports = 0;
  for (std::size_t i = 1; i < reports.size(); ++i) {
    EXPECT_GE(reports[i].done, reports[i - 1].done) << reports[i].what;
    if (reports[i].what.rfind("running the step: ", 0) == 0 && reports[i].what.find(" M events") != std::string::npos) {
      ++engine_reports;
      EXPECT_GE(reports[i].done, 300);
      EXPECT_LE(reports[i].done, 900);
    }
  }
  // One report per kEngineProgressEvents events handled.
  EXPECT_EQ(engine_reports, r.events / kEngineProgressEvents);
}

TEST(SimulateProgress, StopsWhenAskedDuringTheRun) {
  int engine_reports = 0;
  EXPECT_THROW(run([&](std::int64_t, std::int64_t, std::string_view what) {
                 if (what.rfind("running the step: ", 0) == 0) ++engine_reports;
                 return engine_reports < 2;
               }),
               Cancelled);
  EXPECT_EQ(engine_reports, 2);
}

}  // namespace
}  // namespace strata::sim
