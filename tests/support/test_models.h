// Models and plans built in code for unit tests, each with its source.
#pragma once

#include "plan/model_spec.h"
#include "plan/plan_spec.h"

namespace strata::testing {

// GPT-3 175B (Brown et al. 2020, Table 2.1) with Megatron's padded vocabulary.
inline ModelSpec gpt3_175b() {
  ModelSpec m;
  m.name = "gpt3-175b";
  m.num_layers = 96;
  m.hidden_size = 12288;
  m.num_attention_heads = 96;
  m.num_query_groups = 96;
  m.ffn_hidden_size = 4 * 12288;
  m.seq_length = 2048;
  m.vocab_size = 51200;
  return m;
}

// The 7.5B GPT of Narayanan et al. 2021, Table 1 (36 layers, hidden 4096, 32 heads):
// 7.47B parameters, within 0.5% of the ZeRO paper's 7.5B example.
inline ModelSpec gpt_7_5b() {
  ModelSpec m = gpt3_175b();
  m.name = "gpt-7.5b";
  m.num_layers = 36;
  m.hidden_size = 4096;
  m.num_attention_heads = 32;
  m.num_query_groups = 32;
  m.ffn_hidden_size = 4 * 4096;
  return m;
}

// Llama 3 8B (Llama Team 2024, Table 3): GQA with 8 KV heads, SwiGLU, RMSNorm.
inline ModelSpec llama3_8b() {
  ModelSpec m;
  m.name = "llama3-8b";
  m.num_layers = 32;
  m.hidden_size = 4096;
  m.num_attention_heads = 32;
  m.num_query_groups = 8;
  m.ffn_hidden_size = 14336;
  m.swiglu = true;
  m.normalization = Normalization::kRmsNorm;
  m.seq_length = 8192;
  m.vocab_size = 128256;
  m.untie_embeddings_and_output_weights = true;
  m.position_embedding_type = PositionEmbedding::kRope;
  m.add_bias_linear = false;
  m.hidden_dropout = 0.0;
  m.attention_dropout = 0.0;
  return m;
}

inline PlanSpec plan(int tp, int pp, int dp, int mbs, int gbs) {
  PlanSpec p;
  p.tp = tp;
  p.pp = pp;
  p.dp = dp;
  p.micro_batch_size = mbs;
  p.global_batch_size = gbs;
  return p;
}

// A pure pipeline (tp 1, dp 1) of `pp` stages, `vpp` chunks each, running `m`
// micro-batches of one sample on schedule `s`.
inline PlanSpec pipeline_plan(int pp, int vpp, int m, Schedule s) {
  PlanSpec p;
  p.tp = 1;
  p.pp = pp;
  p.dp = 1;
  p.vpp = vpp;
  p.micro_batch_size = 1;
  p.global_batch_size = m;
  p.schedule = s;
  return p;
}

// Small models for unit tests, not published ones: shapes chosen to exercise
// every code path and small enough that 8 ranks on 2 cores finish in seconds. A
// GPT-shaped model (LayerNorm with biases, GeLU MLP, learned positions, tied
// embeddings) and a Llama-shaped one (RMSNorm, no biases, SwiGLU, grouped-query
// attention, untied output layer).
inline ModelSpec gpt_small() {
  ModelSpec m = gpt3_175b();  // its architecture, at test size and without dropout
  m.name = "gpt-small-test";
  m.num_layers = 4;
  m.hidden_size = 32;
  m.num_attention_heads = 4;
  m.num_query_groups = 4;
  m.ffn_hidden_size = 128;
  m.seq_length = 16;
  m.vocab_size = 64;
  m.hidden_dropout = 0.0;
  m.attention_dropout = 0.0;
  return m;
}

inline ModelSpec llama_small() {
  ModelSpec m = llama3_8b();  // its architecture (dropout already 0), at test size
  m.name = "llama-small-test";
  m.num_layers = 4;
  m.hidden_size = 32;
  m.num_attention_heads = 4;
  m.num_query_groups = 2;
  m.ffn_hidden_size = 64;
  m.seq_length = 16;
  m.vocab_size = 64;
  return m;
}

// The small models with routed experts, to check MoE layers (not published
// ones): 4 experts, top-2, every other layer MoE (layers 0 and 2: Megatron's
// integer moe_layer_freq), with the load-balancing loss on. Llama-shaped: SwiGLU
// experts without biases; GPT-shaped: GeLU experts with biases, and a shared
// expert of width 64 beside them (DeepSeek and Qwen2-MoE have them).
inline ModelSpec with_small_experts(ModelSpec m, const char* name, int expert_width) {
  m.name = name;
  m.moe.num_experts = 4;
  m.moe.moe_router_topk = 2;
  m.moe.moe_ffn_hidden_size = expert_width;
  m.moe.moe_layer_freq = 2;
  m.moe.moe_aux_loss_coeff = 0.01;
  return m;
}

inline ModelSpec llama_moe_small() { return with_small_experts(llama_small(), "llama-moe-small-test", 48); }

inline ModelSpec gpt_moe_small() {
  ModelSpec m = with_small_experts(gpt_small(), "gpt-moe-small-test", 64);
  m.moe.moe_shared_expert_intermediate_size = 64;
  return m;
}

// A GPT-style model with `layers` layers, h 64, 4 heads, ffn 256, 32 positions,
// vocabulary 128: small enough to simulate every rank quickly.
inline ModelSpec small_gpt(int layers) {
  ModelSpec m = gpt3_175b();  // its architecture, with the default dropout
  m.name = "small";
  m.num_layers = layers;
  m.hidden_size = 64;
  m.num_attention_heads = 4;
  m.num_query_groups = 4;
  m.ffn_hidden_size = 256;
  m.seq_length = 32;
  m.vocab_size = 128;
  return m;
}

}  // namespace strata::testing
