// The pipeline schedule: which micro-batch each pipeline rank runs forward or
// backward, and in which order. Written once and used by both the simulator and
// the runtime, so what is predicted and what is run are the same plan.
//
// A rank's program is a list of PipelineOps in execution order. Virtual stage
// s = chunk * pp + rank holds the layers plan/pipeline_split.h gives it (L/(pp*vpp)
// of them when the split is even); the
// forward of (micro-batch, s) needs the forward of (micro-batch, s-1), and the
// backward of (micro-batch, s) needs the backward of (micro-batch, s+1), or the
// forward of (micro-batch, s) on the last virtual stage.
#pragma once

#include <string>
#include <vector>

#include "plan/plan_spec.h"

namespace strata {

enum class PipelinePhase { kForward, kBackward };

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
std::vector<PipelineOp> pipeline_program(Schedule schedule, int pp, int vpp, int microbatches,
                                         int rank);

// Virtual stage index of (rank, chunk): chunk * pp + rank.
inline int virtual_stage(int pp, int rank, int chunk) { return chunk * pp + rank; }

// "F3.1" / "B0" style label for tests and traces (chunk shown when vpp > 1).
std::string to_string(const PipelineOp& op, int vpp);

}  // namespace strata
