// model.json: a transformer described in Megatron-LM's vocabulary.
// Every key, its unit and default is documented in docs/formats.md.
#pragma once

#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

namespace strata {

enum class Normalization { kLayerNorm, kRmsNorm };
enum class PositionEmbedding { kLearnedAbsolute, kRope, kAlibi, kNone };

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
  std::string source;              // where the figures come from (free text)

  // Size of one attention head (hidden_size / num_attention_heads).
  int head_dim() const { return hidden_size / num_attention_heads; }
  // Width of the K (or V) projection: num_query_groups * head_dim.
  std::int64_t kv_width() const {
    return static_cast<std::int64_t>(num_query_groups) * head_dim();
  }
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
