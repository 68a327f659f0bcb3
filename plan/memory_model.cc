#include "plan/memory_model.h"

#include "plan/pipeline_split.h"

#include <algorithm>
#include <cmath>

#include "plan/layer_ops.h"
#include "plan/moe_memory.h"
#include "plan/params.h"
#include "plan/pipeline_schedule.h"

namespace strata {

namespace {

// Multi-head latent attention's stored activations per micro-batch (plan/layer_ops.cc
// lists its ops): the down-projections' input (the normed stream, shared), each
// latent norm's input and each up-projection's input (the normed latent; with
// sequence parallelism each rank keeps its own tokens, as for any
// column-parallel input), Q, K and V (what the fused attention keeps: heads x
// q_head_dim, q_head_dim and v_head_dim, rebuilt in backward instead under the
// recompute module mla_up_proj), the projection's input (heads x v_head_dim) and
// the output dropout mask. The rotary embedding keeps nothing of its own (its
// backward needs only the cos/sin tables).
double mla_attention_bytes(const ModelSpec& m, const PlanSpec& p, double rep) {
  const MlaModel& mla = m.mla;
  const double e = dtype_bytes(p.dtype);
  const double sb = static_cast<double>(m.seq_length / p.cp) * p.micro_batch_size;
  const double a = m.num_attention_heads;
  const double t = p.tp;
  const double ql = mla.q_lora_rank;
  const double kvl = mla.kv_lora_rank;
  const bool freed = p.recompute == Recompute::kSelective && p.recompute_modules.mla_up_proj;
  return e * sb * m.hidden_size / rep                                                     // down-projections' input
         + e * sb * 2.0 * (ql + kvl) / rep                                                // latent norms' and up-projections' inputs
         + (freed ? 0.0 : e * sb * a * (2.0 * mla.q_head_dim() + mla.v_head_dim) / t)   // Q, K, V
         + e * sb * static_cast<double>(m.proj_width()) / t                               // projection input
         + (m.hidden_dropout > 0.0 ? sb * m.hidden_size / rep : 0.0);                     // 1-byte dropout mask
}

}  // namespace

LayerActivations layer_activation_bytes(const ModelSpec& m, const PlanSpec& p) {
  const double t = p.tp;
  const double b = p.micro_batch_size;
  // Context parallelism: every stored activation is of this rank's seq / cp tokens
  // (Megatron-Core keeps no more; the fused attention needs no s x s scores).
  const double s = static_cast<double>(m.seq_length / p.cp);
  const double h = m.hidden_size;
  const double a = m.num_attention_heads;
  const double kv = static_cast<double>(m.kv_width());
  const double q = static_cast<double>(m.q_width());  // h unless the model's kv_channels says otherwise
  const double f = m.ffn_hidden_size;
  const double e = dtype_bytes(p.dtype);  // 2 bytes per stored activation (16-bit)
  const double sbh = s * b * h;
  const double sbq = s * b * q;  // Q and the projection's input
  // Tensors on the residual stream are replicated over tp unless sequence parallel splits them.
  const double rep = p.sequence_parallel ? t : 1.0;
  const bool hidden_dropout = m.hidden_dropout > 0.0;
  const bool attn_dropout = m.attention_dropout > 0.0;

  LayerActivations out;
  if (p.recompute == Recompute::kFull) {
    // Only the layer input is kept (Korthikanti et al. 2022, section 4.2: 2sbh).
    out.norm_bytes = e * sbh / rep;
    return out;
  }
  if (p.recompute == Recompute::kSelectiveOp) {
    // torchtitan's op-level policy keeps the layer input (the checkpoint's), the
    // fused attention's output and log-sum-exp, and the outputs of the odd
    // matmuls (op_sac_recomputed_share): Q and V, w1, and w2 when gated (the
    // 7th; ungated it is the 6th, recomputed). Dropout: none in the models
    // torchtitan trains.
    out.norm_bytes = e * sbh / rep;                                                      // layer input
    out.attention_bytes = e * s * b * (q + kv) / t + e * sbq / t + 4.0 * a * s * b / t;  // Q, V, attention out, lse
    out.mlp_bytes = e * s * b * f / t + (m.swiglu ? e * sbh / rep : 0.0);                // w1 out, w2 out
    return out;
  }
  // Attention block: QKV input (after norm), Q, K, V, projection input, output dropout mask.
  double attention = e * sbh / rep                    // QKV GEMM input
                     + e * s * b * (q + 2.0 * kv) / t  // Q, K, V
                     + e * sbq / t                     // projection input (context)
                     + (hidden_dropout ? sbh / rep : 0.0);  // 1-byte dropout mask
  if (m.mla.enabled) attention = mla_attention_bytes(m, p, rep);
  // Attention core: softmax output, dropout mask and dropout output (the 5as^2b of the paper).
  const bool core_stored = !p.flash_attention && p.recompute != Recompute::kSelective;
  if (core_stored) {
    const double as2b = a * s * s * b / t;
    attention += e * as2b + (attn_dropout ? (1.0 + e) * as2b : 0.0);
  } else if (p.flash_attention) {
    attention += 4.0 * a * s * b / t;  // fp32 log-sum-exp per row, kept for backward
  }
  // MLP: fc1 input, activation input (2f wide when gated), fc2 input, dropout mask.
  const double fc1_width = m.swiglu ? 2.0 * f : f;
  double mlp = e * sbh / rep + e * s * b * fc1_width / t + e * s * b * f / t +
               (hidden_dropout ? sbh / rep : 0.0);
  out.attention_bytes = attention;
  out.mlp_bytes = mlp;
  out.norm_bytes = 2.0 * e * sbh / rep;  // inputs of the two normalizations
  return out;
}

namespace {
// Transformer layers on pipeline rank `stage` (plan/pipeline_split.h).
double stage_layers(const ModelSpec& m, const PlanSpec& p, int stage) {
  return p.uneven_stages() ? pipeline_split(m, p).stage_layers(stage) : static_cast<double>(m.num_layers) / p.pp;
}

// An MoE model's stage: how many of its layers are MoE layers, and what the
// layers store per micro-batch on average (dense and MoE layers weighted by
// their counts: exact for 1F1B and GPipe, which hold every layer of a
// micro-batch in flight; interleaved chunks may hold more MoE layers than the
// average).
struct MoeStage {
  double moe_layers = 0.0;
  double dense_layers = 0.0;
  double per_layer = 0.0;  // bytes per layer per micro-batch
};

MoeStage moe_stage(const ModelSpec& m, const PlanSpec& p, int stage) {
  MoeStage st;
  const double layers = stage_layers(m, p, stage);
  st.moe_layers = pipeline_split(m, p).stage_moe_layers(m, stage);
  st.dense_layers = layers - st.moe_layers;
  st.per_layer = (st.dense_layers * layer_activation_bytes(m, p).total() +
                  st.moe_layers * moe_layer_activation_bytes(m, p).total()) /
                 layers;
  return st;
}
}  // namespace

double weight_grad_input_bytes(const ModelSpec& m, const PlanSpec& p) {
  const double e = dtype_bytes(p.dtype);
  LayerOpContext c = layer_op_context(p);
  double bytes = 0.0;
  for (const LayerOp& op : layer_forward_ops(m, c)) {
    if (op.kind != OpKind::kGemm || !op.has_weight) continue;
    const double tokens = static_cast<double>(op.gemm.m) * static_cast<double>(op.gemm.batch);
    // Sequence parallelism keeps a column-parallel layer's input sharded over tp
    // (W gathers it again); the output gradient is kept as the backward had it,
    // for a row-parallel layer gathered whole (sail-sg's zero-bubble Megatron-LM,
    // megatron/core/tensor_parallel/layers.py, WeightGradStore.put).
    const double input_share = p.sequence_parallel && is_column_parallel(op.role) ? 1.0 / p.tp : 1.0;
    bytes += e * tokens * (static_cast<double>(op.gemm.k) * input_share + static_cast<double>(op.gemm.n));
  }
  return bytes;
}

ZeroBubbleHeld zero_bubble_held(const PlanSpec& p, int stage, double full_bytes, double weight_grad_bytes) {
  ZeroBubbleHeld peak;
  double peak_bytes = -1.0;
  int forwards = 0, input_grads = 0, weight_grads = 0, head_waiting = 0;
  // Warm-up and cool-down are at most 2pp - 1 micro-batches long and the steady
  // phase between them repeats one pattern, so from a few pp on, more
  // micro-batches lengthen the steady phase without a new peak: walking
  // 4pp + 4 of them gives the peak of any more (MemoryModel.
  // ZeroBubblePeakOfFewMicroBatchesIsThePeakOfAny checks it against the whole
  // walk) and spares a 2^30-micro-batch plan its program.
  const int microbatches = std::min(p.num_microbatches(), 4 * p.pp + 4);
  for (const PipelineOp& op : pipeline_program(p.schedule, p.pp, p.vpp, microbatches, stage)) {
    forwards += op.phase == PipelinePhase::kForward;
    input_grads += op.phase == PipelinePhase::kBackward;
    weight_grads += op.phase == PipelinePhase::kWeightGrad;
    if (op.chunk == p.vpp - 1) {
      head_waiting += (op.phase == PipelinePhase::kBackward) - (op.phase == PipelinePhase::kWeightGrad);
    }
    const int full = forwards - input_grads, waiting = input_grads - weight_grads;
    const double bytes = full * full_bytes + waiting * weight_grad_bytes;
    if (bytes > peak_bytes) {
      peak_bytes = bytes;
      peak = {full, waiting, head_waiting};
    }
  }
  return peak;
}

namespace {

// layer_microbatches_in_flight, given a zero-bubble schedule's walk
// (zero_bubble_held with the layer's activations as full_bytes) when the caller
// has made it: memory_report needs the walk for the held weight gradients too.
double layers_in_flight(const ModelSpec& m, const PlanSpec& p, int stage, const ZeroBubbleHeld* held) {
  const double mb = p.num_microbatches();
  const double layers_per_stage = stage_layers(m, p, stage);
  switch (p.schedule) {
    case Schedule::kGpipe: return mb * layers_per_stage;
    case Schedule::kOneFOneB: return std::min<double>(p.pp - stage, mb) * layers_per_stage;
    case Schedule::kInterleaved: {
      const double chunks = std::min<double>(mb * p.vpp, 2.0 * (p.pp - stage - 1) +
                                                             (p.vpp - 1.0) * p.pp + 1.0);
      return chunks * layers_per_stage / p.vpp;
    }
    case Schedule::kZbH1:
    case Schedule::kZbH2:
    case Schedule::kZbV: {
      // zb-v counts chunk micro-batches, each of a chunk's (half the stage's) layers.
      const int full = held != nullptr ? held->full
                                       : zero_bubble_held(p, stage, layer_activation_bytes(m, p).total(),
                                                          weight_grad_input_bytes(m, p))
                                             .full;
      return full * layers_per_stage / p.vpp;
    }
  }
  return 0.0;
}

}  // namespace

double layer_microbatches_in_flight(const ModelSpec& m, const PlanSpec& p, int stage) {
  return layers_in_flight(m, p, stage, nullptr);
}

namespace {
// An MoE model's stage states: the routed experts' share of them sharded over
// the expert data-parallel group (their gradients are reduced there,
// Megatron-Core's expert_data_parallel group; its distributed optimizer
// shards them over it), the rest over dp*cp as a dense model's.
void moe_model_states(const ModelSpec& m, const PlanSpec& p, const MemoryModelOptions& o, int stage,
                      StageMemory& st) {
  const double e = dtype_bytes(p.dtype);
  const double dense_shards = p.zero_shards();
  const double expert_shards = p.expert_zero_shards();
  st.expert_params = stage_expert_params_per_gpu(m, p, stage);
  const double experts = static_cast<double>(st.expert_params);
  const double dense = static_cast<double>(st.params) - experts;
  auto sharded = [&](double per_param, int from_stage, double& dense_bytes, double& expert_bytes) {
    dense_bytes = per_param * dense / (p.zero_stage >= from_stage ? dense_shards : 1.0);
    expert_bytes = per_param * experts / (p.zero_stage >= from_stage ? expert_shards : 1.0);
  };
  double weights_d = 0, weights_x = 0, grads_d = 0, grads_x = 0, opt_d = 0, opt_x = 0;
  sharded(e, 3, weights_d, weights_x);
  sharded(p.grad_bytes(), 2, grads_d, grads_x);
  sharded(p.dtype == DType::kFp32 ? 8.0 : o.optimizer_bytes_per_param, 1, opt_d, opt_x);
  st.params_bytes = weights_d + weights_x;
  st.grads_bytes = grads_d + grads_x;
  st.optimizer_bytes = 0.0;
  st.host_bytes = 0.0;
  if (p.offload_optimizer) {
    st.host_bytes = o.offload_host_bytes_per_param * (dense / dense_shards + experts / expert_shards);
    st.expert_state_bytes = weights_x + grads_x;
  } else {
    st.optimizer_bytes = opt_d + opt_x;
    st.expert_state_bytes = weights_x + grads_x + opt_x;
  }
}
}  // namespace

MemoryReport memory_report(const ModelSpec& m, const PlanSpec& p, const DeviceMemory& device,
                           const MemoryModelOptions& o) {
  MemoryReport report;
  report.capacity_bytes = device.capacity_bytes;
  report.layer_activations = layer_activation_bytes(m, p);
  if (m.is_moe()) {
    report.moe = true;
    report.moe_layer_activations = moe_layer_activation_bytes(m, p);
    report.expert_data_parallel = p.expert_data_parallel();
  }
  const double e = dtype_bytes(p.dtype);
  const double t = p.tp;
  // ZeRO shards over the ranks that reduce the gradients: dp x cp (Megatron-Core's
  // distributed optimizer over its data-parallel group with context parallelism),
  // or with hybrid sharding over one group of zero_shard_size of them (PyTorch
  // FSDP HYBRID_SHARD: each group holds a whole copy of the sharded states).
  const double dp = p.zero_shards();
  const double tokens = static_cast<double>(m.seq_length / p.cp);  // this rank's, per sequence
  const double sbh = tokens * p.micro_batch_size * m.hidden_size;
  const double rep = p.sequence_parallel ? t : 1.0;
  const double per_layer = report.layer_activations.total();
  for (int stage = 0; stage < p.pp; ++stage) {
    const double layers_per_stage = stage_layers(m, p, stage);
    StageMemory st;
    st.stage = stage;
    st.layers = static_cast<int>(layers_per_stage);
    st.params = stage_params_per_gpu(m, p, stage);
    const double psi = static_cast<double>(st.params);

    // Model states (ZeRO paper, section 3.1 and figure 1).
    st.params_bytes = e * psi / (p.zero_stage >= 3 ? dp : 1.0);
    st.grads_bytes = p.grad_bytes() * psi / (p.zero_stage >= 2 ? dp : 1.0);
    // fp32 training keeps no separate master copy: only Adam's two moments.
    const double per_param = p.dtype == DType::kFp32 ? 8.0 : o.optimizer_bytes_per_param;
    const double optimizer = per_param * psi / (p.zero_stage >= 1 ? dp : 1.0);
    if (p.offload_optimizer) {
      st.host_bytes = o.offload_host_bytes_per_param * psi / dp;
    } else {
      st.optimizer_bytes = optimizer;
    }
    if (m.is_moe()) moe_model_states(m, p, o, stage, st);

    // Activations of the layers in flight.
    // Zero-bubble: the walk of the stage's program, for the layers in flight and the
    // weight gradients held (below).
    const bool zero_bubble = splits_backward(p.schedule);
    const double w_layer = zero_bubble ? weight_grad_input_bytes(m, p) : 0.0;
    const ZeroBubbleHeld held = zero_bubble ? zero_bubble_held(p, stage, per_layer, w_layer) : ZeroBubbleHeld{};
    st.layer_microbatches_in_flight = layers_in_flight(m, p, stage, zero_bubble ? &held : nullptr);
    const MoeStage moe = m.is_moe() ? moe_stage(m, p, stage) : MoeStage{};
    double activations = (m.is_moe() ? moe.per_layer : per_layer) * st.layer_microbatches_in_flight;
    const double microbatches_in_flight = st.layer_microbatches_in_flight / layers_per_stage;
    if (zero_bubble) {
      // Zero-bubble: micro-batches whose B has run hold only their W's inputs
      // until W (the peak of the program's walk, zero_bubble_held); on the rank
      // with the last virtual stage the output layer's too: its input and the
      // logits' gradient, for each micro-batch of that chunk waiting.
      double w_bytes = held.waiting_weight_grads * w_layer * layers_per_stage / p.vpp;
      if (stage == head_rank(p)) {
        w_bytes += held.waiting_last_chunk * e *
                   (sbh / rep + tokens * p.micro_batch_size * static_cast<double>(vocab_rows_per_gpu(m, p)));
      }
      st.weight_grad_bytes = w_bytes;
      activations += w_bytes;
    }
    // Recompute rebuilds one layer's activations (full) or one attention core
    // (selective) at a time during backward: that working set is live at the peak.
    if (p.recompute != Recompute::kNone) {
      PlanSpec stored = p;
      stored.recompute = Recompute::kNone;
      LayerActivations full = layer_activation_bytes(m, stored);
      if (m.is_moe() && moe.moe_layers > 0) {
        // The largest layer the stage rebuilds: an MoE layer (its routed
        // tokens), unless only dense layers are here.
        const double rebuilt = std::max(moe.dense_layers > 0 ? full.total() : 0.0,
                                        moe_layer_activation_bytes(m, stored).total());
        activations += p.recompute == Recompute::kFull ? rebuilt : full.total() - per_layer;
      } else {
        activations += p.recompute == Recompute::kFull ? full.total() : full.total() - per_layer;
      }
    }
    if (stage == 0 && m.hidden_dropout > 0.0) {
      activations += sbh / rep * microbatches_in_flight;  // embedding dropout mask
    }
    if (stage == head_rank(p)) {
      // Final norm input and output-layer input per micro-batch in flight, and the
      // logits of the micro-batch in its loss: 16-bit logits plus fp32 softmax.
      activations += 2.0 * e * sbh / rep * std::max(1.0, microbatches_in_flight / p.vpp);
      activations += (e + 4.0) * tokens * p.micro_batch_size * static_cast<double>(vocab_rows_per_gpu(m, p));
      if (m.mtp_num_layers > 0) {
        // Multi-token prediction, per MTP layer: its transformer layer (the decoder's
        // last layer's kind), its two norms' inputs and eh_proj's 2h-wide input
        // (this rank's tokens, as any column-parallel input), its final norm's
        // and output layer's inputs per micro-batch in flight, and the logits of
        // the micro-batch in its loss.
        const double layer = m.mtp_layer_is_moe() ? report.moe_layer_activations.total() : per_layer;
        const double own = layer + 6.0 * e * sbh / rep;
        activations += m.mtp_num_layers *
                       (own * std::max(1.0, microbatches_in_flight / p.vpp) +
                        (e + 4.0) * tokens * p.micro_batch_size * static_cast<double>(vocab_rows_per_gpu(m, p)));
      }
    }
    st.activations_bytes = activations;

    // Buffers: pipeline send/recv (one activation each way, double-buffered),
    // ZeRO-2/3 full-size gradient buckets, ZeRO-3 gathered weights (current and
    // prefetched layer).
    double buffers = 0.0;
    if (p.pp > 1) buffers += 4.0 * e * sbh / rep;
    if (p.cp > 1) {
      // Context parallelism's exchange buffers of the layer being computed (K and V
      // of this rank's tokens, its tensor-parallel heads): the ring's send and
      // receive pairs, in backward for dK/dV too (4 of them); the gathered K/V of
      // the whole sequence and, backward, their gradients (allgather); Q, K, V
      // and the output re-laid over the heads and their gradients (a2a, 2).
      const double kv = 2.0 * e * tokens * p.micro_batch_size * static_cast<double>(m.kv_width()) / t;
      const double qkv = e * tokens * p.micro_batch_size * (m.q_width() + 2.0 * m.kv_width()) / t;
      switch (p.cp_comm_type) {
        case CpCommType::kP2p: buffers += 4.0 * kv; break;
        case CpCommType::kAllGather: buffers += 2.0 * kv * p.cp; break;
        case CpCommType::kA2a: buffers += 2.0 * qkv; break;
      }
    }
    // An MoE layer's dispatch and combine buffers, one layer at a time.
    if (m.is_moe() && moe.moe_layers > 0) buffers += moe_dispatch_buffer_bytes(m, p);
    const double layer_params = static_cast<double>(max_layer_params_per_gpu(m, p));
    if (p.zero_stage == 2 && dp > 1) {
      // A bucket is whole from backward's first write until its reduce-scatter
      // ends: with overlap the bucket being filled and the one being reduced, but
      // never more buckets than the stage has; without overlap every bucket until
      // the micro-batch's backward ends (DeepSpeed's reduce_bucket_size, the
      // runtime's ParameterStore).
      const double bucket = std::min(static_cast<double>(p.ddp_bucket_size), psi);
      const double buckets = std::ceil(psi / bucket);
      buffers += p.grad_bytes() * (p.overlap_grad_reduce ? std::min(2.0, buckets) * bucket : psi);
    }
    if (p.zero_stage >= 3 && dp > 1) {
      // ZeRO-3 reduce-scatters each layer's gradient after its backward (the
      // unit, as FSDP): the layer being computed and the one being reduced.
      buffers += 2.0 * p.grad_bytes() * layer_params;
      const double gathered_layers = p.overlap_param_gather ? 2.0 : 1.0;
      buffers += gathered_layers * e * layer_params;
    }
    st.buffers_bytes = buffers;

    st.reserve_bytes = device.framework_reserve_bytes +
                       device.allocator_fragmentation * (activations + buffers);
    st.total_bytes = st.params_bytes + st.grads_bytes + st.optimizer_bytes + st.activations_bytes +
                     st.buffers_bytes + st.reserve_bytes;
    st.fits = st.total_bytes <= report.capacity_bytes;

    if (stage == 0 || st.total_bytes > report.peak_bytes) {
      report.peak_bytes = st.total_bytes;
      report.peak_stage = stage;
    }
    report.host_bytes_per_gpu = std::max(report.host_bytes_per_gpu, st.host_bytes);
    report.stages.push_back(st);
  }
  report.fits = std::all_of(report.stages.begin(), report.stages.end(),
                            [](const StageMemory& s) { return s.fits; });
  return report;
}

}  // namespace strata

