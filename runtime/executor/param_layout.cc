#include "runtime/executor/param_layout.h"

#include "plan/pipeline_split.h"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "core/error.h"
#include "plan/bucket_plan.h"
#include "plan/pipeline_schedule.h"

namespace strata::rt {
namespace {

using i64 = std::int64_t;

// Megatron-LM's --init-method-std default (0.02); residual-branch outputs
// (projection, fc2) use std / sqrt(2 * num_layers) (Megatron's
// scaled_init_method_normal, after GPT-2). Our fill is uniform, with the same std:
// half-width = std * sqrt(3).
constexpr double kInitStd = 0.02;
float uniform_range(double std_dev) { return static_cast<float>(std_dev * std::sqrt(3.0)); }

ParamSpec vector_param(std::string name, i64 n, ParamInit init, bool replicated) {
  ParamSpec p;
  p.name = std::move(name);
  p.rows = n;
  p.cols = 1;
  p.global_rows = n;
  p.pieces = {{0, 0, n}};
  p.init = init;
  p.replicated = replicated;
  return p;
}

class LayoutBuilder {
 public:
  LayoutBuilder(const ModelSpec& m, const PlanSpec& p, int tp_rank, int pp_rank, int ep_rank)
      : m_(m), p_(p), t_(tp_rank), r_(pp_rank), e_(ep_rank) {}

  ParamLayout build() {
    const int chunks = p_.vpp;
    const PipelineSplit split = pipeline_split(m_, p_);
    const int last_vs = p_.pp * p_.vpp - 1;
    const bool tied = !m_.untie_embeddings_and_output_weights;
    out_.layer_units.assign(chunks, {});
    out_.expert_units.assign(chunks, {});
    out_.word_embedding_unit.assign(chunks, -1);
    out_.position_embedding_unit.assign(chunks, -1);
    out_.final_norm_unit.assign(chunks, -1);
    out_.output_unit.assign(chunks, -1);
    for (int c = 0; c < chunks; ++c) {
      const int vs = virtual_stage(p_, r_, c);
      if (vs == 0) {
        out_.word_embedding_unit[c] = add_unit(word_embedding(c, false));
        if (m_.position_embedding_type == PositionEmbedding::kLearnedAbsolute) {
          out_.position_embedding_unit[c] = add_unit(position_embedding(c));
        }
      }
      for (int j = 0; j < split.chunk_layers(r_, c); ++j) {
        const int global = split.chunk_first(r_, c) + j;
        out_.layer_units[c].push_back(add_unit(layer(c, j, global)));
        out_.expert_units[c].push_back(m_.is_moe_layer(global) ? add_unit(experts(c, j, global)) : -1);
      }
      if (vs == last_vs) {
        out_.final_norm_unit[c] = add_unit(final_norm(c));
        if (!tied) {
          out_.output_unit[c] = add_unit(output_layer(c));
        } else if (!embedding_on_head_rank(p_)) {
          out_.output_unit[c] = add_unit(word_embedding(c, true));
        }
      }
    }
    make_buckets();
    return std::move(out_);
  }

 private:
  int add_unit(Unit u) {
    // Replicated parameters last, so sequence parallelism can sum their
    // gradients over tp as one range.
    std::stable_partition(u.params.begin(), u.params.end(), [](const ParamSpec& s) { return !s.replicated; });
    i64 offset = 0;
    u.replicated_begin = -1;
    for (ParamSpec& s : u.params) {
      if (s.replicated && u.replicated_begin < 0) u.replicated_begin = offset;
      s.offset = offset;
      offset += s.numel();
    }
    u.numel = offset;
    if (u.replicated_begin < 0) u.replicated_begin = offset;
    if (u.kind == UnitKind::kLayer) {
      // Roles were recorded by name before the partition: look them up again.
      std::vector<int> index(static_cast<int>(LayerRole::kCount), -1);
      for (int k = 0; k < static_cast<int>(u.params.size()); ++k) {
        const std::string& n = u.params[k].name;
        const std::string suffix = n.substr(n.find('.', n.find('.') + 1) + 1);
        index[static_cast<int>(role_of(suffix))] = k;
      }
      u.role_index = index;
    }
    out_.units.push_back(std::move(u));
    return static_cast<int>(out_.units.size()) - 1;
  }

