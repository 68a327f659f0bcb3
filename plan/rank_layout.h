// Where each global rank sits in the plan's parallel dimensions, and its process
// groups: the one place that knows how ranks are numbered. The simulator places
// its tasks, the topology costing finds the symmetric copies of a collective,
// export writes the rank map and the runtime splits its communicators from this.
//
// Ranks fill the dimensions in the order of the plan's `rank_order`, fastest
// first, as Megatron-Core's RankGenerator does with its `order` string; the
// default "tp-cp-ep-dp-pp" gives
//     rank = tp_rank + tp * (cp_rank + cp * (dp_rank + dp * pp_rank))
// so a tensor-parallel group is tp consecutive ranks (inside one node when tp
// divides the GPUs per node), a data-parallel group strides by tp*cp and a
// pipeline group by tp*cp*dp. Rank r runs on GPU r.
//
// Expert parallelism folds inside the ranks of a pipeline stage (Megatron-Core's
// "MoE Parallel Folding", arXiv 2504.14960): in the dense layout, RankLayout(plan),
// ep has size 1 and only its place in the order is kept; expert_rank_layout(plan)
// is the second decomposition of the same ranks the MoE layers use, by the same
// formula with tp -> etp, cp -> 1, dp -> the expert data-parallel size, as
// Megatron-Core's second RankGenerator (parallel_state.py, initialize_model_parallel).
#pragma once

#include <array>
#include <string>
#include <vector>

namespace strata {

struct PlanSpec;

enum class ParallelDim { kTp, kCp, kEp, kDp, kPp };
inline constexpr int kNumParallelDims = 5;
const char* to_string(ParallelDim dim);

// The dimensions fastest first, e.g. {tp, cp, ep, dp, pp}.
struct RankOrder {
  std::array<ParallelDim, kNumParallelDims> fastest_first{ParallelDim::kTp, ParallelDim::kCp,
                                                           ParallelDim::kEp, ParallelDim::kDp,
                                                           ParallelDim::kPp};
  bool operator==(const RankOrder&) const = default;
};
inline constexpr const char* kDefaultRankOrder = "tp-cp-ep-dp-pp";  // Megatron-Core's default
// Megatron-Core's order with --use-tp-pp-dp-mapping (parallel_state.initialize_model_parallel).
inline constexpr RankOrder kTpPpDpRankOrder{
    {ParallelDim::kTp, ParallelDim::kCp, ParallelDim::kEp, ParallelDim::kPp, ParallelDim::kDp}};
// "tp-cp-ep-dp-pp" -> RankOrder; each of tp, cp, ep, dp, pp once, joined by '-'.
// Returns false (and leaves `out`) when `text` is not such a permutation.
bool parse_rank_order(const std::string& text, RankOrder& out);
std::string to_string(const RankOrder& order);

struct RankCoord {
  int tp = 0;
  int cp = 0;
  int ep = 0;
  int dp = 0;
  int pp = 0;
  int& operator[](ParallelDim dim);
  int operator[](ParallelDim dim) const;
  bool operator==(const RankCoord&) const = default;
};

enum class GroupKind {
  kTensor,     // differs only in tp: tensor-parallel collectives
  kContext,    // differs only in cp
  kData,       // differs only in dp: gradient reduction, ZeRO shards
  kPipeline,   // differs only in pp: stage-to-stage sends, ordered by pp rank
  kModel,      // same dp: every GPU of one model replica (tp x cp x pp ranks):
               // gradient-norm and loss reductions
  kEmbedding,  // first and last stage of one pipeline (Megatron's embedding group,
               // for the tied word-embedding gradient); just the stage when pp == 1
  kExpert,     // differs only in ep: an expert layout's expert-parallel group
               // (the MoE layers' token all-to-all)
};
const char* to_string(GroupKind kind);

class RankLayout {
 public:
  struct Sizes {
    int tp = 1;
    int cp = 1;
    int ep = 1;
    int dp = 1;
    int pp = 1;
  };
  RankLayout() = default;
  // Sizes >= 1; InternalError otherwise.
  RankLayout(const Sizes& sizes, const RankOrder& order = {});
  // A plan whose dp is resolved (>= 1); InternalError otherwise.
  explicit RankLayout(const PlanSpec& plan);

  int world() const { return world_; }
  int size(ParallelDim dim) const { return size_[static_cast<int>(dim)]; }
  const RankOrder& order() const { return order_; }

  // rank in [0, world) -> coordinates; InternalError when out of range.
  RankCoord coord(int rank) const;
  // coordinates -> rank; InternalError when a coordinate is out of range.
  int rank(const RankCoord& coord) const;

  // The ranks of rank's group of the given kind, ordered by the coordinate(s) the
  // group spans (tp, cp, dp or pp; kModel by rank). Empty for kEmbedding when the
  // rank is on a middle pipeline stage.
  std::vector<int> group(GroupKind kind, int rank) const;
  // Every group of the given kind, ordered by their first rank.
  std::vector<std::vector<int>> all_groups(GroupKind kind) const;

  // The rank holding the previous / next pipeline stage, or -1 at the first / last.
  int pipeline_prev(int rank) const;
  int pipeline_next(int rank) const;

 private:
  std::array<int, kNumParallelDims> size_{1, 1, 1, 1, 1};
  std::array<int, kNumParallelDims> stride_{1, 1, 1, 1, 1};  // by ParallelDim
  RankOrder order_;
  int world_ = 1;
};

// The expert layout of a plan whose MoE keys are resolved (check_moe_plan): the
// same ranks as etp x ep x edp x pp, cp 1, in the plan's order. Its kTensor
// groups are the expert tensor-parallel groups, kExpert the expert-parallel
// groups, kData the expert data-parallel groups.
RankLayout expert_rank_layout(const PlanSpec& plan);

}  // namespace strata
