#include "plan/params.h"

#include "plan/pipeline_split.h"

namespace strata {
namespace {

using i64 = std::int64_t;

struct LayerParamParts {
  i64 column_parallel_weights = 0;  // QKV, MLP fc1: split over tp
  i64 row_parallel_weights = 0;     // projection, MLP fc2: split over tp
  i64 column_parallel_biases = 0;   // split over tp
  i64 replicated = 0;               // row-parallel biases, norms: every tp rank holds them
};

LayerParamParts layer_parts(const ModelSpec& m) {
  const i64 h = m.hidden_size;
  const i64 qkv_out = h + 2 * m.kv_width();
  const i64 fc1_out = static_cast<i64>(m.ffn_hidden_size) * (m.swiglu ? 2 : 1);
  const i64 f = m.ffn_hidden_size;
  const i64 norm = m.normalization == Normalization::kLayerNorm ? 2 * h : h;
  LayerParamParts parts;
  parts.column_parallel_weights = h * qkv_out + h * fc1_out;
  parts.row_parallel_weights = h * h + f * h;
  if (m.add_bias_linear) {
    parts.column_parallel_biases = qkv_out + fc1_out;
    parts.replicated += 2 * h;  // biases of the projection and of fc2
  }
  parts.replicated += 2 * norm;  // the two normalizations of a layer
  return parts;
}

}  // namespace

std::int64_t word_embedding_params(const ModelSpec& m) {
  return static_cast<i64>(m.vocab_size) * m.hidden_size;
}

std::int64_t vocab_rows_per_gpu(const ModelSpec& m, const PlanSpec& p) {
  return (static_cast<i64>(m.vocab_size) + p.tp - 1) / p.tp;
}

std::int64_t padded_vocab_size(const ModelSpec& m, const PlanSpec& p) { return vocab_rows_per_gpu(m, p) * p.tp; }

std::int64_t position_embedding_params(const ModelSpec& m) {
  return m.position_embedding_type == PositionEmbedding::kLearnedAbsolute
             ? static_cast<i64>(m.seq_length) * m.hidden_size
             : 0;
}

std::int64_t layer_params(const ModelSpec& m) {
  LayerParamParts p = layer_parts(m);
  return p.column_parallel_weights + p.row_parallel_weights + p.column_parallel_biases +
         p.replicated;
}

std::int64_t layer_params_per_gpu(const ModelSpec& m, int tp) {
  LayerParamParts p = layer_parts(m);
  return (p.column_parallel_weights + p.row_parallel_weights + p.column_parallel_biases) / tp +
         p.replicated;
}

std::int64_t embedding_params(const ModelSpec& m) {
  return word_embedding_params(m) + position_embedding_params(m);
}

std::int64_t output_layer_params(const ModelSpec& m) {
  return m.untie_embeddings_and_output_weights ? word_embedding_params(m) : 0;
}

std::int64_t final_norm_params(const ModelSpec& m) {
  return m.normalization == Normalization::kLayerNorm ? 2LL * m.hidden_size : m.hidden_size;
}

std::int64_t total_params(const ModelSpec& m) {
  return static_cast<i64>(m.num_layers) * layer_params(m) + embedding_params(m) +
         output_layer_params(m) + final_norm_params(m);
}

std::int64_t embedding_params_per_gpu(const ModelSpec& m, const PlanSpec& p) {
  return vocab_rows_per_gpu(m, p) * m.hidden_size + position_embedding_params(m);
}

std::int64_t head_params_per_gpu(const ModelSpec& m, const PlanSpec& p) {
  i64 params = final_norm_params(m);
  if (m.untie_embeddings_and_output_weights || p.pp > 1) {
    params += vocab_rows_per_gpu(m, p) * m.hidden_size;  // untied output layer, or Megatron's tied copy
  }
  return params;
}

std::int64_t stage_params_per_gpu(const ModelSpec& m, const PlanSpec& p, int stage) {
  const i64 layers_per_stage = p.uneven_stages() ? pipeline_split(m, p).stage_layers(stage) : m.num_layers / p.pp;
  i64 params = layers_per_stage * layer_params_per_gpu(m, p.tp);
  if (stage == 0) params += embedding_params_per_gpu(m, p);
  if (stage == p.pp - 1) params += head_params_per_gpu(m, p);
  return params;
}

}  // namespace strata
