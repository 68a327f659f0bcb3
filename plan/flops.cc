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

namespace {

// Forward FLOPs of every layer of the model and of its attention cores: the
// dense layers' and the MoE layers' op lists, each counted as often as the
// model has that kind of layer. An MoE layer's routed experts count topk of
// them per token (layer_forward_ops' whole-model context): active parameters.
struct LayerFlops {
  double all = 0.0;
  double attention_core = 0.0;
  double op_sac_recomputed = 0.0;  // torchtitan's selective_op replay
  double mla_up_proj = 0.0;        // MLA's up-projections (recompute module mla_up_proj)
  // What selective recompute replays with these modules.
  double selective(const RecomputeModules& modules) const {
    return (modules.core_attn ? attention_core : 0.0) + (modules.mla_up_proj ? mla_up_proj : 0.0);
  }
};

double mla_up_proj_flops(const std::vector<LayerOp>& ops) {
  double total = 0.0;
  for (const LayerOp& op : ops) {
    if (is_mla_up_proj(op)) total += op.flops;
  }
  return total;
}

LayerFlops model_layer_flops(const ModelSpec& m, const LayerOpContext& c) {
  LayerFlops f;
  const int moe_layers = m.num_moe_layers();
  for (const MlpKind kind : {MlpKind::kDense, MlpKind::kMoe}) {
    // Multi-token prediction's transformer layers are of the decoder's last layer's kind.
    const int mtp = (kind == MlpKind::kMoe) == m.mtp_layer_is_moe() ? m.mtp_num_layers : 0;
    const double layers = (kind == MlpKind::kMoe ? moe_layers : m.num_layers - moe_layers) + mtp;
    if (layers == 0) continue;
    const std::vector<LayerOp> ops = layer_forward_ops(m, c, kind);
    f.all += layers * sum_flops(ops, false);
    f.attention_core += layers * sum_flops(ops, true);
    for (const LayerOp& op : ops) f.op_sac_recomputed += layers * op.flops * op_sac_recomputed_share(op, m);
    f.mla_up_proj += layers * mla_up_proj_flops(ops);
  }
  return f;
}

// Multi-token prediction's forward work per sequence beside its transformer
// layers: eh_proj (2h -> h) and the output layer again (`head`), per MTP layer.
double mtp_extra_flops(const ModelSpec& m, double head) {
  const double s = m.seq_length, h = m.hidden_size;
  return m.mtp_num_layers * (2.0 * s * 2.0 * h * h + head);
}

// The transformer layers a dense model's sequence passes: the decoder's and MTP's.
double dense_layers(const ModelSpec& m) { return m.num_layers + m.mtp_num_layers; }

}  // namespace

double forward_flops_per_sequence(const ModelSpec& m) {
  LayerOpContext c = whole_model_context(false);
  const double head = sum_flops(head_forward_ops(m, c), false);
  if (!m.is_moe()) {
    return dense_layers(m) * sum_flops(layer_forward_ops(m, c), false) + head + mtp_extra_flops(m, head);
  }
  return model_layer_flops(m, c).all + head + mtp_extra_flops(m, head);
}

StepFlops step_flops(const ModelSpec& m, const PlanSpec& p) {
  LayerOpContext c = whole_model_context(p.flash_attention);
  const double head = sum_flops(head_forward_ops(m, c), false);
  if (m.is_moe()) {
    const LayerFlops layers = model_layer_flops(m, c);
    StepFlops f;
    f.forward_flops_per_sequence = layers.all + head + mtp_extra_flops(m, head);
    f.model_flops = 3.0 * f.forward_flops_per_sequence * p.global_batch_size;
    double recomputed = 0.0;
    if (p.recompute == Recompute::kFull) recomputed = layers.all;
    if (p.recompute == Recompute::kSelective) recomputed = layers.selective(p.recompute_modules);
    if (p.recompute == Recompute::kSelectiveOp) recomputed = layers.op_sac_recomputed;
    f.hardware_flops = f.model_flops + recomputed * p.global_batch_size;
    return f;
  }
  // Dense models: one layer's ops times num_layers (the figures golden outputs hold).
  const double layer = sum_flops(layer_forward_ops(m, c), false);
  const double core = sum_flops(layer_forward_ops(m, c), true);
  const double layers = dense_layers(m);
  const double forward = layers * layer + head + mtp_extra_flops(m, head);
  StepFlops f;
  f.forward_flops_per_sequence = forward;
  f.model_flops = 3.0 * forward * p.global_batch_size;
  double recomputed = 0.0;
  if (p.recompute == Recompute::kFull) recomputed = layers * layer;
  if (p.recompute == Recompute::kSelective) {
    recomputed = layers * ((p.recompute_modules.core_attn ? core : 0.0) +
                           (p.recompute_modules.mla_up_proj ? mla_up_proj_flops(layer_forward_ops(m, c)) : 0.0));
  }
  if (p.recompute == Recompute::kSelectiveOp) {
    for (const LayerOp& op : layer_forward_ops(m, c)) recomputed += layers * op.flops * op_sac_recomputed_share(op, m);
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