namespace strata {

nlohmann::ordered_json to_json(const MemoryReport& r) {
  nlohmann::ordered_json j;
  nlohmann::ordered_json stages = nlohmann::ordered_json::array();
  for (const StageMemory& s : r.stages) {
    nlohmann::ordered_json st;
    st["stage"] = s.stage;
    st["layers"] = s.layers;
    st["params"] = s.params;
    st["layer_microbatches_in_flight"] = s.layer_microbatches_in_flight;
    st["weight_grad_bytes"] = s.weight_grad_bytes;
    st["params_bytes"] = s.params_bytes;
    st["grads_bytes"] = s.grads_bytes;
    st["optimizer_bytes"] = s.optimizer_bytes;
    st["activations_bytes"] = s.activations_bytes;
    st["buffers_bytes"] = s.buffers_bytes;
    st["reserve_bytes"] = s.reserve_bytes;
    st["total_bytes"] = s.total_bytes;
    st["host_bytes"] = s.host_bytes;
    if (r.moe) {
      st["expert_params"] = s.expert_params;
      st["expert_state_bytes"] = s.expert_state_bytes;
    }
    st["fits"] = s.fits;
    stages.push_back(st);
  }
  j["stages"] = stages;
  j["peak_bytes"] = r.peak_bytes;
  j["peak_stage"] = r.peak_stage;
  j["capacity_bytes"] = r.capacity_bytes;
  j["fits"] = r.fits;
  j["host_bytes_per_gpu"] = r.host_bytes_per_gpu;
  nlohmann::ordered_json layer;
  layer["attention_bytes"] = r.layer_activations.attention_bytes;
  layer["mlp_bytes"] = r.layer_activations.mlp_bytes;
  layer["norm_bytes"] = r.layer_activations.norm_bytes;
  layer["total_bytes"] = r.layer_activations.total();
  j["activations_per_layer_per_microbatch"] = layer;
  if (r.moe) {
    const LayerActivations& a = r.moe_layer_activations;
    j["activations_per_moe_layer_per_microbatch"] = {{"attention_bytes", a.attention_bytes},
                                                      {"mlp_bytes", a.mlp_bytes},
                                                      {"norm_bytes", a.norm_bytes},
                                                      {"total_bytes", a.total()}};
    j["expert_data_parallel"] = r.expert_data_parallel;
  }
  return j;
}

}  // namespace strata
