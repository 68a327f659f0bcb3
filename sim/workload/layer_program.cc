#include "sim/workload/layer_program.h"

#include <algorithm>
#include <array>
#include <cstring>
#include <map>
#include <string>

#include "plan/params.h"
#include "sim/workload/cp_ring.h"
#include "sim/workload/tp_overlap.h"

namespace strata::sim {
namespace {

std::string segment_name(const Segment& s) {
  if (s.is_comm) return to_string(s.op);
  if (s.ops.size() == 1) return s.ops.front().name;
  return s.ops.front().name.str() + ".." + s.ops.back().name.str();
}

// The experts each node of an expert-parallel group holds, in expert order (the
// group of rank 0; every group of a plan spans its nodes alike). One entry: one node.
std::vector<int> experts_per_node(const WorkloadBuild& b) {
  const std::vector<int> ep = b.expert_layout.group(GroupKind::kExpert, 0);
  const int local = b.model.moe.num_experts / b.plan.moe.ep;
  std::vector<int> out;
  int last_node = -1;
  for (int r : ep) {
    if (b.node_of(r) != last_node) out.push_back(0);
    last_node = b.node_of(r);
    out.back() += local;
  }
  return out;
}

using SegmentIds = LayerProgram::SegmentIds;
using PendingBlock = LayerProgram::PendingBlock;

// Emits one pipeline op for the simulated members of a tensor-parallel group.
class OpEmitter {
 public:
  // `shape`: which blocks the op has (its phase, and whether its chunk holds the
  // embedding or the head), 3 bits.
  OpEmitter(WorkloadBuild& b, CollapsedStretches& stretches, std::vector<PendingBlock>& pending,
            std::vector<int>& pending_layers, const std::vector<int>& members, const std::vector<int>& group,
            const std::vector<int>& cp_group, int oi, const PipelineOp& op, int chunk_first_layer, int shape,
            bool collapse, TaskId carried_comm)
      : b_(b), stretches_(stretches), members_(members), group_(group), cp_group_(cp_group), oi_(oi), op_(op),
        chunk_first_layer_(chunk_first_layer), collapse_(collapse), prev_(carried_comm),
        prev_comm_(carried_comm >= 0), pending_(pending), pending_layers_(pending_layers), shape_(shape) {}

  // One block: layer j of the chunk (j >= 0), kEmbeddingBlock or kHeadBlock.
  // Blocks are numbered in the op's order: a collapsed stretch is the range of
  // blocks [first, last] of an op of its shape, which names its detail.
  // backward_hooks: the block is a layer's backward, whose module hooks are its
  // modules' backward hooks (WorkloadBuild::hook_slot).
  void block(const std::vector<Segment>& segs, const SegmentIds& ids, int j, bool split_before, bool split_after,
             bool backward_hooks = false) {
    backward_hooks_ = backward_hooks;
    if (collapse_) {
      if (split_before) flush();
      if (stretch_first_ < 0) stretch_first_ = block_count_;
      stretch_last_ = block_count_++;
      collect(segs, j);
      if (j >= 0) pending_layers_.push_back(j);
      if (j == kHeadBlock) pending_head_ = true;
      if (split_after) flush();
      return;
    }
    for (std::size_t k = 0; k < segs.size(); ++k) {
      if (segs[k].is_comm) {
        comm_task(segs[k], ids.label[k], j);
      } else {
        compute_task(segs[k], ids, k, j);
      }
    }
  }

  void finish() {
    if (collapse_) flush();
  }

  // The collective the op ended with (the head's cross-entropy all-reduce), which
  // the rank's next compute waits for; -1 if it ended with compute.
  TaskId trailing_comm() const { return prev_comm_ ? prev_ : -1; }

  // Collapsed ops of one group with the same chunk, phase and boundaries give the
  // same stretches: the first such op records them (record), later ones only
  // make their tasks (emit).
  void record(std::vector<CollapsedStretch>* out) { record_ = out; }

