#include "plan/moe_spec.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "core/error.h"
#include "core/json_reader.h"
#include "plan/rank_layout.h"

namespace strata {
namespace {

// Megatron-LM's --moe-router-load-balancing-type choices (arguments.py _add_moe_args).
const std::vector<std::string>& load_balancing_types() {
  static const std::vector<std::string> types = {"aux_loss",  "seq_aux_loss",       "global_aux_loss",
                                                 "sinkhorn",  "quantile_balancing", "none"};
  return types;
}

// The model keys that mean nothing without num_experts.
const std::vector<std::string>& moe_model_keys() {
  static const std::vector<std::string> keys = {
      "moe_router_topk",  "moe_ffn_hidden_size",           "moe_shared_expert_intermediate_size",
      "moe_layer_freq",   "moe_router_load_balancing_type", "moe_aux_loss_coeff",
      "moe_router_num_groups", "moe_router_group_topk"};
  return keys;
}

// The plan keys that mean nothing for a dense model, in the order they are read.
const std::vector<std::string>& moe_plan_keys() {
  static const std::vector<std::string> keys = {"ep",
                                                "etp",
                                                "moe_token_dispatcher_type",
                                                "moe_expert_capacity_factor",
                                                "moe_grouped_gemm",
                                                "moe_shared_expert_overlap",
                                                "moe_pad_expert_input_to_capacity",
                                                "moe_router_imbalance"};
  return keys;
}

void read_layer_freq(json::ObjectReader& r, ModelSpec& m) {
  if (!r.has("moe_layer_freq")) return;
  const nlohmann::json& v = r.raw("moe_layer_freq");
  const std::string allowed = fmt::format(
      "an integer N in [1, {}] (layer i is an MoE layer when i % N == 0, Megatron's --moe-layer-freq N) or a list "
      "of num_layers = {} values 0 (dense) or 1 (MoE)",
      m.num_layers, m.num_layers);
  if (v.is_number_integer()) {
    const std::int64_t n = v.get<std::int64_t>();
    if (n < 1 || n > m.num_layers) r.fail("moe_layer_freq", "expected " + allowed + ", got " + json::describe(v));
    m.moe.moe_layer_freq = static_cast<int>(n);
    return;
  }
  if (!v.is_array() || v.size() != static_cast<std::size_t>(m.num_layers)) {
    r.fail("moe_layer_freq", "expected " + allowed + ", got " + json::describe(v) +
                                 (v.is_array() ? fmt::format(" with {} values", v.size()) : ""));
  }
  int moe_layers = 0;
  for (std::size_t i = 0; i < v.size(); ++i) {
    if (!v[i].is_number_integer() || (v[i].get<std::int64_t>() != 0 && v[i].get<std::int64_t>() != 1)) {
      throw InputError(r.file(), r.element_path("moe_layer_freq", i),
                       "expected 0 (dense layer) or 1 (MoE layer), got " + json::describe(v[i]));
    }
    m.moe.moe_layer_pattern.push_back(v[i].get<int>());
    moe_layers += m.moe.moe_layer_pattern.back();
  }
  if (moe_layers == 0) {
    r.fail("moe_layer_freq", "has no MoE layer (every value 0): a model without MoE layers has no num_experts");
  }
}

// moe_router_num_groups and moe_router_group_topk, together or not at all, as
// TransformerConfig checks them (transformer_config.py:2671-2686).
void read_group_limited_routing(json::ObjectReader& r, MoeModel& moe) {
  const bool groups = r.has("moe_router_num_groups");
  const bool topk = r.has("moe_router_group_topk");
  if (!groups && !topk) return;
  if (groups != topk) {
    r.fail(groups ? "moe_router_num_groups" : "moe_router_group_topk",
           "group-limited routing needs both moe_router_num_groups (the groups the experts are split into) and "
           "moe_router_group_topk (the groups each token may use): give both, or neither for unlimited routing");
  }
  moe.moe_router_num_groups = static_cast<int>(r.integer("moe_router_num_groups", 1, moe.num_experts));
  if (moe.num_experts % moe.moe_router_num_groups != 0) {
    r.fail("moe_router_num_groups", fmt::format("must divide num_experts = {} into equal groups "
                                                "(transformer_config.py:2680), got {}",
                                                moe.num_experts, moe.moe_router_num_groups));
  }
  moe.moe_router_group_topk = static_cast<int>(r.integer("moe_router_group_topk", 1, moe.moe_router_num_groups));
  const int reachable = moe.moe_router_group_topk * (moe.num_experts / moe.moe_router_num_groups);
  if (moe.moe_router_topk > reachable) {
    r.fail("moe_router_group_topk", fmt::format("{} groups of {} experts hold {} experts, fewer than the {} each token "
                                                "is routed to (moe_router_topk): allowed {} to {}",
                                                moe.moe_router_group_topk, moe.num_experts / moe.moe_router_num_groups,
                                                reachable, moe.moe_router_topk,
                                                (moe.moe_router_topk * moe.moe_router_num_groups + moe.num_experts - 1) /
                                                    moe.num_experts,
                                                moe.moe_router_num_groups));
  }
}

}  // namespace

const char* to_string(MoeDispatcher d) {
  switch (d) {
    case MoeDispatcher::kAllToAll: return "alltoall";
    case MoeDispatcher::kAllGather: return "allgather";
    case MoeDispatcher::kFlex: return "flex";
  }
  return "allgather";
}

const std::vector<std::string>& moe_dispatcher_names() {
  static const std::vector<std::string> names = {to_string(MoeDispatcher::kAllToAll),
                                                 to_string(MoeDispatcher::kAllGather),
                                                 to_string(MoeDispatcher::kFlex)};
  return names;
}

MoeDispatcher parse_moe_dispatcher(const std::string& name) {
  for (MoeDispatcher d : {MoeDispatcher::kAllToAll, MoeDispatcher::kAllGather, MoeDispatcher::kFlex}) {
    if (name == to_string(d)) return d;
  }
  throw InternalError("parse_moe_dispatcher: " + name + " is not a dispatcher (read it with its names)");
}

void read_moe_model(json::ObjectReader& r, ModelSpec& m) {
  if (!r.has("num_experts")) {
    for (const std::string& key : moe_model_keys()) {
      if (r.has(key)) {
        r.fail(key, "is a mixture-of-experts key and needs num_experts (the routed experts per MoE layer); a "
                    "dense model has neither");
      }
    }
    return;
  }
  MoeModel& moe = m.moe;
  moe.num_experts = static_cast<int>(r.integer("num_experts", 1, 1 << 16));
  // Megatron's defaults: top-2 routing (transformer_config.py moe_router_topk), an
  // expert as wide as the dense MLP (arguments.py:1650-1651).
  moe.moe_router_topk = static_cast<int>(r.integer_or("moe_router_topk", 2, 1, 1 << 16));
  if (moe.moe_router_topk > moe.num_experts) {
    r.fail("moe_router_topk", fmt::format("a token is routed to {} experts but an MoE layer has num_experts = {}: "
                                          "allowed 1 to {}",
                                          moe.moe_router_topk, moe.num_experts, moe.num_experts));
  }
  moe.moe_ffn_hidden_size = static_cast<int>(r.integer_or("moe_ffn_hidden_size", m.ffn_hidden_size, 1, 1LL << 28));
  moe.moe_shared_expert_intermediate_size =
      static_cast<int>(r.integer_or("moe_shared_expert_intermediate_size", 0, 1, 1LL << 28));
  read_layer_freq(r, m);
  moe.moe_router_load_balancing_type = r.choice_or("moe_router_load_balancing_type", "aux_loss", load_balancing_types());
  moe.moe_aux_loss_coeff = r.number_or("moe_aux_loss_coeff", 0.0, 0.0, 1000.0);
  read_group_limited_routing(r, moe);
}

void write_moe_model(const ModelSpec& m, nlohmann::ordered_json& j) {
  if (!m.is_moe()) return;
  const MoeModel& moe = m.moe;
  j["num_experts"] = moe.num_experts;
  j["moe_router_topk"] = moe.moe_router_topk;
  j["moe_ffn_hidden_size"] = moe.moe_ffn_hidden_size;
  if (moe.moe_shared_expert_intermediate_size > 0) {
    j["moe_shared_expert_intermediate_size"] = moe.moe_shared_expert_intermediate_size;
  }
  if (moe.moe_layer_pattern.empty()) {
    j["moe_layer_freq"] = moe.moe_layer_freq;
  } else {
    j["moe_layer_freq"] = moe.moe_layer_pattern;
  }
  j["moe_router_load_balancing_type"] = moe.moe_router_load_balancing_type;
  j["moe_aux_loss_coeff"] = moe.moe_aux_loss_coeff;
  if (moe.moe_router_num_groups > 0) {
    j["moe_router_num_groups"] = moe.moe_router_num_groups;
    j["moe_router_group_topk"] = moe.moe_router_group_topk;
  }
}

void read_moe_plan(json::ObjectReader& r, PlanSpec& p) {
  for (const std::string& key : moe_plan_keys()) {
    if (r.has(key)) {
      p.moe.first_key = key;
      break;
    }
  }
  MoePlan& moe = p.moe;
  moe.ep = static_cast<int>(r.integer_or("ep", 1, 1, 1 << 16));
  moe.etp = static_cast<int>(r.integer_or("etp", 0, 1, 1 << 16));
  moe.token_dispatcher = parse_moe_dispatcher(r.choice_or("moe_token_dispatcher_type", "allgather", moe_dispatcher_names()));
  moe.expert_capacity_factor = r.number_or("moe_expert_capacity_factor", 0.0, 0.01, 1000.0);
  moe.grouped_gemm = r.boolean_or("moe_grouped_gemm", false);
  moe.shared_expert_overlap = r.boolean_or("moe_shared_expert_overlap", false);
  moe.pad_to_capacity = r.boolean_or("moe_pad_expert_input_to_capacity", false);
  moe.router_imbalance = r.number_or("moe_router_imbalance", 1.0, 1.0, 1e6);
}

void write_moe_plan(const PlanSpec& p, nlohmann::ordered_json& j) {
  if (!p.moe.active) return;
  j["ep"] = p.moe.ep;
  j["etp"] = p.moe.etp;
  j["moe_token_dispatcher_type"] = to_string(p.moe.token_dispatcher);
  if (p.moe.expert_capacity_factor > 0.0) j["moe_expert_capacity_factor"] = p.moe.expert_capacity_factor;
  j["moe_grouped_gemm"] = p.moe.grouped_gemm;
  if (p.moe.shared_expert_overlap) j["moe_shared_expert_overlap"] = true;
  if (p.moe.pad_to_capacity) j["moe_pad_expert_input_to_capacity"] = true;
  j["moe_router_imbalance"] = p.moe.router_imbalance;
}

void check_moe_plan(PlanSpec& p, const ModelSpec& m, const PlanFailure& fail) {
  MoePlan& moe = p.moe;
  if (!m.is_moe()) {
    if (!moe.first_key.empty()) {
      fail("$." + moe.first_key,
           fmt::format("is a mixture-of-experts key, and model {} has no experts (no num_experts): remove it (and "
                       "the other MoE keys: {}), or use a model with num_experts",
                       m.name, fmt::join(moe_plan_keys(), ", ")));
    }
    return;
  }
  moe.active = true;
  // arguments.py:587-588 (and model_parallel_config.py:506-507): etp defaults to tp.
  if (moe.etp == 0) moe.etp = p.tp;
  const MoeModel& mm = m.moe;
  // arguments.py:1655-1658: "Number of experts should be a multiple of expert model parallel_size."
  if (mm.num_experts % moe.ep != 0) {
    fail("$.ep", fmt::format("ep {} must divide num_experts {} of model {} (each expert-parallel rank holds "
                             "num_experts / ep whole experts; arguments.py:1657)",
                             moe.ep, mm.num_experts, m.name));
  }
  // parallel_state.py:873-884: world_size % (etp * ep * pp) == 0. The MoE layers
  // fold etp x ep over the tp x cp x dp ranks of each stage (MoE Parallel Folding).
  const std::int64_t stage_ranks = static_cast<std::int64_t>(p.tp) * p.cp * p.dp;
  const std::int64_t expert_model = static_cast<std::int64_t>(moe.ep) * moe.etp;
  if (stage_ranks % expert_model != 0) {
    fail("$.ep", fmt::format("etp*ep = {}*{} = {} must divide the ranks of a pipeline stage, tp*cp*dp = {}*{}*{} = "
                             "{}: the MoE layers fold etp x ep over them (MoE Parallel Folding; Megatron-Core's "
                             "parallel_state.py:873-884 requires world_size % (etp*ep*pp) == 0)",
                             moe.etp, moe.ep, expert_model, p.tp, p.cp, p.dp, stage_ranks));
  }
  if (moe.token_dispatcher == MoeDispatcher::kFlex) {
    // token_dispatcher.py MoEFlexTokenDispatcher: "DeepEP dispatcher requires TPxEP > 1".
    if (moe.ep * moe.etp < 2) {
      fail("$.moe_token_dispatcher_type",
           fmt::format("the flex (DeepEP) dispatcher exchanges tokens over etp x ep ranks and needs more than one "
                       "(token_dispatcher.py: \"DeepEP dispatcher requires TPxEP > 1\"); ep is {} and etp {}",
                       moe.ep, moe.etp));
    }
    // Megatron's flex dispatcher treats etp x ep as one group of etp x E experts;
    // Strata models its traffic for whole experts only.
    if (moe.etp != 1) {
      fail("$.etp", fmt::format("Strata models the flex (DeepEP) dispatcher with whole experts, etp 1; etp is {} "
                                "(etp defaults to tp): set etp 1, or use the alltoall dispatcher",
                                moe.etp));
    }
  }
  // transformer_config.py:1820-1826: "moe_shared_expert_overlap only works with
  // alltoall or flex token dispatcher."
  if (moe.shared_expert_overlap && moe.token_dispatcher == MoeDispatcher::kAllGather) {
    fail("$.moe_shared_expert_overlap",
         "runs the shared experts beside the token all-to-alls, which the allgather dispatcher does not have: "
         "Megatron-Core allows it with moe_token_dispatcher_type alltoall or flex only "
         "(transformer_config.py: \"moe_shared_expert_overlap only works with alltoall or flex token "
         "dispatcher\"); remove it or change the dispatcher");
  }
  // transformer_config.py: "moe_expert_capacity_factor must be set to use
  // moe_pad_expert_input_to_capacity"; "Flex token dispatcher with deepep backend
  // does not support moe_pad_expert_input_to_capacity".
  if (moe.pad_to_capacity && moe.expert_capacity_factor <= 0.0) {
    fail("$.moe_pad_expert_input_to_capacity",
         "pads every expert's input to its capacity, which needs moe_expert_capacity_factor (Megatron-Core's "
         "transformer_config.py: \"moe_expert_capacity_factor must be set to use "
         "moe_pad_expert_input_to_capacity\"); give the factor or remove it");
  }
  if (moe.pad_to_capacity && moe.token_dispatcher == MoeDispatcher::kFlex) {
    fail("$.moe_pad_expert_input_to_capacity",
         "is not supported by the flex (DeepEP) dispatcher (transformer_config.py: \"Flex token dispatcher with "
         "deepep backend does not support moe_pad_expert_input_to_capacity\"); remove it or use alltoall");
  }
  // transformer_config.py:2612-2615: "Bias in Moe is only supported when ETP==1".
  if (m.add_bias_linear && moe.etp != 1) {
    fail("$.etp", fmt::format("model {} has biases on its linear layers (add_bias_linear), which Megatron-Core's "
                              "experts support only with etp 1 (transformer_config.py:2614); etp is {} (etp defaults "
                              "to tp): set etp 1",
                              m.name, moe.etp));
  }
  if (mm.moe_ffn_hidden_size % moe.etp != 0) {
    fail("$.etp", fmt::format("etp {} must divide moe_ffn_hidden_size {} of model {} (an expert's fc1 and fc2 are "
                              "split over etp like a tensor-parallel MLP){}",
                              moe.etp, mm.moe_ffn_hidden_size, m.name, moe.etp == p.tp ? "; etp defaults to tp" : ""));
  }
  if (mm.moe_shared_expert_intermediate_size % p.tp != 0) {
    fail("$.tp", fmt::format("tp {} must divide moe_shared_expert_intermediate_size {} of model {} (the shared "
                             "experts are split over tp, as the dense MLP)",
                             p.tp, mm.moe_shared_expert_intermediate_size, m.name));
  }
  // moe_layer.py:636-640: training an MoE layer with tp > 1 needs sequence parallelism.
  if (p.tp > 1 && !p.sequence_parallel) {
    fail("$.sequence_parallel", fmt::format("model {} has MoE layers and tp is {}: Megatron-Core trains MoE layers "
                                            "with tensor parallelism only with sequence_parallel true "
                                            "(transformer/moe/moe_layer.py:636)",
                                            m.name, p.tp));
  }
  // transformer_config.py:1836-1860: token dropping works with the aux-loss kinds only.
  if (moe.expert_capacity_factor > 0.0) {
    const std::string& lb = mm.moe_router_load_balancing_type;
    if (lb != "aux_loss" && lb != "seq_aux_loss" && lb != "global_aux_loss" && lb != "none") {
      fail("$.moe_expert_capacity_factor",
           fmt::format("a capacity factor drops tokens, which Megatron-Core allows only with "
                       "moe_router_load_balancing_type aux_loss, seq_aux_loss, global_aux_loss or none; model {} "
                       "has \"{}\" (transformer_config.py:1836-1860): remove the key (dropless)",
                       m.name, lb));
    }
  }
  // The busiest expert cannot take more than every token: max/mean <= E / k.
  const double most = static_cast<double>(mm.num_experts) / mm.moe_router_topk;
  if (moe.router_imbalance > most) {
    fail("$.moe_router_imbalance",
         fmt::format("{} is more than an expert can take: with {} experts and top-{} routing the busiest expert "
                     "holds at most every token, {} times the mean (allowed 1 to {})",
                     moe.router_imbalance, mm.num_experts, mm.moe_router_topk, most, most));
  }
  // parallel_state.py:1447-1449: the expert data-parallel group splits into the
  // same number of distributed-optimizer instances as the dense one.
  if (p.zero_shard_size > 0 && p.expert_data_parallel() % p.zero_shard_groups() != 0) {
    fail("$.zero_shard_size",
         fmt::format("zero_shard_size {} makes {} distributed-optimizer instances, which must divide the expert "
                     "data-parallel size tp*cp*dp/(ep*etp) = {} too (parallel_state.py:1447)",
                     p.zero_shard_size, p.zero_shard_groups(), p.expert_data_parallel()));
  }
  // parallel_state.py:898-907: without pp last in the order the two layouts'
  // pipeline groups only agree when their data-parallel sizes do; Megatron-Core
  // asserts that the pipeline groups of the dense and the expert layout are the same.
  if (RankLayout(p).all_groups(GroupKind::kPipeline) != expert_rank_layout(p).all_groups(GroupKind::kPipeline)) {
    fail("$.rank_order",
         fmt::format("rank order \"{}\" gives the MoE layers (etp {} ep {} edp {}) other pipeline groups than "
                     "the dense layers (tp {} cp {} dp {}); Megatron-Core requires the same (parallel_state.py:898-907): "
                     "put pp last, or make the expert data-parallel size equal dp",
                     to_string(p.rank_order), moe.etp, moe.ep, p.expert_data_parallel(), p.tp, p.cp, p.dp));
  }
  if (splits_backward(p.schedule)) {
    fail("$.schedule", fmt::format("schedule \"{}\" splits each backward into B and W; what W keeps is modelled "
                                   "for the dense layer's GEMMs, not for MoE layers yet: use 1f1b or "
                                   "interleaved-1f1b",
                                   to_string(p.schedule)));
  }
  if (p.recompute == Recompute::kSelectiveOp) {
    fail("$.recompute", "\"selective_op\" (torchtitan's op-level policy) is defined here for the dense layer's "
                        "matmuls, not for MoE layers: use \"none\", \"selective\" or \"full\"");
  }
}

std::string megatron_moe_layer_freq(const ModelSpec& m) {
  const std::vector<int>& pattern = m.moe.moe_layer_pattern;
  if (pattern.empty()) return std::to_string(m.moe.moe_layer_freq);
  // Runs of equal values, as Megatron's examples write them: "([0]*3+[1]*58)".
  std::string out = "(";
  for (std::size_t i = 0; i < pattern.size();) {
    std::size_t j = i;
    while (j < pattern.size() && pattern[j] == pattern[i]) ++j;
    out += fmt::format("{}[{}]*{}", i == 0 ? "" : "+", pattern[i], j - i);
    i = j;
  }
  return out + ")";
}

}  // namespace strata
