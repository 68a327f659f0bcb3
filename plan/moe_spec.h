// The mixture-of-experts keys of model.json and plan.json, in Megatron-Core's
// names, and the rules an MoE plan keeps. Read strictly; written only where a
// model has experts, so a dense model and its plans read and echo as before.
// Each rule mirrors the Megatron-LM line it cites (d98e8a64: megatron/training/
// arguments.py, megatron/core/parallel_state.py, megatron/core/transformer/...).
//
// Expert parallelism folds inside the ranks of one pipeline stage (Liu et al.,
// "MoE Parallel Folding: Heterogeneous Parallelism Mappings for Efficient
// Large-Scale MoE Model Training with Megatron Core", arXiv 2504.14960, 2025):
// attention runs on tp x cp x dp, the MoE layers on etp x ep x edp over the
// same ranks, so etp * ep must divide tp * cp * dp, not dp * cp
// (plan/rank_layout.h expert_rank_layout numbers them).
#pragma once

#include <functional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "plan/model_spec.h"
#include "plan/plan_spec.h"

namespace strata {

namespace json {
class ObjectReader;
}

// model.json: num_experts, moe_router_topk, moe_ffn_hidden_size,
// moe_shared_expert_intermediate_size, moe_layer_freq, moe_router_load_balancing_type,
// moe_aux_loss_coeff, moe_router_num_groups and moe_router_group_topk. Reads them from r (num_layers and ffn_hidden_size already
// read into m); an MoE key without num_experts, topk > num_experts or a layer
// pattern of the wrong length is an InputError at its key.
void read_moe_model(json::ObjectReader& r, ModelSpec& m);
void write_moe_model(const ModelSpec& m, nlohmann::ordered_json& j);

// plan.json: ep, etp, moe_token_dispatcher_type, moe_expert_capacity_factor,
// moe_grouped_gemm, moe_shared_expert_overlap, moe_router_imbalance. Checked against the model by check_moe_plan.
void read_moe_plan(json::ObjectReader& r, PlanSpec& p);
void write_moe_plan(const PlanSpec& p, nlohmann::ordered_json& j);

// Resolves p.moe (active, etp) against the model and checks Megatron-Core's
// rules, after dp is resolved. fail(path, message) throws (path "$.key").
using PlanFailure = std::function<void(const std::string& path, const std::string& message)>;
void check_moe_plan(PlanSpec& p, const ModelSpec& m, const PlanFailure& fail);

const char* to_string(MoeDispatcher d);  // Megatron's names: "alltoall", "allgather", "flex"
const std::vector<std::string>& moe_dispatcher_names();
// One of moe_dispatcher_names() -> its dispatcher (InternalError otherwise).
MoeDispatcher parse_moe_dispatcher(const std::string& name);

// moe_layer_freq as Megatron's --moe-layer-freq takes it: the integer, or the
// list as a pattern of runs ("([0]*3+[1]*58)", arguments.py moe_freq_type).
std::string megatron_moe_layer_freq(const ModelSpec& m);

}  // namespace strata
