// FLOPs of one training step, counted from the layer operation list.
//
// For an MoE model every MoE layer counts its router, its shared experts and
// topk of its routed experts per token: the model FLOPs are those of the active
// parameters (about 6 * N_active * tokens, plus attention), as MoE papers count
// them for MFU (docs/memory.md).
//
// Model FLOPs (for MFU) count forward and backward once: 3x the forward FLOPs,
// since backward computes a data- and a weight-gradient per GEMM. Hardware FLOPs
// (for HFU) add what recomputation repeats: the whole forward of every layer with
// full recompute, the attention core with selective recompute. The logits are
// never recomputed.
#pragma once

#include <cstdint>

#include "plan/model_spec.h"
#include "plan/plan_spec.h"

namespace strata {

struct StepFlops {
  double model_flops = 0.0;     // whole step, all GPUs
  double hardware_flops = 0.0;  // with recompute
  double forward_flops_per_sequence = 0.0;
};

StepFlops step_flops(const ModelSpec& m, const PlanSpec& p);

// Forward FLOPs of one sequence through all layers and the logits.
double forward_flops_per_sequence(const ModelSpec& m);

// Megatron-LM's closed forms (Narayanan et al. 2021, eq. 3, appendix) for
// GPT-style models (multi-head attention, 4h MLP without gating):
//   72 * B * s * L * h^2 * (1 + s/(6h) + V/(12 h L))   without recompute,
//   96 * B * s * L * h^2 * (1 + s/(6h) + V/(16 h L))   with full recompute.
double megatron_flops(const ModelSpec& m, std::int64_t global_batch_size);
double megatron_flops_full_recompute(const ModelSpec& m, std::int64_t global_batch_size);

}  // namespace strata
