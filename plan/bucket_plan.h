// Which parameters one pipeline rank reduces together over data parallelism: its
// gradient buckets, the one rule the simulator and the runtime both follow.
//
// Megatron-LM's rule (megatron/core/distributed/param_and_grad_buffer.py): each
// model chunk has its own buffer; its parameters are taken in backward order and a
// bucket is closed once it holds --ddp-bucket-size parameters (the plan's
// ddp_bucket_size). With the distributed optimizer (ZeRO >= 1) the tied word
// embedding shared by the first and last stage (pp > 1) is a bucket of its own, so
// both stages shard it identically and the embedding group can sum it shard by
// shard. Our granularity is the block (a layer, the word embedding, ...), not the
// single tensor, and a chunk's last bucket takes what follows its lowest layer, so
// the embedding never is a bucket of a few parameters. With ZeRO-3 (dp > 1) every
// block is its own bucket, gathered before use.
#pragma once

#include <cstdint>
#include <vector>

#include "plan/model_spec.h"
#include "plan/pipeline_schedule.h"
#include "plan/plan_spec.h"

namespace strata {

// The parameter blocks of a model chunk.
// kMtp: the multi-token prediction layers of the last stage (ModelSpec::mtp_num_layers).
enum class ParamBlock { kWordEmbedding, kPositionEmbedding, kLayer, kFinalNorm, kOutputLayer, kMtp };
const char* to_string(ParamBlock block);

struct BlockRef {
  ParamBlock kind = ParamBlock::kLayer;
  int layer = -1;  // chunk-local layer index for kLayer, -1 otherwise
  bool operator==(const BlockRef&) const = default;
};

struct GradBucket {
  int chunk = 0;
  std::vector<BlockRef> blocks;   // in backward order: blocks.back() finishes last in the
                                  // backward and is used first in the forward
  std::int64_t params = 0;        // one GPU's parameters (its tensor-parallel share), but:
  // the routed experts' parameters of its MoE layers (num_experts / ep experts,
  // split over etp), which reduce over the expert data-parallel group, not dp x cp
  // (Megatron-Core keeps them in buffers of their own); 0 for a dense model.
  std::int64_t expert_params = 0;
  bool shared_embedding = false;  // holds the tied word embedding or its last-stage copy (pp > 1)
  bool holds(ParamBlock kind) const;
};

// The blocks chunk `chunk` of pipeline rank `pp_rank` holds, in forward order: the
// word embedding and learned positions on the first virtual stage, its layers, the
// final norm and the output layer on the last (the output layer is the tied
// embedding's copy when pp > 1, absent when tied and pp == 1).
std::vector<BlockRef> chunk_blocks(const ModelSpec& model, const PlanSpec& plan, int pp_rank, int chunk);

// One GPU's parameters of a block under the plan's tensor parallelism (a layer:
// the dense layer's; grad_buckets splits an MoE layer's into its two parts).
std::int64_t block_params_per_gpu(const ModelSpec& model, const PlanSpec& plan, const BlockRef& block);

// Whether a block is the word embedding the first and last stage share on two
// ranks (tied, pp > 1, not zb-v's V).
bool is_shared_embedding(const ModelSpec& model, const PlanSpec& plan, const BlockRef& block);

// The chunks of a pipeline rank ordered by when their last backward (or W) runs in its
// program (pipeline_program of the plan's schedule for that rank).
std::vector<int> chunks_by_last_backward(const std::vector<PipelineOp>& program, int vpp);

// The gradient buckets of pipeline rank `pp_rank`, in the order their gradients
// become final. Requires a checked plan (dp resolved, layers divisible by pp * vpp).
// `program` is the rank's pipeline program; the first form generates it.
std::vector<GradBucket> grad_buckets(const ModelSpec& model, const PlanSpec& plan, int pp_rank);
std::vector<GradBucket> grad_buckets(const ModelSpec& model, const PlanSpec& plan, int pp_rank,
                                     const std::vector<PipelineOp>& program);

}  // namespace strata
