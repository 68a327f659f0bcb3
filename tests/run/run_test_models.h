// Small models and run configs for the executor tests: a GPT-shaped model
// (LayerNorm with biases, GeLU MLP, learned positions, tied embeddings) and a
// Llama-shaped one (RMSNorm, no biases, SwiGLU, grouped-query attention,
// untied output layer), both tiny so that 8 ranks on 2 cores finish in seconds.
// Not published models: shapes chosen to exercise every code path.
#pragma once

#include <string>

#include "runtime/executor/run_config.h"

namespace strata::testing {

inline ModelSpec gpt_small() {
  ModelSpec m;
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
  ModelSpec m;
  m.name = "llama-small-test";
  m.num_layers = 4;
  m.hidden_size = 32;
  m.num_attention_heads = 4;
  m.num_query_groups = 2;
  m.ffn_hidden_size = 64;
  m.swiglu = true;
  m.normalization = Normalization::kRmsNorm;
  m.seq_length = 16;
  m.vocab_size = 64;
  m.untie_embeddings_and_output_weights = true;
  m.position_embedding_type = PositionEmbedding::kRope;
  m.add_bias_linear = false;
  m.hidden_dropout = 0.0;
  m.attention_dropout = 0.0;
  return m;
}

// A run config for a plan (dp resolved by the caller), fp32, on the cpu backend.
inline rt::RunConfig test_config(const ModelSpec& model, const PlanSpec& plan, int steps) {
  rt::RunConfig c;
  c.model = model;
  c.plan = plan;
  c.plan.dtype = DType::kFp32;
  c.training.steps = steps;
  c.training.timing_warmup_steps = 0;
  c.training.seed = 7;
  c.training.lr = 1e-2;
  // Adam divides by sqrt(v) + eps, so an element whose gradient is near zero
  // moves by up to lr * (gradient error) / eps: with Megatron's eps 1e-8, fp32
  // rounding of a sum taken in another order (1e-10) moved single elements by
  // 3e-5 after 3 steps (llama_tp2_sp_selective), at the tolerance. eps 1e-6
  // bounds that amplification 100 times lower (worst seen: 2.6e-6) while real
  // errors, which change gradients by far more than rounding, still show.
  c.training.adam_eps = 1e-6;
  c.timeout = std::chrono::seconds(60);
  c.cpu_threads = 1;
  c.file = "test-run.json";
  return c;
}

}  // namespace strata::testing
