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
};

// Collective over world: splits it into this rank's groups. Throws InputError
// (no file) when world.size() != layout.world(), naming both.
ProcessGroups make_process_groups(Communicator& world, const RankLayout& layout);

}  // namespace strata::rt
