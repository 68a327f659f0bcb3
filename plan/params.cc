#include "plan/params.h"

#include "plan/pipeline_split.h"
#include "plan/stage_map.h"

#include <algorithm>

namespace strata {
namespace {

using i64 = std::int64_t;

struct LayerParamParts {
  i64 column_parallel_weights = 0;  // QKV, MLP fc1: split over tp
  i64 row_parallel_weights = 0;     // projection, MLP fc2: split over tp
  i64 column_parallel_biases = 0;   // split over tp
  i64 replicated = 0;               // row-parallel biases, norms: every tp rank holds them

  LayerParamParts& operator+=(const LayerParamParts& o) {
    column_parallel_weights += o.column_parallel_weights;
    row_parallel_weights += o.row_parallel_weights;
    column_parallel_biases += o.column_parallel_biases;
    replicated += o.replicated;
    return *this;
  }
  i64 total() const { return column_parallel_weights + row_parallel_weights + column_parallel_biases + replicated; }
  // Held by one rank of a tensor-parallel group of `t` ranks.
  i64 per_rank(int t) const {
    return (column_parallel_weights + row_parallel_weights + column_parallel_biases) / t + replicated;
  }
};

// Attention (QKV and projection) and the layer's two normalizations.
LayerParamParts attention_parts(const ModelSpec& m) {
  const i64 h = m.hidden_size;
  if (m.mla.enabled) {
    // Multi-head latent attention (plan/layer_ops.cc): the down-projections and
    // the latents' RMSNorms whole on every tensor-parallel rank; the
    // up-projections column-parallel, the projection row-parallel; only the
    // projection has a bias (Megatron-Core builds the others with bias=False).
    const MlaModel& mla = m.mla;
    const i64 a = m.num_attention_heads;
    const i64 ql = mla.q_lora_rank;
    const i64 kvl = mla.kv_lora_rank;
    const i64 norm = m.normalization == Normalization::kLayerNorm ? 2 * h : h;
    LayerParamParts parts;
    parts.replicated = (ql > 0 ? h * ql + ql : 0) + h * (kvl + mla.qk_pos_emb_head_dim) + kvl;
    parts.column_parallel_weights = (ql > 0 ? ql : h) * a * mla.q_head_dim() + kvl * a * (mla.qk_head_dim + mla.v_head_dim);
    parts.row_parallel_weights = m.proj_width() * h;
    if (m.add_bias_linear) parts.replicated += h;
    parts.replicated += 2 * norm;
    return parts;
  }
  const i64 qkv_out = m.q_width() + 2 * m.kv_width();
  const i64 norm = m.normalization == Normalization::kLayerNorm ? 2 * h : h;
  LayerParamParts parts;
  parts.column_parallel_weights = h * qkv_out;
  parts.row_parallel_weights = m.proj_width() * h;
  if (m.add_bias_linear) {
    parts.column_parallel_biases = qkv_out;
    parts.replicated += h;  // the projection's bias
  }
  parts.replicated += 2 * norm;  // the two normalizations of a layer
  return parts;
}

// An MLP of width f (the dense MLP, one routed expert, the shared experts).
LayerParamParts mlp_parts(const ModelSpec& m, i64 f) {
  const i64 h = m.hidden_size;
  const i64 fc1_out = f * (m.swiglu ? 2 : 1);
  LayerParamParts parts;
  parts.column_parallel_weights = h * fc1_out;
  parts.row_parallel_weights = f * h;
  if (m.add_bias_linear) {
    parts.column_parallel_biases = fc1_out;
    parts.replicated = h;  // fc2's bias
  }
  return parts;
}

LayerParamParts dense_layer_parts(const ModelSpec& m) {
  LayerParamParts parts = attention_parts(m);
  parts += mlp_parts(m, m.ffn_hidden_size);
  return parts;
}

// An MoE layer without its routed experts: attention, norms, the router (an
// h x E GEMM every tensor-parallel rank holds whole, as Megatron-Core's
// TopKRouter) and the shared experts (split over tp like the dense MLP).
LayerParamParts moe_layer_dense_parts(const ModelSpec& m) {
  LayerParamParts parts = attention_parts(m);
  parts.replicated += static_cast<i64>(m.moe.num_experts) * m.hidden_size;
  if (m.moe.moe_shared_expert_intermediate_size > 0) parts += mlp_parts(m, m.moe.moe_shared_expert_intermediate_size);
  return parts;
}

// One multi-token-prediction layer without its routed experts: its transformer
// layer (of the decoder's last layer's kind), eh_proj (2h -> h, column-parallel)
// and its three norms (the embedding's, the hidden states', its final one).
LayerParamParts mtp_layer_dense_parts(const ModelSpec& m) {
  LayerParamParts parts = m.mtp_layer_is_moe() ? moe_layer_dense_parts(m) : dense_layer_parts(m);
  parts.column_parallel_weights += 2 * m.hidden_size * m.hidden_size;
  parts.replicated += 3 * final_norm_params(m);
  return parts;
}

// A pipeline stage's transformer layers and, of them, MoE layers.
struct StageLayers {
  i64 layers = 0;
  i64 moe = 0;
};
StageLayers stage_layers(const ModelSpec& m, const PlanSpec& p, int stage) {
  if (!p.uneven_stages() && !m.is_moe()) return {m.num_layers / p.pp, 0};
  const PipelineSplit split = pipeline_split(m, p);
  return {p.uneven_stages() ? split.stage_layers(stage) : m.num_layers / p.pp,
          m.is_moe() ? split.stage_moe_layers(m, stage) : 0};
}

i64 transformer_params(const ModelSpec& m) {
  const i64 moe_layers = m.num_moe_layers();
  const i64 dense_layers = m.num_layers - moe_layers;
  return dense_layers * layer_params(m) + moe_layers * moe_layer_params(m);
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

std::int64_t layer_params(const ModelSpec& m) { return dense_layer_parts(m).total(); }

std::int64_t layer_params_per_gpu(const ModelSpec& m, int tp) { return dense_layer_parts(m).per_rank(tp); }

std::int64_t expert_params(const ModelSpec& m) { return mlp_parts(m, m.moe.moe_ffn_hidden_size).total(); }

std::int64_t moe_layer_params(const ModelSpec& m) {
  return moe_layer_dense_parts(m).total() + static_cast<i64>(m.moe.num_experts) * expert_params(m);
}

std::int64_t moe_layer_dense_params_per_gpu(const ModelSpec& m, int tp) { return moe_layer_dense_parts(m).per_rank(tp); }

std::int64_t moe_layer_expert_params_per_gpu(const ModelSpec& m, const PlanSpec& p) {
  return static_cast<i64>(m.moe.num_experts / p.moe.ep) * mlp_parts(m, m.moe.moe_ffn_hidden_size).per_rank(p.moe.etp);
}

std::int64_t max_layer_params_per_gpu(const ModelSpec& m, const PlanSpec& p) {
  const i64 dense = layer_params_per_gpu(m, p.tp);
  if (!m.is_moe()) return dense;
  const i64 moe = moe_layer_dense_params_per_gpu(m, p.tp) + moe_layer_expert_params_per_gpu(m, p);
  return m.num_moe_layers() < m.num_layers ? std::max(dense, moe) : moe;
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
  return transformer_params(m) + embedding_params(m) + output_layer_params(m) + final_norm_params(m) +
         m.mtp_num_layers * mtp_layer_params(m);
}

std::int64_t mtp_layer_params(const ModelSpec& m) {
  const i64 experts = m.mtp_layer_is_moe() ? static_cast<i64>(m.moe.num_experts) * expert_params(m) : 0;
  return mtp_layer_dense_parts(m).total() + experts;
}

std::int64_t mtp_dense_params_per_gpu(const ModelSpec& m, const PlanSpec& p) {
  return m.mtp_num_layers * mtp_layer_dense_parts(m).per_rank(p.tp);
}

std::int64_t mtp_expert_params_per_gpu(const ModelSpec& m, const PlanSpec& p) {
  return m.mtp_layer_is_moe() ? m.mtp_num_layers * moe_layer_expert_params_per_gpu(m, p) : 0;
}

bool mtp_embedding_copy(const ModelSpec& m, const PlanSpec& p) {
  return m.mtp_num_layers > 0 && m.untie_embeddings_and_output_weights && !embedding_on_head_rank(p);
}

std::int64_t active_params(const ModelSpec& m) {
  // A token passes the dense parts, the shared experts and top-k of the routed
  // experts of each MoE layer (the count MoE papers report as "activated").
  const i64 idle_experts = m.is_moe() ? m.moe.num_experts - m.moe.moe_router_topk : 0;
  const i64 moe_layers = m.num_moe_layers() + (m.mtp_layer_is_moe() ? m.mtp_num_layers : 0);
  return total_params(m) - moe_layers * idle_experts * expert_params(m);
}

std::int64_t embedding_params_per_gpu(const ModelSpec& m, const PlanSpec& p) {
  return vocab_rows_per_gpu(m, p) * m.hidden_size + position_embedding_params(m);
}

std::int64_t head_params_per_gpu(const ModelSpec& m, const PlanSpec& p) {
  i64 params = final_norm_params(m);
  if (m.untie_embeddings_and_output_weights || !embedding_on_head_rank(p)) {
    params += vocab_rows_per_gpu(m, p) * m.hidden_size;  // untied output layer, or Megatron's tied copy
  }
  // Multi-token prediction's layers (their routed experts are counted with the
  // stage's, stage_expert_params_per_gpu).
  params += mtp_dense_params_per_gpu(m, p);
  if (mtp_embedding_copy(m, p)) params += vocab_rows_per_gpu(m, p) * m.hidden_size;
  return params;
}

std::int64_t stage_expert_params_per_gpu(const ModelSpec& m, const PlanSpec& p, int stage) {
  if (!m.is_moe()) return 0;
  return pipeline_split(m, p).stage_moe_layers(m, stage) * moe_layer_expert_params_per_gpu(m, p) +
         (stage == head_rank(p) ? mtp_expert_params_per_gpu(m, p) : 0);
}

std::int64_t stage_params_per_gpu(const ModelSpec& m, const PlanSpec& p, int stage) {
  const StageLayers l = stage_layers(m, p, stage);
  i64 params = (l.layers - l.moe) * layer_params_per_gpu(m, p.tp);
  if (l.moe > 0) {
    params += l.moe * moe_layer_dense_params_per_gpu(m, p.tp) + stage_expert_params_per_gpu(m, p, stage);
  }
  if (stage == 0) params += embedding_params_per_gpu(m, p);
  if (stage == head_rank(p)) params += head_params_per_gpu(m, p);
  return params;
}

std::int64_t sequence_parallel_replicated_params(const ModelSpec& m, const PlanSpec& p, int stage) {
  // What a tensor-parallel rank holds whole: the layers' `replicated` parts, and
  // on the last stage the final norm's and the multi-token-prediction layers'
  // (Megatron-Core marks every norm sequence-parallel, theirs too).
  const StageLayers l = stage_layers(m, p, stage);
  i64 params = (l.layers - l.moe) * dense_layer_parts(m).replicated;
  if (l.moe > 0) params += l.moe * moe_layer_dense_parts(m).replicated;
  if (stage == head_rank(p)) params += final_norm_params(m) + m.mtp_num_layers * mtp_layer_dense_parts(m).replicated;
  return params;
}

}  // namespace strata
