#include "runtime/process_groups.h"

#include <fmt/format.h>

#include "core/error.h"

namespace strata::rt {
namespace {

void check_sizes(const ParallelSizes& s) {
  if (s.tp < 1 || s.dp < 1 || s.pp < 1) {
    throw InternalError(fmt::format("parallel sizes tp={} dp={} pp={} must all be >= 1", s.tp,
                                    s.dp, s.pp));
  }
}

void check_rank(const ParallelSizes& s, int rank) {
  check_sizes(s);
  if (rank < 0 || rank >= s.world()) {
    throw InternalError(fmt::format("rank {} is outside [0, {}) for tp={} dp={} pp={}", rank,
                                    s.world(), s.tp, s.dp, s.pp));
  }
}

// The position of rank inside its group of this kind, used as the split key.
int position_in_group(const RankCoord& c, const ParallelSizes& s, GroupKind kind) {
  switch (kind) {
    case GroupKind::kTensor: return c.tp_rank;
    case GroupKind::kData: return c.dp_rank;
    case GroupKind::kPipeline: return c.pp_rank;
    case GroupKind::kModel: return c.tp_rank + s.tp * c.pp_rank;
    case GroupKind::kEmbedding: return c.pp_rank == 0 ? 0 : 1;
  }
  return 0;
}

// A number identifying rank's group of this kind (the split color), or -1 when
// the rank is in none.
int group_color(const RankCoord& c, const ParallelSizes& s, GroupKind kind) {
  switch (kind) {
    case GroupKind::kTensor: return c.dp_rank + s.dp * c.pp_rank;
    case GroupKind::kData: return c.tp_rank + s.tp * c.pp_rank;
    case GroupKind::kPipeline:
    case GroupKind::kEmbedding:
      if (kind == GroupKind::kEmbedding && c.pp_rank != 0 && c.pp_rank != s.pp - 1) return -1;
      return c.tp_rank + s.tp * c.dp_rank;
    case GroupKind::kModel: return c.dp_rank;
  }
  return -1;
}

}  // namespace

ParallelSizes parallel_sizes(const PlanSpec& plan) {
  if (plan.dp < 1) {
    throw InternalError("parallel_sizes: the plan's dp is not resolved (call resolve_and_check_plan)");
  }
  ParallelSizes s{plan.tp, plan.dp, plan.pp};
  check_sizes(s);
  return s;
}

RankCoord rank_coord(const ParallelSizes& s, int rank) {
  check_rank(s, rank);
  return {rank % s.tp, (rank / s.tp) % s.dp, rank / (s.tp * s.dp)};
}

int global_rank(const ParallelSizes& s, const RankCoord& c) {
  check_sizes(s);
  if (c.tp_rank < 0 || c.tp_rank >= s.tp || c.dp_rank < 0 || c.dp_rank >= s.dp ||
      c.pp_rank < 0 || c.pp_rank >= s.pp) {
    throw InternalError(fmt::format("coordinate (tp {}, dp {}, pp {}) is outside tp={} dp={} pp={}",
                                    c.tp_rank, c.dp_rank, c.pp_rank, s.tp, s.dp, s.pp));
  }
  return c.tp_rank + s.tp * (c.dp_rank + s.dp * c.pp_rank);
}

const char* to_string(GroupKind kind) {
  switch (kind) {
    case GroupKind::kTensor: return "tensor";
    case GroupKind::kData: return "data";
    case GroupKind::kPipeline: return "pipeline";
    case GroupKind::kModel: return "model";
    case GroupKind::kEmbedding: return "embedding";
  }
  return "tensor";
}

std::vector<int> group_members(const ParallelSizes& s, GroupKind kind, int rank) {
  const RankCoord c = rank_coord(s, rank);
  std::vector<int> members;
  switch (kind) {
    case GroupKind::kTensor:
      for (int t = 0; t < s.tp; ++t) members.push_back(global_rank(s, {t, c.dp_rank, c.pp_rank}));
      break;
    case GroupKind::kData:
      for (int d = 0; d < s.dp; ++d) members.push_back(global_rank(s, {c.tp_rank, d, c.pp_rank}));
      break;
    case GroupKind::kPipeline:
      for (int p = 0; p < s.pp; ++p) members.push_back(global_rank(s, {c.tp_rank, c.dp_rank, p}));
      break;
    case GroupKind::kModel:
      for (int p = 0; p < s.pp; ++p) {
        for (int t = 0; t < s.tp; ++t) members.push_back(global_rank(s, {t, c.dp_rank, p}));
      }
      break;
    case GroupKind::kEmbedding:
      if (c.pp_rank != 0 && c.pp_rank != s.pp - 1) break;
      members.push_back(global_rank(s, {c.tp_rank, c.dp_rank, 0}));
      if (s.pp > 1) members.push_back(global_rank(s, {c.tp_rank, c.dp_rank, s.pp - 1}));
      break;
  }
  return members;
}

std::vector<std::vector<int>> all_groups(const ParallelSizes& s, GroupKind kind) {
  check_sizes(s);
  std::vector<std::vector<int>> groups;
  for (int r = 0; r < s.world(); ++r) {
    std::vector<int> members = group_members(s, kind, r);
    if (!members.empty() && members.front() == r) groups.push_back(std::move(members));
  }
  return groups;
}

int pipeline_prev_rank(const ParallelSizes& s, int rank) {
  const RankCoord c = rank_coord(s, rank);
  return c.pp_rank == 0 ? -1 : global_rank(s, {c.tp_rank, c.dp_rank, c.pp_rank - 1});
}

int pipeline_next_rank(const ParallelSizes& s, int rank) {
  const RankCoord c = rank_coord(s, rank);
  return c.pp_rank == s.pp - 1 ? -1 : global_rank(s, {c.tp_rank, c.dp_rank, c.pp_rank + 1});
}

ProcessGroups make_process_groups(Communicator& world, const ParallelSizes& sizes) {
  check_sizes(sizes);
  if (world.size() != sizes.world()) {
    throw InputError("", "",
                     fmt::format("the plan needs tp·dp·pp = {}·{}·{} = {} ranks but {} were "
                                 "launched; start it with mpirun -n {} (or srun -n {})",
                                 sizes.tp, sizes.dp, sizes.pp, sizes.world(), world.size(),
                                 sizes.world(), sizes.world()));
  }
  ProcessGroups g;
  g.sizes = sizes;
  g.coord = rank_coord(sizes, world.rank());
  // Every rank takes part in every split, in the same order (splits are collective).
  auto split = [&](GroupKind kind) {
    return world.split(group_color(g.coord, sizes, kind), position_in_group(g.coord, sizes, kind));
  };
  g.tp = split(GroupKind::kTensor);
  g.dp = split(GroupKind::kData);
  g.pp = split(GroupKind::kPipeline);
  g.model = split(GroupKind::kModel);
  g.embedding = split(GroupKind::kEmbedding);
  return g;
}

}  // namespace strata::rt
