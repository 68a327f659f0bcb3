// This rank's process groups as communicators, split from the world by the
// plan's rank layout (plan/rank_layout.h: the one place that numbers ranks).
#pragma once

#include <memory>

#include "plan/rank_layout.h"
#include "runtime/comm/communicator.h"

namespace strata::rt {

// Each communicator's rank is the rank's position in RankLayout::group (so
// pp->rank() == coord.pp, tp->rank() == coord.tp, cp->rank() == coord.cp).
struct ProcessGroups {
  RankLayout layout;
  RankCoord coord;
  std::unique_ptr<Communicator> tp;
  std::unique_ptr<Communicator> cp;        // context-parallel ranks (one rank when cp == 1)
  std::unique_ptr<Communicator> dp;
  // The replicas of this rank's weights, dp x cp (PlanSpec::grad_replicas): its
  // rank is the replica index cp_rank + cp * dp_rank, as the simulator numbers
  // them. Gradients are reduced and ZeRO shards over it (Megatron-Core's data
  // parallel group with context parallelism).
  std::unique_ptr<Communicator> replicas;
  std::unique_ptr<Communicator> pp;
  std::unique_ptr<Communicator> model;
  std::unique_ptr<Communicator> embedding;  // nullptr on middle pipeline stages
  // MoE models (make_expert_groups): the rank's place in the expert layout
  // (plan/rank_layout.h expert_rank_layout), its expert-parallel group (the
  // token all-to-alls; rank == expert_coord.ep) and its expert data-parallel
  // group (the experts' gradient reduction; rank == expert_coord.dp). Null otherwise.
  RankCoord expert_coord;
  std::unique_ptr<Communicator> ep;
  std::unique_ptr<Communicator> expert_dp;
};

// Collective over world: splits it into this rank's groups. Throws InputError
// (no file) when world.size() != layout.world(), naming both.
ProcessGroups make_process_groups(Communicator& world, const RankLayout& layout);

// Collective over world: adds the expert groups of expert_layout (the same
// ranks as the groups' dense layout) to g.
void make_expert_groups(Communicator& world, const RankLayout& expert_layout, ProcessGroups& g);

}  // namespace strata::rt
