// The exposed lane's intervals (sim/metrics.h, compute_stream_waits): against a
// hand-drawn pipeline timeline, and, on plans with communication, against the
// step metrics they must add up to.
#include <gtest/gtest.h>

#include <map>

#include "fake_costs.h"
#include "sim/engine/engine.h"
#include "sim/metrics.h"
#include "sim/workload/workload.h"
#include "test_models.h"

namespace strata::sim {
namespace {

using testing::AlphaBetaComm;
using testing::FreeComm;
using testing::GemmCountCosts;
using strata::testing::pipeline_plan;

struct Gap {
  TimeNs start, end;
  Category why;
  bool operator==(const Gap&) const = default;
};

void PrintTo(const Gap& g, std::ostream* os) {
  *os << "[" << g.start << ", " << g.end << ") " << trace::to_string(g.why);
}

std::vector<Gap> gaps(const std::vector<ComputeWait>& waits) {
  std::vector<Gap> out;
  for (const ComputeWait& w : waits) out.push_back({w.start_ns, w.end_ns, w.why});
  return out;
}

// 2 stages, 4 micro-batches, 1F1B, u = one forward (engine_test.cc draws it):
//   stage 0: F0 [0,1] F1 [1,2] B0 [4,6] F2 [6,7] B1 [7,9] F3 [9,10] B2 [10,12] B3 [13,15]
//   stage 1: F0 [1,2] B0 [2,4] F1 [4,5] B1 [5,7] F2 [7,8] B2 [8,10] F3 [10,11] B3 [11,13]
// With free transfers every idle moment is bubble: stage 0 waits [2,4] for B0
// and [12,13] for B3; stage 1 waits [0,1] for F0 and [13,15] for the flush.
TEST(ComputeStreamWaits, OneFOneBGapsAreTheHandDrawnBubbles) {
  const TimeNs u = 6 * 1000;
  ModelSpec m = strata::testing::small_gpt(2);
  GemmCountCosts costs(1000, m.vocab_size);
  FreeComm comm;
  Workload w = build_workload(m, pipeline_plan(2, 1, 4, Schedule::kOneFOneB), costs, comm, Fidelity::kFull);
  RunResult run = run_task_graph(w.graph, nullptr);
  const auto waits = compute_stream_waits(w, run);
  ASSERT_EQ(waits.size(), 2u);
  EXPECT_EQ(gaps(waits[0]), (std::vector<Gap>{{2 * u, 4 * u, Category::kBubble}, {12 * u, 13 * u, Category::kBubble}}));
  EXPECT_EQ(gaps(waits[1]), (std::vector<Gap>{{0, u, Category::kBubble}, {13 * u, 15 * u, Category::kBubble}}));
  for (const auto& rank : waits) {
    for (const ComputeWait& wait : rank) EXPECT_EQ(wait.blocker, -1);
  }
}

// Per rank, the waits of each kind sum to what step_metrics reports, they never
// overlap each other, and none overlaps the rank's compute.
void expect_waits_add_up(const Workload& w, const RunResult& run) {
  const StepMetrics metrics = step_metrics(w, run);
  const auto waits = compute_stream_waits(w, run);
  ASSERT_EQ(waits.size(), metrics.ranks.size());
  for (std::size_t r = 0; r < waits.size(); ++r) {
    std::map<Category, TimeNs> sum;
    TimeNs last_end = 0;
    for (const ComputeWait& wait : waits[r]) {
      EXPECT_LT(wait.start_ns, wait.end_ns);
      EXPECT_GE(wait.start_ns, last_end) << "rank " << r << ": waits overlap";
      last_end = wait.end_ns;
      sum[wait.why] += wait.end_ns - wait.start_ns;
      if (wait.why == Category::kBubble) {
        EXPECT_EQ(wait.blocker, -1);
      } else if (wait.why != Category::kWait) {  // (the step's tail waits for no one task)
        EXPECT_GE(wait.blocker, 0);
      }
    }
    const RankMetrics& rm = metrics.ranks[r];
    EXPECT_NEAR(ns_to_seconds(sum[Category::kBubble]), rm.bubble_s, 1e-12) << "rank " << r;
    EXPECT_NEAR(ns_to_seconds(sum[Category::kHost]), rm.host_s, 1e-12) << "rank " << r;
    EXPECT_NEAR(ns_to_seconds(sum[Category::kWait]), rm.peer_wait_s, 1e-12) << "rank " << r;
    const std::pair<CommKind, Category> kinds[] = {
        {CommKind::kTp, Category::kTp},     {CommKind::kPp, Category::kPp}, {CommKind::kDp, Category::kDp},
        {CommKind::kZero, Category::kZero}, {CommKind::kCp, Category::kCp}, {CommKind::kEp, Category::kEp},
        {CommKind::kOffload, Category::kCopy}};
    for (const auto& [kind, category] : kinds) {
      EXPECT_NEAR(ns_to_seconds(sum[category]), rm.exposed_s[static_cast<int>(kind)], 1e-12)
          << "rank " << r << " " << to_string(kind);
    }
    // Compute, its waits and its folded collectives fill the step window.
    if (!w.ranks_start_next_step_alone) {
      EXPECT_NEAR(rm.compute_s + rm.bubble_s + rm.host_s + rm.peer_wait_s +
                      [&] {
                        double s = 0;
                        for (double e : rm.exposed_s) s += e;
                        return s;
                      }(),
                  metrics.step_time_s, 1e-9)
          << "rank " << r;
    }
  }
}

// Tensor, pipeline and data parallelism with costed transfers, at both
// fidelities: the folded blocks' collectives are exposed tp, the tail's gradient
// reduction exposed dp, and stage-to-stage transfers exposed pp.
TEST(ComputeStreamWaits, AddUpToTheStepMetrics) {
  ModelSpec m = strata::testing::small_gpt(8);
  PlanSpec p = pipeline_plan(4, 2, 8, Schedule::kInterleaved);
  p.tp = 2;
  p.dp = 2;
  p.global_batch_size = 16;
  p.zero_stage = 1;
  GemmCountCosts costs(10000, m.vocab_size / 2);
  AlphaBetaComm comm(2000, 5e9);
  for (Fidelity f : {Fidelity::kFull, Fidelity::kFolded}) {
    SCOPED_TRACE(f == Fidelity::kFull ? "full" : "folded");
    Workload w = build_workload(m, p, costs, comm, f);
    RunResult run = run_task_graph(w.graph, nullptr);
    expect_waits_add_up(w, run);
    const StepMetrics metrics = step_metrics(w, run);
    // The plan exposes each kind somewhere (else the sums above prove little).
    EXPECT_GT(metrics.exposed_s[static_cast<int>(CommKind::kTp)], 0.0);
    EXPECT_GT(metrics.exposed_s[static_cast<int>(CommKind::kPp)], 0.0);
    EXPECT_GT(metrics.exposed_s[static_cast<int>(CommKind::kDp)], 0.0);
    EXPECT_GT(metrics.bubble_ratio, 0.0);
  }
}

// ZeRO-3's gathers and reduce-scatters, overlapped or not.
TEST(ComputeStreamWaits, AddUpUnderZero3) {
  ModelSpec m = strata::testing::small_gpt(4);
  PlanSpec p = pipeline_plan(1, 1, 4, Schedule::kOneFOneB);
  p.dp = 4;
  p.global_batch_size = 16;
  p.zero_stage = 3;
  GemmCountCosts costs(20000, m.vocab_size);
  AlphaBetaComm comm(3000, 2e9);
  Workload w = build_workload(m, p, costs, comm, Fidelity::kFull);
  RunResult run = run_task_graph(w.graph, nullptr);
  expect_waits_add_up(w, run);
  EXPECT_GT(step_metrics(w, run).exposed_s[static_cast<int>(CommKind::kZero)], 0.0);
}

// Two data-parallel replicas without a pipeline, one 25% slower: the fast one
// waits for its peer at the gradient reduction before the optimizer step. That is
// waiting for a slower peer, not a pipeline bubble (a plan with pp 1 has none),
// and it is the slow one's extra compute time exactly (free communication).
// (Tensor-parallel peers compute in lockstep: one task for the group, see
// SlowRank.TensorParallelGroupWaitsForItsSlowestMember.)
TEST(ComputeStreamWaits, WaitingForASlowerPeerIsNotBubble) {
  ModelSpec m = strata::testing::small_gpt(2);
  PlanSpec p = pipeline_plan(1, 1, 4, Schedule::kOneFOneB);
  p.dp = 2;
  GemmCountCosts costs(1000, m.vocab_size);
  FreeComm comm;
  Workload w = build_workload(m, p, costs, comm, Fidelity::kFull);
  w.graph.scale_compute(stream_index(StreamKind::kCompute), {1.0, 1.25});
  RunResult run = run_task_graph(w.graph, nullptr);
  expect_waits_add_up(w, run);
  const StepMetrics metrics = step_metrics(w, run);
  EXPECT_EQ(metrics.bubble_ratio, 0.0);
  const RankMetrics& fast = metrics.ranks[0];
  const RankMetrics& slow = metrics.ranks[1];
  EXPECT_NEAR(fast.peer_wait_s, slow.compute_s - fast.compute_s, 1e-9);
  EXPECT_GT(fast.peer_wait_s, 0.0);
  EXPECT_EQ(slow.peer_wait_s, 0.0);
  const auto waits = compute_stream_waits(w, run);
  int peer_waits = 0;
  for (const ComputeWait& wait : waits[0]) {
    if (wait.why != Category::kWait || wait.blocker < 0) continue;
    ++peer_waits;
    EXPECT_TRUE(w.graph.runs_on(wait.blocker, 1));  // the slow replica's compute
  }
  EXPECT_GT(peer_waits, 0);
}

}  // namespace
}  // namespace strata::sim
