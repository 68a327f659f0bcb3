// One transformer layer on one tensor-parallel rank, forward and backward, as
// Megatron-LM runs it (Shoeybi et al. 2019, figure 3; Korthikanti et al. 2022,
// figure 5): pre-norm attention (column-parallel QKV, causal softmax attention
// with grouped-query heads, row-parallel projection) and MLP (column-parallel
// fc1, GeLU or SwiGLU, row-parallel fc2), each followed by a residual add; the
// tensor-parallel all-reduce (or, with sequence parallelism, all-gather before
// and reduce-scatter after) around each half. No dropout: the run is
// deterministic so that every plan can be checked against one reference.
//
// Recompute (Korthikanti et al. 2022, section 5): selective drops the attention
// core's softmax output and recomputes scores, softmax and values before the
// backward; full keeps only the layer's input and reruns the whole forward
// (with its collectives) before the backward.
#pragma once

#include <string>
#include <vector>

#include "runtime/executor/context_parallel.h"
#include "runtime/executor/kernels.h"
#include "runtime/executor/moe_layer.h"
#include "runtime/executor/param_layout.h"

namespace strata::rt {

// A layer's parameters (or fp32 gradients) as views; absent ones are empty.
// An MoE layer has a router and its routed experts (a kExperts unit) instead of fc1 and fc2.
struct LayerParams {
  TensorView qkv_weight, qkv_bias, proj_weight, proj_bias, fc1_weight, fc1_bias, fc2_weight, fc2_bias;
  TensorView norm1_weight, norm1_bias, norm2_weight, norm2_bias;
  TensorView router_weight;
  TensorView shared_fc1_weight, shared_fc1_bias, shared_fc2_weight, shared_fc2_bias;  // an MoE layer's shared experts
  const Unit* experts = nullptr;  // an MoE layer's experts unit, null for a dense layer
  TensorView expert_params;       // its flat weights (or gradients)
};

// Views of a unit's flat weights or gradients by role; with an MoE layer's
// experts unit and its flat buffer (else null and empty).
LayerParams layer_params(const Unit& unit, const TensorView& flat, const Unit* experts = nullptr,
                         const TensorView& expert_flat = {});

// What one layer keeps from its forward for its backward, for one micro-batch.
struct LayerActivations {
  Tensor x;                                   // input [local_tokens, h]
  Tensor norm1, norm1_mean, norm1_rstd;       // input norm output (this rank's tokens) and statistics
  Tensor qkv;                                 // [b, heads + 2 groups, s, d] (cp > 1: [2b, .., s/2, d])
  Tensor kv;                                  // cp > 1: every cp rank's K/V (ContextParallelAttention)
  Tensor probs;                               // softmax output [b, heads, s, s] (cp > 1: its chunks')
  Tensor context;                             // attention output [tokens, q_width]
  Tensor x2, norm2, norm2_mean, norm2_rstd;   // after the attention residual; its norm
  Tensor fc1_out;                             // [tokens, fc1_width], the activation's input
  Tensor act_out;                             // [tokens, ffn], fc2's input
  MoeActivations moe;                         // an MoE layer's MLP half
  bool complete = false;                      // false: only x is kept (full recompute)
};

// One of a layer's weight gradients deferred to W, and where it accumulates.
struct LayerWgrad {
  DeferredWgrad gemm;
  TensorView LayerParams::*weight = nullptr;
  TensorView LayerParams::*bias = nullptr;  // a column layer's bias (summed with its weight), or none
};

// One of a layer's MLPs (the dense layer's, an MoE layer's shared experts):
// which parameters, its width on this rank, and its ops' names (the simulator's).
struct MlpPart {
  TensorView LayerParams::*fc1_weight = nullptr;
  TensorView LayerParams::*fc1_bias = nullptr;
  TensorView LayerParams::*fc2_weight = nullptr;
  TensorView LayerParams::*fc2_bias = nullptr;
  std::int64_t ffn = 0;        // its width / tp
  std::int64_t fc1_width = 0;  // 2 * ffn when gated
  // Op names (the simulator's): forward, then the backward's. Kept here because
  // a deferred weight gradient (DeferredWgrad) holds its name until W.
  std::string fc1, act, fc2;
  std::string fc1_dgrad, fc1_wgrad, fc2_dgrad, fc2_wgrad, act_bwd, fc2_bias_bwd;
};

class TransformerLayer {
 public:
  // cp: the context-parallel attention core when cp > 1 (else null); moe: the
  // MoE layers' MLP half (MoE models; else null).
  TransformerLayer(Kernels& kernels, Recompute recompute, ContextParallelAttention* cp = nullptr,
                   MoeMlp* moe = nullptr);

