// Tensor-, data- and pipeline-parallel process groups, from a plan.
//
// Rank order is Megatron-LM's (docs/formats.md, "plan.json"): TP fastest, then
// DP, then PP:  rank = tp_rank + tp * (dp_rank + dp * pp_rank).
// So a TP group is tp consecutive ranks (inside one node when tp <= GPUs per
// node), a DP group strides by tp, and a PP group strides by tp * dp.
//
// The mapping functions are pure (testable without MPI); make_process_groups
// wires them to communicator splits.
#pragma once

#include <memory>
#include <vector>

#include "runtime/communicator.h"
#include "sim/spec/plan_spec.h"

namespace strata::rt {

struct ParallelSizes {
  int tp = 1;
  int dp = 1;
  int pp = 1;
  int world() const { return tp * dp * pp; }
};

// The sizes of a plan whose dp is resolved (plan.dp >= 1); InternalError otherwise.
ParallelSizes parallel_sizes(const PlanSpec& plan);

// Where one rank sits in the three parallel dimensions.
struct RankCoord {
  int tp_rank = 0;
  int dp_rank = 0;
  int pp_rank = 0;
  bool operator==(const RankCoord&) const = default;
};

// rank in [0, world) -> coordinates; InternalError when out of range.
RankCoord rank_coord(const ParallelSizes& sizes, int rank);
// coordinates -> rank; InternalError when a coordinate is out of range.
int global_rank(const ParallelSizes& sizes, const RankCoord& coord);

enum class GroupKind {
  kTensor,     // same dp_rank and pp_rank: TP collectives
  kData,       // same tp_rank and pp_rank: gradient reduction, ZeRO shards
  kPipeline,   // same tp_rank and dp_rank: stage-to-stage sends, ordered by pp_rank
  kModel,      // same dp_rank (tp x pp ranks): gradient-norm and loss reductions
  kEmbedding,  // first and last pipeline stage of a pipeline (Megatron's embedding
               // group, for the tied word-embedding gradient); just the stage when pp == 1
};

const char* to_string(GroupKind kind);

// The ranks of rank's group of the given kind, ascending (which is also the
// order of the coordinate the group spans). Empty for kEmbedding when rank is
// on a middle pipeline stage.
std::vector<int> group_members(const ParallelSizes& sizes, GroupKind kind, int rank);
// Every group of the given kind, each ascending, ordered by their first rank.
std::vector<std::vector<int>> all_groups(const ParallelSizes& sizes, GroupKind kind);

// Pipeline neighbours of rank: the rank holding the previous / next stage, or -1
// at the first / last stage.
int pipeline_prev_rank(const ParallelSizes& sizes, int rank);
int pipeline_next_rank(const ParallelSizes& sizes, int rank);

// This rank's groups as communicators. Each communicator's rank is the rank's
// position in group_members (so pp->rank() == pp_rank, tp->rank() == tp_rank).
struct ProcessGroups {
  ParallelSizes sizes;
  RankCoord coord;
  std::unique_ptr<Communicator> tp;
  std::unique_ptr<Communicator> dp;
  std::unique_ptr<Communicator> pp;
  std::unique_ptr<Communicator> model;
  std::unique_ptr<Communicator> embedding;  // nullptr on middle pipeline stages
};

// Collective over world: splits it into this rank's groups. Throws InputError
// (no file) when world.size() != sizes.world(), naming both.
ProcessGroups make_process_groups(Communicator& world, const ParallelSizes& sizes);

}  // namespace strata::rt
