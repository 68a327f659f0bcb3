// model.json: a transformer described in Megatron-LM's vocabulary.
// Every key, its unit and default is documented in docs/formats.md.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace strata {

enum class Normalization { kLayerNorm, kRmsNorm };

// Mixture of experts, in Megatron-Core's names (--num-experts, --moe-*):
// which layers route their tokens to experts and how. Absent from a dense
// model (num_experts 0). plan/moe_spec.h reads, writes and checks these keys.
struct MoeModel {
  int num_experts = 0;               // routed experts per MoE layer (E); 0: dense model
  int moe_router_topk = 2;           // experts each token is routed to (k; Megatron's default 2)
  int moe_ffn_hidden_size = 0;       // one routed expert's MLP width (ffn_hidden_size when not given)
  // All shared experts' MLP width together (num_shared_experts x their width,
  // Megatron's definition); 0: no shared expert.
  int moe_shared_expert_intermediate_size = 0;
  // Which layers are MoE layers: every Nth (layer i when i % N == 0, Megatron's
  // integer --moe-layer-freq), or one 0/1 per layer (its list form).
  int moe_layer_freq = 1;
  std::vector<int> moe_layer_pattern;  // not empty: the list form, num_layers long
  std::string moe_router_load_balancing_type = "aux_loss";  // Megatron's default
  double moe_aux_loss_coeff = 0.0;                          // for the record (Megatron's default 0)
  // Group-limited routing (Megatron-Core's --moe-router-num-groups and
  // --moe-router-group-topk; DeepSeek-V2's device-limited and DeepSeek-V3's
  // node-limited routing): the experts in num_groups equal groups, each token's
  // experts chosen within its group_topk best groups. 0: unlimited.
  int moe_router_num_groups = 0;
  int moe_router_group_topk = 0;
};
enum class PositionEmbedding { kLearnedAbsolute, kRope, kAlibi, kNone };

// Multi-head latent attention (DeepSeek-V2/V3; Megatron-Core's
// --multi-latent-attention and MLATransformerConfig's names): queries and
// keys/values go through low-rank latents. Per layer: the query down-projection
// h -> q_lora_rank (none when q_lora_rank is 0: one h -> heads x q_head_dim
// projection), the key/value down-projection h -> kv_lora_rank +
// qk_pos_emb_head_dim (the rotary key shared by every head), an RMSNorm on each
// latent, the up-projections q_lora_rank -> heads x (qk_head_dim +
// qk_pos_emb_head_dim) and kv_lora_rank -> heads x (qk_head_dim + v_head_dim),
// attention with keys of q_head_dim and values of v_head_dim, and the output
// projection heads x v_head_dim -> h. Every head has its own keys and values
// (num_query_groups = num_attention_heads).
struct MlaModel {
  bool enabled = false;
  int q_lora_rank = 0;          // 0: queries projected from h directly (Megatron's q_lora_rank None)
  int kv_lora_rank = 0;
  int qk_head_dim = 0;          // the per-head query/key part without position embedding
  int qk_pos_emb_head_dim = 0;  // the rotary part of each query and the shared rotary key
  int v_head_dim = 0;
  int q_head_dim() const { return qk_head_dim + qk_pos_emb_head_dim; }
};

struct ModelSpec {
  std::string name;
  int num_layers = 0;
  int hidden_size = 0;
  int num_attention_heads = 0;
  int num_query_groups = 0;   // GQA; equals num_attention_heads for multi-head attention
  int ffn_hidden_size = 0;    // 4 * hidden_size when not given
  bool swiglu = false;        // gated MLP: the first linear is 2 * ffn_hidden_size wide
  Normalization normalization = Normalization::kLayerNorm;
  int seq_length = 0;
  int vocab_size = 0;         // as trained (Megatron pads it; shipped files give the padded size)
  bool untie_embeddings_and_output_weights = false;
  PositionEmbedding position_embedding_type = PositionEmbedding::kLearnedAbsolute;
  bool add_bias_linear = true;     // Megatron's default; Llama-style models have no biases
  double hidden_dropout = 0.1;     // Megatron's defaults; >0 stores 1-byte dropout masks
  double attention_dropout = 0.1;
  // Size of one attention head (Megatron's --kv-channels) when the model names
  // one other than hidden_size / num_attention_heads (then Q and the
  // projection's input are num_attention_heads * kv_channels wide, not
  // hidden_size); 0: hidden_size / num_attention_heads.
  int kv_channels = 0;
  MlaModel mla;
  // Multi-token prediction (Megatron-Core's --mtp-num-layers; DeepSeek-V3's MTP
  // module): after the decoder, on the last pipeline stage, each of these layers
  // normalizes the previous hidden states and the embedding of the tokens one
  // further ahead, projects their concatenation 2h -> h (eh_proj), runs one
  // transformer layer of the decoder's last layer's kind, and predicts through
  // the model's output layer and loss again. 0: none.
  int mtp_num_layers = 0;
  MoeModel moe;
  std::string source;              // where the figures come from (free text)

  // Size of one attention head; with MLA the mean of the key and value heads'
  // sizes, (q_head_dim + v_head_dim) / 2, which gives the attention core its
  // FLOPs (scores over q_head_dim, values over v_head_dim) and K + V their bytes.
  int head_dim() const {
    if (mla.enabled) return (mla.q_head_dim() + mla.v_head_dim) / 2;
    return kv_channels > 0 ? kv_channels : hidden_size / num_attention_heads;
  }
  // Width of Q: num_attention_heads * head_dim (hidden_size unless kv_channels
  // says otherwise; with MLA heads x q_head_dim).
  std::int64_t q_width() const {
    return static_cast<std::int64_t>(num_attention_heads) * (mla.enabled ? mla.q_head_dim() : head_dim());
  }
  // Width of the attention projection's input (the attention's output): Q's,
  // or with MLA heads x v_head_dim.
  std::int64_t proj_width() const {
    return mla.enabled ? static_cast<std::int64_t>(num_attention_heads) * mla.v_head_dim : q_width();
  }
  // Width of the K (or V) projection: num_query_groups * head_dim; with MLA
  // the mean of K's and V's widths (their sum is 2 x kv_width).
  std::int64_t kv_width() const {
    return static_cast<std::int64_t>(num_query_groups) * head_dim();
  }
  // Whether the model has MoE layers, and whether layer `layer` (0-based) is one.
  bool is_moe() const { return moe.num_experts > 0; }
  bool is_moe_layer(int layer) const;
  // An MTP layer's transformer layer is of the decoder's last layer's kind
  // (Megatron-Core's pretrain_gpt.py builds it from the last layer's spec).
  bool mtp_layer_is_moe() const { return is_moe_layer(num_layers - 1); }
  // MoE layers in [first, first + count).
  int moe_layers_in(int first, int count) const;
  int num_moe_layers() const { return moe_layers_in(0, num_layers); }
};

// Reads a model.json document. file names the source in errors.
// Throws InputError for unknown keys, wrong types and inconsistent values.
// path: the JSON path of the model object in its file ("$", or "$.model" when embedded).
ModelSpec read_model_spec(const nlohmann::json& doc, const std::string& file,
                          const std::string& path = "$");
// Resolves a path or shipped name (scenarios/models/) and reads it.
ModelSpec load_model_spec(const std::string& path_or_name);
// The spec as JSON with every key (defaults filled in), for echoing in outputs.
nlohmann::ordered_json to_json(const ModelSpec& model);

const char* to_string(Normalization n);
const char* to_string(PositionEmbedding p);

}  // namespace strata
