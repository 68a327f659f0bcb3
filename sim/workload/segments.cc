#include "sim/workload/segments.h"

#include "core/error.h"
#include "plan/moe_traffic.h"

#include <algorithm>

namespace strata::sim {
namespace {

// A collective hooked to a point of the forward op list, with what it is in
// forward and in backward (either may be absent).
struct CommPoint {
  std::optional<CollectiveOp> forward;
  std::optional<CollectiveOp> backward;
  double bytes = 0.0;
  CommGroup group = CommGroup::kTensor;
};

// An op of the forward list, or a collective point between ops.
struct Item {
  bool is_point = false;
  LayerOp op;
  CommPoint point;
  // Sequence parallelism keeps only this rank's tokens of a column-parallel
  // layer's input; the backward all-gathers them again for the weight gradient
  // (Megatron-LM's LinearWithGradAccumulationAndAsyncCommunication, Strata's
  // runtime Kernels::gather_column_input): the bytes of that gather, 0 if none.
  double wgrad_gather_bytes = 0.0;
  // Part of multi-head latent attention's up-projections (the op, or the gather
  // before it): replayed before the attention's backward under the recompute
  // module mla_up_proj.
  bool mla_up = false;
  // A point: the MoE exchange the shared experts run beside (Segment::beside_next).
  bool beside = false;
  // An op: the last of the shared experts' ops that run beside that exchange.
  bool beside_end = false;
};

Category op_category(const LayerOp& op) {
  switch (op.kind) {
    case OpKind::kGemm: return op.attention_core ? Category::kAttention : Category::kGemm;
    case OpKind::kAttention: return Category::kAttention;
    case OpKind::kElementwise: return Category::kElementwise;
  }
  return Category::kElementwise;
}

DetailOp forward_detail(const LayerOp& op, const PlanSpec& p, const OpCosts& c,
                                   const std::string& prefix = "") {
  TimeNs t = 0;
  switch (op.kind) {
    case OpKind::kGemm: t = c.gemm(op.gemm, p.dtype).ns(); break;
    case OpKind::kAttention:
      t = c.attention({op.attn_batch_heads, op.attn_seq, op.attn_seq, op.attn_head_dim, true}, false, p.dtype).ns();
      break;
    case OpKind::kElementwise: t = c.elementwise(op.role, op.bytes, p.dtype).ns(); break;
  }
  return {prefix + op.name, op_category(op), t, op.flops, op.bytes};
}

// Backward of one op: for C[m x n] = A[m x k] B[k x n], dA = dC B^T is an m x k x n GEMM
// and dB = A^T dC a k x n x m one (both for weights and for attention's batched GEMMs);
// memory-bound ops read the input and the incoming gradient and write a gradient:
// twice their forward traffic.
// A weight GEMM's wgrad goes to `weight_grad` when the schedule defers it (W);
// the attention core's batched GEMMs have no weights: both their GEMMs are B's.
std::vector<DetailOp> backward_details(const LayerOp& op, const PlanSpec& p, const OpCosts& c,
                                       std::vector<DetailOp>* weight_grad = nullptr) {
  std::vector<DetailOp> out;
  switch (op.kind) {
    case OpKind::kGemm: {
      GemmShape dgrad{op.gemm.m, op.gemm.k, op.gemm.n, op.gemm.batch};
      GemmShape wgrad{op.gemm.k, op.gemm.n, op.gemm.m, op.gemm.batch};
      out.push_back({op.name + " dgrad", op_category(op), c.gemm(dgrad, p.dtype).ns(), dgrad.flops(), 0.0});
      DetailOp w{op.name + " wgrad", op_category(op), c.gemm(wgrad, p.dtype).ns(), wgrad.flops(), 0.0};
      if (weight_grad != nullptr && !op.attention_core) {
        weight_grad->push_back(std::move(w));
      } else {
        out.push_back(std::move(w));
      }
      break;
    }
    case OpKind::kAttention:
      out.push_back({op.name + " bwd", Category::kAttention,
                     c.attention({op.attn_batch_heads, op.attn_seq, op.attn_seq, op.attn_head_dim, true}, true, p.dtype)
                         .ns(),
                     2.0 * op.flops, 2.0 * op.bytes});
      break;
    case OpKind::kElementwise:
      out.push_back({op.name + " bwd", Category::kElementwise,
                     c.elementwise(op.role, 2.0 * op.bytes, p.dtype).ns(), 0.0, 2.0 * op.bytes});
      break;
  }
  return out;
}

// Turns a sequence of details and collective points into segments, merging
// consecutive details into one compute segment.
class SegmentSink {
 public:
  void add(DetailOp op) { pending_.push_back(std::move(op)); }
  // The next compute segment starts at module `module`'s pre-hook.
  void hook(int module) {
    flush();
    next_hook_ = module;
  }
  void add_comm(CollectiveOp op, double bytes, CommGroup group = CommGroup::kTensor, bool beside_previous = false,
                bool beside_next = false) {
    flush();
    Segment s;
    s.is_comm = true;
    s.op = op;
    s.comm_bytes = bytes;
    s.group = group;
    s.beside_previous = beside_previous;
    s.beside_next = beside_next;
    out_.push_back(std::move(s));
  }
  // The compute so far is the last that runs beside the exchange before it.
  void end_beside() {
    flush();
    if (!out_.empty() && !out_.back().is_comm) out_.back().beside_end = true;
  }
  std::vector<Segment> take() {
    flush();
    return std::move(out_);
  }

