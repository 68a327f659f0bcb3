// Parameter counts of a model, whole and as held by one GPU under a plan.
#pragma once

#include <cstdint>

#include "plan/model_spec.h"
#include "plan/plan_spec.h"

namespace strata {

// Parameters of one dense transformer layer (no parallelism): attention, norms
// and the MLP of ffn_hidden_size.
std::int64_t layer_params(const ModelSpec& m);
// Mixture of experts (MoeModel): one routed expert's MLP of moe_ffn_hidden_size,
// and one MoE layer whole: attention, norms, the router (h x E), the shared
// experts and every routed expert.
std::int64_t expert_params(const ModelSpec& m);
std::int64_t moe_layer_params(const ModelSpec& m);
// The word embedding's parameters (vocabulary x hidden).
std::int64_t word_embedding_params(const ModelSpec& m);
// Vocabulary rows one GPU holds of the embedding and the logits: Megatron-LM
// pads the vocabulary to a multiple of tp (at least; vocab_size_with_padding in
// megatron/core/tokenizers/utils/build_tokenizer.py) and splits it evenly.
std::int64_t vocab_rows_per_gpu(const ModelSpec& m, const PlanSpec& p);
// The vocabulary as the tp ranks hold it together (vocab_size rounded up to a multiple of tp).
std::int64_t padded_vocab_size(const ModelSpec& m, const PlanSpec& p);
// Learned absolute position embeddings (0 with rotary positions).
std::int64_t position_embedding_params(const ModelSpec& m);
// Word embedding (+ learned positions) parameters.
std::int64_t embedding_params(const ModelSpec& m);
// Output projection parameters when untied (0 when tied).
std::int64_t output_layer_params(const ModelSpec& m);
// Final normalization parameters.
std::int64_t final_norm_params(const ModelSpec& m);
// Unique parameters of the whole model.
std::int64_t total_params(const ModelSpec& m);
// Parameters one token passes through: all but the routed experts it is not
// sent to, num_experts - moe_router_topk per MoE layer (total_params for a
// dense model). MoE papers' "activated parameters"; MFU's model FLOPs count these.
std::int64_t active_params(const ModelSpec& m);

// Parameters held by one GPU of pipeline rank `stage` (0-based) under tensor
// parallelism (before any ZeRO sharding). With tied embeddings and pp > 1 the
// last stage holds its own copy of the word embedding for the output layer,
// as Megatron-LM does.
std::int64_t stage_params_per_gpu(const ModelSpec& m, const PlanSpec& p, int stage);
// Embedding parameters one GPU of the first stage holds (vocabulary split over tp).
std::int64_t embedding_params_per_gpu(const ModelSpec& m, const PlanSpec& p);
// Output-head parameters one GPU of the last stage holds: final norm and the output
// layer (untied, or Megatron's copy of the tied embedding when pp > 1), and the
// multi-token prediction layers' dense part (with its embedding copy).
std::int64_t head_params_per_gpu(const ModelSpec& m, const PlanSpec& p);
// Parameters of one dense layer held by one GPU under tensor parallelism.
std::int64_t layer_params_per_gpu(const ModelSpec& m, int tp);
// Of one MoE layer, held by one GPU: the part split over tp (attention, norms,
// the router, the shared experts), and the routed experts: num_experts / ep of
// them, each split over etp (the plan's MoE keys resolved).
std::int64_t moe_layer_dense_params_per_gpu(const ModelSpec& m, int tp);
std::int64_t moe_layer_expert_params_per_gpu(const ModelSpec& m, const PlanSpec& p);
// The most parameters one layer of the model puts on one GPU (a ZeRO-3 gather's unit).
std::int64_t max_layer_params_per_gpu(const ModelSpec& m, const PlanSpec& p);
// Multi-token prediction (ModelSpec::mtp_num_layers): one MTP layer whole
// (its transformer layer, eh_proj 2h x h, and its three norms: the embedding's,
// the hidden states', the final one; the output layer is the model's own), and
// all of them on one GPU of the last stage: the part split over tp (and the
// norms), and the routed experts of MoE ones. With untied embeddings and pp > 1
// the last stage also holds a copy of the word embedding for the MTP input,
// shared with the first stage as Megatron's tied copy is.
std::int64_t mtp_layer_params(const ModelSpec& m);
std::int64_t mtp_dense_params_per_gpu(const ModelSpec& m, const PlanSpec& p);
std::int64_t mtp_expert_params_per_gpu(const ModelSpec& m, const PlanSpec& p);
bool mtp_embedding_copy(const ModelSpec& m, const PlanSpec& p);
// Of stage_params_per_gpu, those every tensor-parallel rank holds whole whose
// gradients sequence parallelism leaves partial on each (each rank back-propagates
// only its own tokens through them): the norms, the row-parallel layers' biases,
// multi-head latent attention's duplicated down-projections, the MoE router, and
// on the last stage the final norm. Megatron-Core all-reduces their gradients over
// tp after the data-parallel reduction (finalize_model_grads.py,
// _allreduce_non_tensor_model_parallel_grads), as Strata's runtime does
// (ParameterStore::sum_replicated_over_tp). The plan's tp and sequence
// parallelism do not enter the count (the caller asks only when both are on);
// multi-token prediction layers are not counted.
std::int64_t sequence_parallel_replicated_params(const ModelSpec& m, const PlanSpec& p, int stage);
// Of stage_params_per_gpu, the routed experts' (0 for a dense model): sharded
// by ZeRO over the expert data-parallel group, not dp*cp.
std::int64_t stage_expert_params_per_gpu(const ModelSpec& m, const PlanSpec& p, int stage);

}  // namespace strata
