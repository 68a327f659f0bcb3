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
    ASSERT_EQ(ops.size(), static_cast<std::size_t>(2 * c.m * c.vpp));
    std::set<std::tuple<int, int, int>> seen;
    for (const PipelineOp& op : ops) {
      EXPECT_TRUE(seen.insert({static_cast<int>(op.phase), op.microbatch, op.chunk}).second);
      if (op.phase == PipelinePhase::kBackward) {
        EXPECT_TRUE(seen.count({static_cast<int>(PipelinePhase::kForward), op.microbatch, op.chunk}));
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Schedules, EveryOpOnce,
                         ::testing::Values(ScheduleCase{Schedule::kGpipe, 4, 1, 6},
                                           ScheduleCase{Schedule::kOneFOneB, 4, 1, 2},
                                           ScheduleCase{Schedule::kOneFOneB, 8, 1, 16},
                                           ScheduleCase{Schedule::kInterleaved, 4, 2, 8},
                                           ScheduleCase{Schedule::kInterleaved, 4, 3, 4}));

}  // namespace
}  // namespace strata
