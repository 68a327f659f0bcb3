// The pipeline schedule: which micro-batch each pipeline rank runs forward or
// backward, and in which order. Written once and used by both the simulator and
// the runtime, so what is predicted and what is run are the same plan.
//
// A rank's program is a list of PipelineOps in execution order. Virtual stage
// s (plan/stage_map.h: chunk * pp + rank, or the V of zb-v) holds the layers
// plan/pipeline_split.h gives it (L/(pp*vpp) of them when the split is even); the
// forward of (micro-batch, s) needs the forward of (micro-batch, s-1), and the
// backward of (micro-batch, s) needs the backward of (micro-batch, s+1), or the
// forward of (micro-batch, s) on the last virtual stage.
//
// Zero-bubble schedules (splits_backward) split each backward into B, which
// computes the input gradients the previous stage waits for, and W, the weight
// gradients, which nothing downstream needs: B of (micro-batch, s) is a kBackward
// op, W a kWeightGrad op after it on the same rank. Under the other schedules a
// kBackward op computes both.
#pragma once

#include <string>
#include <vector>

#include "plan/plan_spec.h"
#include "plan/stage_map.h"

namespace strata {

enum class PipelinePhase { kForward, kBackward, kWeightGrad };

struct PipelineOp {
  PipelinePhase phase = PipelinePhase::kForward;
  int microbatch = 0;
  int chunk = 0;  // model chunk on this rank (0 .. vpp-1)

  bool operator==(const PipelineOp&) const = default;
};

// The ordered program of pipeline rank `rank` (0 .. pp-1) for m micro-batches.
//   GPipe: all forwards, then all backwards (last micro-batch first).
//   1F1B (Narayanan et al. 2021, section 2.2.1; Megatron-LM's
//     forward_backward_pipelining_without_interleaving): min(pp - rank - 1, m) warm-up
//     forwards, then alternating one forward and one backward, then the cool-down backwards.
//   Interleaved 1F1B (section 2.2.2; Megatron-LM's
//     forward_backward_pipelining_with_interleaving): m*vpp virtual micro-batches walked in
//     groups of pp, chunk by chunk; warm-up (pp - rank - 1)*2 + (vpp - 1)*pp.
//   ZB-H1 (Qi et al. 2024, figure 3; sail-sg's ZeroBubbleH1Pipeline): 1F1B's
//     pp - rank - 1 warm-up forwards, then rank pairs of F and B with W deferred,
//     then triples F B W, then B W pairs, then the rank deferred W's. At most pp
//     micro-batches in flight (forward done, W not), as 1F1B's first stage; with
//     equal F, B and W times the bubble is (pp - 1) units against 1F1B's 3(pp - 1).
//   ZB-H2 (section 2.3, figure 4): more warm-up forwards fill the bubble before
//     the first B and W's fill the tail, so that each stage runs its 3m units
//     back to back (a parallelogram). The order is the one a unit-time list
//     schedule gives (free rank: a ready B first, else a forward while fewer than
//     2pp - 1 micro-batches are in flight, else the oldest W); peak 2pp - 1 in flight.
//   ZB-V (section 6, figure 8; PyTorch's ScheduleZBVZeroBubble orders it the same
//     way): two chunks per rank on a V (plan/stage_map.h). Rank r warms up with
//     2(pp - r) - 1 forwards of chunk 0, then r pairs of forwards (chunk 1, then
//     0), then pp - r triples F B W of chunk 1; in the steady state F B W of
//     chunk 0, then of chunk 1; the cool-down runs the last B's and fills the
//     tail with the W's. At most 2pp chunk micro-batches in flight, each half a
//     stage: 1F1B's peak activation memory; with equal F, B and W times and no
//     transfer time, no bubble but the pp - 1 units of the ramp.
std::vector<PipelineOp> pipeline_program(Schedule schedule, int pp, int vpp, int microbatches,
                                         int rank);

// Whether op computes weight gradients: its chunk's are final after the last such op.
inline bool computes_weight_grads(const PipelineOp& op, Schedule schedule) {
  return op.phase == PipelinePhase::kWeightGrad || (op.phase == PipelinePhase::kBackward && !splits_backward(schedule));
}

// The most micro-batches a program holds in flight at once: forwards whose
// backward (and, when the schedule splits it, W) has not run yet.
int peak_in_flight(const std::vector<PipelineOp>& program, Schedule schedule);

// The bubble's share of the step in the papers' unit-time model, for comparing
// the simulated bubble with:
//   GPipe, 1F1B, interleaved: (p - 1) / (v*m + p - 1) (Narayanan et al. 2021,
//     section 2.2, with a backward twice a forward);
//   ZB-H1: (p - 1) / (3m + p - 1), F, B and W one unit each (Qi et al. 2024,
//     section 3.1: p - 1 units against 1F1B's 3(p - 1));
//   ZB-H2: 0 (its parallelogram, once the optimizer step's post-validation lets
//     each stage start the next step as soon as it is done, section 4);
//   ZB-V: (p - 1) / (6m + p - 1), each chunk's F, B and W half a unit: only the
//     ramp of p - 1 chunk units is left (PipelineSchedule.ZbVRampIsItsOnlyBubble).
double analytic_bubble_ratio(Schedule schedule, int pp, int vpp, int microbatches);

// "F3.1" / "B0" / "W2" style label for tests and traces (chunk shown when vpp > 1).
std::string to_string(const PipelineOp& op, int vpp);

}  // namespace strata