  static LayerRole role_of(const std::string& suffix) {
    static const std::pair<const char*, LayerRole> names[] = {
        {"qkv.weight", LayerRole::kQkvWeight},           {"qkv.bias", LayerRole::kQkvBias},
        {"proj.weight", LayerRole::kProjWeight},         {"proj.bias", LayerRole::kProjBias},
        {"fc1.weight", LayerRole::kFc1Weight},           {"fc1.bias", LayerRole::kFc1Bias},
        {"fc2.weight", LayerRole::kFc2Weight},           {"fc2.bias", LayerRole::kFc2Bias},
        {"input_norm.weight", LayerRole::kNorm1Weight},  {"input_norm.bias", LayerRole::kNorm1Bias},
        {"post_attn_norm.weight", LayerRole::kNorm2Weight}, {"post_attn_norm.bias", LayerRole::kNorm2Bias},
        {"router.weight", LayerRole::kRouterWeight},
        {"shared_fc1.weight", LayerRole::kSharedFc1Weight}, {"shared_fc1.bias", LayerRole::kSharedFc1Bias},
        {"shared_fc2.weight", LayerRole::kSharedFc2Weight}, {"shared_fc2.bias", LayerRole::kSharedFc2Bias},
    };
    for (const auto& [name, role] : names) {
      if (suffix == name) return role;
    }
    throw InternalError("param_layout: unknown layer parameter " + suffix);
  }

  Unit word_embedding(int chunk, bool tied_copy) {
    const i64 vl = m_.vocab_size / p_.tp;
    ParamSpec s;
    s.name = "embedding.word_embeddings.weight";
    s.rows = vl;
    s.cols = m_.hidden_size;
    s.global_rows = m_.vocab_size;
    s.pieces = {{0, t_ * vl, vl}};
    s.init_range = uniform_range(kInitStd);
    s.tied_copy = tied_copy;
    Unit u;
    u.kind = tied_copy ? UnitKind::kOutputLayer : UnitKind::kWordEmbedding;
    u.chunk = chunk;
    u.params.push_back(std::move(s));
    return u;
  }

  Unit position_embedding(int chunk) {
    ParamSpec s;
    s.name = "embedding.position_embeddings.weight";
    s.rows = m_.seq_length;
    s.cols = m_.hidden_size;
    s.global_rows = m_.seq_length;
    s.pieces = {{0, 0, m_.seq_length}};
    s.init_range = uniform_range(kInitStd);
    s.replicated = true;
    Unit u;
    u.kind = UnitKind::kPositionEmbedding;
    u.chunk = chunk;
    u.params.push_back(std::move(s));
    return u;
  }

  Unit final_norm(int chunk) {
    Unit u;
    u.kind = UnitKind::kFinalNorm;
    u.chunk = chunk;
    u.params.push_back(vector_param("final_norm.weight", m_.hidden_size, ParamInit::kOnes, true));
    if (m_.normalization == Normalization::kLayerNorm) {
      u.params.push_back(vector_param("final_norm.bias", m_.hidden_size, ParamInit::kZeros, true));
    }
    return u;
  }

  Unit output_layer(int chunk) {
    Unit u = word_embedding(chunk, false);
    u.kind = UnitKind::kOutputLayer;
    u.params[0].name = "output_layer.weight";
    return u;
  }

