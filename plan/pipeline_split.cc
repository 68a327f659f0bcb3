#include "plan/pipeline_split.h"

#include <algorithm>
#include <functional>
#include <numeric>

#include <fmt/format.h>

#include "core/error.h"

namespace strata {
namespace {

constexpr const char* kFirstKey = "$.decoder_first_pipeline_num_layers";
constexpr const char* kLastKey = "$.decoder_last_pipeline_num_layers";

// Layers per pipeline rank, or the problem.
std::optional<PipelineSplitProblem> stage_counts(const ModelSpec& m, const PlanSpec& p, std::vector<int>& per_stage) {
  const int L = m.num_layers;
  const bool uneven = p.first_stage_layers > 0 || p.last_stage_layers > 0;
  const bool counted = p.account_for_embedding || p.account_for_loss;
  per_stage.assign(static_cast<std::size_t>(p.pp), 0);
  if (uneven && counted) {
    return PipelineSplitProblem{p.account_for_embedding ? "$.account_for_embedding_in_pipeline_split"
                                                        : "$.account_for_loss_in_pipeline_split",
                                "the embedding or loss counted as a layer cannot be combined with "
                                "decoder_first_pipeline_num_layers / decoder_last_pipeline_num_layers (Megatron-Core "
                                "takes one or the other): give the first and last stages' layers, or count them"};
  }
  if (uneven) {
    const char* key = p.first_stage_layers > 0 ? kFirstKey : kLastKey;
    if (p.pp < 2) return PipelineSplitProblem{key, "an uneven first or last pipeline stage needs pp >= 2"};
    const int rest = L - p.first_stage_layers - p.last_stage_layers;
    const int stages_left = p.pp - (p.first_stage_layers > 0 ? 1 : 0) - (p.last_stage_layers > 0 ? 1 : 0);
    if (rest < (stages_left > 0 ? stages_left : 0) || (stages_left == 0 && rest != 0) ||
        (stages_left > 0 && rest % stages_left != 0)) {
      return PipelineSplitProblem{
          key, fmt::format("num_layers {} of model {} less the first stage's {} and the last stage's {} leaves {} "
                           "layers for the other {} stage(s): they must divide evenly (allowed: first + last "
                           "layers such that (num_layers - first - last) is a positive multiple of the remaining "
                           "stages)",
                           L, m.name, p.first_stage_layers, p.last_stage_layers, rest, stages_left)};
    }
    const int middle = stages_left > 0 ? rest / stages_left : 0;
    for (int r = 0; r < p.pp; ++r) per_stage[static_cast<std::size_t>(r)] = middle;
    if (p.first_stage_layers > 0) per_stage.front() = p.first_stage_layers;
    if (p.last_stage_layers > 0) per_stage.back() = p.last_stage_layers;
    return std::nullopt;
  }
  const int counted_layers = L + (p.account_for_embedding ? 1 : 0) + (p.account_for_loss ? 1 : 0);
  if (counted_layers % (p.pp * p.vpp) != 0) {
    const std::string what = counted ? fmt::format("num_layers {} of model {} plus the {} counted as a layer ({})", L,
                                                   m.name,
                                                   p.account_for_embedding && p.account_for_loss ? "embedding and loss"
                                                   : p.account_for_embedding                     ? "embedding"
                                                                                                 : "loss",
                                                   counted_layers)
                                     : fmt::format("num_layers {} of model {}", L, m.name);
    return PipelineSplitProblem{
        p.vpp > 1 ? "$.vpp" : "$.pp",
        fmt::format("{} must be divisible by pp*vpp = {}*{} = {}, or the first and last stages given their own "
                    "layer counts (decoder_first_pipeline_num_layers, decoder_last_pipeline_num_layers)",
                    what, p.pp, p.vpp, p.pp * p.vpp)};
  }
  for (int& n : per_stage) n = counted_layers / p.pp;
  return std::nullopt;
}

}  // namespace

int PipelineSplit::stage_layers(int pp_rank) const {
  int n = 0;
  for (int c = 0; c < vpp; ++c) n += chunk_layers(pp_rank, c);
  return n;
}

int PipelineSplit::stage_moe_layers(const ModelSpec& model, int pp_rank) const {
  int n = 0;
  for (int c = 0; c < vpp; ++c) n += model.moe_layers_in(chunk_first(pp_rank, c), chunk_layers(pp_rank, c));
  return n;
}

int PipelineSplit::max_chunk_layers() const { return layers.empty() ? 0 : *std::max_element(layers.begin(), layers.end()); }

bool PipelineSplit::even() const {
  return std::adjacent_find(layers.begin(), layers.end(), std::not_equal_to<>()) == layers.end();
}

std::optional<PipelineSplitProblem> pipeline_split_problem(const ModelSpec& m, const PlanSpec& p) {
  std::vector<int> per_stage;
  if (auto problem = stage_counts(m, p, per_stage)) return problem;
  for (int r = 0; r < p.pp; ++r) {
    const int n = per_stage[static_cast<std::size_t>(r)];
    if (n % p.vpp != 0) {
      const bool own_count = (r == 0 && p.first_stage_layers > 0) || (r == p.pp - 1 && p.last_stage_layers > 0);
      return PipelineSplitProblem{
          own_count ? (r == 0 ? kFirstKey : kLastKey) : "$.vpp",
          fmt::format("pipeline stage {} holds {} layers, which must split evenly over its vpp = {} model chunks",
                      r, n, p.vpp)};
    }
  }
  // A virtual stage must keep a transformer layer after the counted embedding or loss.
  const int first_chunk = per_stage.front() / p.vpp - (p.account_for_embedding ? 1 : 0);
  const int last_chunk = per_stage.back() / p.vpp - (p.account_for_loss ? 1 : 0);
  if (first_chunk < 1 || last_chunk < 1 || *std::min_element(per_stage.begin(), per_stage.end()) < p.vpp) {
    return PipelineSplitProblem{first_chunk < 1 ? (p.account_for_embedding ? "$.account_for_embedding_in_pipeline_split"
                                                                           : kFirstKey)
                                                : (p.account_for_loss ? "$.account_for_loss_in_pipeline_split"
                                                                      : kLastKey),
                                "every virtual pipeline stage must keep at least one transformer layer"};
  }
  return std::nullopt;
}

PipelineSplit pipeline_split(const ModelSpec& m, const PlanSpec& p) {
  if (auto problem = pipeline_split_problem(m, p)) {
    throw InternalError("pipeline_split: the plan is not checked against the model: " + problem->message);
  }
  std::vector<int> per_stage;
  stage_counts(m, p, per_stage);
  PipelineSplit s;
  s.pp = p.pp;
  s.vpp = p.vpp;
  s.schedule = p.schedule;
  const int stages = p.pp * p.vpp;
  s.layers.assign(static_cast<std::size_t>(stages), 0);
  s.first.assign(static_cast<std::size_t>(stages), 0);
  for (int vs = 0; vs < stages; ++vs) s.layers[static_cast<std::size_t>(vs)] = per_stage[static_cast<std::size_t>(stage_place(p, vs).rank)] / p.vpp;
  if (p.account_for_embedding) --s.layers.front();
  if (p.account_for_loss) --s.layers.back();
  std::partial_sum(s.layers.begin(), s.layers.end() - 1, s.first.begin() + 1);
  return s;
}

}  // namespace strata