  // A collapsed stretch's tasks: one compute task on every member, its kernels'
  // issue, and its marks.
  void emit(const CollapsedStretch& st) {
    TaskInfo info = info_for(0);  // layer offsets count from the chunk's first layer
    info.detail = st.detail;
    info.bytes = st.bytes;
    TaskId t = b_.shared_compute(members_, Duration::from_ns(st.ns), st.label, info);
    b_.issue(members_, t, st.kernels, st.phase);
    prev_ = t;
    prev_comm_ = false;
    for (int member : members_) b_.op_marks[member][oi_].add(t);
    for (int j : st.layers) {
      for (int member : members_) b_.layer_marks[member][oi_ * b_.chunk_layers() + j].add(t);
    }
    if (st.head) {
      for (int member : members_) b_.head_marks[member][oi_].add(t);
    }
  }

 private:
  TaskInfo info_for(int j) const {
    TaskInfo info;
    info.microbatch = op_.microbatch;
    info.chunk = op_.chunk;
    info.layer = j >= 0 ? chunk_first_layer_ + j : -1;
    return info;
  }

  void mark(TaskId t, int j) {
    for (int member : members_) {
      b_.op_marks[member][oi_].add(t);
      if (j >= 0) b_.layer_marks[member][oi_ * b_.chunk_layers() + j].add(t);
      if (j == kHeadBlock) b_.head_marks[member][oi_].add(t);
    }
  }

  void compute_task(const Segment& s, const SegmentIds& ids, std::size_t k, int j) {
    TaskInfo info = info_for(j);
    info.detail = ids.detail[k];
    info.bytes = s.bytes;
    const TaskId before = prev_;
    TaskId t = b_.shared_compute(members_, Duration::from_ns(s.duration_ns), ids.label[k], info);
    if (s.hook >= 0 && j >= 0 && b_.module_hooks()) mark_hook(t, before, j, s.hook);
    // Each op of a segment is one kernel (a GEMM's backward is its dgrad and wgrad ops).
    b_.issue(members_, t, s.ops.size(), b_.w.notes.label(ids.label[k]).phase);
    if (prev_ >= 0 && prev_comm_) b_.w.graph.add_dependency(prev_, t);
    wait_beside(t);
    if (s.beside_end && beside_ >= 0) {  // what follows waits for the exchange
      beside_wait_ = beside_;
      beside_ = -1;
    }
    prev_ = t;
    prev_comm_ = false;
    mark(t, j);
  }

  // The compute after a run beside an exchange waits for the exchange (and so
  // does every collective before that compute: comm_task).
  void wait_beside(TaskId t) {
    if (beside_wait_ < 0) return;
    b_.depend(beside_wait_, t);
    beside_wait_ = -1;
  }

  // The module hook before task t (its first task) of layer j; `before` is the
  // task before it in this op (-1: none).
  void mark_hook(TaskId t, TaskId before, int j, int module) {
    const std::size_t slot = static_cast<std::size_t>((oi_ * b_.chunk_layers() + j) * b_.hook_slots() +
                                                      b_.hook_slot(backward_hooks_, module));
    for (int member : members_) {
      b_.hook_first[member][slot] = t;
      b_.hook_prev[member][slot] = before;
    }
  }

  // A collective segment's comm id: on the tensor-parallel group, its context-
  // parallel group, or its members' expert groups.
  std::int32_t comm_of(const Segment& s) const {
    if (is_expert_group(s.group)) return b_.expert_collective(s.op, s.group, group_, s.comm_bytes);
    // A ring step's transfer at full fidelity (cp_ring.h).
    if (s.group == CommGroup::kContext && s.beside_next) return b_.cp_ring_transfer(group_, s.comm_bytes);
    return b_.collective(s.op, s.group == CommGroup::kContext ? cp_group_ : group_, s.comm_bytes);
  }

  // A tensor-parallel collective (segments have them only when tp > 1), a
  // context-parallel one, costed on the first member's context-parallel group, or
  // an MoE layer's exchange on the members' expert groups (their shares at full
  // fidelity: WorkloadBuild::expert_collective); run by every member at once, on
  // the model-parallel lane (tp-comm).
  void comm_task(const Segment& s, std::int32_t label, int j) {
    TaskInfo info = info_for(j);
    info.bytes = s.comm_bytes;
    std::vector<std::pair<int, int>> slots;
    for (int member : members_) slots.emplace_back(member, stream_index(StreamKind::kTpComm));
    TaskId t = b_.comm_task(slots, comm_of(s), label, info);
    if (prev_ >= 0) b_.depend(prev_, t);
    if (beside_wait_ >= 0) b_.depend(beside_wait_, t);  // the compute after it waits too (compute_task)
    mark(t, j);
    if (s.beside_next) {
      // The compute after it runs beside it, waiting only for what it waits for
      // (prev_ stays); the task after the run waits for it (compute_task).
      beside_ = t;
      return;
    }
    prev_ = t;
    prev_comm_ = true;
  }

