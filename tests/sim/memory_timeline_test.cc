// Memory over the step (sim/memory_timeline.h) against the memory model: each
// rank's curve peaks at its stage's total exactly when the simulated schedule
// holds as many chunk-micro-batches as the memory model's in-flight formula
// (Megatron-LM's warm-up count plus one) says — two independent counts of the
// same thing, the schedule walked by the engine and the closed form.
#include <gtest/gtest.h>

#include <algorithm>

#include "fake_costs.h"
#include "plan/memory_model.h"
#include "sim/engine/engine.h"
#include "sim/memory_timeline.h"
#include "sim/workload/workload.h"
#include "test_models.h"

namespace strata::sim {
namespace {

using testing::FreeComm;
using testing::GemmCountCosts;
using strata::testing::pipeline_plan;

struct Case {
  Schedule schedule;
  int pp, vpp, m;
};

void PrintTo(const Case& c, std::ostream* os) { *os << to_string(c.schedule) << " pp" << c.pp << " vpp" << c.vpp << " m" << c.m; }

class MemoryTimeline : public ::testing::TestWithParam<Case> {};

TEST_P(MemoryTimeline, PeaksAtTheMemoryModelsTotal) {
  const Case c = GetParam();
  ModelSpec m = strata::testing::small_gpt(c.pp * c.vpp * 2);
  const PlanSpec p = pipeline_plan(c.pp, c.vpp, c.m, c.schedule);
  GemmCountCosts costs(1000, m.vocab_size);
  FreeComm comm;
  Workload w = build_workload(m, p, costs, comm, Fidelity::kFull);
  RunResult run = run_task_graph(w.graph, nullptr);
  const DeviceMemory device{80e9, 1e9, 0.1};
  const MemoryReport report = memory_report(m, p, device);
  const auto timeline = memory_timeline(w, run, report, m, p, device);
  ASSERT_EQ(timeline.size(), static_cast<std::size_t>(c.pp));
  for (int r = 0; r < c.pp; ++r) {
    const RankMemory& rm = timeline[r];
    const StageMemory& st = report.stages[w.stage[r]];
    // The engine's schedule holds what the formula counts.
    EXPECT_EQ(rm.peak_in_flight, static_cast<int>(std::lround(rm.model_in_flight))) << "stage " << w.stage[r];
    double peak = 0;
    for (const MemoryPoint& pt : rm.points) peak = std::max(peak, pt.bytes);
    EXPECT_NEAR(peak, st.total_bytes, 1e-6 * st.total_bytes) << "stage " << w.stage[r];
    // It ends with no activations held (the model's total without them), its low.
    const double empty = st.total_bytes - st.activations_bytes * (1.0 + device.allocator_fragmentation);
    double low = peak;
    for (const MemoryPoint& pt : rm.points) low = std::min(low, pt.bytes);
    EXPECT_NEAR(rm.points.back().bytes, empty, 1e-6 * empty);
    EXPECT_NEAR(low, empty, 1e-6 * empty);
    EXPECT_EQ(rm.points.front().t_ns, 0);
    for (std::size_t i = 1; i < rm.points.size(); ++i) EXPECT_GT(rm.points[i].t_ns, rm.points[i - 1].t_ns);
  }
}

// Zero-bubble schedules hold a micro-batch's W inputs from its B to its W: the
// model walks the rank's program for the peak (zero_bubble_held), the engine runs
// it; both give the same peak, but on the last stage, whose output layer's W
// inputs the curve does not follow (it stays below the model by them).
TEST(MemoryTimelineZeroBubble, PeaksAtTheMemoryModelsTotal) {
  for (Schedule s : {Schedule::kZbH1, Schedule::kZbH2}) {
    ModelSpec m = strata::testing::small_gpt(8);
    m.untie_embeddings_and_output_weights = true;
    PlanSpec p = pipeline_plan(4, 1, 8, s);
    p.flash_attention = true;
    GemmCountCosts costs(1000, m.vocab_size);
    FreeComm comm;
    Workload w = build_workload(m, p, costs, comm, Fidelity::kFull);
    RunResult run = run_task_graph(w.graph, nullptr);
    const DeviceMemory device{80e9, 1e9, 0.1};
    const MemoryReport report = memory_report(m, p, device);
    const auto timeline = memory_timeline(w, run, report, m, p, device);
    for (int r = 0; r < p.pp; ++r) {
      SCOPED_TRACE(std::string(to_string(s)) + " stage " + std::to_string(r));
      const StageMemory& st = report.stages[w.stage[r]];
      double peak = 0;
      for (const MemoryPoint& pt : timeline[r].points) peak = std::max(peak, pt.bytes);
      EXPECT_EQ(timeline[r].peak_in_flight, static_cast<int>(std::lround(timeline[r].model_in_flight)));
      if (w.stage[r] < p.pp - 1) {
        EXPECT_NEAR(peak, st.total_bytes, 1e-9 * st.total_bytes);
      } else {
        EXPECT_LT(peak, st.total_bytes);
        EXPECT_GT(peak, st.total_bytes - st.weight_grad_bytes * (1.0 + device.allocator_fragmentation));
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Schedules, MemoryTimeline,
                         ::testing::Values(Case{Schedule::kOneFOneB, 4, 1, 8}, Case{Schedule::kOneFOneB, 4, 1, 2},
                                           Case{Schedule::kGpipe, 2, 1, 4}, Case{Schedule::kInterleaved, 4, 2, 8},
                                           Case{Schedule::kInterleaved, 2, 3, 4}));

}  // namespace
}  // namespace strata::sim
