#include "plan/pipeline_schedule.h"

#include <gtest/gtest.h>

#include <algorithm>
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

// ZB-V (Qi et al. 2024, section 6) for 2 ranks and 4 micro-batches, derived by
// hand from the phases pipeline_schedule.h names. Rank 0 (virtual stages 0 and 3):
// 3 forwards of chunk 0, 2 triples F B W of chunk 1, the steady F B W of chunk 0
// then chunk 1, the last B W pairs. Rank 1 (stages 1 and 2): 1 forward, 1 pair
// (chunk 1 then 0), 1 triple, the steady state, then B0 B1, B0 W0 and the W's left.
TEST(PipelineSchedule, ZbVMatchesTheHandDerivedOrder) {
  EXPECT_EQ(program_string(Schedule::kZbV, 2, 2, 4, 0),
            "F0.0 F1.0 F2.0 F0.1 B0.1 W0.1 F1.1 B1.1 W1.1 F3.0 B0.0 W0.0 F2.1 B2.1 W2.1 B1.0 W1.0 F3.1 B3.1 W3.1 "
            "B2.0 W2.0 B3.0 W3.0");
  EXPECT_EQ(program_string(Schedule::kZbV, 2, 2, 4, 1),
            "F0.0 F0.1 F1.0 F1.1 B0.1 W0.1 F2.0 B0.0 W0.0 F2.1 B1.1 W1.1 F3.0 B1.0 W1.0 F3.1 B2.1 W2.1 B2.0 B3.1 "
            "B3.0 W2.0 W3.1 W3.0");
}

// The V: chunk 0 runs down the ranks, chunk 1 back up; rank 0 holds the first
// and the last stage; every other schedule loops round the ranks.
TEST(StageMap, ZbVFoldsTheStagesIntoAV) {
  PlanSpec p;
  p.pp = 4;
  p.vpp = 2;
  p.schedule = Schedule::kZbV;
  const int want[4][2] = {{0, 7}, {1, 6}, {2, 5}, {3, 4}};
  for (int rank = 0; rank < 4; ++rank) {
    for (int chunk = 0; chunk < 2; ++chunk) {
      const int vs = virtual_stage(p, rank, chunk);
      EXPECT_EQ(vs, want[rank][chunk]);
      EXPECT_EQ(stage_place(p, vs).rank, rank);
      EXPECT_EQ(stage_place(p, vs).chunk, chunk);
    }
  }
  EXPECT_EQ(head_rank(p), 0);
  EXPECT_TRUE(embedding_on_head_rank(p));
  p.schedule = Schedule::kInterleaved;
  EXPECT_EQ(virtual_stage(p, 1, 1), 5);
  EXPECT_EQ(head_rank(p), 3);
  EXPECT_FALSE(embedding_on_head_rank(p));
}

// Every rank's program run with F, B and W one unit each and free transfers:
// when each op starts and the step's length, or -1 if the programs deadlock.
int unit_time_makespan(Schedule s, int pp, int vpp, int m) {
  PlanSpec p;
  p.pp = pp;
  p.vpp = vpp;
  p.schedule = s;
  const int last = pp * vpp - 1;
  std::vector<std::vector<PipelineOp>> programs;
  for (int r = 0; r < pp; ++r) programs.push_back(pipeline_program(s, pp, vpp, m, r));
  // End time of (phase, micro-batch, virtual stage); -1 until it has run.
  std::vector<int> end(static_cast<std::size_t>(3 * m * (last + 1)), -1);
  auto at = [&](PipelinePhase ph, int mb, int vs) -> int& {
    return end[static_cast<std::size_t>((static_cast<int>(ph) * m + mb) * (last + 1) + vs)];
  };
  std::vector<std::size_t> next(pp, 0);
  std::vector<int> free_at(pp, 0);
  int makespan = 0;
  for (bool progress = true; progress;) {
    progress = false;
    for (int r = 0; r < pp; ++r) {
      if (next[r] == programs[r].size()) continue;
      const PipelineOp& op = programs[r][next[r]];
      const int vs = virtual_stage(p, r, op.chunk);
      int needs = -2;  // the end of what op waits for (-1: not run yet)
      if (op.phase == PipelinePhase::kForward) needs = vs > 0 ? at(PipelinePhase::kForward, op.microbatch, vs - 1) : 0;
      if (op.phase == PipelinePhase::kBackward) {
        needs = vs < last ? at(PipelinePhase::kBackward, op.microbatch, vs + 1)
                          : at(PipelinePhase::kForward, op.microbatch, vs);
      }
      if (op.phase == PipelinePhase::kWeightGrad) needs = at(PipelinePhase::kBackward, op.microbatch, vs);
      if (needs < 0) continue;
      free_at[r] = std::max(free_at[r], needs) + 1;
      at(op.phase, op.microbatch, vs) = free_at[r];
      makespan = std::max(makespan, free_at[r]);
      ++next[r];
      progress = true;
    }
  }
  for (int r = 0; r < pp; ++r) {
    if (next[r] != programs[r].size()) return -1;
  }
  return makespan;
}

// ZB-V with equal F, B and W chunk times: every rank runs its 6m chunk ops back
// to back after the ramp of p - 1, for any m (fewer micro-batches than its
// warm-up too: m from 1); its peak is 2p chunk micro-batches, 1F1B's p
// micro-batches of a whole stage (the authors' table, huggingface.co/spaces/sail/
// pipeline-parallelism-with-controllable-memory: V-ZB activation memory p, as 1F1B).
TEST(PipelineSchedule, ZbVRampIsItsOnlyBubble) {
  for (int pp = 2; pp <= 8; ++pp) {
    for (int m = 1; m <= 4 * pp; ++m) {
      const int makespan = unit_time_makespan(Schedule::kZbV, pp, 2, m);
      ASSERT_GE(makespan, 0) << "pp " << pp << " m " << m << " deadlocks";
      if (m >= 2 * pp - 1) {
        EXPECT_EQ(makespan, 6 * m + pp - 1) << "pp " << pp << " m " << m;
      }
    }
    EXPECT_EQ(peak_in_flight(pipeline_program(Schedule::kZbV, pp, 2, 4 * pp, 0), Schedule::kZbV), 2 * pp);
    for (int rank = 1; rank < pp; ++rank) {
      EXPECT_LE(peak_in_flight(pipeline_program(Schedule::kZbV, pp, 2, 4 * pp, rank), Schedule::kZbV), 2 * pp);
    }
  }
  // The same executor gives 1F1B's (3m + 3(p - 1)) and ZB-H1's (3m + p - 1) in
  // whole-stage units (F = B = W, so 1F1B's backward is 2 units here).
  EXPECT_EQ(unit_time_makespan(Schedule::kZbH1, 4, 1, 8), 3 * 8 + 3);
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
                                           ScheduleCase{Schedule::kZbH2, 16, 1, 64},
                                           ScheduleCase{Schedule::kZbV, 4, 2, 8},
                                           ScheduleCase{Schedule::kZbV, 8, 2, 3},
                                           ScheduleCase{Schedule::kZbV, 3, 2, 11}));

}  // namespace
}  // namespace strata
