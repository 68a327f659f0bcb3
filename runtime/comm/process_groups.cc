#include "runtime/comm/process_groups.h"

#include <algorithm>

#include <fmt/format.h>

#include "core/error.h"

namespace strata::rt {

namespace {

// This rank's group of `kind` in layout as a communicator, split from world.
// Every rank takes part in every split, in the same order (splits are
// collective): the group's first rank is its colour, the rank's position in it the key.
std::unique_ptr<Communicator> split_group(Communicator& world, const RankLayout& layout, GroupKind kind) {
  const std::vector<int> members = layout.group(kind, world.rank());
  if (members.empty()) return world.split(-1, 0);
  const auto at = std::find(members.begin(), members.end(), world.rank());
  return world.split(members.front(), static_cast<int>(at - members.begin()));
}

}  // namespace

ProcessGroups make_process_groups(Communicator& world, const RankLayout& layout) {
  if (world.size() != layout.world()) {
    throw InputError("", "",
                     fmt::format("the plan needs tp·cp·dp·pp = {}·{}·{}·{} = {} ranks but {} were "
                                 "launched; start it with mpirun -n {} (or srun -n {})",
                                 layout.size(ParallelDim::kTp), layout.size(ParallelDim::kCp), layout.size(ParallelDim::kDp),
                                 layout.size(ParallelDim::kPp), layout.world(), world.size(),
                                 layout.world(), layout.world()));
  }
  ProcessGroups g;
  g.layout = layout;
  g.coord = layout.coord(world.rank());
  auto split = [&](GroupKind kind) { return split_group(world, layout, kind); };
  g.tp = split(GroupKind::kTensor);
  g.cp = split(GroupKind::kContext);
  g.dp = split(GroupKind::kData);
  {
    RankCoord first = g.coord;
    first.cp = 0;
    first.dp = 0;
    g.replicas = world.split(layout.rank(first), g.coord.cp + layout.size(ParallelDim::kCp) * g.coord.dp);
  }
  g.pp = split(GroupKind::kPipeline);
  g.model = split(GroupKind::kModel);
  g.embedding = split(GroupKind::kEmbedding);
  return g;
}

void make_expert_groups(Communicator& world, const RankLayout& expert_layout, ProcessGroups& g) {
  if (expert_layout.world() != world.size()) throw InternalError("make_expert_groups: the layouts' worlds differ");
  g.expert_coord = expert_layout.coord(world.rank());
  g.ep = split_group(world, expert_layout, GroupKind::kExpert);
  g.expert_dp = split_group(world, expert_layout, GroupKind::kData);
}

}  // namespace strata::rt