  // Folded fidelity: remembers the block and adds up its time; the ops of a
  // stretch are only copied out (flush) the first time its shape is seen.
  void collect(const std::vector<Segment>& segs, int j) {
    const CollapsedStretches::BlockSummary& sum =
        stretches_.summary(segs, [this](const Segment& s) { return comm_of(s); });
    pending_.push_back({&sum, &segs, j >= 0 ? j : -1});
    pending_ns_ += sum.ns;
    pending_bytes_ += sum.bytes;
    pending_kernels_ += sum.kernels;
  }

  void flush() {
    if (pending_.empty()) {
      pending_layers_.clear();
      pending_head_ = false;
      stretch_first_ = -1;
      return;
    }
    // Same group, op shape and block range: the same ops (group < 2^24 GPUs,
    // blocks per op < 2^16). A model with dense and MoE layers keys the range by
    // its layers (blocks shifted by the chunk's first layer): within one shape
    // that range names the layers, and so their kinds.
    const int shift = b_.model.is_moe() ? chunk_first_layer_ : 0;
    const std::uint64_t key = static_cast<std::uint64_t>(group_.front()) << 40 |
                              static_cast<std::uint64_t>(shape_) << 32 |
                              static_cast<std::uint64_t>(stretch_first_ + shift) << 16 |
                              static_cast<std::uint64_t>(stretch_last_ + shift);
    CollapsedStretch st;
    st.detail = stretches_.detail(key, pending_);
    st.ns = pending_ns_;
    st.bytes = pending_bytes_;
    st.kernels = pending_kernels_;
    int first = -1, last = -1;
    if (!pending_layers_.empty()) {
      first = chunk_first_layer_ + std::min(pending_layers_.front(), pending_layers_.back());
      last = chunk_first_layer_ + std::max(pending_layers_.front(), pending_layers_.back());
    }
    st.phase = op_.phase == PipelinePhase::kForward    ? Phase::kForward
               : op_.phase == PipelinePhase::kBackward ? Phase::kBackward
                                                        : Phase::kWeightGrad;
    st.label = stretches_.label(st.phase, first, last);
    st.layers = pending_layers_;
    st.head = pending_head_;
    emit(st);
    if (record_ != nullptr) record_->push_back(std::move(st));
    pending_head_ = false;
    pending_.clear();
    pending_ns_ = 0;
    pending_bytes_ = 0.0;
    pending_kernels_ = 0;
    pending_layers_.clear();
    stretch_first_ = -1;
  }

