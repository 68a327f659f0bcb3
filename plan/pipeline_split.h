// Which transformer layers each pipeline stage holds: Megatron-Core's rule
// (transformer_block.py, get_num_layers_to_build; its layer offsets), the one
// place the simulator, the memory model, the bucket plan, the runtime and the
// export take it from.
//
//   even (default)     num_layers / (pp * vpp) per virtual stage;
//   uneven             decoder_first_pipeline_num_layers / _last_: that many on the
//                      first / last pipeline stage, the rest split evenly over the
//                      others; each stage's layers split evenly over its vpp chunks;
//   account_for_*      the embedding (loss) counts as a layer: (num_layers + 1 or 2)
//                      split evenly, the first (last) virtual stage one layer fewer
//                      (BLOOM's 70 layers on 12 stages: 5 / 6 x 10 / 5).
// The two forms exclude each other, as in Megatron-Core.
//
// Virtual stage vs (plan/stage_map.h: chunk * pp + pp_rank, or zb-v's V) holds
// layers [first[vs], first[vs] + layers[vs]) of the model, in that order.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "plan/model_spec.h"
#include "plan/plan_spec.h"
#include "plan/stage_map.h"

namespace strata {

struct PipelineSplit {
  std::vector<int> layers;  // [virtual stage]
  std::vector<int> first;   // [virtual stage] its first layer's global index
  int pp = 1;
  int vpp = 1;
  Schedule schedule = Schedule::kOneFOneB;  // places the virtual stages (plan/stage_map.h)

  int chunk_layers(int pp_rank, int chunk) const { return layers[stage_index(pp_rank, chunk)]; }
  int chunk_first(int pp_rank, int chunk) const { return first[stage_index(pp_rank, chunk)]; }
  // Every layer of pipeline rank pp_rank, over its chunks.
  int stage_layers(int pp_rank) const;
  // Of those, the model's MoE layers (ModelSpec::is_moe_layer).
  int stage_moe_layers(const ModelSpec& model, int pp_rank) const;
  // The most layers any virtual stage holds (the stride of per-layer tables).
  int max_chunk_layers() const;
  bool even() const;

 private:
  std::size_t stage_index(int pp_rank, int chunk) const {
    return static_cast<std::size_t>(virtual_stage(schedule, pp, pp_rank, chunk));
  }
};

// Why the plan's split cannot be made, with the plan key to name, or nullopt.
struct PipelineSplitProblem {
  std::string key;  // "$.decoder_first_pipeline_num_layers", "$.pp", ...
  std::string message;
};
std::optional<PipelineSplitProblem> pipeline_split_problem(const ModelSpec& model, const PlanSpec& plan);

// The split of a plan that pipeline_split_problem accepts; InternalError otherwise.
PipelineSplit pipeline_split(const ModelSpec& model, const PlanSpec& plan);

}  // namespace strata
