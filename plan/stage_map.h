// Which pipeline rank and model chunk hold each virtual stage: the one mapping
// the layer split, the schedules, the memory model, the simulator and the
// runtime share.
//
//   loop (every schedule but zb-v; Megatron-LM's interleaving): vs = chunk * pp + rank,
//       so the stages go round the ranks vpp times;
//   V (zb-v; Qi et al. 2024, section 6, figure 8): chunk 0 runs down the ranks
//       and chunk 1 back up, vs = rank and 2pp - 1 - rank. Rank 0 then holds the
//       first and the last stage (embedding, output layer and loss), and rank pp - 1
//       hands its chunk 0's output to its own chunk 1 with no transfer.
#pragma once

#include "plan/plan_spec.h"

namespace strata {

struct StagePlace {
  int rank = 0;
  int chunk = 0;
};

inline bool v_shaped(Schedule s) { return s == Schedule::kZbV; }

inline int virtual_stage(Schedule s, int pp, int rank, int chunk) {
  if (v_shaped(s) && chunk == 1) return 2 * pp - 1 - rank;
  return chunk * pp + rank;
}
inline int virtual_stage(const PlanSpec& p, int rank, int chunk) { return virtual_stage(p.schedule, p.pp, rank, chunk); }

inline StagePlace stage_place(Schedule s, int pp, int vs) {
  if (v_shaped(s) && vs >= pp) return {2 * pp - 1 - vs, 1};
  return {vs % pp, vs / pp};
}
inline StagePlace stage_place(const PlanSpec& p, int vs) { return stage_place(p.schedule, p.pp, vs); }

// The pipeline rank holding the last virtual stage: final norm, output layer, loss.
inline int head_rank(const PlanSpec& p) { return stage_place(p, p.pp * p.vpp - 1).rank; }

// Whether the word embedding and the output layer sit on one rank (pp 1, or the
// V): tied, the output layer is then the embedding itself, with no copy to sync.
inline bool embedding_on_head_rank(const PlanSpec& p) { return head_rank(p) == 0; }

}  // namespace strata
