// What an MoE layer keeps on one GPU beyond the dense layer's formulas: the
// activations of its router, shared and routed experts, and the dispatch and
// combine buffers of the layer being computed (docs/memory.md, "Mixture of
// experts", gives each term and its source). The routed experts' weights,
// gradients and optimizer states are plan/params.h's stage_expert_params_per_gpu,
// sharded by the memory model over the expert data-parallel group.
//
// Notation: T = (seq_length / cp) * micro_batch_size tokens of this rank, r = tp
// with sequence parallelism (1 without), own = T / r the tokens entering the MoE
// layer here, k = moe_router_topk, E = num_experts, load = expert_load_factor
// (the capacity factor, or dropless the routing imbalance), and
// routed = own * k * etp * load the tokens this rank's experts take.
#pragma once

#include "plan/memory_model.h"
#include "plan/model_spec.h"
#include "plan/plan_spec.h"

namespace strata {

// Stored activations of one MoE layer for one micro-batch on one GPU: the dense
// layer's attention and norm parts; the MLP part is the MoE's.
LayerActivations moe_layer_activation_bytes(const ModelSpec& m, const PlanSpec& p);

// Of those, the MoE part (what replaces the dense MLP's terms): the input the
// router, the shared experts and the dispatch read, the router's fp32 scores,
// the shared experts' MLP terms, the routed tokens' fc1 input, activation input
// and fc2 input, and the expert outputs the combine weights by the routing
// probabilities.
double moe_mlp_activation_bytes(const ModelSpec& m, const PlanSpec& p);

// The token dispatcher's buffers of the MoE layer being computed (transient,
// one layer at a time): alltoall, the dispatch's and the combine's send and
// receive buffers, 2 * e * h * own * k * (1 + load), plus with etp > 1 the
// routed tokens' fc2 output before its reduce-scatter over etp, e * h * routed;
// allgather, the etp x ep group's tokens gathered and the output before its
// reduce-scatter, 2 * e * h * own * etp * ep.
double moe_dispatch_buffer_bytes(const ModelSpec& m, const PlanSpec& p);

}  // namespace strata
