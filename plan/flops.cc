#include "plan/flops.h"

#include "plan/layer_ops.h"

namespace strata {
namespace {

double sum_flops(const std::vector<LayerOp>& ops, bool attention_core_only) {
  double total = 0.0;
  for (const LayerOp& op : ops) {
    if (!attention_core_only || op.attention_core) total += op.flops;
  }
  return total;
}

LayerOpContext whole_model_context(bool flash) {
  LayerOpContext c;  // tp 1, micro-batch 1: the unsplit model, one sequence
  c.flash_attention = flash;
  return c;
}

}  // namespace

double forward_flops_per_sequence(const ModelSpec& m) {
  LayerOpContext c = whole_model_context(false);
  return m.num_layers * sum_flops(layer_forward_ops(m, c), false) +
         sum_flops(head_forward_ops(m, c), false);
}

StepFlops step_flops(const ModelSpec& m, const PlanSpec& p) {
  LayerOpContext c = whole_model_context(p.flash_attention);
  const double layer = sum_flops(layer_forward_ops(m, c), false);
  const double core = sum_flops(layer_forward_ops(m, c), true);
  const double head = sum_flops(head_forward_ops(m, c), false);
  const double forward = m.num_layers * layer + head;
  StepFlops f;
  f.forward_flops_per_sequence = forward;
  f.model_flops = 3.0 * forward * p.global_batch_size;
  double recomputed = 0.0;
  if (p.recompute == Recompute::kFull) recomputed = m.num_layers * layer;
  if (p.recompute == Recompute::kSelective) recomputed = m.num_layers * core;
  if (p.recompute == Recompute::kSelectiveOp) {
    for (const LayerOp& op : layer_forward_ops(m, c)) recomputed += m.num_layers * op.flops * op_sac_recomputed_share(op, m);
  }
  f.hardware_flops = f.model_flops + recomputed * p.global_batch_size;
  return f;
}

double megatron_flops(const ModelSpec& m, std::int64_t global_batch_size) {
  const double B = static_cast<double>(global_batch_size);
  const double s = m.seq_length, L = m.num_layers, h = m.hidden_size, V = m.vocab_size;
  return 72.0 * B * s * L * h * h * (1.0 + s / (6.0 * h) + V / (12.0 * h * L));
}

double megatron_flops_full_recompute(const ModelSpec& m, std::int64_t global_batch_size) {
  const double B = static_cast<double>(global_batch_size);
  const double s = m.seq_length, L = m.num_layers, h = m.hidden_size, V = m.vocab_size;
  return 96.0 * B * s * L * h * h * (1.0 + s / (6.0 * h) + V / (16.0 * h * L));
}

}  // namespace strata
