#include "plan/bucket_plan.h"

#include "plan/pipeline_split.h"

#include <algorithm>
#include <utility>

#include "core/error.h"
#include "plan/params.h"
#include "plan/pipeline_schedule.h"

namespace strata {

const char* to_string(ParamBlock block) {
  switch (block) {
    case ParamBlock::kWordEmbedding: return "word_embedding";
    case ParamBlock::kPositionEmbedding: return "position_embedding";
    case ParamBlock::kLayer: return "layer";
    case ParamBlock::kFinalNorm: return "final_norm";
    case ParamBlock::kMtp: return "mtp";
    case ParamBlock::kOutputLayer: return "output_layer";
  }
  return "layer";
}

bool GradBucket::holds(ParamBlock kind) const {
  return std::any_of(blocks.begin(), blocks.end(), [kind](const BlockRef& b) { return b.kind == kind; });
}

std::vector<BlockRef> chunk_blocks(const ModelSpec& model, const PlanSpec& plan, int pp_rank, int chunk) {
  const int vs = virtual_stage(plan, pp_rank, chunk);
  const int last_vs = plan.pp * plan.vpp - 1;
  const int layers = pipeline_split(model, plan).chunk_layers(pp_rank, chunk);
  std::vector<BlockRef> blocks;
  if (vs == 0) {
    blocks.push_back({ParamBlock::kWordEmbedding});
    if (model.position_embedding_type == PositionEmbedding::kLearnedAbsolute) {
      blocks.push_back({ParamBlock::kPositionEmbedding});
    }
  }
  for (int j = 0; j < layers; ++j) blocks.push_back({ParamBlock::kLayer, j});
  if (vs == last_vs) {
    blocks.push_back({ParamBlock::kFinalNorm});
    // Untied: its own output layer. Tied with pp > 1: Megatron's copy of the word
    // embedding on the last stage. Tied with pp == 1 (or zb-v's V, whose last
    // stage is on rank 0 too): the word embedding itself.
    if (model.untie_embeddings_and_output_weights || !embedding_on_head_rank(plan)) {
      blocks.push_back({ParamBlock::kOutputLayer});
    }
    // Multi-token prediction: its layers, and with untied embeddings on another
    // rank than the first stage's, the copy of the word embedding its input reads.
    if (mtp_embedding_copy(model, plan)) blocks.push_back({ParamBlock::kWordEmbedding});
    if (model.mtp_num_layers > 0) blocks.push_back({ParamBlock::kMtp});
  }
  return blocks;
}

std::int64_t block_params_per_gpu(const ModelSpec& model, const PlanSpec& plan, const BlockRef& block) {
  switch (block.kind) {
    case ParamBlock::kWordEmbedding:
    case ParamBlock::kOutputLayer: return word_embedding_params(model) / plan.tp;
    case ParamBlock::kPositionEmbedding: return position_embedding_params(model);
    case ParamBlock::kLayer: return layer_params_per_gpu(model, plan.tp);
    case ParamBlock::kFinalNorm: return final_norm_params(model);
    case ParamBlock::kMtp: return mtp_dense_params_per_gpu(model, plan);
  }
  return 0;
}

bool is_shared_embedding(const ModelSpec& model, const PlanSpec& plan, const BlockRef& block) {
  const bool embedding = block.kind == ParamBlock::kWordEmbedding || block.kind == ParamBlock::kOutputLayer;
  // Untied, the word embedding is shared only with multi-token prediction's copy.
  if (mtp_embedding_copy(model, plan)) return block.kind == ParamBlock::kWordEmbedding;
  return embedding && !model.untie_embeddings_and_output_weights && !embedding_on_head_rank(plan);
}

std::vector<int> chunks_by_last_backward(const std::vector<PipelineOp>& program, int vpp) {
  // (op index of the chunk's last backward, or W where the schedule splits it, chunk)
  std::vector<std::pair<int, int>> last;
  for (int c = 0; c < vpp; ++c) {
    int at = -1;
    for (int i = 0; i < static_cast<int>(program.size()); ++i) {
      if (program[i].phase != PipelinePhase::kForward && program[i].chunk == c) at = i;
    }
    last.emplace_back(at, c);
  }
  std::sort(last.begin(), last.end());
  std::vector<int> out;
  for (const auto& [unused, c] : last) out.push_back(c);
  return out;
}

std::vector<GradBucket> grad_buckets(const ModelSpec& model, const PlanSpec& plan, int pp_rank) {
  if (pp_rank < 0 || pp_rank >= plan.pp) throw InternalError("grad_buckets: no such pipeline rank");
  return grad_buckets(model, plan, pp_rank,
                      pipeline_program(plan.schedule, plan.pp, plan.vpp, plan.num_microbatches(), pp_rank));
}

std::vector<GradBucket> grad_buckets(const ModelSpec& model, const PlanSpec& plan, int pp_rank,
                                     const std::vector<PipelineOp>& program) {
  if (plan.dp < 1 || pipeline_split_problem(model, plan) || pp_rank < 0 || pp_rank >= plan.pp) {
    throw InternalError("grad_buckets: the plan is not checked against the model");
  }
  const bool every_block_alone = plan.zero_stage == 3 && plan.dp > 1;
  const bool distributed_optimizer = plan.zero_stage >= 1;
  std::vector<GradBucket> buckets;
  GradBucket current;
  auto close = [&] {
    if (!current.blocks.empty()) buckets.push_back(std::move(current));
    current = GradBucket{};
  };
  // An MoE model's layers are of two kinds: which one a chunk's layer is needs its global index.
  const std::optional<PipelineSplit> split = model.is_moe() ? std::optional(pipeline_split(model, plan)) : std::nullopt;
  for (int chunk : chunks_by_last_backward(program, plan.vpp)) {
    current.chunk = chunk;
    std::vector<BlockRef> blocks = chunk_blocks(model, plan, pp_rank, chunk);
    std::reverse(blocks.begin(), blocks.end());  // backward order
    const int first_layer = split ? split->first[virtual_stage(plan, pp_rank, chunk)] : 0;
    for (const BlockRef& block : blocks) {
      const bool shared = is_shared_embedding(model, plan, block);
      const bool alone = every_block_alone || (shared && distributed_optimizer);
      if (alone) close();
      current.chunk = chunk;
      current.blocks.push_back(block);
      if (block.kind == ParamBlock::kLayer && split && model.is_moe_layer(first_layer + block.layer)) {
        current.params += moe_layer_dense_params_per_gpu(model, plan.tp);
        current.expert_params += moe_layer_expert_params_per_gpu(model, plan);
      } else if (block.kind == ParamBlock::kMtp) {
        current.params += mtp_dense_params_per_gpu(model, plan);
        current.expert_params += mtp_expert_params_per_gpu(model, plan);
      } else {
        current.params += block_params_per_gpu(model, plan, block);
      }
      current.shared_embedding = current.shared_embedding || shared;
      // A full bucket closes after a layer above the chunk's lowest, so whatever
      // follows the lowest layer (the embedding) joins the last bucket.
      const bool full = block.kind == ParamBlock::kLayer && block.layer > 0 &&
                        current.params + current.expert_params >= plan.ddp_bucket_size;
      if (alone || full) close();
    }
    close();
  }
  return buckets;
}

}  // namespace strata
