// The MLP half of an MoE layer on one rank (Megatron-Core's MoELayer,
// expert tensor parallelism 1): the router's logits and the routing decisions
// (moe_routing.h), then one of two token dispatchers.
//   alltoall (MoEAlltoAllTokenDispatcher): this rank's token copies permuted
//     expert by expert, sent to their experts' ranks over the expert-parallel
//     group, sorted by local expert, run through the local experts' MLPs, sent
//     back, and summed per token by its gates.
//   allgather (MoEAllGatherTokenDispatcher): the group's tokens and routing
//     gathered on every rank, which runs the copies its experts take; a
//     reduce-scatter sums each token's gated outputs back to its rank.
// The backward runs the same way in reverse; the router's gradient comes from
// the gates' gradient and the load-balancing loss.
//
// The event names are the simulator's (plan/layer_ops.cc append_moe_mlp:
// router, permute, sort_chunks, expert_fc1, expert_swiglu / expert_gelu,
// expert_fc2, unsort_chunks, unpermute; the exchanges all_to_all, all_gather,
// reduce_scatter on the ep category), so a measured trace lines up with the
// predicted one.
#pragma once

#include <vector>

#include "runtime/device/device.h"
#include "runtime/executor/kernels.h"
#include "runtime/executor/moe_routing.h"
#include "runtime/executor/param_layout.h"

namespace strata::rt {

// What an MoE layer's MLP keeps from its forward for its backward, for one micro-batch.
struct MoeActivations {
  Routing routing;
  BalanceCounts balance;                   // the load-balancing loss's counts over the sequence's ranks
  std::vector<float> logits;               // [tokens, E], fp32
  std::vector<std::int64_t> send_counts;   // elements to each ep rank (dispatch)
  std::vector<std::int64_t> recv_counts;   // elements from each ep rank
  std::vector<std::int64_t> expert_rows;   // [local experts]: rows each computes
  // alltoall: this rank's copies (slots [tokens * k]: each copy's row, -1
  // dropped; row_tokens / row_gates [routed]: each row's token and gate);
  // allgather: the copies this rank's experts take of the whole group's tokens
  // (slots [ep * tokens * k] by the source's token and choice, -1 not here;
  // row_tokens / row_gates [received]: each row's token in the gathered tokens).
  IndexTensor slots;
  IndexTensor row_tokens;
  Tensor row_gates;           // fp32
  Tensor gates;               // fp32, by slot: the combine's weights (0: dropped or not here)
  IndexTensor expert_order;   // [received]: the received row of each expert-major row (ep > 1)
  IndexTensor source_order;   // [received]: the expert-major row of each received row (ep > 1)
  Tensor expert_in;           // [received, h], expert by expert
  Tensor fc1_out;             // [received, fc1 width]
  Tensor act_out;             // [received, f]
  Tensor expert_out;          // the experts' outputs by row as the combine reads them (the gates' gradient)
};

class MoeMlp {
 public:
  // ep: the expert-parallel group (its rank holds experts [rank * E/ep, (rank + 1) * E/ep)).
  // aux_grad_scale: d(step loss) / d(one micro-batch's load-balancing loss),
  // micro_batch_size / global_batch_size (Megatron averages it over the micro-batches and replicas).
  // sequence_groups: the groups over which this rank's sequence is split (tp
  // with sequence parallelism, cp), over which the load-balancing loss's counts
  // are summed (Megatron-Core's tp x cp reduction of tokens_per_expert).
  MoeMlp(Kernels& kernels, Communicator& ep, const ModelSpec& model, const PlanSpec& plan, double aux_grad_scale,
         std::vector<Communicator*> sequence_groups = {});

  // x [tokens, h]: the post-attention norm's output; returns the routed experts'
  // output [tokens, h] (before the residual add). router: [E, h].
  Tensor forward(const TensorView& router, const Unit& experts, const TensorView& expert_weights, const TensorView& x,
                 MoeActivations& a);
  // dy [tokens, h] -> dx [tokens, h]; accumulates the router's and the experts'
  // gradients; frees a.
  Tensor backward(const TensorView& router, const TensorView& router_grad, const Unit& experts,
                  const TensorView& expert_weights, const TensorView& expert_grads, const TensorView& x,
                  const TensorView& dy, MoeActivations& a);

