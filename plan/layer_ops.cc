#include "plan/layer_ops.h"

#include <cmath>

namespace strata {
namespace {

using i64 = std::int64_t;

LayerOp gemm(OpRole role, std::string name, i64 m, i64 n, i64 k, i64 batch, bool has_weight,
             bool attention_core = false) {
  LayerOp op;
  op.name = std::move(name);
  op.role = role;
  op.kind = OpKind::kGemm;
  op.gemm = {m, n, k, batch};
  op.flops = op.gemm.flops();
  op.has_weight = has_weight;
  op.attention_core = attention_core;
  return op;
}

// The fused attention core over a sequence of s: batch x heads (and key/value
// heads), the kernel's head size, its FLOPs and bytes on this GPU.
LayerOp flash_attention(i64 s, i64 batch_heads, i64 batch_kv_heads, i64 head_dim, double flops, double bytes) {
  LayerOp a;
  a.name = "flash_attention";
  a.role = OpRole::kFlashAttention;
  a.kind = OpKind::kAttention;
  a.flops = flops;
  a.bytes = bytes;
  a.attention_core = true;
  a.attn_batch_heads = batch_heads;
  a.attn_seq = s;
  a.attn_head_dim = head_dim;
  a.attn_batch_kv_heads = batch_kv_heads;
  return a;
}

LayerOp elementwise(OpRole role, std::string name, double bytes, bool attention_core = false) {
  LayerOp op;
  op.name = std::move(name);
  op.role = role;
  op.kind = OpKind::kElementwise;
  op.bytes = bytes;
  op.attention_core = attention_core;
  return op;
}

}  // namespace

const char* to_string(OpRole role) {
  switch (role) {
    case OpRole::kQkv: return "qkv";
    case OpRole::kProj: return "proj";
    case OpRole::kFc1: return "fc1";
    case OpRole::kFc2: return "fc2";
    case OpRole::kLogits: return "logits";
    case OpRole::kAttnScores: return "attn_scores";
    case OpRole::kAttnValues: return "attn_values";
    case OpRole::kFlashAttention: return "flash_attention";
    case OpRole::kNorm: return "norm";
    case OpRole::kSoftmax: return "softmax";
    case OpRole::kDropout: return "dropout";
    case OpRole::kActivation: return "activation";
    case OpRole::kResidual: return "residual";
    case OpRole::kCrossEntropy: return "cross_entropy";
    case OpRole::kEmbedding: return "embedding";
    case OpRole::kRouter: return "router";
    case OpRole::kExpertFc1: return "expert_fc1";
    case OpRole::kExpertFc2: return "expert_fc2";
    case OpRole::kPermute: return "permute";
    case OpRole::kSortChunks: return "sort_chunks";
    case OpRole::kMlaDown: return "mla_down";
    case OpRole::kMlaUp: return "mla_up";
    case OpRole::kMlaRope: return "mla_rope";
  }
  return "residual";
}

bool is_column_parallel(OpRole role) {
  return role == OpRole::kQkv || role == OpRole::kFc1 || role == OpRole::kLogits || role == OpRole::kMlaUp;
}

bool is_mla_up_proj(const LayerOp& op) { return op.role == OpRole::kMlaUp || op.role == OpRole::kMlaRope; }

double op_sac_recomputed_share(const LayerOp& op, const ModelSpec& m) {
  if (op.kind != OpKind::kGemm || !op.has_weight) return 0.0;
  const double h = static_cast<double>(m.q_width());  // Q's width, as layer_forward_ops makes QKV
  const double kv = static_cast<double>(m.kv_width());
  const double f = static_cast<double>(m.ffn_hidden_size);
  // The matmuls before this op's in torchtitan's order, and this op's parts' widths.
  int before = 0;
  std::vector<double> parts;
  switch (op.role) {
    case OpRole::kQkv: parts = {h, kv, kv}; break;
    case OpRole::kProj: before = 3; parts = {1.0}; break;
    case OpRole::kFc1: before = 4; parts = m.swiglu ? std::vector<double>{f, f} : std::vector<double>{1.0}; break;
    case OpRole::kFc2: before = m.swiglu ? 6 : 5; parts = {1.0}; break;
    default: return 0.0;
  }
  double total = 0.0, recomputed = 0.0;
  for (std::size_t i = 0; i < parts.size(); ++i) {
    total += parts[i];
    if ((before + static_cast<int>(i) + 1) % 2 == 0) recomputed += parts[i];
  }
  return recomputed / total;
}

bool is_row_parallel(OpRole role) { return role == OpRole::kProj || role == OpRole::kFc2; }

LayerOpContext layer_op_context(const PlanSpec& plan) {
  LayerOpContext c;
  c.tp = plan.tp;
  c.cp = plan.cp;
  c.sequence_parallel = plan.sequence_parallel;
  c.micro_batch_size = plan.micro_batch_size;
  c.flash_attention = plan.flash_attention;
  c.dtype = plan.dtype;
  if (plan.moe.active) {
    c.etp = plan.moe.etp;
    c.expert_load = expert_load_factor(plan);
    c.ep = plan.moe.ep;
    c.alltoall = plan.moe.token_dispatcher == MoeDispatcher::kAllToAll;
  }
  return c;
}

double expert_load_factor(const PlanSpec& plan) {
  // With a capacity factor an expert takes at most that multiple of its share
  // (Megatron-Core's get_capacity: ceil(tokens * topk / E * factor), the rest
  // dropped); dropless, the busiest expert takes what the routing sends it.
  return plan.moe.expert_capacity_factor > 0.0 ? plan.moe.expert_capacity_factor : plan.moe.router_imbalance;
}

namespace {

// An MoE layer's MLP part, in Megatron-Core's MoELayer order: the router over
// this rank's sequence-parallel shard, the token permutation, the routed experts
// over the tokens dispatched to this rank, the unpermutation, then the shared
// experts (a tensor-parallel MLP of their width, added to the routed output).
// The dispatch and combine exchanges sit around the routed experts
// (sim/workload/segments.cc places them).
void append_moe_mlp(std::vector<LayerOp>& ops, const ModelSpec& m, const LayerOpContext& c, i64 tokens, double e) {
  const MoeModel& moe = m.moe;
  const i64 t = c.tp;
  const i64 h = m.hidden_size;
  const i64 own_tokens = c.sequence_parallel ? tokens / t : tokens;
  ops.push_back(gemm(OpRole::kRouter, "router", own_tokens, moe.num_experts, h, 1, true));
  const double own_bytes = static_cast<double>(own_tokens) * h * e;
  // Each token copied once per expert it goes to: read and written.
  ops.push_back(elementwise(OpRole::kPermute, "permute", 2.0 * own_bytes * moe.moe_router_topk));
  const i64 routed = static_cast<i64>(
      std::ceil(static_cast<double>(own_tokens) * moe.moe_router_topk * c.etp * c.expert_load));
  const i64 f = moe.moe_ffn_hidden_size / c.etp;
  const i64 fc1 = m.swiglu ? 2 * f : f;
  // A grouped GEMM: one GEMM per local expert over its share of the routed
  // tokens (its efficiency is that of the smaller shape); FLOPs of them all.
  auto expert_gemm = [&](OpRole role, const char* name, i64 n, i64 k) {
    const i64 local = c.ep > 0 ? moe.num_experts / c.ep : 1;
    LayerOp op = gemm(role, name, (routed + local - 1) / local, n, k, local, true);
    op.flops = 2.0 * static_cast<double>(routed) * n * k;
    return op;
  };
  // Megatron-Core's all-to-all dispatcher reorders what it received, each row
  // read and written once, before the experts and back after them.
  const bool sort = c.alltoall && c.ep > 1 && moe.num_experts / c.ep > 1;
  const double sorted_bytes = 2.0 * static_cast<double>(routed) * h * e;
  if (sort) ops.push_back(elementwise(OpRole::kSortChunks, "sort_chunks", sorted_bytes));
  ops.push_back(expert_gemm(OpRole::kExpertFc1, "expert_fc1", fc1, h));
  ops.push_back(elementwise(OpRole::kActivation, m.swiglu ? "expert_swiglu" : "expert_gelu",
                            static_cast<double>(routed) * (fc1 + f) * e));
  ops.push_back(expert_gemm(OpRole::kExpertFc2, "expert_fc2", h, f));
  if (sort) ops.push_back(elementwise(OpRole::kSortChunks, "unsort_chunks", sorted_bytes));
  // Reads every routed copy, writes the token once.
  ops.push_back(elementwise(OpRole::kPermute, "unpermute", own_bytes * (moe.moe_router_topk + 1)));
  if (moe.moe_shared_expert_intermediate_size > 0) {
    const i64 sf = moe.moe_shared_expert_intermediate_size / t;
    const i64 sfc1 = m.swiglu ? 2 * sf : sf;
    ops.push_back(gemm(OpRole::kFc1, "shared_fc1", tokens, sfc1, h, 1, true));
    ops.push_back(elementwise(OpRole::kActivation, m.swiglu ? "shared_swiglu" : "shared_gelu",
                              static_cast<double>(tokens) * (sfc1 + sf) * e));
    ops.push_back(gemm(OpRole::kFc2, "shared_fc2", tokens, h, sf, 1, true));
    for (auto it = ops.end() - 3; it != ops.end(); ++it) it->shared_expert = true;
  }
}

// Multi-head or grouped-query attention after the input norm, to the
// projection: QKV (column-parallel), the core (fused, or as its batched GEMMs
// and softmax), the projection (row-parallel).
void append_attention(std::vector<LayerOp>& ops, const ModelSpec& m, const LayerOpContext& c, i64 tokens, double e) {
  const i64 t = c.tp;
  const i64 b = c.micro_batch_size;
  const i64 s = m.seq_length;
  const i64 h = m.hidden_size;
  const i64 heads = m.num_attention_heads / t;
  const i64 q = m.q_width();  // hidden_size unless the model's kv_channels says otherwise
  const i64 d = m.head_dim();
  const i64 kv = m.kv_width() / t;
  ops.push_back(gemm(OpRole::kQkv, "qkv", tokens, q / t + 2 * kv, h, 1, true));
  if (c.flash_attention) {
    // Scores + values over the whole s x s (Megatron's count); a context-parallel
    // rank does 1/cp of it (its load-balanced chunks' share of the causal work).
    ops.push_back(flash_attention(s, b * heads, b * (kv / d), d,
                                  4.0 * static_cast<double>(b) * heads * s * s * d / static_cast<double>(c.cp),
                                  static_cast<double>(tokens) * (2 * heads * d + 2 * kv) * e));  // Q, K, V in, O out
  } else {
    const double scores = static_cast<double>(b) * heads * s * s * e;
    ops.push_back(gemm(OpRole::kAttnScores, "attn_scores", s, s, d, b * heads, false, true));
    // Softmax reads and writes the scores; dropout reads them and writes output and mask.
    ops.push_back(elementwise(OpRole::kSoftmax, "softmax", 2.0 * scores, true));
    if (m.attention_dropout > 0.0) ops.push_back(elementwise(OpRole::kDropout, "attn_dropout", 2.5 * scores, true));
    ops.push_back(gemm(OpRole::kAttnValues, "attn_values", s, d, s, b * heads, false, true));
  }
  ops.push_back(gemm(OpRole::kProj, "proj", tokens, h, q / t, 1, true));
}

// Multi-head latent attention after the input norm, to the projection, in
// Megatron-Core's MLASelfAttention order (multi_latent_attention.py, with
// gpt_layer_specs.py's TE modules): the down-projections over this rank's
// tokens (whole weights: TELinear "duplicated"), the latents' RMSNorms, the
// up-projections (column-parallel; with sequence parallelism they gather the
// normed latents over tp, the rotary key with the key/value latent), the
// rotary embedding assembling Q = [q_nope, rope(q_pe)] and K = [k_nope,
// rope(k_pe)] per head and V contiguous for the fused kernel, the attention
// (keys of q_head_dim, values of v_head_dim), the output projection.
void append_mla_attention(std::vector<LayerOp>& ops, const ModelSpec& m, const LayerOpContext& c, i64 tokens,
                          double e) {
  const MlaModel& mla = m.mla;
  const i64 t = c.tp;
  const i64 b = c.micro_batch_size;
  const i64 s = m.seq_length;
  const i64 h = m.hidden_size;
  const i64 heads = m.num_attention_heads / t;
  const i64 qh = mla.q_head_dim();
  const i64 v = mla.v_head_dim;
  const i64 own = c.sequence_parallel ? tokens / t : tokens;  // the duplicated layers' tokens
  const i64 kv_down = mla.kv_lora_rank + mla.qk_pos_emb_head_dim;
  if (mla.q_lora_rank > 0) ops.push_back(gemm(OpRole::kMlaDown, "q_down", own, mla.q_lora_rank, h, 1, true));
  ops.push_back(gemm(OpRole::kMlaDown, "kv_down", own, kv_down, h, 1, true));
  auto latent_norm = [&](const char* name, i64 width) {
    LayerOp n = elementwise(OpRole::kNorm, name, 2.0 * static_cast<double>(own) * width * e);
    n.norm_width = width;
    ops.push_back(n);
  };
  if (mla.q_lora_rank > 0) latent_norm("q_norm", mla.q_lora_rank);
  latent_norm("kv_norm", mla.kv_lora_rank);
  LayerOp q_up = mla.q_lora_rank > 0 ? gemm(OpRole::kMlaUp, "q_up", tokens, heads * qh, mla.q_lora_rank, 1, true)
                                     : gemm(OpRole::kMlaUp, "q_proj", tokens, heads * qh, h, 1, true);
  q_up.tp_input_width = mla.q_lora_rank;  // 0 without compression: the hidden stream
  ops.push_back(q_up);
  LayerOp kv_up = gemm(OpRole::kMlaUp, "kv_up", tokens, heads * (mla.qk_head_dim + v), mla.kv_lora_rank, 1, true);
  kv_up.tp_input_width = kv_down;
  ops.push_back(kv_up);
  const double qkv = static_cast<double>(tokens) * heads * (2 * qh + v) * e;  // Q, K, V on this rank
  ops.push_back(elementwise(OpRole::kMlaRope, "mla_rope", 2.0 * qkv));
  if (c.flash_attention) {
    // 2 s^2 per head for the scores' q_head_dim and the values' v_head_dim.
    ops.push_back(flash_attention(
        s, b * heads, b * heads, m.head_dim(),
        2.0 * static_cast<double>(b) * heads * s * s * static_cast<double>(qh + v) / static_cast<double>(c.cp),
        qkv + static_cast<double>(tokens) * heads * v * e));  // Q, K, V in, O out
  } else {
    const double scores = static_cast<double>(b) * heads * s * s * e;
    ops.push_back(gemm(OpRole::kAttnScores, "attn_scores", s, s, qh, b * heads, false, true));
    ops.push_back(elementwise(OpRole::kSoftmax, "softmax", 2.0 * scores, true));
    if (m.attention_dropout > 0.0) ops.push_back(elementwise(OpRole::kDropout, "attn_dropout", 2.5 * scores, true));
    ops.push_back(gemm(OpRole::kAttnValues, "attn_values", s, v, s, b * heads, false, true));
  }
  ops.push_back(gemm(OpRole::kProj, "proj", tokens, h, heads * v, 1, true));
}

}  // namespace

std::vector<LayerOp> layer_forward_ops(const ModelSpec& m, const LayerOpContext& c, MlpKind mlp) {
  const i64 t = c.tp;
  const i64 b = c.micro_batch_size;
  const i64 s = m.seq_length;
  const i64 h = m.hidden_size;
  const i64 f = m.ffn_hidden_size / t;
  const i64 fc1 = m.swiglu ? 2 * f : f;
  const double e = dtype_bytes(c.dtype);
  // Context parallelism: this GPU's tokens of each sequence.
  const i64 tokens = s / c.cp * b;
  // Elementwise work on the residual stream is split over tp only with sequence parallel.
  const double stream = static_cast<double>(tokens) * h * e / (c.sequence_parallel ? t : 1);

  std::vector<LayerOp> ops;
  ops.push_back(elementwise(OpRole::kNorm, "input_norm", 2.0 * stream));
  if (m.mla.enabled) {
    append_mla_attention(ops, m, c, tokens, e);
  } else {
    append_attention(ops, m, c, tokens, e);
  }
  // Residual add (+ dropout): reads two streams, writes one (and a 1-byte mask).
  ops.push_back(elementwise(OpRole::kResidual, "residual_attn", 3.0 * stream + (m.hidden_dropout > 0 ? stream / e : 0)));
  ops.push_back(elementwise(OpRole::kNorm, "post_attn_norm", 2.0 * stream));
  if (mlp == MlpKind::kMoe) {
    append_moe_mlp(ops, m, c, tokens, e);
  } else {
    ops.push_back(gemm(OpRole::kFc1, "fc1", tokens, fc1, h, 1, true));
    const double act_in = static_cast<double>(tokens) * fc1 * e;
    const double act_out = static_cast<double>(tokens) * f * e;
    ops.push_back(elementwise(OpRole::kActivation, m.swiglu ? "swiglu" : "gelu", act_in + act_out));
    ops.push_back(gemm(OpRole::kFc2, "fc2", tokens, h, f, 1, true));
  }
  ops.push_back(elementwise(OpRole::kResidual, "residual_mlp", 3.0 * stream + (m.hidden_dropout > 0 ? stream / e : 0)));
  return ops;
}

std::vector<LayerOp> head_forward_ops(const ModelSpec& m, const LayerOpContext& c) {
  const i64 t = c.tp;
  const i64 tokens = static_cast<i64>(m.seq_length) / c.cp * c.micro_batch_size;
  const double e = dtype_bytes(c.dtype);
  const double stream = static_cast<double>(tokens) * m.hidden_size * e / (c.sequence_parallel ? t : 1);
  // Megatron pads the vocabulary to a multiple of tp (plan/params.h vocab_rows_per_gpu).
  const i64 vocab_rows = (static_cast<i64>(m.vocab_size) + t - 1) / t;
  std::vector<LayerOp> ops;
  ops.push_back(elementwise(OpRole::kNorm, "final_norm", 2.0 * stream));
  ops.push_back(gemm(OpRole::kLogits, "logits", tokens, vocab_rows, m.hidden_size, 1, true));
  // Vocab-parallel cross-entropy in fp32: reads the logits, writes fp32 softmax.
  ops.push_back(elementwise(OpRole::kCrossEntropy, "cross_entropy",
                            static_cast<double>(tokens) * vocab_rows * (e + 4.0)));
  return ops;
}

std::vector<LayerOp> embedding_forward_ops(const ModelSpec& m, const LayerOpContext& c) {
  const i64 tokens = static_cast<i64>(m.seq_length) / c.cp * c.micro_batch_size;
  const double e = dtype_bytes(c.dtype);
  // Gathers one row per token and writes the stream (before the tp all-reduce).
  return {elementwise(OpRole::kEmbedding, "embedding", 2.0 * static_cast<double>(tokens) * m.hidden_size * e)};
}

}  // namespace strata
