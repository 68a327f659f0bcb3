// estimated_tasks bounds the graph build_workload then builds (it sizes the
// graph and decides whether a step may be built at all), and a step over the
// limit is refused before any of it is built.
#include <gtest/gtest.h>

#include "fake_costs.h"
#include "sim/workload/workload.h"
#include "test_models.h"

namespace strata::sim {
namespace {

using testing::FreeComm;
using testing::GemmCountCosts;

PlanSpec plan(int tp, int pp, int dp, int microbatches, Schedule schedule) {
  PlanSpec p;
  p.tp = tp;
  p.pp = pp;
  p.dp = dp;
  p.micro_batch_size = 1;
  p.global_batch_size = microbatches * dp;
  p.schedule = schedule;
  return p;
}

TEST(TaskEstimate, BoundsTheBuiltGraphAtBothFidelities) {
  const ModelSpec m = strata::testing::small_gpt(8);
  const GemmCountCosts costs(1000, m.vocab_size);
  const FreeComm comm;
  for (Schedule s : {Schedule::kOneFOneB, Schedule::kGpipe, Schedule::kZbH1}) {
    for (const PlanSpec& p : {plan(1, 2, 2, 8, s), plan(2, 4, 1, 16, s), plan(2, 2, 2, 32, s)}) {
      for (Fidelity f : {Fidelity::kFull, Fidelity::kFolded}) {
        const Workload w = build_workload(m, p, costs, comm, f);
        const double tasks = w.graph.num_tasks();
        const std::string what = std::string(to_string(s)) + " tp " + std::to_string(p.tp) + " pp " +
                                 std::to_string(p.pp) + " " + to_string(f);
        EXPECT_GE(w.estimated_tasks, tasks) << what;
        // close enough to size the graph and to refuse only what is large
        if (f == Fidelity::kFull) {
          EXPECT_LE(w.estimated_tasks, 3.0 * tasks) << what;
        }
      }
    }
  }
}

TEST(TaskEstimate, GrowsWithMicroBatchesAndRanks) {
  const PlanSpec small = plan(2, 4, 2, 16, Schedule::kOneFOneB);
  PlanSpec more_batches = small;
  more_batches.global_batch_size *= 4;
  PlanSpec more_ranks = small;
  more_ranks.dp *= 4;
  more_ranks.global_batch_size *= 4;  // the same micro-batches per replica
  const double base = estimated_tasks(small, Fidelity::kFull, 4, 20);
  // ops (2 per micro-batch) x groups x (4 layers x 10 + 8), plus (ops + 64) per rank:
  // 32 ops x 8 groups x 48 + 16 ranks x 96
  EXPECT_DOUBLE_EQ(base, 32.0 * 8 * 48 + 16 * 96);
  EXPECT_DOUBLE_EQ(estimated_tasks(more_batches, Fidelity::kFull, 4, 20), 128.0 * 8 * 48 + 16 * (128 + 64));
  EXPECT_DOUBLE_EQ(estimated_tasks(more_ranks, Fidelity::kFull, 4, 20), 4 * base);
  // folded simulates one rank per stage, whatever dp
  EXPECT_DOUBLE_EQ(estimated_tasks(small, Fidelity::kFolded, 4, 20),
                   estimated_tasks(more_ranks, Fidelity::kFolded, 4, 20));
}

TEST(TaskEstimate, AStepOverTheLimitIsRefusedBeforeItIsBuilt) {
  const ModelSpec m = strata::testing::small_gpt(8);
  const GemmCountCosts costs(1000, m.vocab_size);
  const FreeComm comm;
  // ten million micro-batches: about 3e8 tasks, refused in microseconds
  const PlanSpec p = plan(1, 2, 1, 10'000'000, Schedule::kOneFOneB);
  WorkloadOptions o;
  o.max_tasks = 1e6;
  try {
    build_workload(m, p, costs, comm, Fidelity::kFolded, o);
    FAIL() << "not refused";
  } catch (const WorkloadTooLarge& e) {
    EXPECT_EQ(e.microbatches, 10'000'000);
    EXPECT_EQ(e.simulated_ranks, 2);
    EXPECT_GT(e.tasks, 1e8);
    EXPECT_DOUBLE_EQ(e.max_tasks, 1e6);
  }
}

}  // namespace
}  // namespace strata::sim