  // Forward of a.x; fills a (all of it, or only x with full recompute) and
  // returns the layer's output [local_tokens, h].
  Tensor forward(const LayerParams& w, LayerActivations& a);
  // Backward: dy [local_tokens, h] -> dx; accumulates into g; frees a.
  // Recomputes what the forward dropped first. With `deferred` (a zero-bubble
  // schedule's B) the four weight GEMMs' gradients are not computed but
  // appended there, with what they need, for weight_grads (W).
  Tensor backward(const LayerParams& w, const LayerParams& g, LayerActivations& a, Tensor dy,
                  std::vector<LayerWgrad>* deferred = nullptr);
  // W: accumulates the deferred weight gradients into g, in the order the
  // backward would have (fc2, fc1, proj, qkv), and frees what they kept.
  void weight_grads(const LayerParams& g, std::vector<LayerWgrad>& deferred);

 private:
  Tensor run_forward(const LayerParams& w, LayerActivations& a, bool keep_probs);
  void attention_scores(const TensorView& qkv, const TensorView& probs, const char* scores_name,
                        const char* softmax_name);
  void attention_values(const TensorView& qkv, const TensorView& probs, const TensorView& context4,
                        const char* name);

  // The attention core's view of a micro-batch: [b, s] rows, or with context
  // parallelism each sample's two chunks as two rows of s/2.
  std::int64_t core_batch() const;
  std::int64_t core_seq() const;
  // Scores, softmax and values into probs and context4; exchange: gather the
  // other cp ranks' K/V first (a recompute reuses them).
  void attention_core(LayerActivations& a, const TensorView& probs, const TensorView& context4, bool exchange);
  std::int64_t probs_numel() const;
  void core_backward(LayerActivations& a, Tensor& d_context4, Tensor& d_qkv4);
  // An MLP's forward on the post-attention norm's output: its output summed over
  // tp into the residual stream's shape (fc2's bias not added); keeps fc1's output
  // and the activation's in a.
  Tensor mlp_forward(const MlpPart& m, const LayerParams& w, LayerActivations& a);
  // Its backward from the layer's output gradient dy to the norm output's
  // gradient (fc2's bias gradient included).
  Tensor mlp_backward(const MlpPart& m, const LayerParams& w, const LayerParams& g, LayerActivations& a,
                      const TensorView& dy, std::vector<LayerWgrad>* deferred);
  Tensor finish_attention_backward(const LayerParams& w, const LayerParams& g, LayerActivations& a, Tensor d_qkv,
                                   const TensorView& dx2, std::vector<LayerWgrad>* deferred);
  // A row-parallel layer's wgrad now, or deferred: dy_full is the whole output
  // gradient, `gathered` its tensor when gathered (sequence parallelism), else
  // empty: the caller then hands the stream gradient over with keep_stream_grad.
  void row_wgrad(const char* name, const TensorView& dy_full, Tensor& gathered, Tensor& x, std::int64_t in,
                 const TensorView& dw, TensorView LayerParams::*weight, std::vector<LayerWgrad>* deferred);
  void column_wgrad(const char* name, Tensor& dy, Tensor& stream_x, std::int64_t out, const TensorView& dw,
                    const TensorView& dbias, TensorView LayerParams::*weight, TensorView LayerParams::*bias,
                    std::vector<LayerWgrad>* deferred);

  Kernels& k_;
  Recompute recompute_;
  ContextParallelAttention* cp_;
  MoeMlp* moe_;
  MlpPart dense_;   // the dense layers' MLP
  MlpPart shared_;  // an MoE layer's shared experts (ffn 0: none)
};

}  // namespace strata::rt
