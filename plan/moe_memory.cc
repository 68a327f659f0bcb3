#include "plan/moe_memory.h"

#include "plan/layer_ops.h"

namespace strata {
namespace {

struct MoeTokens {
  double own = 0.0;     // tokens entering the MoE layer on this rank (its sequence-parallel shard)
  double routed = 0.0;  // tokens this rank's experts take
};

MoeTokens moe_tokens(const ModelSpec& m, const PlanSpec& p) {
  const double tokens = static_cast<double>(m.seq_length / p.cp) * p.micro_batch_size;
  MoeTokens t;
  t.own = tokens / (p.sequence_parallel ? p.tp : 1);
  // Each of this rank's tokens goes to k experts; a rank of an etp group runs
  // its experts' slice for the tokens of the whole etp group (gathered after
  // the dispatch), and the busiest rank takes `load` times the balanced share.
  t.routed = t.own * m.moe.moe_router_topk * p.moe.etp * expert_load_factor(p);
  return t;
}

}  // namespace

double moe_mlp_activation_bytes(const ModelSpec& m, const PlanSpec& p) {
  const MoeModel& moe = m.moe;
  const double e = dtype_bytes(p.dtype);
  const double h = m.hidden_size;
  const double t = p.tp;
  const double k = moe.moe_router_topk;
  const double tokens = static_cast<double>(m.seq_length / p.cp) * p.micro_batch_size;
  const MoeTokens x = moe_tokens(m, p);
  // The layer's MoE input (the post-attention norm's output): read by the
  // router, the shared experts and the dispatch's permutation; the sequence-parallel shard.
  double bytes = e * x.own * h;
  // The router's scores, kept in fp32 for the softmax / sigmoid backward
  // (Megatron-Core's moe_utils.py computes them in float32).
  bytes += 4.0 * x.own * moe.num_experts;
  // Shared experts: a tensor-parallel MLP of their width over all T tokens
  // (gathered over tp as the dense MLP's fc1 input is): activation input
  // (twice the width when gated) and fc2 input.
  if (moe.moe_shared_expert_intermediate_size > 0) {
    const double f = moe.moe_shared_expert_intermediate_size;
    bytes += e * tokens * (m.swiglu ? 2.0 * f : f) / t + e * tokens * f / t;
  }
  // Routed experts, per routed token: fc1's input (the dispatched hidden
  // state), the activation input and fc2's input, each expert split over etp.
  const double f = moe.moe_ffn_hidden_size;
  const double etp = p.moe.etp;
  bytes += e * x.routed * (h + (m.swiglu ? 2.0 * f : f) / etp + f / etp);
  // Combine: the k expert outputs of each own token, back on this rank before
  // they are summed with the routing probabilities (whose gradient needs them).
  bytes += e * x.own * k * h;
  if (m.hidden_dropout > 0.0) bytes += x.own * h;  // the MLP dropout's 1-byte mask
  return bytes;
}

LayerActivations moe_layer_activation_bytes(const ModelSpec& m, const PlanSpec& p) {
  LayerActivations a = layer_activation_bytes(m, p);
  // Full recompute keeps only the layer input, whatever the layer's MLP.
  if (p.recompute == Recompute::kFull) return a;
  a.mlp_bytes = moe_mlp_activation_bytes(m, p);
  return a;
}

double moe_dispatch_buffer_bytes(const ModelSpec& m, const PlanSpec& p) {
  const double e = dtype_bytes(p.dtype);
  const double h = m.hidden_size;
  const MoeTokens x = moe_tokens(m, p);
  if (p.moe.token_dispatcher == MoeDispatcher::kAllGather) {
    // MoEAllGatherTokenDispatcher: every token of the etp x ep group gathered
    // on each rank, and the output of the same size before its reduce-scatter.
    return 2.0 * e * h * x.own * p.moe.etp * p.moe.ep;
  }
  // MoEAlltoAllTokenDispatcher: dispatch sends own * k tokens and receives the
  // load-weighted share, the combine the reverse.
  const double k = m.moe.moe_router_topk;
  double bytes = 2.0 * e * h * x.own * k * (1.0 + expert_load_factor(p));
  if (p.moe.etp > 1) bytes += e * h * x.routed;  // fc2's partial output before the etp reduce-scatter
  return bytes;
}

}  // namespace strata