  WorkloadBuild& b_;
  CollapsedStretches& stretches_;
  const std::vector<int>& members_;
  const std::vector<int>& group_;
  const std::vector<int>& cp_group_;
  int oi_;
  PipelineOp op_;
  int chunk_first_layer_;
  bool collapse_;
  TaskId prev_ = -1;
  bool prev_comm_ = false;
  // An exchange the compute after it runs beside (Segment::beside_next: an MoE
  // layer's token exchange, a context-parallel ring step's transfer at full
  // fidelity), and, once that run has been emitted, the exchange the next tasks
  // wait for.
  TaskId beside_ = -1;
  TaskId beside_wait_ = -1;
  // The pending stretch.
  std::vector<PendingBlock>& pending_;
  TimeNs pending_ns_ = 0;
  double pending_bytes_ = 0.0;
  std::size_t pending_kernels_ = 0;
  std::vector<int>& pending_layers_;
  bool pending_head_ = false;  // the pending stretch holds the head block
  int shape_;                  // forward, first virtual stage, last virtual stage, W (4 bits)
  int block_count_ = 0;        // blocks seen in this op
  int stretch_first_ = -1;     // the pending stretch's blocks
  int stretch_last_ = -1;
  bool backward_hooks_ = false;  // the current block's module hooks are backward hooks
  std::vector<CollapsedStretch>* record_ = nullptr;
};

}  // namespace

LayerProgram::LayerProgram(WorkloadBuild& b) : b_(b), stretches_(b) {
  LayerSegmentOptions options;
  options.module_hooks = b.module_hooks();
  const double layer_params = static_cast<double>(layer_params_per_gpu(b.model, b.plan.tp));
  if (b.plan.zero_stage == 3 && b.options.sharded.gather_copy_out) {
    options.gather_copy_out_bytes = layer_params * dtype_bytes(b.plan.dtype);
  }
  if (b.plan.zero_stage == 3 && b.options.sharded.reduce_copy_in) {
    options.reduce_copy_in_read_bytes = layer_params * dtype_bytes(b.plan.dtype);
    options.reduce_copy_in_write_bytes = layer_params * b.plan.grad_bytes();
  }
  layer_ = layer_segments(b.model, b.plan, b.op_costs, options);
  if (b.model.is_moe()) {
    if (b.plan.moe.token_dispatcher == MoeDispatcher::kFlex) options.experts_per_node = experts_per_node(b);
    moe_layer_ = layer_segments(b.model, b.plan, b.op_costs, options, MlpKind::kMoe);
  }
  embedding_ = embedding_segments(b.model, b.plan, b.op_costs);
  head_ = head_segments(b.model, b.plan, b.op_costs);
  if (b.plan.tp > 1) overlap_tp_comm();
  if (b.plan.cp > 1) overlap_cp_ring();
  // Multi-token prediction's layers follow the head on the last stage, each
  // with a transformer layer as the decoder's last (its overlaps already applied).
  if (b.model.mtp_num_layers > 0) {
    const BlockSegments mtp = mtp_segments(b.model, b.plan, b.op_costs, b.model.mtp_layer_is_moe() ? moe_layer_ : layer_);
    for (int i = 0; i < b.model.mtp_num_layers; ++i) append_after(head_, mtp);
  }
  layer_ids_ = register_block(layer_);
  if (b.model.is_moe()) moe_layer_ids_ = register_block(moe_layer_);
  embedding_ids_ = register_block(embedding_);
  head_ids_ = register_block(head_);
}

std::vector<BlockSegments*> LayerProgram::layer_blocks() {
  std::vector<BlockSegments*> out{&layer_};
  if (b_.model.is_moe()) out.push_back(&moe_layer_);
  return out;
}

void LayerProgram::overlap_tp_comm() {
  // Costed on the first tensor-parallel group: every group has the same shape. The
  // time is baked into the GEMM's, so the links are shared with the other groups'
  // copies up front at either fidelity (CommCosts::baked).
  const std::vector<int> group = b_.tp_group_gpus(0, 0);
  const TpCommTime alone = [this, &group](CollectiveOp op, double bytes) {
    const CommSpec spec = b_.comm_costs.baked(op, group, bytes);
    return TpComm{collapsed_comm_ns(spec), spec.channels};
  };
  const int tp = b_.plan.tp;
  const int units = b_.options.compute_units;
  // Transformer Engine's userbuffers first (they need sequence parallelism); what
  // they leave, Megatron's asynchronous backward.
  if (b_.options.tp_overlap && b_.plan.sequence_parallel) {
    for (BlockSegments* layer : layer_blocks()) {
      for (std::vector<Segment>* segs : {&layer->forward, &layer->backward, &layer->recompute}) {
        overlap_tp_collectives(*segs, *b_.options.tp_overlap, tp, units, alone);
      }
    }
  }
  if (b_.options.tp_async_backward) {
    const TpOverlap async = async_backward_overlap(*b_.options.tp_async_backward);
    std::vector<std::vector<Segment>*> backward{&head_.backward};
    for (BlockSegments* layer : layer_blocks()) backward.push_back(&layer->backward);
    for (std::vector<Segment>* segs : backward) overlap_tp_collectives(*segs, async, tp, units, alone);
  }
}

void LayerProgram::overlap_cp_ring() {
  // Full fidelity: the transfers as tasks of their own (cp_ring.h).
  if (b_.fidelity == Fidelity::kFull) {
    for (BlockSegments* layer : layer_blocks()) {
      for (std::vector<Segment>* segs : {&layer->forward, &layer->backward, &layer->recompute}) {
        cp_ring_transfers_beside(*segs);
      }
    }
    return;
  }
  // Folded: costed on the first ring's first edge (cp rank 0 to 1 of tensor-parallel rank
  // 0 in the first replica of stage 0): every edge has the same shape, and the
  // baked cost shares the links with the ring's other edges at either fidelity.
  const std::vector<int> ring = b_.cp_group_gpus(0, 0, 0);
  const std::vector<int> edge{ring[0], ring[1]};
  const CpRingTime send_ns = [this, &edge](double bytes) {
    return collapsed_comm_ns(b_.comm_costs.baked(CollectiveOp::kSendRecv, edge, bytes));
  };
  for (BlockSegments* layer : layer_blocks()) {
    for (std::vector<Segment>* segs : {&layer->forward, &layer->backward, &layer->recompute}) {
      overlap_cp_ring_steps(*segs, send_ns);
    }
  }
}

std::size_t LayerProgram::segments_per_layer() const {
  const auto count = [](const BlockSegments& l) { return l.forward.size() + l.backward.size() + l.recompute.size(); };
  return b_.model.is_moe() ? std::max(count(layer_), count(moe_layer_)) : count(layer_);
}

LayerProgram::SegmentIds LayerProgram::register_segments(const std::vector<Segment>& segs, Phase phase) {
  SegmentIds ids;
  for (const Segment& s : segs) {
    TaskLabel label{segment_name(s), s.is_comm ? comm_category(s) : s.category, phase};
    ids.label.push_back(b_.w.notes.add_label(label));
    ids.detail.push_back(s.is_comm ? -1 : b_.w.notes.add_detail(s.ops));
  }
  return ids;
}

LayerProgram::BlockIds LayerProgram::register_block(const BlockSegments& block) {
  BlockIds ids;
  ids.forward = register_segments(block.forward, Phase::kForward);
  ids.backward = register_segments(block.backward, Phase::kBackward);
  ids.recompute = register_segments(block.recompute, Phase::kRecompute);
  ids.weight_grad = register_segments(block.weight_grad, Phase::kWeightGrad);
  return ids;
}

void LayerProgram::emit_tp_group(int d, int r) {
  const PlanSpec& p = b_.plan;
  std::vector<int> members;
  for (int t = 0; t < p.tp; ++t) {
    int s = b_.sim_index(b_.global(t, d, r));
    if (s >= 0) members.push_back(s);
  }
  const std::vector<int> group = b_.tp_group_gpus(d, r);
  // A context-parallel collective is one per tensor-parallel rank; the group's
  // tasks stand for all of them and are costed on one. The cp peers (each a
  // tensor-parallel group of its own at full fidelity) take different ones, so
  // the engine does not load one rank's links with every peer's copy (while
  // cp <= tp each rail carries one, as it does).
  const std::vector<int> cp_group = b_.cp_group_gpus((d % p.cp) % p.tp, d, r);
  stretches_.start_group();  // the block summaries hold this group's collective times
  const auto& program = b_.programs[r];
  const int lc = b_.chunk_layers();
  for (int member : members) {
    b_.op_marks[member].assign(program.size(), Mark{});
    b_.layer_marks[member].assign(program.size() * lc, Mark{});
    b_.head_marks[member].assign(program.size(), Mark{});
    if (b_.module_hooks()) {
      const std::size_t hooks = program.size() * static_cast<std::size_t>(lc * b_.hook_slots());
      b_.hook_first[member].assign(hooks, -1);
      b_.hook_prev[member].assign(hooks, -1);
    }
  }
  // Per-module gathers attach to every module hook: nothing collapses.
  const bool collapse = b_.fidelity == Fidelity::kFolded && !b_.module_hooks();
  const Boundaries bounds = collapse ? collapse_boundaries(b_, r) : Boundaries{};
  auto before = [&](std::size_t oi, int j) { return collapse && bounds.before[oi * lc + j] != 0; };
  auto after = [&](std::size_t oi, int j) { return collapse && bounds.after[oi * lc + j] != 0; };
  auto head_before = [&](std::size_t oi) { return collapse && bounds.head_before[oi] != 0; };
  auto head_after = [&](std::size_t oi) { return collapse && bounds.head_after[oi] != 0; };
  const int last_vs = b_.num_virtual_stages() - 1;
  TaskId carried_comm = -1;
  std::map<std::vector<char>, std::vector<CollapsedStretch>> collapsed_ops;  // see OpEmitter::record
  std::vector<char> key;  // an op's key there, built in place
  for (std::size_t oi = 0; oi < program.size(); ++oi) {
    const PipelineOp& op = program[oi];
    const int vs = virtual_stage(p, r, op.chunk);
    const int shape = (op.phase == PipelinePhase::kForward ? 1 : 0) | (vs == 0 ? 2 : 0) | (vs == last_vs ? 4 : 0) |
                      (op.phase == PipelinePhase::kWeightGrad ? 8 : 0);
    OpEmitter e(b_, stretches_, pending_blocks_, pending_layers_, members, group, cp_group, static_cast<int>(oi), op,
                b_.first_layer_of(vs), shape, collapse, carried_comm);
    std::vector<CollapsedStretch>* recorded = nullptr;
    if (collapse) {
      // The op's stretches depend on its virtual stage, phase and boundaries only.
      // (Most ops have no boundary: their key is the phase and stage alone.)
      key.assign(1, static_cast<char>(op.phase));
      key.resize(1 + sizeof vs);
      std::memcpy(key.data() + 1, &vs, sizeof vs);
      const auto from = static_cast<long>(oi * lc), to = static_cast<long>((oi + 1) * lc);
      const bool bounded = bounds.head_before[oi] != 0 || bounds.head_after[oi] != 0 ||
                           std::any_of(bounds.before.begin() + from, bounds.before.begin() + to, [](char c) { return c != 0; }) ||
                           std::any_of(bounds.after.begin() + from, bounds.after.begin() + to, [](char c) { return c != 0; });
      if (bounded) {
        key.insert(key.end(), bounds.before.begin() + from, bounds.before.begin() + to);
        key.insert(key.end(), bounds.after.begin() + from, bounds.after.begin() + to);
        key.push_back(bounds.head_before[oi]);
        key.push_back(bounds.head_after[oi]);
      }
      if (auto it = collapsed_ops.find(key); it != collapsed_ops.end()) {
        for (const CollapsedStretch& st : it->second) e.emit(st);
        carried_comm = -1;  // a collapsed op ends with a compute task
        continue;
      }
      recorded = &collapsed_ops[key];
    }
    e.record(recorded);
    const int layers = b_.layers_of(vs);
    // Layer j of this chunk: an MoE layer's blocks or the dense layer's.
    const int first_layer = b_.first_layer_of(vs);
    auto moe = [&](int j) { return b_.model.is_moe() && b_.model.is_moe_layer(first_layer + j); };
    auto layer = [&](int j) -> const BlockSegments& { return moe(j) ? moe_layer_ : layer_; };
    auto ids = [&](int j) -> const BlockIds& { return moe(j) ? moe_layer_ids_ : layer_ids_; };
    if (op.phase == PipelinePhase::kForward) {
      if (vs == 0) e.block(embedding_.forward, embedding_ids_.forward, kEmbeddingBlock, false, false);
      for (int j = 0; j < layers; ++j) {
        e.block(layer(j).forward, ids(j).forward, j, before(oi, j), after(oi, j));
      }
      if (vs == last_vs) e.block(head_.forward, head_ids_.forward, kHeadBlock, head_before(oi), false);
    } else if (op.phase == PipelinePhase::kWeightGrad) {
      // W: the weight gradients the backward (B) left, in its order.
      if (vs == last_vs) e.block(head_.weight_grad, head_ids_.weight_grad, kHeadBlock, false, head_after(oi));
      for (int j = layers - 1; j >= 0; --j) {
        e.block(layer(j).weight_grad, ids(j).weight_grad, j, before(oi, j), after(oi, j));
      }
    } else {
      if (vs == last_vs) e.block(head_.backward, head_ids_.backward, kHeadBlock, false, head_after(oi));
      for (int j = layers - 1; j >= 0; --j) {
        e.block(layer(j).recompute, ids(j).recompute, j, before(oi, j), false);
        e.block(layer(j).backward, ids(j).backward, j, false, after(oi, j), true);
      }
      if (vs == 0) e.block(embedding_.backward, embedding_ids_.backward, kEmbeddingBlock, false, false);
    }
    e.finish();
    carried_comm = e.trailing_comm();
  }
  for (int member : members) {
    if (!program.empty()) b_.last_task[member] = b_.op_marks[member].back().last;
  }
}

}  // namespace strata::sim