  Unit layer(int chunk, int local_layer, int global_layer) {
    const i64 h = m_.hidden_size;
    const i64 tp = p_.tp;
    const i64 d = m_.head_dim();
    const i64 q_width = h;                       // all heads
    const i64 kv_width = m_.num_query_groups * d;
    const i64 ql = q_width / tp;
    const i64 kvl = kv_width / tp;
    const i64 f = m_.ffn_hidden_size;
    const i64 fl = f / tp;
    const std::string prefix = fmt::format("layers.{}.", global_layer);
    const float range = uniform_range(kInitStd);
    const float scaled = uniform_range(kInitStd / std::sqrt(2.0 * m_.num_layers));
    const bool bias = m_.add_bias_linear;
    const bool layernorm = m_.normalization == Normalization::kLayerNorm;

    Unit u;
    u.kind = UnitKind::kLayer;
    u.chunk = chunk;
    u.local_layer = local_layer;
    u.layer = global_layer;
    // Column-parallel QKV: this rank's Q heads, K groups and V groups.
    std::vector<ParamSpec::Piece> qkv_pieces = {{0, t_ * ql, ql},
                                                {ql, q_width + t_ * kvl, kvl},
                                                {ql + kvl, q_width + kv_width + t_ * kvl, kvl}};
    u.params.push_back(matrix(prefix + "qkv.weight", ql + 2 * kvl, h, q_width + 2 * kv_width, qkv_pieces, range));
    if (bias) u.params.push_back(column_bias(prefix + "qkv.bias", ql + 2 * kvl, q_width + 2 * kv_width, qkv_pieces));
    // Row-parallel projection: this rank's input rows.
    u.params.push_back(matrix(prefix + "proj.weight", ql, h, q_width, {{0, t_ * ql, ql}}, scaled));
    if (bias) u.params.push_back(vector_param(prefix + "proj.bias", h, ParamInit::kZeros, true));
    if (m_.is_moe_layer(global_layer)) {
      // Megatron-Core's TopKRouter: [num_experts, h], whole on every tensor-parallel rank.
      ParamSpec router = matrix(prefix + "router.weight", m_.moe.num_experts, h, m_.moe.num_experts,
                                {{0, 0, m_.moe.num_experts}}, range);
      router.replicated = true;
      u.params.push_back(std::move(router));
      const i64 shared = m_.moe.moe_shared_expert_intermediate_size;
      if (shared > 0) append_mlp(u, prefix + "shared_", shared, shared / tp, t_);
    } else {
      append_mlp(u, prefix, f, fl, t_);
    }
    u.params.push_back(vector_param(prefix + "input_norm.weight", h, ParamInit::kOnes, true));
    if (layernorm) u.params.push_back(vector_param(prefix + "input_norm.bias", h, ParamInit::kZeros, true));
    u.params.push_back(vector_param(prefix + "post_attn_norm.weight", h, ParamInit::kOnes, true));
    if (layernorm) u.params.push_back(vector_param(prefix + "post_attn_norm.bias", h, ParamInit::kZeros, true));
    return u;
  }

  // An MLP of global width f, fl of it on this rank (tensor-parallel rank t):
  // column-parallel fc1 ([a | b] halves when gated), row-parallel fc2.
  void append_mlp(Unit& u, const std::string& prefix, i64 f, i64 fl, i64 t) const {
    const i64 h = m_.hidden_size;
    const bool bias = m_.add_bias_linear;
    std::vector<ParamSpec::Piece> fc1_pieces = {{0, t * fl, fl}};
    if (m_.swiglu) fc1_pieces.push_back({fl, f + t * fl, fl});
    const i64 fc1_rows = m_.swiglu ? 2 * fl : fl;
    const i64 fc1_global = m_.swiglu ? 2 * f : f;
    u.params.push_back(matrix(prefix + "fc1.weight", fc1_rows, h, fc1_global, fc1_pieces, uniform_range(kInitStd)));
    if (bias) u.params.push_back(column_bias(prefix + "fc1.bias", fc1_rows, fc1_global, fc1_pieces));
    const float scaled = uniform_range(kInitStd / std::sqrt(2.0 * m_.num_layers));
    u.params.push_back(matrix(prefix + "fc2.weight", fl, h, f, {{0, t * fl, fl}}, scaled));
    if (bias) u.params.push_back(vector_param(prefix + "fc2.bias", h, ParamInit::kZeros, true));
  }

