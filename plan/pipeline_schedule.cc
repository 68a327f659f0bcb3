#include "plan/pipeline_schedule.h"

#include <algorithm>
#include <limits>

namespace strata {
namespace {

std::vector<PipelineOp> gpipe(int microbatches) {
  std::vector<PipelineOp> ops;
  for (int mb = 0; mb < microbatches; ++mb) ops.push_back({PipelinePhase::kForward, mb, 0});
  for (int mb = microbatches - 1; mb >= 0; --mb) ops.push_back({PipelinePhase::kBackward, mb, 0});
  return ops;
}

std::vector<PipelineOp> one_f_one_b(int pp, int microbatches, int rank) {
  const int warmup = std::min(pp - rank - 1, microbatches);
  std::vector<PipelineOp> ops;
  int next_forward = 0;
  int next_backward = 0;
  for (int i = 0; i < warmup; ++i) ops.push_back({PipelinePhase::kForward, next_forward++, 0});
  while (next_forward < microbatches) {
    ops.push_back({PipelinePhase::kForward, next_forward++, 0});
    ops.push_back({PipelinePhase::kBackward, next_backward++, 0});
  }
  while (next_backward < microbatches) ops.push_back({PipelinePhase::kBackward, next_backward++, 0});
  return ops;
}

// Megatron-LM's interleaved schedule. Virtual micro-batch k (0 .. m*vpp-1) maps to a
// chunk and a micro-batch: within each group of pp*vpp, pp consecutive virtual
// micro-batches run on one chunk; backward walks the chunks in reverse.
PipelineOp interleaved_op(int k, int pp, int vpp, bool forward) {
  const int group = pp * vpp;
  const int in_group = k % group;
  int chunk = in_group / pp;
  if (!forward) chunk = vpp - 1 - chunk;
  const int microbatch = (k / group) * pp + in_group % pp;
  return {forward ? PipelinePhase::kForward : PipelinePhase::kBackward, microbatch, chunk};
}

std::vector<PipelineOp> interleaved(int pp, int vpp, int microbatches, int rank) {
  const int total = microbatches * vpp;
  const int warmup = std::min((pp - rank - 1) * 2 + (vpp - 1) * pp, total);
  std::vector<PipelineOp> ops;
  int next_forward = 0;
  int next_backward = 0;
  for (int i = 0; i < warmup; ++i) ops.push_back(interleaved_op(next_forward++, pp, vpp, true));
  while (next_forward < total) {
    ops.push_back(interleaved_op(next_forward++, pp, vpp, true));
    ops.push_back(interleaved_op(next_backward++, pp, vpp, false));
  }
  while (next_backward < total) ops.push_back(interleaved_op(next_backward++, pp, vpp, false));
  return ops;
}

// ZB-H1's order for one rank (pipeline_schedule.h).
std::vector<PipelineOp> zb_h1(int pp, int microbatches, int rank) {
  std::vector<PipelineOp> ops;
  int f = 0, b = 0, w = 0;
  auto forward = [&] { ops.push_back({PipelinePhase::kForward, f++, 0}); };
  auto input_grad = [&] { ops.push_back({PipelinePhase::kBackward, b++, 0}); };
  auto weight_grad = [&] { ops.push_back({PipelinePhase::kWeightGrad, w++, 0}); };
  for (int i = 0; i < pp - rank - 1 && f < microbatches; ++i) forward();
  for (int i = 0; i < rank && f < microbatches; ++i) {
    forward();
    input_grad();
  }
  while (f < microbatches) {
    forward();
    input_grad();
    weight_grad();
  }
  while (b < microbatches) {
    input_grad();
    weight_grad();
  }
  while (w < microbatches) weight_grad();
  return ops;
}

// ZB-H2's order: the unit-time list schedule of every rank at once (F, B and W
// one unit each), read off for `rank`.
std::vector<PipelineOp> zb_h2(int pp, int microbatches, int rank) {
  constexpr int kNever = std::numeric_limits<int>::max();
  const int bound = 2 * pp - 1;
  // When each rank's forward / B of each micro-batch ends (kNever: not yet).
  std::vector<std::vector<int>> f_end(pp, std::vector<int>(microbatches, kNever));
  std::vector<std::vector<int>> b_end = f_end;
  std::vector<int> nf(pp, 0), nb(pp, 0), nw(pp, 0);
  std::vector<PipelineOp> ops;
  for (int t = 0; nw[rank] < microbatches; ++t) {
    for (int r = 0; r < pp; ++r) {
      PipelineOp op;
      const int mb_b = nb[r];
      const bool b_ready = mb_b < nf[r] && f_end[r][mb_b] <= t && (r == pp - 1 || b_end[r + 1][mb_b] <= t);
      const bool f_ready = nf[r] < microbatches && nf[r] - nw[r] < bound && (r == 0 || f_end[r - 1][nf[r]] <= t);
      if (b_ready) {
        op = {PipelinePhase::kBackward, nb[r]++, 0};
        b_end[r][op.microbatch] = t + 1;
      } else if (f_ready) {
        op = {PipelinePhase::kForward, nf[r]++, 0};
        f_end[r][op.microbatch] = t + 1;
      } else if (nw[r] < nb[r] && b_end[r][nw[r]] <= t) {
        op = {PipelinePhase::kWeightGrad, nw[r]++, 0};
      } else {
        continue;
      }
      if (r == rank) ops.push_back(op);
    }
  }
  return ops;
}

// ZB-V's order for one rank (pipeline_schedule.h), its phases written for at
// least 2pp - 1 micro-batches; with fewer, the ops of micro-batches that do not
// exist are left out (the order of the rest keeps every dependency).
std::vector<PipelineOp> zb_v(int pp, int microbatches, int rank) {
  const int n = std::max(microbatches, 2 * pp - 1);
  std::vector<PipelineOp> ops;
  // Next micro-batch of each phase, per chunk (0 runs down the V, 1 back up).
  int next[3][2] = {};
  auto run = [&](PipelinePhase phase, int chunk) {
    const int mb = next[static_cast<int>(phase)][chunk]++;
    if (mb < microbatches) ops.push_back({phase, mb, chunk});
  };
  const auto F = PipelinePhase::kForward, B = PipelinePhase::kBackward, W = PipelinePhase::kWeightGrad;
  // Warm-up: chunk 0's forwards fill the way down; the deeper the rank, the
  // sooner chunk 1's forwards (and their B and W) come back up.
  for (int i = 0; i < 2 * (pp - rank) - 1; ++i) run(F, 0);
  for (int i = 0; i < rank; ++i) {
    run(F, 1);
    run(F, 0);
  }
  for (int i = 0; i < pp - rank; ++i) {
    run(F, 1);
    run(B, 1);
    run(W, 1);
  }
  // Steady state: F B W of each chunk in turn, until chunk 1 has run every forward.
  while (next[0][1] < n) {
    if (next[0][0] < n) run(F, 0);
    run(B, 0);
    run(W, 0);
    run(F, 1);
    run(B, 1);
    run(W, 1);
  }
  // Cool-down: the remaining B's (the W's of the first ones deferred into the
  // tail), then every W left, chunk 1's first.
  for (int i = 0; i < rank; ++i) {
    run(B, 0);
    run(B, 1);
  }
  while (next[1][0] < n) {
    run(B, 0);
    run(W, 0);
  }
  while (next[2][1] < n) run(W, 1);
  while (next[2][0] < n) run(W, 0);
  return ops;
}

}  // namespace

int peak_in_flight(const std::vector<PipelineOp>& program, Schedule schedule) {
  int in_flight = 0, peak = 0;
  for (const PipelineOp& op : program) {
    if (op.phase == PipelinePhase::kForward) peak = std::max(peak, ++in_flight);
    if (computes_weight_grads(op, schedule)) --in_flight;
  }
  return peak;
}

std::vector<PipelineOp> pipeline_program(Schedule schedule, int pp, int vpp, int microbatches,
                                         int rank) {
  switch (schedule) {
    case Schedule::kGpipe: return gpipe(microbatches);
    case Schedule::kOneFOneB: return one_f_one_b(pp, microbatches, rank);
    case Schedule::kInterleaved: return interleaved(pp, vpp, microbatches, rank);
    case Schedule::kZbH1: return zb_h1(pp, microbatches, rank);
    case Schedule::kZbH2: return zb_h2(pp, microbatches, rank);
    case Schedule::kZbV: return zb_v(pp, microbatches, rank);
  }
  return {};
}

double analytic_bubble_ratio(Schedule schedule, int pp, int vpp, int microbatches) {
  const double p = pp, m = microbatches;
  switch (schedule) {
    case Schedule::kZbH1: return (p - 1.0) / (3.0 * m + p - 1.0);
    case Schedule::kZbH2: return 0.0;
    case Schedule::kZbV: return (p - 1.0) / (6.0 * m + p - 1.0);
    case Schedule::kGpipe:
    case Schedule::kOneFOneB:
    case Schedule::kInterleaved: break;
  }
  return (p - 1.0) / (vpp * m + p - 1.0);
}

std::string to_string(const PipelineOp& op, int vpp) {
  std::string s = op.phase == PipelinePhase::kForward ? "F" : op.phase == PipelinePhase::kBackward ? "B" : "W";
  s += std::to_string(op.microbatch);
  if (vpp > 1) {
    s += '.';
    s += std::to_string(op.chunk);
  }
  return s;
}

}  // namespace strata
