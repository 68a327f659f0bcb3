// A transformer layer (or the embedding, or the output head) as the event engine
// sees it: compute segments (ops that run back to back on the compute stream)
// separated by tensor-parallel collectives.
//
// Where the collectives sit follows Megatron-LM (Shoeybi et al. 2019, figure 3;
// Korthikanti et al. 2022, figure 5): without sequence parallelism the "g"
// all-reduce follows the row-parallel projection and fc2 in forward, and the "f"
// all-reduce follows the column-parallel QKV and fc1 in backward; with sequence
// parallelism an all-gather precedes QKV and fc1 and a reduce-scatter follows the
// projection and fc2 in forward, and the conjugates run in backward, where each
// column-parallel layer (QKV, fc1, the logits) also all-gathers its input again
// before its data-gradient GEMM: it kept only its rank's tokens, and the weight
// gradient needs them all (Korthikanti et al. 2022, section 4.2.2).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/collective.h"
#include "sim/engine/task_graph.h"
#include "plan/layer_ops.h"
#include "plan/model_spec.h"
#include "plan/plan_spec.h"
#include "sim/workload/costs.h"

namespace strata::sim {

// The process group a segment's collective runs on, from the layer's tensor-
// parallel group: its own (tp) or the context-parallel group of each of its
// ranks (cp; for the ring step, the send to the next cp rank); in an MoE layer
// the expert layout's groups of each of its ranks (plan/rank_layout.h
// expert_rank_layout): expert-parallel (the token all-to-alls), expert tensor-
// parallel (etp), or both together (etp x ep: the allgather dispatcher's).
// kExpertNode / kExpertRail: of a rank's expert-parallel group, the ranks on its
// own node, and the ranks on the other nodes at its place within theirs (its
// rail): the flex (DeepEP) dispatcher's two hops.
enum class CommGroup : std::uint8_t { kTensor, kContext, kExpert, kExpertTensor, kExpertModel, kExpertNode, kExpertRail };
bool is_expert_group(CommGroup g);

struct Segment {
  bool is_comm = false;
  // Compute segment.
  std::vector<DetailOp> ops;
  TimeNs duration_ns = 0;
  double flops = 0.0;
  double bytes = 0.0;
  Category category = Category::kElementwise;  // of its longest op
  // Communication segment (a tensor- or context-parallel collective).
  CollectiveOp op = CollectiveOp::kAllReduce;
  double comm_bytes = 0.0;
  CommGroup group = CommGroup::kTensor;
  // A context-parallel ring step's K/V transfer: it runs beside the compute
  // segment before it (the step that uses the K/V already received), and the
  // compute after it waits for both (LayerProgram folds it into that step).
  bool beside_previous = false;
  // An MoE layer's token exchange the shared experts run beside (the plan's
  // moe_shared_expert_overlap): the compute segments after it, up to and
  // including the one marked beside_end, do not wait for it; what follows them
  // does. (A collective among them is on the same lane and queues behind it.)
  bool beside_next = false;
  // Compute segment: the last of those that run beside the exchange before them.
  bool beside_end = false;
  // With per-module parameter gathering (ZeRO-3 as DeepSpeed does it): the
  // module whose pre-hook fires just before this compute segment, as its index
  // among the layer's modules with parameters (layer_parameter_modules); -1: none.
  int hook = -1;
};

// A module of the layer that holds parameters (a norm or a weight GEMM): its
// parameters' element counts on one GPU, each a tensor of its own (a weight, a
// bias, a norm's scale and shift).
struct ParameterModule {
  std::string name;
  std::vector<std::int64_t> params;
  std::int64_t elements() const;
};
// The layer's modules with parameters in forward order: what Segment::hook indexes.
std::vector<ParameterModule> layer_parameter_modules(const ModelSpec& m, const PlanSpec& p);

// A compute segment's time, FLOPs and bytes from its ops again, and its category
// from its longest kernel (a context-parallel ring wait is not one); for the
// passes that fold collectives into compute (tp_overlap.h, cp_ring.h).
void recompute_totals(Segment& s);
// Whether compute segment `next` may join compute segment `into` as one: not when
// `into` ends a run beside an exchange (Segment::beside_end), which `next` waits for.
bool can_join(const Segment& into, const Segment& next);
// Appends `next`'s ops to `into` (can_join), which then ends where `next` ended.
void join(Segment& into, Segment next);

struct BlockSegments {
  std::vector<Segment> forward;
  std::vector<Segment> backward;   // includes selective recompute of the attention core
  std::vector<Segment> recompute;  // full recompute: the forward again, before backward
  // The weight-gradient GEMMs a zero-bubble schedule defers to its W op (empty
  // otherwise: the backward holds them), in backward order; with sequence
  // parallelism each after the all-gather of its input.
  std::vector<Segment> weight_grad;
};

// Segments of one transformer layer, of the embedding and of the output head
// (final norm, logits, loss) on one GPU for one micro-batch. Tensor-parallel
// collectives appear only when tp > 1, context-parallel ones only when cp > 1.
//
// Context parallelism (cp > 1) splits the fused attention as Transformer
// Engine's attention with context parallelism runs it (Megatron-Core's
// --cp-comm-type), each rank holding the load-balanced chunks i and 2cp-1-i of
// the sequence (seq / (2cp) tokens each):
//   p2p: cp steps; step 0 its own chunks (causal, seq/cp x seq/cp), steps 1..cp-1
//        the K/V received from the previous ring rank, of which its queries see
//        half whole (unmasked, seq/cp x seq/(2cp)); the K/V of each step but the
//        last is sent on beside it. Backward the same steps, sending K/V and the
//        accumulated dK/dV (twice the bytes).
//   allgather: K/V all-gathered over cp before the local attention (seq/cp
//        queries against the causal prefix, seq/cp x seq/2 of work); backward
//        gathers K/V again and reduce-scatters dK/dV.
//   a2a: all-to-all from sequence to head sharding (Q, K, V), attention over the
//        whole sequence on heads/cp, all-to-all of the output back; backward the
//        conjugate exchanges of the gradients.
// Each rank does 1/cp of the causal attention's work in every variant.
// What ZeRO-3's software adds to a layer's segments.
struct LayerSegmentOptions {
  // Split the compute segments where a module with parameters starts (forward,
  // recompute and backward), each marked with Segment::hook (per-module gathers).
  bool module_hooks = false;
  // A copy of this many bytes of gathered parameters on the compute stream
  // before the layer's forward and before its backward (or full recompute): the
  // gathered buffer copied out into the parameters (FSDP2); 0: none.
  double gather_copy_out_bytes = 0.0;
  // A copy after the layer's backward of its gradients into the reduce-scatter's
  // input on the compute stream, reading this many bytes and writing
  // reduce_copy_in_write_bytes (cast to the reduction dtype: FSDP2); 0: none.
  double reduce_copy_in_read_bytes = 0.0;
  double reduce_copy_in_write_bytes = 0.0;
  // The flex (DeepEP) dispatcher: of one expert-parallel group, how many experts
  // each node holds, in expert order (the nodes it spans); empty: one node.
  std::vector<int> experts_per_node;
};
//
// An MoE layer (mlp kMoe) exchanges its routed tokens around the routed experts
// as Megatron-Core's token dispatchers do (transformer/moe/token_dispatcher.py):
//   alltoall: the permuted tokens all-to-all over ep, then all-gathered over etp
//        (etp > 1); the combine the conjugates (reduce-scatter over etp, then the
//        all-to-all back); backward each exchange's conjugate on the gradients.
//   allgather: the hidden states all-gathered over etp x ep, the experts' output
//        reduce-scattered back; backward the conjugates.
//   flex (DeepEP): each token once to every other node that holds one of its
//        experts, all-to-all over the rank's rail of the group (each rank sends
//        own x D / N to each of the N - 1 other nodes, D the expected nodes per
//        token, plan/moe_traffic.h: fewer with node-limited routing), then its
//        copies over NVLink to their experts' ranks on that node, all-to-all over
//        the node's ranks of the group (own x k in all, of which (g - 1) / g
//        leave each rank); the combine the two in reverse. DeepEP pipelines the
//        two hops; here they run one after the other.
// The all-to-all moves each rank's tokens x topk, scaled by the plan's expert
// load (capacity factor, or the routing imbalance): the busiest rank receives
// that much, and the slowest rank sets the exchange's pace.
// The shared experts (a tensor-parallel MLP of moe_shared_expert_intermediate_size)
// follow the unpermutation. With moe_shared_expert_overlap (alltoall and flex)
// they run as Megatron-Core's SharedExpertMLP does on its side stream: the
// all-gather of their input (sequence parallelism) before the dispatch, fc1 and
// the activation beside the dispatch's last exchange, fc2 beside the combine's
// last exchange, then the reduce-scatter of their output, before the
// unpermutation. Backward, as autograd replays it (each op on its forward's
// stream, token_dispatcher.py's launch order): the exchange's gradient beside
// fc2's backward, then beside fc1's and the activation's. Approximations: one
// compute stream (the side stream's kernels take turns with the main one's, as
// SMs shared do), the side stream's collectives queued on the model-parallel
// lane behind the exchange, and the dispatch waits for the input's all-gather
// (on its own stream in Megatron-Core, beside the permutation).
BlockSegments layer_segments(const ModelSpec& m, const PlanSpec& p, const OpCosts& costs,
                             const LayerSegmentOptions& options = {}, MlpKind mlp = MlpKind::kDense);
BlockSegments embedding_segments(const ModelSpec& m, const PlanSpec& p, const OpCosts& costs);
BlockSegments head_segments(const ModelSpec& m, const PlanSpec& p, const OpCosts& costs);
// One multi-token prediction layer (ModelSpec::mtp_num_layers; Megatron-Core's
// MultiTokenPredictionLayer), run on the last stage after the head: the
// embedding of the tokens one further ahead (the vocabulary-parallel lookup and
// its reduction), the two norms, eh_proj (2h -> h, column-parallel: its input
// gathered with sequence parallelism, its output gathered over tp and scattered
// back), `layer` (a transformer layer's segments, of the decoder's last layer's
// kind), then the output layer and loss again (head_segments). Its backward runs
// first in the head's (the replay of full recompute at its start).
BlockSegments mtp_segments(const ModelSpec& m, const PlanSpec& p, const OpCosts& costs, const BlockSegments& layer);
// Appends `after` to `block`: forward after block's, backward (and W) before.
void append_after(BlockSegments& block, const BlockSegments& after);

}  // namespace strata::sim