  // This expert-parallel rank's routed experts of an MoE layer, whole (etp 1),
  // each initialized as a dense MLP of moe_ffn_hidden_size.
  Unit experts(int chunk, int local_layer, int global_layer) {
    const int local = m_.moe.num_experts / p_.moe.ep;
    Unit u;
    u.kind = UnitKind::kExperts;
    u.chunk = chunk;
    u.local_layer = local_layer;
    u.layer = global_layer;
    u.first_expert = e_ * local;
    u.experts = local;
    const i64 f = m_.moe.moe_ffn_hidden_size;
    for (int e = 0; e < local; ++e) {
      append_mlp(u, fmt::format("layers.{}.experts.{}.", global_layer, u.first_expert + e), f, f, 0);
    }
    // Nothing in an expert is replicated over tensor parallelism: its fc2 bias
    // belongs to this expert alone.
    for (ParamSpec& s : u.params) s.replicated = false;
    return u;
  }

  static ParamSpec matrix(std::string name, i64 rows, i64 cols, i64 global_rows,
                          std::vector<ParamSpec::Piece> pieces, float range) {
    ParamSpec s;
    s.name = std::move(name);
    s.rows = rows;
    s.cols = cols;
    s.global_rows = global_rows;
    s.pieces = std::move(pieces);
    s.init_range = range;
    return s;
  }

  static ParamSpec column_bias(std::string name, i64 rows, i64 global_rows,
                               std::vector<ParamSpec::Piece> pieces) {
    ParamSpec s = matrix(std::move(name), rows, 1, global_rows, std::move(pieces), 0.0f);
    s.init = ParamInit::kZeros;
    return s;
  }

  int unit_of(int chunk, const BlockRef& block) const {
    switch (block.kind) {
      case ParamBlock::kWordEmbedding: return out_.word_embedding_unit[chunk];
      case ParamBlock::kPositionEmbedding: return out_.position_embedding_unit[chunk];
      case ParamBlock::kLayer: return out_.layer_units[chunk][block.layer];
      case ParamBlock::kFinalNorm: return out_.final_norm_unit[chunk];
      case ParamBlock::kOutputLayer: return out_.output_unit[chunk];
      case ParamBlock::kMtp: break;  // strata run refuses multi-token prediction (run_refusal)
    }
    return -1;
  }

  // The plan's buckets (plan/bucket_plan.h), in units; a bucket with routed
  // experts is followed by one of its expert units. The units' sizes are the
  // plan's parameter counts, or the simulator would cost other buckets than we run.
  void make_buckets() {
    for (const GradBucket& planned : grad_buckets(m_, p_, r_)) {
      Bucket bucket;
      bucket.chunk = planned.chunk;
      bucket.embedding_sync = planned.shared_embedding;
      Bucket expert_bucket;
      expert_bucket.chunk = planned.chunk;
      expert_bucket.expert = true;
      for (const BlockRef& block : planned.blocks) {
        const int unit = unit_of(planned.chunk, block);
        if (unit < 0) throw InternalError(fmt::format("param_layout: chunk {} has no {}", planned.chunk, to_string(block.kind)));
        out_.units[unit].shared_embedding = is_shared_embedding(m_, p_, block);
        bucket.units.push_back(unit);
        bucket.numel += out_.units[unit].numel;
        const int experts = block.kind == ParamBlock::kLayer ? out_.expert_units[planned.chunk][block.layer] : -1;
        if (experts >= 0) {
          expert_bucket.units.push_back(experts);
          expert_bucket.numel += out_.units[experts].numel;
        }
      }
      if (bucket.numel != planned.params || expert_bucket.numel != planned.expert_params) {
        throw InternalError(fmt::format("param_layout: a bucket of chunk {} holds {} + {} expert parameters, plan/params "
                                        "counts {} + {}",
                                        planned.chunk, bucket.numel, expert_bucket.numel, planned.params,
                                        planned.expert_params));
      }
      out_.buckets.push_back(std::move(bucket));
      if (!expert_bucket.units.empty()) out_.buckets.push_back(std::move(expert_bucket));
    }
    for (int b = 0; b < static_cast<int>(out_.buckets.size()); ++b) {
      Bucket& bucket = out_.buckets[b];
      i64 offset = 0;
      for (int u : bucket.units) {
        out_.units[u].bucket = b;
        out_.units[u].bucket_offset = offset;
        offset += out_.units[u].numel;
      }
      const int group = bucket.expert ? p_.expert_data_parallel() : p_.grad_replicas();
      bucket.padded_numel = (bucket.numel + group - 1) / group * group;
    }
  }