  // The load of the expert-parallel ranks: over the forwards since the last
  // reset (recomputes not counted), the sum of max / mean of the rows each ep
  // rank's experts computed, and how many forwards. The simulator's
  // moe_router_imbalance is this ratio (plan/plan_spec.h): the busiest rank sets the pace.
  double load_ratio_sum() const { return load_ratio_sum_; }
  int load_samples() const { return load_samples_; }
  void reset_load() {
    load_ratio_sum_ = 0.0;
    load_samples_ = 0;
  }

 private:
  // The router's logits and the routing decisions (host), with the balance counts.
  void route(const TensorView& router, const TensorView& x, MoeActivations& a);
  // Adds a forward's max / mean of the rows each ep rank's experts take.
  void record_load(const std::vector<std::int64_t>& rows_per_rank);
  // The dispatchers: forward from the routing to the routed output [tokens, h];
  // backward from its gradient to the input's (not the router's), gate_grad
  // (fp32 [tokens * k]) filled.
  Tensor forward_alltoall(const Unit& unit, const TensorView& w, const TensorView& x, MoeActivations& a);
  Tensor forward_allgather(const Unit& unit, const TensorView& w, const TensorView& x, MoeActivations& a);
  Tensor backward_alltoall(const Unit& unit, const TensorView& w, const TensorView& g, const TensorView& dy,
                           const Tensor& gate_grad, MoeActivations& a);
  Tensor backward_allgather(const Unit& unit, const TensorView& w, const TensorView& g, const TensorView& dy,
                            const Tensor& gate_grad, MoeActivations& a);
  // body(local expert, its first row, its rows) for each local expert with rows, in order.
  template <class F>
  void each_expert(const MoeActivations& a, F&& body) const {
    std::int64_t first = 0;
    for (int l = 0; l < local_; ++l) {
      const std::int64_t rows = a.expert_rows[static_cast<std::size_t>(l)];
      if (rows == 0) continue;
      body(l, first, rows);
      first += rows;
    }
  }
  // The local experts on a.expert_in (rows a.expert_rows, expert by expert) and back.
  Tensor experts_forward(const Unit& unit, const TensorView& w, MoeActivations& a);
  Tensor experts_backward(const Unit& unit, const TensorView& w, const TensorView& g, Tensor d_out, MoeActivations& a);
  void router_backward(const TensorView& router, const TensorView& router_grad, const TensorView& x,
                       const Tensor& gate_grad, const Tensor& dx, MoeActivations& a);
  // Rows of src [.., h] moved to the peers' and back: send_counts / recv_counts in elements.
  Tensor exchange(const char* name, const TensorView& src, const std::vector<std::int64_t>& send_counts,
                  const std::vector<std::int64_t>& recv_counts);
  // The load-balancing loss's counts: this rank's, summed over the sequence groups.
  BalanceCounts balance_counts(const Routing& r);
  // Dst = src's rows in `order` (k = 1 gather), as one elementwise event.
  Tensor reorder(const char* name, const TensorView& src, const IndexTensor& order, std::int64_t rows);

  Kernels& k_;
  Communicator& ep_;
  std::vector<Communicator*> sequence_groups_;
  int experts_ = 0;       // E
  int local_ = 0;         // E / ep
  int topk_ = 1;
  std::int64_t f_ = 0;    // an expert's width
  std::int64_t fc1_ = 0;  // its fc1's outputs (2f gated)
  double capacity_factor_ = 0.0;
  double aux_coeff_ = 0.0;
  double aux_grad_scale_ = 0.0;
  bool allgather_ = false;  // Megatron's allgather dispatcher, else alltoall
  double load_ratio_sum_ = 0.0;
  int load_samples_ = 0;
};

}  // namespace strata::rt
