// The operations of one transformer layer's forward pass on one GPU, for one
// micro-batch: the single list the FLOPs model counts and the workload builder
// turns into tasks. Backward costs follow from it (each GEMM has a data- and a
// weight-gradient GEMM of the same size; elementwise work is read back twice).
//
// Shapes follow Megatron-LM's column-/row-parallel layers: QKV and fc1 split
// their output over tp, the projection and fc2 their input.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "plan/model_spec.h"
#include "plan/plan_spec.h"

namespace strata {

enum class OpKind {
  kGemm,         // a (batched) matrix multiply
  kAttention,    // fused flash-style attention core (scores, softmax, values)
  kElementwise,  // memory-bound: norms, softmax, activations, residuals, dropout
};

// C[m x n] = A[m x k] * B[k x n], `batch` times.
struct GemmShape {
  std::int64_t m = 0;
  std::int64_t n = 0;
  std::int64_t k = 0;
  std::int64_t batch = 1;
  double flops() const { return 2.0 * static_cast<double>(m) * n * k * batch; }
};

// What an op is in the layer: the cost side and the placement of tensor-parallel
// collectives dispatch on it, never on the op's name (which only labels traces).
enum class OpRole {
  // GEMMs with a weight; column-parallel (output split over tp): qkv, fc1, logits;
  // row-parallel (input split over tp): proj, fc2.
  kQkv, kProj, kFc1, kFc2, kLogits,
  // Attention's batched GEMMs when not fused.
  kAttnScores, kAttnValues,
  // The fused attention core.
  kFlashAttention,
  // Memory-bound.
  kNorm, kSoftmax, kDropout, kActivation, kResidual, kCrossEntropy, kEmbedding,
  // MoE layers: the router's scores (an h x E GEMM every tensor-parallel rank
  // runs whole), and the routed experts' fc1 and fc2 over the tokens
  // dispatched to this rank's experts (split over etp, not tp). A shared
  // expert is an MLP of its own width: kFc1 / kFc2.
  kRouter, kExpertFc1, kExpertFc2,
  // Memory-bound: the routed tokens gathered into expert order before the
  // dispatch and scattered back, weighted by their routing probabilities, after
  // the combine (Megatron-Core's permute / unpermute).
  kPermute,
  // Memory-bound: the all-to-all dispatcher's received tokens (source by source)
  // reordered expert by expert for the grouped GEMM, and back before the combine
  // (token_dispatcher.py sort_chunks_by_idxs, with more than one local expert).
  kSortChunks,
  // Multi-head latent attention: the down-projections to the latents, whole
  // on every tensor-parallel rank over its own tokens (Megatron-Core's TELinear
  // in "duplicated" mode); the up-projections from the latents (or, without
  // query compression, the query projection), column-parallel; the rotary
  // embedding's assembly of Q and K (memory-bound).
  kMlaDown, kMlaUp, kMlaRope,
};
const char* to_string(OpRole role);
bool is_column_parallel(OpRole role);
bool is_row_parallel(OpRole role);

struct LayerOp {
  std::string name;       // its label: "qkv", "input_norm", "residual_attn", ...
  OpRole role = OpRole::kResidual;
  OpKind kind = OpKind::kElementwise;
  GemmShape gemm;         // kGemm only
  double flops = 0.0;     // forward FLOPs on this GPU
  double bytes = 0.0;     // forward bytes read + written (memory-bound ops, attention)
  bool attention_core = false;  // recomputed by selective recompute
  bool has_weight = false;      // kGemm with a weight: backward has a weight-gradient GEMM
  // Fused attention dimensions (kAttention): batch*heads, sequence, head size.
  // attn_seq is the whole sequence; with context parallelism this GPU's queries
  // are attn_seq / cp of it (the workload splits the kernel into cp's steps).
  std::int64_t attn_batch_heads = 0;
  std::int64_t attn_seq = 0;
  std::int64_t attn_head_dim = 0;
  std::int64_t attn_batch_kv_heads = 0;  // batch * key/value heads (grouped-query attention)
  // A column-parallel op's input width, what sequence parallelism gathers over
  // tp before it (0: the hidden stream; MLA's up-projections gather a latent).
  std::int64_t tp_input_width = 0;
  // A norm's width (its scale's length; 0: hidden_size; MLA's latent norms).
  std::int64_t norm_width = 0;
  // Part of an MoE layer's shared experts (their fc1, activation and fc2).
  bool shared_expert = false;
};

struct LayerOpContext {
  int tp = 1;
  int cp = 1;  // every op runs on seq_length / cp tokens; attention does 1/cp of the causal work
  bool sequence_parallel = false;
  int micro_batch_size = 1;
  bool flash_attention = false;
  DType dtype = DType::kBf16;
  // MoE layers: the expert tensor-parallel size, and the tokens this rank's
  // experts take as a multiple of their balanced share (expert_load_factor:
  // the capacity factor, or dropless the routing imbalance; 1 for the whole
  // model's FLOPs).
  int etp = 1;
  double expert_load = 1.0;
  // The expert-parallel size: each rank's num_experts / ep experts run as one
  // grouped GEMM of that many GEMMs (batch), each over its share of the routed
  // tokens; 0: one GEMM over all routed tokens (the whole model's FLOPs).
  int ep = 0;
  // The all-to-all dispatcher: with more than one local expert the received
  // tokens are sorted by expert and back (kSortChunks).
  bool alltoall = false;
};

// Multi-head latent attention's recompute set (Megatron-Core's recompute module
// "mla_up_proj"): the up-projections and the rotary assembly, whose outputs
// (Q, K, V) are freed after the attention and rebuilt before its backward.
bool is_mla_up_proj(const LayerOp& op);

// Which MLP a layer has: the dense one, or an MoE layer's router, shared and routed experts.
enum class MlpKind { kDense, kMoe };

LayerOpContext layer_op_context(const PlanSpec& plan);
// The tokens the busiest expert takes as a multiple of its balanced share: the
// plan's capacity factor, or dropless its routing imbalance.
double expert_load_factor(const PlanSpec& plan);

// torchtitan's op-level selective recompute counts the layer's matmuls in
// forward order, unfused (wq, wk, wv, wo, w1, w3 when gated, w2), keeps every
// odd one's output and recomputes every even one (torchtitan
// apply_activation_checkpointing: "Saves output of all compute ops, except every
// second mm"). The share of a weight GEMM's output columns it recomputes: QKV
// the K part, the projection all, fc1 the w3 half when gated, fc2 none (gated)
// or all (not gated); 0 for ops without a weight.
double op_sac_recomputed_share(const LayerOp& op, const ModelSpec& m);

// Forward operations of one transformer layer, in execution order. An MoE
// layer's routed-expert GEMMs run over the tokens this rank's experts take:
// (its tokens, of its sequence-parallel shard) x topk x etp x expert_load; the
// whole model's (tp 1, etp 1, load 1) give topk x tokens, its active FLOPs.
std::vector<LayerOp> layer_forward_ops(const ModelSpec& m, const LayerOpContext& c, MlpKind mlp = MlpKind::kDense);
// The output layer (logits GEMM) and the cross-entropy of one micro-batch.
std::vector<LayerOp> head_forward_ops(const ModelSpec& m, const LayerOpContext& c);
// The embedding lookup of one micro-batch.
std::vector<LayerOp> embedding_forward_ops(const ModelSpec& m, const LayerOpContext& c);

}  // namespace strata