  const ModelSpec& m_;
  const PlanSpec& p_;
  int t_;
  int r_;
  int e_;
  ParamLayout out_;
};

}  // namespace

const char* to_string(UnitKind kind) {
  switch (kind) {
    case UnitKind::kWordEmbedding: return "word_embedding";
    case UnitKind::kPositionEmbedding: return "position_embedding";
    case UnitKind::kLayer: return "layer";
    case UnitKind::kFinalNorm: return "final_norm";
    case UnitKind::kOutputLayer: return "output_layer";
    case UnitKind::kExperts: return "experts";
  }
  return "layer";
}

std::int64_t ParamLayout::total_numel() const {
  std::int64_t n = 0;
  for (const Unit& u : units) n += u.numel;
  return n;
}

ParamLayout make_param_layout(const ModelSpec& model, const PlanSpec& plan, int tp_rank, int pp_rank, int ep_rank) {
  if (plan.dp < 1 || model.vocab_size % plan.tp != 0 || pipeline_split_problem(model, plan)) {
    throw InternalError("make_param_layout: the plan is not checked against the model");
  }
  if (model.is_moe() && (!plan.moe.active || plan.moe.etp != 1 || ep_rank < 0 || ep_rank >= plan.moe.ep)) {
    throw InternalError("make_param_layout: MoE layers need resolved keys, etp 1 and an ep rank");
  }
  if (tp_rank < 0 || tp_rank >= plan.tp || pp_rank < 0 || pp_rank >= plan.pp) {
    throw InternalError(fmt::format("make_param_layout: rank ({}, {}) outside tp {} pp {}", tp_rank, pp_rank,
                                    plan.tp, plan.pp));
  }
  return LayoutBuilder(model, plan, tp_rank, pp_rank, ep_rank).build();
}

ExpertView expert_view(const Unit& experts, const TensorView& flat, int local_expert) {
  if (experts.kind != UnitKind::kExperts || local_expert < 0 || local_expert >= experts.experts) {
    throw InternalError("expert_view: not an expert of this unit");
  }
  const std::size_t per_expert = experts.params.size() / static_cast<std::size_t>(experts.experts);
  const std::size_t first = per_expert * static_cast<std::size_t>(local_expert);
  auto view = [&](std::size_t k) {
    const ParamSpec& p = experts.params[first + k];
    return flat.slice(p.offset, p.numel());
  };
  ExpertView v;
  v.fc1_weight = view(0);
  if (per_expert == 4) {
    v.fc1_bias = view(1);
    v.fc2_weight = view(2);
    v.fc2_bias = view(3);
  } else {
    v.fc2_weight = view(1);
  }
  return v;
}

std::vector<std::pair<std::string, std::int64_t>> global_parameter_sizes(const ModelSpec& model) {
  PlanSpec single;
  single.dp = 1;
  single.moe.active = model.is_moe();
  single.moe.etp = 1;
  const ParamLayout layout = make_param_layout(model, single, 0, 0);
  std::vector<std::pair<std::string, std::int64_t>> out;
  for (const Unit& u : layout.units) {
    for (const ParamSpec& s : u.params) out.emplace_back(s.name, s.numel());
  }
  return out;
}

}  // namespace strata::rt
