#include "runtime/executor/transformer_layer.h"

#include <cmath>

#include "core/error.h"

namespace strata::rt {
namespace {

using i64 = std::int64_t;

TensorView role_view(const Unit& unit, const TensorView& flat, LayerRole role) {
  const int k = unit.role_index.at(static_cast<int>(role));
  if (k < 0) return {};
  const ParamSpec& p = unit.params[k];
  return flat.slice(p.offset, p.numel());
}

// The rest of a tensor from element `offset` (a strided GEMM operand's start).
TensorView from(const TensorView& v, i64 offset) { return v.slice(offset, v.numel - offset); }

// A deferred row-parallel wgrad whose output gradient was not gathered takes the
// residual stream's gradient itself, once the backward is done with it.
void hand_over_stream_grad(std::vector<LayerWgrad>* deferred, std::size_t at, Tensor& grad) {
  if (deferred != nullptr && (*deferred)[at].gemm.dy.numel() == 0) (*deferred)[at].gemm.dy = std::move(grad);
  grad = Tensor();
}

constexpr Transpose N = Transpose::kNo;
constexpr Transpose T = Transpose::kYes;

}  // namespace

LayerParams layer_params(const Unit& unit, const TensorView& flat, const Unit* experts, const TensorView& expert_flat) {
  if (unit.kind != UnitKind::kLayer) throw InternalError("layer_params: not a layer unit");
  LayerParams p;
  p.router_weight = role_view(unit, flat, LayerRole::kRouterWeight);
  p.shared_fc1_weight = role_view(unit, flat, LayerRole::kSharedFc1Weight);
  p.shared_fc1_bias = role_view(unit, flat, LayerRole::kSharedFc1Bias);
  p.shared_fc2_weight = role_view(unit, flat, LayerRole::kSharedFc2Weight);
  p.shared_fc2_bias = role_view(unit, flat, LayerRole::kSharedFc2Bias);
  p.experts = experts;
  p.expert_params = expert_flat;
  if ((experts != nullptr) != (p.router_weight.numel > 0)) {
    throw InternalError("layer_params: an MoE layer needs its router and experts, a dense layer neither");
  }
  p.qkv_weight = role_view(unit, flat, LayerRole::kQkvWeight);
  p.qkv_bias = role_view(unit, flat, LayerRole::kQkvBias);
  p.proj_weight = role_view(unit, flat, LayerRole::kProjWeight);
  p.proj_bias = role_view(unit, flat, LayerRole::kProjBias);
  p.fc1_weight = role_view(unit, flat, LayerRole::kFc1Weight);
  p.fc1_bias = role_view(unit, flat, LayerRole::kFc1Bias);
  p.fc2_weight = role_view(unit, flat, LayerRole::kFc2Weight);
  p.fc2_bias = role_view(unit, flat, LayerRole::kFc2Bias);
  p.norm1_weight = role_view(unit, flat, LayerRole::kNorm1Weight);
  p.norm1_bias = role_view(unit, flat, LayerRole::kNorm1Bias);
  p.norm2_weight = role_view(unit, flat, LayerRole::kNorm2Weight);
  p.norm2_bias = role_view(unit, flat, LayerRole::kNorm2Bias);
  return p;
}

TransformerLayer::TransformerLayer(Kernels& kernels, Recompute recompute, ContextParallelAttention* cp, MoeMlp* moe)
    : k_(kernels), recompute_(recompute), cp_(cp), moe_(moe) {
  const Shapes& s = k_.shapes();
  const std::string act = s.swiglu ? "swiglu" : "gelu";
  auto part = [&](const std::string& prefix, std::int64_t ffn) {
    MlpPart m;
    m.ffn = ffn;
    m.fc1_width = s.swiglu ? 2 * ffn : ffn;
    m.fc1 = prefix + "fc1";
    m.act = prefix + act;
    m.fc2 = prefix + "fc2";
    m.fc1_dgrad = m.fc1 + " dgrad";
    m.fc1_wgrad = m.fc1 + " wgrad";
    m.fc2_dgrad = m.fc2 + " dgrad";
    m.fc2_wgrad = m.fc2 + " wgrad";
    m.act_bwd = m.act + " bwd";
    m.fc2_bias_bwd = m.fc2 + " bias bwd";
    return m;
  };
  dense_ = part("", s.ffn);
  dense_.fc1_weight = &LayerParams::fc1_weight;
  dense_.fc1_bias = &LayerParams::fc1_bias;
  dense_.fc2_weight = &LayerParams::fc2_weight;
  dense_.fc2_bias = &LayerParams::fc2_bias;
  shared_ = part("shared_", s.shared_ffn);
  shared_.fc1_weight = &LayerParams::shared_fc1_weight;
  shared_.fc1_bias = &LayerParams::shared_fc1_bias;
  shared_.fc2_weight = &LayerParams::shared_fc2_weight;
  shared_.fc2_bias = &LayerParams::shared_fc2_bias;
}

std::int64_t TransformerLayer::core_batch() const { return cp_ ? 2 * k_.shapes().b : k_.shapes().b; }
std::int64_t TransformerLayer::core_seq() const { return cp_ ? k_.shapes().s / 2 : k_.shapes().s; }

std::int64_t TransformerLayer::probs_numel() const {
  const Shapes& s = k_.shapes();
  return cp_ ? cp_->probs_numel() : s.b * s.heads * s.s * s.s;
}

void TransformerLayer::attention_core(LayerActivations& a, const TensorView& probs, const TensorView& context4,
                                      bool exchange) {
  if (cp_ != nullptr) {
    if (exchange) a.kv = k_.activation(cp_->kv_numel());
    cp_->forward(a.qkv.view(), a.kv.view(), probs, context4, exchange);
    return;
  }
  attention_scores(a.qkv.view(), probs, "attn_scores", "softmax");
  attention_values(a.qkv.view(), probs, context4, "attn_values");
}

// Scores and softmax of every (sample, query group): the heads of a group share
// its key, so one GEMM per group covers them all (rows: heads_per_group * s).
void TransformerLayer::attention_scores(const TensorView& qkv, const TensorView& probs, const char* scores_name,
                                        const char* softmax_name) {
  const Shapes& s = k_.shapes();
  const i64 hpg = s.heads_per_group;
  const i64 sample_qkv = (s.heads + 2 * s.groups) * s.s * s.d;
  const i64 sample_scores = s.heads * s.s * s.s;
  const double flops = 2.0 * static_cast<double>(s.b) * s.heads * s.s * s.s * s.d;
  k_.recorder().compute(scores_name, EventCategory::kAttention, flops, 0.0, [&] {
    for (i64 bi = 0; bi < s.b; ++bi) {
      const i64 q = bi * sample_qkv;
      const i64 k = q + s.heads * s.s * s.d;
      k_.device().gemm(strided_batched_gemm(N, T, hpg * s.s, s.s, s.d, from(qkv, q), s.d, hpg * s.s * s.d, from(qkv, k),
                                            s.d, s.s * s.d, from(probs, bi * sample_scores), s.s, hpg * s.s * s.s,
                                            s.groups));
    }
  });
  // Megatron's softmax scale 1/sqrt(head size); causal mask.
  const float scale = 1.0f / std::sqrt(static_cast<float>(s.d));
  k_.recorder().compute(softmax_name, EventCategory::kElementwise, 0.0, 2.0 * static_cast<double>(probs.bytes()),
                        [&] { k_.device().softmax_forward(probs, s.b * s.heads * s.s, s.s, s.s, scale, true, probs); });
}

void TransformerLayer::attention_values(const TensorView& qkv, const TensorView& probs, const TensorView& context4,
                                        const char* name) {
  const Shapes& s = k_.shapes();
  const i64 hpg = s.heads_per_group;
  const i64 sample_qkv = (s.heads + 2 * s.groups) * s.s * s.d;
  const double flops = 2.0 * static_cast<double>(s.b) * s.heads * s.s * s.s * s.d;
  k_.recorder().compute(name, EventCategory::kAttention, flops, 0.0, [&] {
    for (i64 bi = 0; bi < s.b; ++bi) {
      const i64 v = bi * sample_qkv + (s.heads + s.groups) * s.s * s.d;
      k_.device().gemm(strided_batched_gemm(N, N, hpg * s.s, s.d, s.s, from(probs, bi * s.heads * s.s * s.s), s.s,
                                            hpg * s.s * s.s, from(qkv, v), s.d, s.s * s.d,
                                            from(context4, bi * s.heads * s.s * s.d), s.d, hpg * s.s * s.d, s.groups));
    }
  });
}

Tensor TransformerLayer::run_forward(const LayerParams& w, LayerActivations& a, bool keep_probs) {
  const Shapes& s = k_.shapes();
  Device& dev = k_.device();
  const i64 rows = s.local_tokens;
  a.norm1 = k_.activation(rows * s.h);
  if (s.layernorm) a.norm1_mean = k_.fp32(rows);
  a.norm1_rstd = k_.fp32(rows);
  k_.norm_forward("input_norm", a.x.view(), w.norm1_weight, w.norm1_bias, rows, a.norm1.view(), a.norm1_mean.view(),
                  a.norm1_rstd.view());
  Tensor qkv = k_.activation(s.tokens * s.qkv_width);
  {
    Tensor gathered;
    const TensorView in = k_.gather_column_input(a.norm1.view(), gathered);
    k_.column_forward("qkv", in, w.qkv_weight, w.qkv_bias, s.tokens, s.h, s.qkv_width, qkv.view());
  }
  a.qkv = k_.activation(s.tokens * s.qkv_width);
  k_.recorder().compute("qkv permute", EventCategory::kElementwise, 0.0, 2.0 * static_cast<double>(qkv.view().bytes()),
                        [&] {
                          dev.permute_0213(qkv.view(), core_batch(), core_seq(), s.heads + 2 * s.groups, s.d,
                                           a.qkv.view());
                        });
  qkv = Tensor();
  Tensor probs = k_.activation(probs_numel());
  Tensor context4 = k_.activation(s.b * s.heads * s.s * s.d);
  attention_core(a, probs.view(), context4.view(), true);
  if (keep_probs) a.probs = std::move(probs);
  probs = Tensor();
  a.context = k_.activation(s.tokens * s.q_width);
  k_.recorder().compute("context permute", EventCategory::kElementwise, 0.0,
                        2.0 * static_cast<double>(context4.view().bytes()),
                        [&] { dev.permute_0213(context4.view(), core_batch(), s.heads, core_seq(), s.d, a.context.view()); });
  context4 = Tensor();
  Tensor partial = k_.activation(s.tokens * s.h);
  k_.row_forward("proj", a.context.view(), w.proj_weight, s.tokens, s.q_width, s.h, partial.view());
  Tensor attn = k_.reduce_row_output(std::move(partial));
  a.x2 = k_.activation(rows * s.h);
  k_.recorder().compute("residual_attn", EventCategory::kElementwise, 0.0, 3.0 * static_cast<double>(attn.view().bytes()),
                        [&] {
                          if (w.proj_bias.numel > 0) dev.add_bias(attn.view(), w.proj_bias, rows, s.h);
                          dev.add(a.x.view(), attn.view(), a.x2.view());
                        });
  attn = Tensor();

  a.norm2 = k_.activation(rows * s.h);
  if (s.layernorm) a.norm2_mean = k_.fp32(rows);
  a.norm2_rstd = k_.fp32(rows);
  k_.norm_forward("post_attn_norm", a.x2.view(), w.norm2_weight, w.norm2_bias, rows, a.norm2.view(),
                  a.norm2_mean.view(), a.norm2_rstd.view());
  if (w.experts != nullptr) {
    if (moe_ == nullptr) throw InternalError("TransformerLayer: an MoE layer without its MoE MLP");
    Tensor routed = moe_->forward(w.router_weight, *w.experts, w.expert_params, a.norm2.view(), a.moe);
    // Megatron-Core's MoELayer: the shared experts' output added to the routed experts'.
    Tensor shared = shared_.ffn > 0 ? mlp_forward(shared_, w, a) : Tensor();
    Tensor out = k_.activation(rows * s.h);
    k_.recorder().compute("residual_mlp", EventCategory::kElementwise, 0.0,
                          3.0 * static_cast<double>(routed.view().bytes()), [&] {
                            dev.add(a.x2.view(), routed.view(), out.view());
                            if (shared.numel() > 0) {
                              if (w.shared_fc2_bias.numel > 0) dev.add_bias(shared.view(), w.shared_fc2_bias, rows, s.h);
                              dev.add(out.view(), shared.view(), out.view());
                            }
                          });
    a.complete = true;
    return out;
  }
  Tensor mlp = mlp_forward(dense_, w, a);
  Tensor out = k_.activation(rows * s.h);
  k_.recorder().compute("residual_mlp", EventCategory::kElementwise, 0.0, 3.0 * static_cast<double>(mlp.view().bytes()),
                        [&] {
                          if (w.fc2_bias.numel > 0) dev.add_bias(mlp.view(), w.fc2_bias, rows, s.h);
                          dev.add(a.x2.view(), mlp.view(), out.view());
                        });
  a.complete = true;
  return out;
}

Tensor TransformerLayer::mlp_forward(const MlpPart& m, const LayerParams& w, LayerActivations& a) {
  const Shapes& s = k_.shapes();
  Device& dev = k_.device();
  a.fc1_out = k_.activation(s.tokens * m.fc1_width);
  {
    Tensor gathered;
    const TensorView in = k_.gather_column_input(a.norm2.view(), gathered);
    k_.column_forward(m.fc1.c_str(), in, w.*m.fc1_weight, w.*m.fc1_bias, s.tokens, s.h, m.fc1_width,
                      a.fc1_out.view());
  }
  a.act_out = k_.activation(s.tokens * m.ffn);
  k_.recorder().compute(m.act, EventCategory::kElementwise, 0.0,
                        static_cast<double>(a.fc1_out.view().bytes() + a.act_out.view().bytes()), [&] {
                          if (s.swiglu) {
                            dev.swiglu_forward(a.fc1_out.view(), s.tokens, m.ffn, a.act_out.view());
                          } else {
                            dev.gelu_forward(a.fc1_out.view(), a.act_out.view());
                          }
                        });
  Tensor partial = k_.activation(s.tokens * s.h);
  k_.row_forward(m.fc2.c_str(), a.act_out.view(), w.*m.fc2_weight, s.tokens, m.ffn, s.h, partial.view());
  return k_.reduce_row_output(std::move(partial));
}

Tensor TransformerLayer::forward(const LayerParams& w, LayerActivations& a) {
  Tensor out = run_forward(w, a, recompute_ == Recompute::kNone);
  if (recompute_ == Recompute::kFull) {
    Tensor x = std::move(a.x);
    a = LayerActivations{};
    a.x = std::move(x);
  }
  return out;
}

void TransformerLayer::row_wgrad(const char* name, const TensorView& dy_full, Tensor& gathered, Tensor& x, i64 in,
                                 const TensorView& dw, TensorView LayerParams::*weight,
                                 std::vector<LayerWgrad>* deferred) {
  const Shapes& s = k_.shapes();
  if (deferred == nullptr) {
    k_.row_wgrad(name, dy_full, x.view(), s.tokens, in, s.h, dw);
    return;
  }
  LayerWgrad later;
  later.gemm = {name, false, std::move(gathered), std::move(x), s.tokens, in, s.h};
  later.weight = weight;
  deferred->push_back(std::move(later));
}

// A column-parallel layer's wgrad now (its input gathered again with sequence
// parallelism), or deferred with its output gradient and stream input.
void TransformerLayer::column_wgrad(const char* name, Tensor& dy, Tensor& stream_x, i64 out, const TensorView& dw,
                                    const TensorView& dbias, TensorView LayerParams::*weight,
                                    TensorView LayerParams::*bias, std::vector<LayerWgrad>* deferred) {
  const Shapes& s = k_.shapes();
  if (deferred == nullptr) {
    Tensor gathered;
    const TensorView in = k_.gather_column_input(stream_x.view(), gathered);
    k_.column_wgrad(name, dy.view(), in, s.tokens, s.h, out, dw, dbias);
    return;
  }
  LayerWgrad later;
  later.gemm = {name, true, std::move(dy), std::move(stream_x), s.tokens, s.h, out};
  later.weight = weight;
  later.bias = bias;
  deferred->push_back(std::move(later));
}

void TransformerLayer::weight_grads(const LayerParams& g, std::vector<LayerWgrad>& deferred) {
  for (LayerWgrad& later : deferred) {
    k_.deferred_wgrad(later.gemm, g.*later.weight, later.bias != nullptr ? g.*later.bias : TensorView{});
    later.gemm = DeferredWgrad{};  // what it kept is freed as soon as it is used
  }
  deferred.clear();
}

Tensor TransformerLayer::backward(const LayerParams& w, const LayerParams& g, LayerActivations& a, Tensor dy,
                                  std::vector<LayerWgrad>* deferred) {
  const Shapes& s = k_.shapes();
  Device& dev = k_.device();
  Recorder& rec = k_.recorder();
  const i64 rows = s.local_tokens;
  EventContext& ctx = rec.context();
  const EventPhase phase = ctx.phase;
  if (!a.complete) {
    // Full recompute: rerun the forward from the kept input (output dropped).
    ctx.phase = EventPhase::kRecompute;
    run_forward(w, a, true);
    ctx.phase = phase;
  }

  // MLP half: out = x2 + fc2(act(fc1(norm2(x2)))), or the routed experts' output.
  const std::size_t fc2_at = deferred != nullptr ? deferred->size() : 0;
  Tensor d_norm2;
  if (w.experts != nullptr) {
    d_norm2 = moe_->backward(w.router_weight, g.router_weight, *w.experts, w.expert_params, g.expert_params,
                             a.norm2.view(), dy.view(), a.moe);
    if (shared_.ffn > 0) {
      Tensor d_shared = mlp_backward(shared_, w, g, a, dy.view(), deferred);
      rec.compute("shared experts grad add", EventCategory::kElementwise, 0.0,
                  3.0 * static_cast<double>(d_shared.view().bytes()),
                  [&] { dev.add(d_norm2.view(), d_shared.view(), d_norm2.view()); });
    }
  } else {
    d_norm2 = mlp_backward(dense_, w, g, a, dy.view(), deferred);
  }
  Tensor dx2 = k_.activation(rows * s.h);
  k_.norm_backward("post_attn_norm bwd", d_norm2.view(), a.x2.view(), w.norm2_weight, a.norm2_mean.view(),
                   a.norm2_rstd.view(), rows, dx2.view(), g.norm2_weight, g.norm2_bias);
  rec.compute("residual_mlp bwd", EventCategory::kElementwise, 0.0, 3.0 * static_cast<double>(dx2.view().bytes()),
              [&] { dev.add(dx2.view(), dy.view(), dx2.view()); });
  hand_over_stream_grad(deferred, fc2_at, dy);
  d_norm2 = Tensor();
  a.norm2 = Tensor();
  a.norm2_mean = Tensor();
  a.norm2_rstd = Tensor();
  a.x2 = Tensor();

  // Attention half: x2 = x + proj(attention(qkv(norm1(x)))).
  const std::size_t proj_at = deferred != nullptr ? deferred->size() : 0;
  Tensor d_context = k_.activation(s.tokens * s.q_width);
  {
    Tensor gathered;
    const TensorView d_full = k_.gather_row_output_grad(dx2.view(), gathered);
    rec.compute("proj bias bwd", EventCategory::kElementwise, 0.0, static_cast<double>(dx2.view().bytes()), [&] {
      if (g.proj_bias.numel > 0) dev.bias_backward(dx2.view(), rows, s.h, g.proj_bias);
    });
    k_.row_dgrad("proj dgrad", d_full, w.proj_weight, s.tokens, s.q_width, s.h, d_context.view());
    row_wgrad("proj wgrad", d_full, gathered, a.context, s.q_width, g.proj_weight, &LayerParams::proj_weight,
              deferred);
  }
  a.context = Tensor();
  if (!a.probs.buffer().data()) {
    // Selective recompute: the attention core again (Megatron checkpoints the
    // whole core attention, so the values GEMM reruns too).
    ctx.phase = EventPhase::kRecompute;
    a.probs = k_.activation(probs_numel());
    Tensor context4 = k_.activation(s.b * s.heads * s.s * s.d);
    attention_core(a, a.probs.view(), context4.view(), false);
    ctx.phase = phase;
  }
  Tensor d_context4 = k_.activation(s.b * s.heads * s.s * s.d);
  rec.compute("context permute bwd", EventCategory::kElementwise, 0.0, 2.0 * static_cast<double>(d_context.view().bytes()),
              [&] { dev.permute_0213(d_context.view(), core_batch(), core_seq(), s.heads, s.d, d_context4.view()); });
  d_context = Tensor();
  Tensor d_qkv4 = k_.activation(s.tokens * s.qkv_width);
  if (cp_ != nullptr) {
    cp_->backward(a.qkv.view(), a.kv.view(), a.probs.view(), d_context4.view(), d_qkv4.view());
    d_context4 = Tensor();
    a.probs = Tensor();
    a.kv = Tensor();
  } else {
    core_backward(a, d_context4, d_qkv4);
  }
  a.qkv = Tensor();
  Tensor d_qkv = k_.activation(s.tokens * s.qkv_width);
  rec.compute("qkv permute bwd", EventCategory::kElementwise, 0.0, 2.0 * static_cast<double>(d_qkv.view().bytes()),
              [&] {
                dev.permute_0213(d_qkv4.view(), core_batch(), s.heads + 2 * s.groups, core_seq(), s.d, d_qkv.view());
              });
  d_qkv4 = Tensor();
  Tensor dx = finish_attention_backward(w, g, a, std::move(d_qkv), dx2.view(), deferred);
  hand_over_stream_grad(deferred, proj_at, dx2);
  return dx;
}

Tensor TransformerLayer::mlp_backward(const MlpPart& m, const LayerParams& w, const LayerParams& g,
                                      LayerActivations& a, const TensorView& dy, std::vector<LayerWgrad>* deferred) {
  const Shapes& s = k_.shapes();
  Device& dev = k_.device();
  Recorder& rec = k_.recorder();
  const i64 rows = s.local_tokens;
  Tensor d_act = k_.activation(s.tokens * m.ffn);
  {
    Tensor gathered;
    const TensorView dy_full = k_.gather_row_output_grad(dy, gathered);
    const TensorView dbias = g.*m.fc2_bias;
    rec.compute(m.fc2_bias_bwd, EventCategory::kElementwise, 0.0, static_cast<double>(dy.bytes()), [&] {
      if (dbias.numel > 0) dev.bias_backward(dy, rows, s.h, dbias);
    });
    k_.row_dgrad(m.fc2_dgrad.c_str(), dy_full, w.*m.fc2_weight, s.tokens, m.ffn, s.h, d_act.view());
    row_wgrad(m.fc2_wgrad.c_str(), dy_full, gathered, a.act_out, m.ffn, g.*m.fc2_weight, m.fc2_weight, deferred);
  }
  a.act_out = Tensor();
  Tensor d_fc1 = k_.activation(s.tokens * m.fc1_width);
  rec.compute(m.act_bwd, EventCategory::kElementwise, 0.0,
              2.0 * static_cast<double>(a.fc1_out.view().bytes() + d_act.view().bytes()), [&] {
                if (s.swiglu) {
                  dev.swiglu_backward(d_act.view(), a.fc1_out.view(), s.tokens, m.ffn, d_fc1.view());
                } else {
                  dev.gelu_backward(d_act.view(), a.fc1_out.view(), d_fc1.view());
                }
              });
  d_act = Tensor();
  a.fc1_out = Tensor();
  Tensor d_norm2_full = k_.activation(s.tokens * s.h);
  k_.column_dgrad(m.fc1_dgrad.c_str(), d_fc1.view(), w.*m.fc1_weight, s.tokens, s.h, m.fc1_width,
                  d_norm2_full.view());
  // With sequence parallelism the norm output is gathered again (Megatron keeps
  // only this rank's tokens for the weight gradient).
  column_wgrad(m.fc1_wgrad.c_str(), d_fc1, a.norm2, m.fc1_width, g.*m.fc1_weight, g.*m.fc1_bias, m.fc1_weight,
               m.fc1_bias, deferred);
  d_fc1 = Tensor();
  return k_.reduce_column_input_grad(std::move(d_norm2_full));
}

// The attention core's backward without context parallelism: d_qkv4 from the
// output's gradient d_context4 (freed) and the kept qkv and probs (freed).
void TransformerLayer::core_backward(LayerActivations& a, Tensor& d_context4, Tensor& d_qkv4) {
  const Shapes& s = k_.shapes();
  Device& dev = k_.device();
  Recorder& rec = k_.recorder();
  const i64 hpg = s.heads_per_group;
  const i64 sample_qkv = (s.heads + 2 * s.groups) * s.s * s.d;
  const i64 sample_probs = s.heads * s.s * s.s;
  const i64 sample_ctx = s.heads * s.s * s.d;
  const double core_flops = 2.0 * static_cast<double>(s.b) * s.heads * s.s * s.s * s.d;
  Tensor d_probs = k_.activation(s.b * s.heads * s.s * s.s);
  const TensorView qkv = a.qkv.view();
  const TensorView probs = a.probs.view();
  rec.compute("attn_values dgrad", EventCategory::kAttention, core_flops, 0.0, [&] {
    for (i64 bi = 0; bi < s.b; ++bi) {
      const i64 v = bi * sample_qkv + (s.heads + s.groups) * s.s * s.d;
      dev.gemm(strided_batched_gemm(N, T, hpg * s.s, s.s, s.d, from(d_context4.view(), bi * sample_ctx), s.d,
                                    hpg * s.s * s.d, from(qkv, v), s.d, s.s * s.d,
                                    from(d_probs.view(), bi * sample_probs), s.s, hpg * s.s * s.s, s.groups));
    }
  });
  rec.compute("attn_values wgrad", EventCategory::kAttention, core_flops, 0.0, [&] {
    for (i64 bi = 0; bi < s.b; ++bi) {
      const i64 v = bi * sample_qkv + (s.heads + s.groups) * s.s * s.d;
      dev.gemm(strided_batched_gemm(T, N, s.s, s.d, hpg * s.s, from(probs, bi * sample_probs), s.s, hpg * s.s * s.s,
                                    from(d_context4.view(), bi * sample_ctx), s.d, hpg * s.s * s.d,
                                    from(d_qkv4.view(), v), s.d, s.s * s.d, s.groups));
    }
  });
  d_context4 = Tensor();
  const float scale = 1.0f / std::sqrt(static_cast<float>(s.d));
  rec.compute("softmax bwd", EventCategory::kElementwise, 0.0, 3.0 * static_cast<double>(probs.bytes()), [&] {
    dev.softmax_backward(probs, d_probs.view(), s.b * s.heads * s.s, s.s, scale, d_probs.view());
  });
  a.probs = Tensor();
  rec.compute("attn_scores dgrad", EventCategory::kAttention, core_flops, 0.0, [&] {
    for (i64 bi = 0; bi < s.b; ++bi) {
      const i64 q = bi * sample_qkv;
      const i64 k = q + s.heads * s.s * s.d;
      dev.gemm(strided_batched_gemm(N, N, hpg * s.s, s.d, s.s, from(d_probs.view(), bi * sample_probs), s.s,
                                    hpg * s.s * s.s, from(qkv, k), s.d, s.s * s.d, from(d_qkv4.view(), q), s.d,
                                    hpg * s.s * s.d, s.groups));
    }
  });
  rec.compute("attn_scores wgrad", EventCategory::kAttention, core_flops, 0.0, [&] {
    for (i64 bi = 0; bi < s.b; ++bi) {
      const i64 q = bi * sample_qkv;
      const i64 k = q + s.heads * s.s * s.d;
      dev.gemm(strided_batched_gemm(T, N, s.s, s.d, hpg * s.s, from(d_probs.view(), bi * sample_probs), s.s,
                                    hpg * s.s * s.s, from(qkv, q), s.d, hpg * s.s * s.d, from(d_qkv4.view(), k), s.d,
                                    s.s * s.d, s.groups));
    }
  });
  d_probs = Tensor();
}

// The attention half's backward from the QKV GEMM's output gradient d_qkv down
// to the layer's input: dx = d(norm1(x)) + dx2.
Tensor TransformerLayer::finish_attention_backward(const LayerParams& w, const LayerParams& g, LayerActivations& a,
                                                   Tensor d_qkv, const TensorView& dx2,
                                                   std::vector<LayerWgrad>* deferred) {
  const Shapes& s = k_.shapes();
  Device& dev = k_.device();
  Recorder& rec = k_.recorder();
  const i64 rows = s.local_tokens;
  Tensor d_norm1_full = k_.activation(s.tokens * s.h);
  k_.column_dgrad("qkv dgrad", d_qkv.view(), w.qkv_weight, s.tokens, s.h, s.qkv_width, d_norm1_full.view());
  column_wgrad("qkv wgrad", d_qkv, a.norm1, s.qkv_width, g.qkv_weight, g.qkv_bias, &LayerParams::qkv_weight,
               &LayerParams::qkv_bias, deferred);
  d_qkv = Tensor();
  Tensor d_norm1 = k_.reduce_column_input_grad(std::move(d_norm1_full));
  Tensor dx = k_.activation(rows * s.h);
  k_.norm_backward("input_norm bwd", d_norm1.view(), a.x.view(), w.norm1_weight, a.norm1_mean.view(),
                   a.norm1_rstd.view(), rows, dx.view(), g.norm1_weight, g.norm1_bias);
  rec.compute("residual_attn bwd", EventCategory::kElementwise, 0.0, 3.0 * static_cast<double>(dx.view().bytes()),
              [&] { dev.add(dx.view(), dx2, dx.view()); });
  a = LayerActivations{};
  return dx;
}

}  // namespace strata::rt
