#include "plan/pipeline_schedule.h"

#include <gtest/gtest.h>

#include <set>

namespace strata {
namespace {

std::string program_string(Schedule s, int pp, int vpp, int m, int rank) {
  std::string out;
  for (const PipelineOp& op : pipeline_program(s, pp, vpp, m, rank)) {
    if (!out.empty()) out += ' ';
    out += to_string(op, vpp);
  }
  return out;
}

// Narayanan et al. 2021, figure 4 (top): 4 stages, 8 micro-batches; stage 0 warms up
// with 3 forwards, then alternates.
TEST(PipelineSchedule, OneFOneBMatchesTheFigure) {
  EXPECT_EQ(program_string(Schedule::kOneFOneB, 4, 1, 8, 0),
            "F0 F1 F2 F3 B0 F4 B1 F5 B2 F6 B3 F7 B4 B5 B6 B7");
  EXPECT_EQ(program_string(Schedule::kOneFOneB, 4, 1, 8, 3),
            "F0 B0 F1 B1 F2 B2 F3 B3 F4 B4 F5 B5 F6 B6 F7 B7");
  EXPECT_EQ(program_string(Schedule::kOneFOneB, 2, 1, 4, 0), "F0 F1 B0 F2 B1 F3 B2 B3");
}

TEST(PipelineSchedule, GpipeRunsAllForwardsFirst) {
  EXPECT_EQ(program_string(Schedule::kGpipe, 4, 1, 3, 2), "F0 F1 F2 B2 B1 B0");
}

// Megatron-LM's interleaved schedule, 2 stages x 2 chunks, 4 micro-batches: stage 0
// warms up with (2-0-1)*2 + (2-1)*2 = 4 forwards walking micro-batches 0,1 of chunk 0,
// then of chunk 1.
TEST(PipelineSchedule, InterleavedWalksChunksInGroupsOfPp) {
  EXPECT_EQ(program_string(Schedule::kInterleaved, 2, 2, 4, 0),
            "F0.0 F1.0 F0.1 F1.1 F2.0 B0.1 F3.0 B1.1 F2.1 B0.0 F3.1 B1.0 B2.1 B3.1 B2.0 B3.0");
}

// Qi et al. 2024, figure 3 (top), as sail-sg's ZeroBubbleH1Pipeline orders it:
// 4 stages, 8 micro-batches; stage i warms up with 3 - i forwards, runs i F B
// pairs, then F B W triples, and leaves i W's for the end.
TEST(PipelineSchedule, ZbH1MatchesTheFigure) {
  EXPECT_EQ(program_string(Schedule::kZbH1, 4, 1, 8, 0),
            "F0 F1 F2 F3 B0 W0 F4 B1 W1 F5 B2 W2 F6 B3 W3 F7 B4 W4 B5 W5 B6 W6 B7 W7");
  EXPECT_EQ(program_string(Schedule::kZbH1, 4, 1, 8, 1),
            "F0 F1 F2 B0 F3 B1 W0 F4 B2 W1 F5 B3 W2 F6 B4 W3 F7 B5 W4 B6 W5 B7 W6 W7");
  EXPECT_EQ(program_string(Schedule::kZbH1, 4, 1, 8, 3),
            "F0 B0 F1 B1 F2 B2 F3 B3 W0 F4 B4 W1 F5 B5 W2 F6 B6 W3 F7 B7 W4 W5 W6 W7");
  // Fewer micro-batches than stages: the warm-up stops at m.
  EXPECT_EQ(program_string(Schedule::kZbH1, 4, 1, 2, 0), "F0 F1 B0 W0 B1 W1");
}

// ZB-H2 (figure 4): the unit-time list schedule drawn by hand for 4 stages and
// 8 micro-batches: stage 0 warms up with 2p - 1 = 7 forwards, and every stage
// then runs without a gap (each ends 3m = 24 units after it starts).
TEST(PipelineSchedule, ZbH2MatchesTheHandDrawnSchedule) {
  EXPECT_EQ(program_string(Schedule::kZbH2, 4, 1, 8, 0),
            "F0 F1 F2 F3 F4 F5 F6 B0 W0 B1 F7 B2 W1 B3 W2 B4 W3 B5 W4 B6 W5 W6 B7 W7");
  EXPECT_EQ(program_string(Schedule::kZbH2, 4, 1, 8, 1),
            "F0 F1 F2 F3 F4 B0 F5 B1 F6 B2 W0 B3 F7 B4 W1 B5 W2 B6 W3 W4 B7 W5 W6 W7");
  EXPECT_EQ(program_string(Schedule::kZbH2, 4, 1, 8, 3),
            "F0 B0 F1 B1 F2 B2 F3 B3 F4 B4 F5 B5 F6 B6 W0 F7 B7 W1 W2 W3 W4 W5 W6 W7");
}

// The paper's section 2.3: ZB-H1 holds at most p micro-batches (forward done,
// W not), as 1F1B's first stage; ZB-H2 2p - 1 on its first stage.
TEST(PipelineSchedule, ZeroBubblePeakInFlight) {
  for (int pp : {2, 4, 8}) {
    for (int rank = 0; rank < pp; ++rank) {
      EXPECT_EQ(peak_in_flight(pipeline_program(Schedule::kZbH1, pp, 1, 4 * pp, rank), Schedule::kZbH1), pp);
      EXPECT_EQ(peak_in_flight(pipeline_program(Schedule::kOneFOneB, pp, 1, 4 * pp, rank), Schedule::kOneFOneB),
                pp - rank);
      EXPECT_LE(peak_in_flight(pipeline_program(Schedule::kZbH2, pp, 1, 4 * pp, rank), Schedule::kZbH2),
                2 * pp - 1);
    }
    EXPECT_EQ(peak_in_flight(pipeline_program(Schedule::kZbH2, pp, 1, 4 * pp, 0), Schedule::kZbH2), 2 * pp - 1);
  }
}

struct ScheduleCase {
  Schedule schedule;
  int pp, vpp, m;
};

class EveryOpOnce : public ::testing::TestWithParam<ScheduleCase> {};

// Each (phase, micro-batch, chunk) runs exactly once per rank, and a micro-batch's
// backward of a chunk comes after its forward.
TEST_P(EveryOpOnce, OnEveryRank) {
  const ScheduleCase c = GetParam();
  for (int rank = 0; rank < c.pp; ++rank) {
    auto ops = pipeline_program(c.schedule, c.pp, c.vpp, c.m, rank);
    const int phases = splits_backward(c.schedule) ? 3 : 2;
    ASSERT_EQ(ops.size(), static_cast<std::size_t>(phases * c.m * c.vpp));
    std::set<std::tuple<int, int, int>> seen;
    for (const PipelineOp& op : ops) {
      EXPECT_TRUE(seen.insert({static_cast<int>(op.phase), op.microbatch, op.chunk}).second);
      if (op.phase == PipelinePhase::kBackward) {
        EXPECT_TRUE(seen.count({static_cast<int>(PipelinePhase::kForward), op.microbatch, op.chunk}));
      }
      if (op.phase == PipelinePhase::kWeightGrad) {
        EXPECT_TRUE(seen.count({static_cast<int>(PipelinePhase::kBackward), op.microbatch, op.chunk}));
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Schedules, EveryOpOnce,
                         ::testing::Values(ScheduleCase{Schedule::kGpipe, 4, 1, 6},
                                           ScheduleCase{Schedule::kOneFOneB, 4, 1, 2},
                                           ScheduleCase{Schedule::kOneFOneB, 8, 1, 16},
                                           ScheduleCase{Schedule::kInterleaved, 4, 2, 8},
                                           ScheduleCase{Schedule::kInterleaved, 4, 3, 4},
                                           ScheduleCase{Schedule::kZbH1, 4, 1, 8},
                                           ScheduleCase{Schedule::kZbH1, 8, 1, 3},
                                           ScheduleCase{Schedule::kZbH2, 4, 1, 8},
                                           ScheduleCase{Schedule::kZbH2, 8, 1, 3},
                                           ScheduleCase{Schedule::kZbH2, 16, 1, 64}));

}  // namespace
}  // namespace strata
