#include "plan/model_spec.h"

#include <fmt/format.h>

#include "core/data_paths.h"
#include "core/error.h"
#include "core/json_reader.h"
#include "plan/moe_spec.h"

namespace strata {

const char* to_string(Normalization n) {
  return n == Normalization::kLayerNorm ? "layernorm" : "rmsnorm";
}

const char* to_string(PositionEmbedding p) {
  switch (p) {
    case PositionEmbedding::kLearnedAbsolute: return "learned_absolute";
    case PositionEmbedding::kRope: return "rope";
    case PositionEmbedding::kAlibi: return "alibi";
    case PositionEmbedding::kNone: return "none";
  }
  return "none";
}

namespace {

constexpr const char* kMlaKeys[] = {"q_lora_rank", "kv_lora_rank", "qk_head_dim", "qk_pos_emb_head_dim",
                                    "v_head_dim"};

// Multi-head latent attention, read as Megatron-Core's MLATransformerConfig
// names it; every size given (Megatron's defaults are DeepSeek-V2-Lite's, not
// a model's own), q_lora_rank 0 or absent for no query compression.
void read_mla_model(json::ObjectReader& r, ModelSpec& m) {
  constexpr std::int64_t kBig = 1 << 20;
  m.mla.enabled = r.boolean_or("multi_latent_attention", false);
  if (!m.mla.enabled) {
    for (const char* key : kMlaKeys) {
      if (r.has(key)) r.fail(key, "is a multi-head latent attention size: set multi_latent_attention true, or drop it");
    }
    return;
  }
  if (r.has("kv_channels")) {
    r.fail("kv_channels", "multi-head latent attention sizes its heads with qk_head_dim, qk_pos_emb_head_dim and "
                          "v_head_dim; drop kv_channels");
  }
  if (r.has("num_query_groups") && m.num_query_groups != m.num_attention_heads) {
    r.fail("num_query_groups", fmt::format("multi-head latent attention gives every head its own keys and values: "
                                           "num_query_groups must be num_attention_heads ({}) or absent",
                                           m.num_attention_heads));
  }
  m.mla.q_lora_rank = static_cast<int>(r.integer_or("q_lora_rank", 0, 0, kBig));
  m.mla.kv_lora_rank = static_cast<int>(r.integer("kv_lora_rank", 1, kBig));
  m.mla.qk_head_dim = static_cast<int>(r.integer("qk_head_dim", 1, kBig));
  m.mla.qk_pos_emb_head_dim = static_cast<int>(r.integer("qk_pos_emb_head_dim", 1, kBig));
  m.mla.v_head_dim = static_cast<int>(r.integer("v_head_dim", 1, kBig));
}

}  // namespace

ModelSpec read_model_spec(const nlohmann::json& doc, const std::string& file, const std::string& path) {
  json::ObjectReader r(doc, file, path);
  constexpr std::int64_t kBig = 1 << 24;
  ModelSpec m;
  m.name = r.string("name");
  m.num_layers = static_cast<int>(r.integer("num_layers", 1, 100000));
  m.hidden_size = static_cast<int>(r.integer("hidden_size", 1, kBig));
  m.num_attention_heads = static_cast<int>(r.integer("num_attention_heads", 1, kBig));
  m.num_query_groups =
      static_cast<int>(r.integer_or("num_query_groups", m.num_attention_heads, 1, kBig));
  m.ffn_hidden_size = static_cast<int>(r.integer_or("ffn_hidden_size", 4LL * m.hidden_size, 1, 1LL << 28));
  m.swiglu = r.boolean_or("swiglu", false);
  // Strata's lower-case names and Megatron-LM's own spellings (--normalization
  // LayerNorm / RMSNorm, arguments.py), so a model copied from a Megatron script reads.
  const std::string norm =
      r.choice_or("normalization", "layernorm", {"layernorm", "rmsnorm", "LayerNorm", "RMSNorm"});
  m.normalization = norm == "layernorm" || norm == "LayerNorm" ? Normalization::kLayerNorm : Normalization::kRmsNorm;
  m.seq_length = static_cast<int>(r.integer("seq_length", 1, kBig));
  m.vocab_size = static_cast<int>(r.integer("vocab_size", 1, 1LL << 30));
  m.untie_embeddings_and_output_weights = r.boolean_or("untie_embeddings_and_output_weights", false);
  std::string pos = r.choice_or("position_embedding_type", "learned_absolute",
                                {"learned_absolute", "rope", "alibi", "none"});
  m.position_embedding_type = pos == "learned_absolute" ? PositionEmbedding::kLearnedAbsolute
                              : pos == "rope"           ? PositionEmbedding::kRope
                              : pos == "alibi"          ? PositionEmbedding::kAlibi
                                                        : PositionEmbedding::kNone;
  m.add_bias_linear = r.boolean_or("add_bias_linear", true);
  m.hidden_dropout = r.number_or("hidden_dropout", 0.1, 0.0, 1.0);
  m.attention_dropout = r.number_or("attention_dropout", 0.1, 0.0, 1.0);
  if (r.has("kv_channels")) {
    m.kv_channels = static_cast<int>(r.integer("kv_channels", 1, kBig));
    // The default written out is the default: the model reads and echoes as without it.
    if (m.hidden_size % m.num_attention_heads == 0 && m.kv_channels == m.hidden_size / m.num_attention_heads) {
      m.kv_channels = 0;
    }
  }
  read_mla_model(r, m);
  m.mtp_num_layers = static_cast<int>(r.integer_or("mtp_num_layers", 0, 0, 64));
  read_moe_model(r, m);
  if (r.has("source")) m.source = r.string("source");
  r.allow_text("notes");
  r.finish();

  if (m.kv_channels == 0 && !m.mla.enabled && m.hidden_size % m.num_attention_heads != 0) {
    throw InputError(file, path + ".num_attention_heads",
                     fmt::format("hidden_size {} must be divisible by num_attention_heads {} (or give the "
                                 "head size as kv_channels)",
                                 m.hidden_size, m.num_attention_heads));
  }
  if (m.num_attention_heads % m.num_query_groups != 0) {
    throw InputError(file, path + ".num_query_groups",
                     fmt::format("num_attention_heads {} must be divisible by num_query_groups {}",
                                 m.num_attention_heads, m.num_query_groups));
  }
  return m;
}

bool ModelSpec::is_moe_layer(int layer) const {
  if (!is_moe()) return false;
  if (!moe.moe_layer_pattern.empty()) return moe.moe_layer_pattern[static_cast<std::size_t>(layer)] != 0;
  return layer % moe.moe_layer_freq == 0;  // Megatron-Core's integer form (gpt_layer_specs.py)
}

int ModelSpec::moe_layers_in(int first, int count) const {
  int n = 0;
  for (int layer = first; layer < first + count; ++layer) n += is_moe_layer(layer) ? 1 : 0;
  return n;
}

ModelSpec load_model_spec(const std::string& path_or_name) {
  std::string path = resolve_data_file(path_or_name, "scenarios/models", "model");
  return read_model_spec(json::parse_file(path), path);
}

nlohmann::ordered_json to_json(const ModelSpec& m) {
  nlohmann::ordered_json j;
  j["name"] = m.name;
  j["num_layers"] = m.num_layers;
  j["hidden_size"] = m.hidden_size;
  j["num_attention_heads"] = m.num_attention_heads;
  j["num_query_groups"] = m.num_query_groups;
  j["ffn_hidden_size"] = m.ffn_hidden_size;
  j["swiglu"] = m.swiglu;
  j["normalization"] = to_string(m.normalization);
  j["seq_length"] = m.seq_length;
  j["vocab_size"] = m.vocab_size;
  j["untie_embeddings_and_output_weights"] = m.untie_embeddings_and_output_weights;
  j["position_embedding_type"] = to_string(m.position_embedding_type);
  j["add_bias_linear"] = m.add_bias_linear;
  j["hidden_dropout"] = m.hidden_dropout;
  j["attention_dropout"] = m.attention_dropout;
  // Written only when the model has them, so other models echo as before.
  if (m.kv_channels > 0) j["kv_channels"] = m.kv_channels;
  if (m.mla.enabled) {
    j["multi_latent_attention"] = true;
    if (m.mla.q_lora_rank > 0) j["q_lora_rank"] = m.mla.q_lora_rank;
    j["kv_lora_rank"] = m.mla.kv_lora_rank;
    j["qk_head_dim"] = m.mla.qk_head_dim;
    j["qk_pos_emb_head_dim"] = m.mla.qk_pos_emb_head_dim;
    j["v_head_dim"] = m.mla.v_head_dim;
  }
  if (m.mtp_num_layers > 0) j["mtp_num_layers"] = m.mtp_num_layers;
  write_moe_model(m, j);
  if (!m.source.empty()) j["source"] = m.source;
  return j;
}

}  // namespace strata