 private:
  void flush() {
    if (pending_.empty()) return;
    Segment s;
    s.ops = std::move(pending_);
    pending_.clear();
    recompute_totals(s);
    s.hook = next_hook_;
    next_hook_ = -1;
    out_.push_back(std::move(s));
  }
  std::vector<DetailOp> pending_;
  std::vector<Segment> out_;
  int next_hook_ = -1;
};

// The fused attention of a context-parallel rank (segments.h says how each
// --cp-comm-type splits it): its kernels as details, its exchanges as
// context-parallel collectives.
void add_cp_attention(SegmentSink& sink, const LayerOp& op, const PlanSpec& p, const OpCosts& c, bool backward,
                      const std::string& prefix) {
  using i64 = std::int64_t;
  const i64 cp = p.cp;
  const i64 s = op.attn_seq;
  const i64 local = s / cp;       // this rank's queries: two chunks
  const i64 chunk = s / (2 * cp);  // one load-balanced chunk
  const i64 d = op.attn_head_dim;
  const double e = dtype_bytes(p.dtype);
  // K and V of this rank's tokens, its tensor-parallel share of the heads.
  const double kv_bytes = 2.0 * static_cast<double>(local) * static_cast<double>(op.attn_batch_kv_heads * d) * e;
  const double pass = backward ? 2.0 : 1.0;  // the backward's FLOPs and bytes, as backward_details counts them
  const std::string name = prefix + op.name + (backward ? " bwd" : "");
  auto kernel = [&](const AttentionBlock& block, const std::string& label, double share) {
    sink.add({label, Category::kAttention, c.attention(block, backward, p.dtype).ns(), pass * op.flops * share,
              pass * op.bytes * share});
  };
  switch (p.cp_comm_type) {
    case CpCommType::kP2p:
      // Every step does the same work: the causal square of seq/cp is half of
      // it, as is each unmasked seq/cp x seq/(2cp) rectangle.
      for (i64 i = 0; i < cp; ++i) {
        const AttentionBlock block = i == 0 ? AttentionBlock{op.attn_batch_heads, local, local, d, true}
                                            : AttentionBlock{op.attn_batch_heads, local, chunk, d, false};
        kernel(block, name + " cp step " + std::to_string(i), 1.0 / static_cast<double>(cp));
        if (i + 1 < cp) sink.add_comm(CollectiveOp::kSendRecv, pass * kv_bytes, CommGroup::kContext, true);
      }
      break;
    case CpCommType::kAllGather:
      sink.add_comm(CollectiveOp::kAllGather, kv_bytes * static_cast<double>(cp), CommGroup::kContext);
      kernel({op.attn_batch_heads, local, s / 2, d, false}, name, 1.0);
      if (backward) sink.add_comm(CollectiveOp::kReduceScatter, kv_bytes * static_cast<double>(cp), CommGroup::kContext);
      break;
    case CpCommType::kA2a: {
      // Q, K and V of this rank's tokens go out as 1/cp of the heads over the
      // whole sequence; the output (or, backward, its gradient) comes back.
      const double out_bytes = static_cast<double>(local) * static_cast<double>(op.attn_batch_heads * d) * e;
      const double qkv_bytes = out_bytes + kv_bytes;  // Q is as wide as the output
      sink.add_comm(CollectiveOp::kAllToAll, backward ? out_bytes : qkv_bytes, CommGroup::kContext);
      kernel({op.attn_batch_heads / cp, s, s, d, true}, name, 1.0);
      sink.add_comm(CollectiveOp::kAllToAll, backward ? qkv_bytes : out_bytes, CommGroup::kContext);
      break;
    }
  }
}

// An op's forward (or its replay, with prefix "recompute ").
void add_forward(SegmentSink& sink, const LayerOp& op, const PlanSpec& p, const OpCosts& c,
                 const std::string& prefix = "") {
  if (op.kind == OpKind::kAttention && p.cp > 1) {
    add_cp_attention(sink, op, p, c, false, prefix);
    return;
  }
  sink.add(forward_detail(op, p, c, prefix));
}

// An op's backward into `sink`; with a split backward (W deferred), its weight
// gradient GEMM into `weight_grad` instead.
void add_backward(SegmentSink& sink, const LayerOp& op, const PlanSpec& p, const OpCosts& c,
                  SegmentSink* weight_grad) {
  if (op.kind == OpKind::kAttention && p.cp > 1) {
    add_cp_attention(sink, op, p, c, true, "");
    return;
  }
  std::vector<DetailOp> deferred;
  for (auto& d : backward_details(op, p, c, weight_grad != nullptr ? &deferred : nullptr)) sink.add(std::move(d));
  for (auto& d : deferred) weight_grad->add(std::move(d));
}

// torchtitan's op-level selective recompute, replayed before the layer's
// backward: every memory-bound op, and the recomputed columns of the weight
// GEMMs (op_sac_recomputed_share); the fused attention's output is kept. With
// tensor parallelism the replay's own collectives (torchtitan saves reduce-
// scatter outputs, not all-gather ones) are not costed yet.
std::vector<Segment> op_sac_recompute(const std::vector<Item>& items, const ModelSpec& m, const PlanSpec& p,
                                      const OpCosts& c) {
  SegmentSink rec;
  for (const Item& it : items) {
    if (it.is_point) continue;
    const LayerOp& op = it.op;
    if (op.kind == OpKind::kElementwise) rec.add(forward_detail(op, p, c, "recompute "));
    const double share = op_sac_recomputed_share(op, m);
    if (share <= 0.0) continue;
    GemmShape part = op.gemm;
    part.n = std::max<std::int64_t>(1, std::llround(static_cast<double>(op.gemm.n) * share));
    rec.add({"recompute " + op.name, op_category(op), c.gemm(part, p.dtype).ns(), op.flops * share, 0.0});
  }
  return rec.take();
}

// A module with parameters starts at this op: a weight GEMM or a norm.
bool has_parameters(const LayerOp& op) { return op.has_weight || op.role == OpRole::kNorm; }

// module_hooks: mark where each module with parameters starts.
BlockSegments build(const std::vector<Item>& items, const PlanSpec& p, const OpCosts& c, bool module_hooks = false) {
  // Each item's module index (-1: the op has no parameters, or a collective point).
  std::vector<int> module_of(items.size(), -1);
  if (module_hooks) {
    int next = 0;
    for (std::size_t i = 0; i < items.size(); ++i) {
      if (!items[i].is_point && has_parameters(items[i].op)) module_of[i] = next++;
    }
  }
  BlockSegments b;
  SegmentSink fwd;
  SegmentSink rec;
  for (std::size_t i = 0; i < items.size(); ++i) {
    const Item& it = items[i];
    if (it.is_point) {
      if (it.point.forward) {
        fwd.add_comm(*it.point.forward, it.point.bytes, it.point.group, false, it.beside);
        rec.add_comm(*it.point.forward, it.point.bytes, it.point.group, false, it.beside);
      }
      continue;
    }
    if (module_of[i] >= 0) {
      fwd.hook(module_of[i]);
      rec.hook(module_of[i]);
    }
    add_forward(fwd, it.op, p, c);
    add_forward(rec, it.op, p, c, "recompute ");
    if (it.beside_end) {
      fwd.end_beside();
      rec.end_beside();
    }
  }
  b.forward = fwd.take();
  if (p.recompute == Recompute::kFull) b.recompute = rec.take();

  // Backward: the forward list in reverse; selective recompute replays the
  // attention core's forward just before its backward. An exchange the shared
  // experts ran beside in forward runs beside their backward: its gradient's
  // exchange first, then their ops' backward (in reverse), the last of them
  // ending the run. The run's own input gathers (sequence parallelism's, for the
  // weight gradients) go first: on the same lane they would queue behind the
  // exchange, where Megatron-Core's run on their own communicator's stream.
  std::vector<int> beside_from(items.size(), -1);  // at a run's last op: its exchange
  std::vector<char> beside_first(items.size(), 0);  // a run's first op
  std::vector<char> beside_moved(items.size(), 0);  // an exchange moved to its run's end
  std::vector<char> gathered(items.size(), 0);      // an op whose input gather went first
  for (std::size_t i = 0; i < items.size(); ++i) {
    if (!items[i].is_point || !items[i].beside) continue;
    std::size_t j = i + 1;
    while (j < items.size() && (items[j].is_point || !items[j].beside_end)) ++j;
    if (j == items.size() || !items[i].point.backward) continue;
    beside_from[j] = static_cast<int>(i);
    beside_first[i + 1] = 1;
    beside_moved[i] = 1;
  }
  SegmentSink bwd;
  SegmentSink wgt;  // W, when the schedule defers it
  const bool split = splits_backward(p.schedule);
  bool core_replayed = false;
  for (auto it = items.rbegin(); it != items.rend(); ++it) {
    const std::size_t index = static_cast<std::size_t>(items.rend() - it - 1);
    if (beside_from[index] >= 0) {
      const std::size_t from = static_cast<std::size_t>(beside_from[index]);
      for (std::size_t g = index; g > from && !split; --g) {
        if (items[g].is_point || items[g].wgrad_gather_bytes <= 0.0) continue;
        bwd.add_comm(CollectiveOp::kAllGather, items[g].wgrad_gather_bytes);
        gathered[g] = 1;
      }
      const Item& x = items[from];
      bwd.add_comm(*x.point.backward, x.point.bytes, x.point.group, false, true);
    }
    const int module = module_of[index];
    if (module >= 0) bwd.hook(module);
    if (it->is_point) {
      if (beside_moved[index]) continue;  // already emitted, beside the run after it
      if (it->point.backward) bwd.add_comm(*it->point.backward, it->point.bytes, it->point.group);
      continue;
    }
    // Selective recompute replays its modules' forward just before the
    // attention's backward, which needs what they rebuild: the attention core
    // (core_attn), MLA's up-projections with their gathers (mla_up_proj).
    if (p.recompute == Recompute::kSelective && it->op.attention_core && !core_replayed) {
      for (const Item& f : items) {
        if (f.is_point) {
          if (p.recompute_modules.mla_up_proj && f.mla_up && f.point.forward) {
            bwd.add_comm(*f.point.forward, f.point.bytes, f.point.group);
          }
          continue;
        }
        const bool replay = (p.recompute_modules.core_attn && f.op.attention_core) ||
                            (p.recompute_modules.mla_up_proj && f.mla_up);
        if (replay) add_forward(bwd, f.op, p, c, "recompute ");
      }
      core_replayed = true;
    }
    // Megatron launches the gather before the data-gradient GEMM, which does not
    // need it; the weight-gradient GEMM waits for it. A deferred W keeps the
    // rank's shard and gathers it again itself (sail-sg's zero-bubble Megatron-LM,
    // megatron/core/tensor_parallel/layers.py: WeightGradStore.put of pre_process).
    if (it->wgrad_gather_bytes > 0.0 && !gathered[index]) {
      (split ? wgt : bwd).add_comm(CollectiveOp::kAllGather, it->wgrad_gather_bytes);
    }
    add_backward(bwd, it->op, p, c, split ? &wgt : nullptr);
    if (beside_first[index]) bwd.end_beside();
  }
  b.backward = bwd.take();
  b.weight_grad = wgt.take();
  return b;
}

Item op_item(LayerOp op) {
  Item it;
  it.op = std::move(op);
  return it;
}

Item point(std::optional<CollectiveOp> forward, std::optional<CollectiveOp> backward, double bytes,
           CommGroup group = CommGroup::kTensor) {
  Item it;
  it.is_point = true;
  it.point = {forward, backward, bytes, group};
  return it;
}

// Bytes of the full residual stream of one micro-batch on this context-parallel
// rank (what TP collectives move).
double stream_bytes(const ModelSpec& m, const PlanSpec& p) {
  return static_cast<double>(m.seq_length / p.cp) * p.micro_batch_size * m.hidden_size * dtype_bytes(p.dtype);
}

// A column-parallel op; with sequence parallelism its backward gathers the input again.
Item column_parallel_item(LayerOp op, const PlanSpec& p, double bytes) {
  Item it = op_item(std::move(op));
  if (p.tp > 1 && p.sequence_parallel) it.wgrad_gather_bytes = bytes;
  return it;
}

// The collective point that precedes a column-parallel layer ("f" / all-gather).
Item before_column_parallel(const PlanSpec& p, double bytes) {
  if (p.sequence_parallel) return point(CollectiveOp::kAllGather, CollectiveOp::kReduceScatter, bytes);
  return point(std::nullopt, CollectiveOp::kAllReduce, bytes);
}

// The collective point that follows a row-parallel layer ("g" / reduce-scatter).
Item after_row_parallel(const PlanSpec& p, double bytes) {
  if (p.sequence_parallel) return point(CollectiveOp::kReduceScatter, CollectiveOp::kAllGather, bytes);
  return point(CollectiveOp::kAllReduce, std::nullopt, bytes);
}

// The MoE layer's token exchanges (segments.h says where each dispatcher puts
// them): before the routed experts (dispatch) or after them (combine).
void add_moe_exchange(std::vector<Item>& items, const ModelSpec& m, const PlanSpec& p, bool dispatch,
                      const std::vector<int>& experts_per_node) {
  const int ep = p.moe.ep;
  const int etp = p.moe.etp;
  // This rank's tokens: its sequence-parallel shard of the layer's.
  const double own = stream_bytes(m, p) / (p.sequence_parallel ? p.tp : 1);
  const CollectiveOp gather = dispatch ? CollectiveOp::kAllGather : CollectiveOp::kReduceScatter;
  const CollectiveOp scatter = dispatch ? CollectiveOp::kReduceScatter : CollectiveOp::kAllGather;
  if (p.moe.token_dispatcher == MoeDispatcher::kAllGather) {
    if (ep * etp > 1) items.push_back(point(gather, scatter, own * ep * etp, CommGroup::kExpertModel));
    return;
  }
  const double routed = own * m.moe.moe_router_topk * expert_load_factor(p);
  if (p.moe.token_dispatcher == MoeDispatcher::kFlex) {
    const int nodes = experts_per_node.empty() ? 1 : static_cast<int>(experts_per_node.size());
    // Over the network: own x (expected nodes per token) x load, as an all-to-all
    // over the N ranks of the rail (each pair own x load x D / N).
    const double network =
        nodes > 1 ? own * expected_nodes_per_token(m.moe, experts_per_node) * expert_load_factor(p) : 0.0;
    const bool node_hop = ep > nodes;  // more than one rank of the group on a node
    Item rail = point(CollectiveOp::kAllToAll, CollectiveOp::kAllToAll, network, CommGroup::kExpertRail);
    Item node = point(CollectiveOp::kAllToAll, CollectiveOp::kAllToAll, routed, CommGroup::kExpertNode);
    if (dispatch && nodes > 1) items.push_back(rail);
    if (node_hop) items.push_back(node);
    if (!dispatch && nodes > 1) items.push_back(rail);
    return;
  }
  const bool a2a = ep > 1;
  if (dispatch && a2a) items.push_back(point(CollectiveOp::kAllToAll, CollectiveOp::kAllToAll, routed, CommGroup::kExpert));
  if (etp > 1) items.push_back(point(gather, scatter, routed * etp, CommGroup::kExpertTensor));
  if (!dispatch && a2a) items.push_back(point(CollectiveOp::kAllToAll, CollectiveOp::kAllToAll, routed, CommGroup::kExpert));
}

}  // namespace

bool is_expert_group(CommGroup g) {
  return g == CommGroup::kExpert || g == CommGroup::kExpertTensor || g == CommGroup::kExpertModel ||
         g == CommGroup::kExpertNode || g == CommGroup::kExpertRail;
}

void recompute_totals(Segment& s) {
  s.duration_ns = 0;
  s.flops = 0.0;
  s.bytes = 0.0;
  TimeNs longest = -1;
  for (const DetailOp& op : s.ops) {
    s.duration_ns += op.duration_ns;
    s.flops += op.flops;
    s.bytes += op.bytes;
    if (op.category != Category::kCp && op.duration_ns > longest) {
      longest = op.duration_ns;
      s.category = op.category;
    }
  }
}

bool can_join(const Segment& into, const Segment& next) {
  return !into.is_comm && !next.is_comm && !into.beside_end;
}

void join(Segment& into, Segment next) {
  for (DetailOp& op : next.ops) into.ops.push_back(std::move(op));
  into.beside_end = next.beside_end;
  recompute_totals(into);
}

std::int64_t ParameterModule::elements() const {
  std::int64_t n = 0;
  for (std::int64_t e : params) n += e;
  return n;
}

std::vector<ParameterModule> layer_parameter_modules(const ModelSpec& m, const PlanSpec& p) {
  std::vector<ParameterModule> out;
  for (const LayerOp& op : layer_forward_ops(m, layer_op_context(p))) {
    if (!has_parameters(op)) continue;
    ParameterModule mod;
    mod.name = op.name;
    if (op.has_weight) {
      // The weight is k x n on this GPU (Megatron's column- and row-parallel
      // layers split n and k over tp); the bias is as wide as the output on this
      // GPU (split with a column-parallel layer's, whole with a row-parallel one's).
      mod.params.push_back(op.gemm.k * op.gemm.n);
      const bool mla_latent = op.role == OpRole::kMlaDown || op.role == OpRole::kMlaUp;  // bias=False in Megatron-Core
      if (m.add_bias_linear && !mla_latent) mod.params.push_back(op.gemm.n);
    } else {
      // A norm: its scale, and LayerNorm's shift (MLA's latent norms are RMSNorms).
      const std::int64_t width = op.norm_width > 0 ? op.norm_width : m.hidden_size;
      mod.params.push_back(width);
      if (m.normalization == Normalization::kLayerNorm && op.norm_width == 0) mod.params.push_back(width);
    }
    out.push_back(std::move(mod));
  }
  return out;
}

namespace {

// Puts `op` first in the segments' first compute segment (a new one when they
// start with a collective).
void prepend(std::vector<Segment>& segs, DetailOp op) {
  if (segs.empty() || segs.front().is_comm) segs.insert(segs.begin(), Segment{});
  Segment& s = segs.front();
  s.ops.insert(s.ops.begin(), std::move(op));
  recompute_totals(s);
}

}  // namespace

BlockSegments layer_segments(const ModelSpec& m, const PlanSpec& p, const OpCosts& costs,
                             const LayerSegmentOptions& options, MlpKind mlp) {
  const double bytes = stream_bytes(m, p);
  const bool tp = p.tp > 1;
  std::vector<Item> items;
  std::vector<LayerOp> ops = layer_forward_ops(m, layer_op_context(p), mlp);
  // The exchanges sit around the routed experts, and around the reordering of
  // what the dispatch received when there is one (dispatch before sort_chunks,
  // combine after unsort_chunks).
  const bool sorted = std::any_of(ops.begin(), ops.end(), [](const LayerOp& o) { return o.role == OpRole::kSortChunks; });
  const OpRole dispatch_before = sorted ? OpRole::kSortChunks : OpRole::kExpertFc1;
  const OpRole combine_after = sorted ? OpRole::kSortChunks : OpRole::kExpertFc2;
  // moe_shared_expert_overlap: the shared experts' ops move beside the exchanges
  // (segments.h); with ep 1 there is no token exchange to run beside.
  std::vector<LayerOp> shared;
  // (check_moe_plan refuses it with the allgather dispatcher, which has none.)
  const bool beside_exchange = mlp == MlpKind::kMoe && p.moe.shared_expert_overlap && p.moe.ep > 1 &&
                               p.moe.token_dispatcher != MoeDispatcher::kAllGather;
  if (beside_exchange) {
    for (const LayerOp& op : ops) {
      if (op.shared_expert) shared.push_back(op);
    }
    ops.erase(std::remove_if(ops.begin(), ops.end(), [](const LayerOp& o) { return o.shared_expert; }), ops.end());
  }
  // The exchange before (dispatch) or after (combine) the routed experts; with the
  // shared experts beside it, fc1 and the activation (dispatch) or fc2 (combine)
  // right after its last token all-to-all.
  auto add_exchange = [&](bool dispatch) {
    if (shared.empty()) {
      add_moe_exchange(items, m, p, dispatch, options.experts_per_node);
      return;
    }
    if (dispatch && tp) items.push_back(before_column_parallel(p, bytes));  // the shared experts' input
    const std::size_t from = items.size();
    add_moe_exchange(items, m, p, dispatch, options.experts_per_node);
    std::size_t at = items.size();
    for (std::size_t k = from; k < items.size(); ++k) {
      const CommGroup g = items[k].point.group;
      if (g == CommGroup::kExpert || g == CommGroup::kExpertNode || g == CommGroup::kExpertRail) at = k;
    }
    if (at == items.size()) throw InternalError("an MoE exchange with ep > 1 has no all-to-all to run beside");
    items[at].beside = true;
    std::vector<Item> run;  // fc1 and the activation beside the dispatch, fc2 beside the combine
    for (const LayerOp& op : shared) {
      if ((op.role == OpRole::kFc2) == dispatch) continue;
      run.push_back(op.role == OpRole::kFc1 ? column_parallel_item(op, p, bytes) : op_item(op));
    }
    run.back().beside_end = true;
    if (!dispatch && tp) run.push_back(after_row_parallel(p, bytes));
    items.insert(items.begin() + static_cast<std::ptrdiff_t>(at + 1), run.begin(), run.end());
  };
  bool dispatched = false;
  for (LayerOp& op : ops) {
    const bool column_parallel = is_column_parallel(op.role);
    const bool row_parallel = is_row_parallel(op.role);
    const OpRole role = op.role;
    // What a column-parallel op gathers: the stream, or MLA's latent.
    const double input_bytes =
        op.tp_input_width > 0 ? bytes * static_cast<double>(op.tp_input_width) / m.hidden_size : bytes;
    const bool mla_up = is_mla_up_proj(op);
    if (tp && column_parallel) {
      items.push_back(before_column_parallel(p, input_bytes));
      items.back().mla_up = mla_up;
    }
    const bool dispatch = role == dispatch_before && !dispatched;
    if (dispatch) add_exchange(true);
    items.push_back(column_parallel ? column_parallel_item(std::move(op), p, input_bytes) : op_item(std::move(op)));
    items.back().mla_up = mla_up;
    if (tp && row_parallel) items.push_back(after_row_parallel(p, bytes));
    if (role == combine_after && !dispatch) add_exchange(false);
    dispatched = dispatched || dispatch;
  }
  BlockSegments b = build(items, p, costs, options.module_hooks);
  if (p.recompute == Recompute::kSelectiveOp) b.recompute = op_sac_recompute(items, m, p, costs);
  if (options.gather_copy_out_bytes > 0.0) {
    // One copy per gather: the forward's, and the backward's, which the
    // recompute, when there is one, runs first.
    const double copied = options.gather_copy_out_bytes;
    const DetailOp copy{"param copy-out", Category::kElementwise, costs.device_copy(copied).ns(), 0.0, 2.0 * copied};
    prepend(b.forward, copy);
    prepend(b.recompute.empty() ? b.backward : b.recompute, copy);
  }
  if (options.reduce_copy_in_read_bytes > 0.0) {
    // device_copy reads and writes the same bytes: their mean moves as many.
    const double moved = options.reduce_copy_in_read_bytes + options.reduce_copy_in_write_bytes;
    const DetailOp copy{"grad copy-in", Category::kElementwise, costs.device_copy(moved / 2.0).ns(), 0.0, moved};
    if (b.backward.empty() || b.backward.back().is_comm) b.backward.push_back(Segment{});
    b.backward.back().ops.push_back(copy);
    recompute_totals(b.backward.back());
  }
  return b;
}

BlockSegments embedding_segments(const ModelSpec& m, const PlanSpec& p, const OpCosts& costs) {
  std::vector<Item> items;
  for (LayerOp& op : embedding_forward_ops(m, layer_op_context(p))) items.push_back(op_item(std::move(op)));
  // The vocabulary-parallel embedding sums its partial lookups over tp.
  if (p.tp > 1) items.push_back(after_row_parallel(p, stream_bytes(m, p)));
  return build(items, p, costs);
}

BlockSegments head_segments(const ModelSpec& m, const PlanSpec& p, const OpCosts& costs) {
  std::vector<Item> items;
  const double tokens = static_cast<double>(m.seq_length / p.cp) * p.micro_batch_size;
  for (LayerOp& op : head_forward_ops(m, layer_op_context(p))) {
    if (p.tp > 1 && op.role == OpRole::kLogits) items.push_back(before_column_parallel(p, stream_bytes(m, p)));
    const bool loss = op.role == OpRole::kCrossEntropy;
    const bool logits = op.role == OpRole::kLogits;
    items.push_back(logits ? column_parallel_item(std::move(op), p, stream_bytes(m, p)) : op_item(std::move(op)));
    // Vocabulary-parallel cross-entropy all-reduces the max, the sum of exponentials
    // and the target logit of every token over tp (Megatron-LM, cross_entropy.py): 3 fp32 values.
    if (p.tp > 1 && loss) items.push_back(point(CollectiveOp::kAllReduce, std::nullopt, 3.0 * 4.0 * tokens));
  }
  return build(items, p, costs);
}

namespace {

// Appends `more` to `segs`, merging a compute segment that meets another.
void concat(std::vector<Segment>& segs, const std::vector<Segment>& more) {
  for (const Segment& s : more) {
    if (!segs.empty() && s.hook < 0 && can_join(segs.back(), s)) {
      join(segs.back(), s);
      continue;
    }
    segs.push_back(s);
  }
}

std::vector<Segment> joined(std::initializer_list<const std::vector<Segment>*> parts) {
  std::vector<Segment> out;
  for (const std::vector<Segment>* part : parts) concat(out, *part);
  return out;
}

}  // namespace

BlockSegments mtp_segments(const ModelSpec& m, const PlanSpec& p, const OpCosts& costs, const BlockSegments& layer) {
  const double stream = stream_bytes(m, p);
  const double tokens = static_cast<double>(m.seq_length / p.cp) * p.micro_batch_size;
  const double own = stream / (p.sequence_parallel ? p.tp : 1);  // this rank's part of the stream
  std::vector<Item> items;
  for (LayerOp op : embedding_forward_ops(m, layer_op_context(p))) {
    op.name = "mtp_embedding";
    items.push_back(op_item(std::move(op)));
  }
  if (p.tp > 1) items.push_back(after_row_parallel(p, stream));
  LayerOp norm;
  norm.kind = OpKind::kElementwise;
  norm.role = OpRole::kNorm;
  norm.bytes = 2.0 * own;
  norm.name = "mtp_enorm";
  items.push_back(op_item(norm));
  norm.name = "mtp_hnorm";
  items.push_back(op_item(norm));
  LayerOp eh;
  eh.name = "mtp_eh_proj";
  eh.role = OpRole::kFc1;  // column-parallel, 2h -> h
  eh.kind = OpKind::kGemm;
  eh.has_weight = true;
  eh.gemm = {static_cast<std::int64_t>(tokens), m.hidden_size / p.tp, 2LL * m.hidden_size, 1};
  eh.flops = eh.gemm.flops();
  if (p.tp > 1) items.push_back(before_column_parallel(p, 2.0 * stream));
  items.push_back(column_parallel_item(std::move(eh), p, 2.0 * stream));
  // Its output split over tp is gathered whole (gather_from_tensor_model_parallel_region),
  // then, with sequence parallelism, scattered back to this rank's tokens, whose
  // backward is an all-gather.
  if (p.tp > 1) {
    items.push_back(point(CollectiveOp::kAllGather,
                          p.sequence_parallel ? std::optional(CollectiveOp::kAllGather) : std::nullopt, stream));
  }
  const BlockSegments pre = build(items, p, costs);
  const BlockSegments head = head_segments(m, p, costs);
  BlockSegments out;
  out.forward = joined({&pre.forward, &layer.forward, &head.forward});
  out.backward = joined({&head.backward, &layer.recompute, &layer.backward, &pre.backward});
  out.weight_grad = joined({&head.weight_grad, &layer.weight_grad, &pre.weight_grad});
  return out;
}

void append_after(BlockSegments& block, const BlockSegments& after) {
  concat(block.forward, after.forward);
  block.backward = joined({&after.backward, &block.backward});
  block.weight_grad = joined({&after.weight_grad, &block.weight_grad});
}

}  // namespace strata::sim
