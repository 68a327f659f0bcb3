#include "sim/workload/workload.h"

#include <algorithm>
#include <map>
#include <unordered_map>
#include <tuple>

#include <fmt/format.h>

#include "core/error.h"
#include "plan/bucket_plan.h"
#include "plan/params.h"
#include "plan/pipeline_schedule.h"
#include "sim/workload/segments.h"

namespace strata::sim {

const char* to_string(Fidelity f) { return f == Fidelity::kFull ? "full" : "folded"; }

namespace {

// First and last task of a piece of a rank's program.
struct Mark {
  TaskId first = -1;
  TaskId last = -1;
  void add(TaskId t) {
    if (first < 0) first = t;
    last = t;
  }
};

// Which block of an op a task belongs to: a chunk-local layer index (>= 0), or one
// of these.
constexpr int kEmbeddingBlock = -1;
constexpr int kHeadBlock = -2;

// Per-template-segment task label and detail ids, created once.
struct SegmentIds {
  std::vector<std::int32_t> label;
  std::vector<std::int32_t> detail;
};

class Builder {
 public:
  Builder(const ModelSpec& m, const PlanSpec& p, const OpCosts& oc, const CommCosts& cc,
          Fidelity fidelity, const WorkloadOptions& o)
      : m_(m), p_(p), layout_(p), oc_(oc), cc_(cc), fidelity_(fidelity), o_(o) {}

  Workload build() {
    place_ranks();
    w_.graph = TaskGraph(static_cast<int>(w_.global_rank.size()));
    layer_ = layer_segments(m_, p_, oc_);
    embedding_ = embedding_segments(m_, p_, oc_);
    head_ = head_segments(m_, p_, oc_);
    layer_ids_ = register_block(layer_, "layer");
    embedding_ids_ = register_block(embedding_, "embedding");
    head_ids_ = register_block(head_, "head");
    build_programs();
    reserve();
    for (int r = 0; r < p_.pp; ++r) {
      for (int d = 0; d < p_.dp; ++d) {
        if (sim_index(global(0, d, r)) >= 0) emit_tp_group(d, r);
      }
    }
    add_pipeline_transfers();
    add_data_parallel_and_step();
    w_.graph.finalize();
    return std::move(w_);
  }

 private:
  struct BlockIds {
    SegmentIds forward, backward, recompute;
  };

  int global(int t, int d, int r) const { return layout_.rank({.tp = t, .dp = d, .pp = r}); }
  int sim_index(int global_rank) const { return sim_of_global_[global_rank]; }
  int chunk_layers() const { return m_.num_layers / (p_.pp * p_.vpp); }
  int num_virtual_stages() const { return p_.pp * p_.vpp; }

  void place_ranks() {
    const int world = layout_.world();
    sim_of_global_.assign(world, -1);
    for (int r = 0; r < p_.pp; ++r) {
      for (int d = 0; d < p_.dp; ++d) {
        for (int t = 0; t < p_.tp; ++t) {
          if (fidelity_ == Fidelity::kFolded && (t != 0 || d != 0)) continue;
          const int g = global(t, d, r);
          sim_of_global_[g] = static_cast<int>(w_.global_rank.size());
          w_.global_rank.push_back(g);
          w_.stage.push_back(r);
          w_.tp_rank.push_back(t);
          w_.dp_rank.push_back(d);
        }
      }
    }
    w_.fidelity = fidelity_;
    const std::size_t n = w_.global_rank.size();
    op_marks_.resize(n);
    layer_marks_.resize(n);
    head_marks_.resize(n);
    last_task_.assign(n, -1);
  }

  // Sizes the graph's storage from the program: tasks per tensor-parallel group
  // times the groups simulated, plus transfers and data-parallel work.
  void reserve() {
    const std::size_t groups = w_.global_rank.size() / (fidelity_ == Fidelity::kFolded ? 1 : p_.tp);
    const std::size_t per_layer = layer_.forward.size() + layer_.backward.size() + layer_.recompute.size();
    const std::size_t ops = 2ull * p_.vpp * p_.num_microbatches();
    const std::size_t tasks = groups * (ops * (chunk_layers() * per_layer / 2 + 8)) +
                              w_.global_rank.size() * (ops + 64);
    const std::size_t ranks_per_group = fidelity_ == Fidelity::kFolded ? 1 : p_.tp;
    w_.graph.reserve(tasks, tasks * ranks_per_group, tasks + w_.global_rank.size() * ops * 2);
  }

  static std::string segment_name(const Segment& s) {
    if (s.is_comm) return to_string(s.op);
    if (s.ops.size() == 1) return s.ops.front().name;
    return s.ops.front().name + ".." + s.ops.back().name;
  }

  SegmentIds register_segments(const std::vector<Segment>& segs, Phase phase) {
    SegmentIds ids;
    for (const Segment& s : segs) {
      TaskLabel label{segment_name(s), s.is_comm ? Category::kTp : s.category, phase};
      ids.label.push_back(w_.graph.add_label(label));
      ids.detail.push_back(s.is_comm ? -1 : w_.graph.add_detail(s.ops));
    }
    return ids;
  }

  BlockIds register_block(const BlockSegments& b, const std::string&) {
    return {register_segments(b.forward, Phase::kForward),
            register_segments(b.backward, Phase::kBackward),
            register_segments(b.recompute, Phase::kRecompute)};
  }

  void build_programs() {
    const int m = p_.num_microbatches();
    programs_.resize(p_.pp);
    op_index_.resize(p_.pp);
    buckets_.resize(p_.pp);
    for (int r = 0; r < p_.pp; ++r) {
      buckets_[r] = grad_buckets(m_, p_, r);
      programs_[r] = pipeline_program(p_.schedule, p_.pp, p_.vpp, m, r);
      op_index_[r].assign(2 * p_.vpp * m, -1);
      for (int i = 0; i < static_cast<int>(programs_[r].size()); ++i) {
        const PipelineOp& op = programs_[r][i];
        op_index_[r][op_key(op.phase, op.chunk, op.microbatch)] = i;
      }
    }
  }

  int op_key(PipelinePhase phase, int chunk, int mb) const {
    return ((phase == PipelinePhase::kForward ? 0 : 1) * p_.vpp + chunk) * p_.num_microbatches() + mb;
  }

  std::vector<int> tp_group_gpus(int d, int r) const {
    std::vector<int> g;
    for (int t = 0; t < p_.tp; ++t) g.push_back(global(t, d, r));
    return g;
  }

  std::vector<int> dp_group_gpus(int t, int r) const {
    std::vector<int> g;
    for (int d = 0; d < p_.dp; ++d) g.push_back(global(t, d, r));
    return g;
  }

  // Interns the CommSpec of a collective, so repeated collectives share one entry.
  std::int32_t collective(CollectiveOp op, const std::vector<int>& group, double bytes,
                          Category category) {
    auto key = std::make_tuple(static_cast<int>(op), group.front(), group.size() > 1 ? group[1] - group[0] : 0,
                               static_cast<int>(group.size()), static_cast<long long>(bytes),
                               static_cast<int>(category));
    auto it = comm_ids_.find(key);
    if (it != comm_ids_.end()) return it->second;
    std::int32_t id = w_.graph.add_comm(cc_.collective(op, group, bytes, category));
    comm_ids_.emplace(key, id);
    return id;
  }

  // Interns the CommSpec of a pipeline transfer of one activation tensor.
  std::int32_t p2p(int src_gpu, int dst_gpu) {
    auto key = std::make_pair(src_gpu, dst_gpu);
    auto it = p2p_ids_.find(key);
    if (it != p2p_ids_.end()) return it->second;
    std::int32_t id = w_.graph.add_comm(cc_.p2p(src_gpu, dst_gpu, activation_bytes()));
    p2p_ids_.emplace(key, id);
    return id;
  }

  std::int32_t label(const std::string& name, Category category, Phase phase) {
    auto key = std::make_tuple(name, static_cast<int>(category), static_cast<int>(phase));
    auto it = label_ids_.find(key);
    if (it != label_ids_.end()) return it->second;
    std::int32_t id = w_.graph.add_label({name, category, phase});
    label_ids_.emplace(key, id);
    return id;
  }

  // Where a collapsed op (folded fidelity) must start or end a task: before a
  // block whose first task receives a dependency, after a block whose last task
  // gives one. Layers are indexed [op * chunk_layers + layer], the head [op], for
  // one stage's program; the embedding is at an op's start or end, always a boundary.
  struct Boundaries {
    std::vector<char> before;
    std::vector<char> after;
    std::vector<char> head_before;
    std::vector<char> head_after;
    void set(bool forward, int op, int lc, const BlockRef& block) {
      if (block.kind == ParamBlock::kLayer) {
        (forward ? before : after)[op * lc + block.layer] = 1;
      } else if (block.kind == ParamBlock::kFinalNorm || block.kind == ParamBlock::kOutputLayer) {
        (forward ? head_before : head_after)[op] = 1;
      }
    }
  };

  Boundaries boundaries_of_stage(int r) const {
    const auto& program = programs_[r];
    const int lc = chunk_layers();
    Boundaries b;
    b.before.assign(program.size() * lc, 0);
    b.after.assign(program.size() * lc, 0);
    b.head_before.assign(program.size(), 0);
    b.head_after.assign(program.size(), 0);
    if (p_.dp > 1 && p_.zero_stage == 3) {
      std::fill(b.before.begin(), b.before.end(), 1);
      std::fill(b.after.begin(), b.after.end(), 1);
      return b;
    }
    if (p_.dp == 1) return b;
    for (const GradBucket& bucket : buckets_[r]) {
      const BlockRef& edge = bucket.blocks.back();  // first used in the forward, last final in the backward
      if (p_.zero_stage >= 1 && p_.overlap_param_gather) b.set(true, first_forward_op(r, bucket.chunk), lc, edge);
      if (!p_.overlap_grad_reduce) continue;
      for (int oi = 0; oi < static_cast<int>(program.size()); ++oi) {
        const PipelineOp& op = program[oi];
        if (op.phase != PipelinePhase::kBackward || op.chunk != bucket.chunk) continue;
        if (p_.zero_stage == 2 || oi == last_backward_op(r, bucket.chunk)) b.set(false, oi, lc, edge);
      }
    }
    return b;
  }

  // A collective's time inside a collapsed stretch: statically costed, its
  // contention already in the rate (TopologyCommCosts::folded).
  static TimeNs collapsed_comm_ns(const CommSpec& spec) {
    TimeNs ns = spec.fixed_ns;
    if (spec.bytes > 0.0 && spec.rate_cap_bytes_per_s > 0.0) ns += seconds_to_ns(spec.bytes / spec.rate_cap_bytes_per_s);
    return ns;
  }

  // A block of a collapsed stretch (folded fidelity).
  struct PendingBlock {
    const std::vector<Segment>* segments;
    int layer;
  };
  std::vector<PendingBlock> pending_blocks_;
  std::vector<int> pending_layers_;

  // Emits one pipeline op (a forward or backward of one micro-batch through one
  // chunk) for the simulated members of a tensor-parallel group, who share its tasks.
  // Full fidelity: a task per compute segment and per collective. Folded: segments
  // and the (statically costed) collectives between them collapse into one task per
  // stretch between boundaries.
  class OpEmitter {
   public:
    // `shape`: which blocks the op has (its phase, and whether its chunk holds the
    // embedding or the head), 3 bits.
    OpEmitter(Builder& b, const std::vector<int>& members, const std::vector<int>& group, int oi,
              const PipelineOp& op, int chunk_first_layer, int shape, bool collapse)
        : b_(b), members_(members), group_(group), oi_(oi), op_(op),
          chunk_first_layer_(chunk_first_layer), collapse_(collapse), shape_(shape) {}

    // One block (embedding, layer j of the chunk, head); j < 0 for embedding/head.
    // Blocks are numbered in the op's order: a collapsed stretch is the range of
    // blocks [first, last] of an op of its shape, which names its detail.
    void block(const std::vector<Segment>& segs, const SegmentIds& ids, int j, bool split_before,
               bool split_after) {
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
        b_.op_marks_[member][oi_].add(t);
        if (j >= 0) b_.layer_marks_[member][oi_ * b_.chunk_layers() + j].add(t);
        if (j == kHeadBlock) b_.head_marks_[member][oi_].add(t);
      }
    }

    void compute_task(const Segment& s, const SegmentIds& ids, std::size_t k, int j) {
      TaskInfo info = info_for(j);
      info.detail = ids.detail[k];
      info.bytes = s.bytes;
      TaskId t = b_.w_.graph.add_shared_compute(members_, s.duration_ns, ids.label[k], info);
      if (prev_ >= 0 && prev_comm_) b_.w_.graph.add_dependency(prev_, t);
      prev_ = t;
      prev_comm_ = false;
      mark(t, j);
    }

    void comm_task(const Segment& s, std::int32_t label, int j) {
      if (b_.p_.tp == 1) return;
      TaskInfo info = info_for(j);
      info.bytes = s.comm_bytes;
      std::vector<std::pair<int, StreamKind>> slots;
      for (int member : members_) slots.emplace_back(member, StreamKind::kTpComm);
      TaskId t = b_.w_.graph.add_comm_task(
          slots, b_.collective(s.op, group_, s.comm_bytes, Category::kTp), label, info);
      if (prev_ >= 0) b_.w_.graph.add_dependency(prev_, t);
      prev_ = t;
      prev_comm_ = true;
      mark(t, j);
    }

    // Folded fidelity: remembers the block and adds up its time; the ops of a
    // stretch are only copied out (flush) the first time its shape is seen.
    void collect(const std::vector<Segment>& segs, int j) {
      const BlockSummary& sum = b_.block_summary(segs, group_);
      pending_.push_back({&segs, j >= 0 ? j : -1});
      pending_ns_ += sum.ns;
      pending_bytes_ += sum.bytes;
    }

    // The ops of the pending stretch, for its detail.
    std::vector<TaskGraph::DetailOp> pending_ops() const {
      std::vector<TaskGraph::DetailOp> ops;
      for (const PendingBlock& p : pending_) {
        for (const Segment& s : *p.segments) {
          if (s.is_comm) {
            if (b_.p_.tp == 1) continue;
            const CommSpec& spec = b_.w_.graph.comm(b_.collective(s.op, group_, s.comm_bytes, Category::kTp));
            ops.push_back({to_string(s.op), Category::kTp, collapsed_comm_ns(spec), 0.0, s.comm_bytes,
                           StreamKind::kTpComm, p.layer});
            continue;
          }
          for (TaskGraph::DetailOp op : s.ops) {
            op.layer_offset = p.layer;
            ops.push_back(std::move(op));
          }
        }
      }
      return ops;
    }

    void flush() {
      if (pending_.empty()) {
        pending_layers_.clear();
        pending_head_ = false;
        stretch_first_ = -1;
        return;
      }
      const bool forward = op_.phase == PipelinePhase::kForward;
      TaskInfo info = info_for(0);  // layer offsets count from the chunk's first layer
      // The same blocks on the same tensor-parallel group give the same ops.
      // Same group, op shape and block range: the same ops (group < 2^24 GPUs,
      // blocks per op < 2^16).
      const std::uint64_t key = static_cast<std::uint64_t>(group_.front()) << 40 |
                                static_cast<std::uint64_t>(shape_) << 32 |
                                static_cast<std::uint64_t>(stretch_first_) << 16 |
                                static_cast<std::uint64_t>(stretch_last_);
      info.detail = b_.intern_detail(key, [this] { return pending_ops(); });
      info.bytes = pending_bytes_;
      int first = -1, last = -1;
      if (!pending_layers_.empty()) {
        first = chunk_first_layer_ + std::min(pending_layers_.front(), pending_layers_.back());
        last = chunk_first_layer_ + std::max(pending_layers_.front(), pending_layers_.back());
      }
      const std::int32_t label = b_.stretch_label(forward, first, last);
      TaskId t = b_.w_.graph.add_shared_compute(members_, pending_ns_, label, info);
      prev_ = t;
      prev_comm_ = false;
      for (int member : members_) b_.op_marks_[member][oi_].add(t);
      for (int j : pending_layers_) {
        for (int member : members_) b_.layer_marks_[member][oi_ * b_.chunk_layers() + j].add(t);
      }
      if (pending_head_) {
        for (int member : members_) b_.head_marks_[member][oi_].add(t);
      }
      pending_head_ = false;
      pending_.clear();
      pending_ns_ = 0;
      pending_bytes_ = 0.0;
      pending_layers_.clear();
      stretch_first_ = -1;
    }

    Builder& b_;
    const std::vector<int>& members_;
    const std::vector<int>& group_;
    int oi_;
    PipelineOp op_;
    int chunk_first_layer_;
    bool collapse_;
    TaskId prev_ = -1;
    bool prev_comm_ = false;
    // The pending stretch (buffers the Builder keeps, so no op allocates).
    std::vector<PendingBlock>& pending_ = b_.pending_blocks_;
    TimeNs pending_ns_ = 0;
    double pending_bytes_ = 0.0;
    std::vector<int>& pending_layers_ = b_.pending_layers_;
    bool pending_head_ = false;  // the pending stretch holds the head block
    int shape_;              // phase, first virtual stage, last virtual stage (3 bits)
    int block_count_ = 0;    // blocks seen in this op
    int stretch_first_ = -1; // the pending stretch's blocks
    int stretch_last_ = -1;
  };

  // A block's time and bytes in a collapsed stretch (its collectives statically
  // costed on `group`); the cache is per tensor-parallel group (emit_tp_group).
  struct BlockSummary {
    TimeNs ns = 0;
    double bytes = 0.0;
  };
  const BlockSummary& block_summary(const std::vector<Segment>& segs, const std::vector<int>& group) {
    auto it = block_summaries_.find(&segs);
    if (it != block_summaries_.end()) return it->second;
    BlockSummary sum;
    for (const Segment& s : segs) {
      if (s.is_comm) {
        if (p_.tp == 1) continue;
        sum.ns += collapsed_comm_ns(w_.graph.comm(collective(s.op, group, s.comm_bytes, Category::kTp)));
        continue;
      }
      for (const TaskGraph::DetailOp& op : s.ops) {
        sum.ns += op.duration_ns;
        sum.bytes += op.bytes;
      }
    }
    return block_summaries_.emplace(&segs, sum).first->second;
  }

  // Collapsed blocks of the same shape share one detail; `make_ops` runs only for
  // a shape not seen before.
  template <typename MakeOps>
  std::int32_t intern_detail(std::uint64_t key, MakeOps make_ops) {
    auto it = detail_ids_.find(key);
    if (it != detail_ids_.end()) return it->second;
    std::int32_t id = w_.graph.add_detail(make_ops());
    detail_ids_.emplace(key, id);
    return id;
  }

  // The label of a collapsed stretch: "forward layers 3-5" (first < 0: no layer).
  std::int32_t stretch_label(bool forward, int first, int last) {
    const auto key = std::make_tuple(forward, first, last);
    auto it = stretch_label_ids_.find(key);
    if (it != stretch_label_ids_.end()) return it->second;
    const char* phase = forward ? "forward" : "backward";
    const std::string name = first < 0 ? std::string(phase) : fmt::format("{} layers {}-{}", phase, first, last);
    const std::int32_t id = label(name, Category::kGemm, forward ? Phase::kForward : Phase::kBackward);
    stretch_label_ids_.emplace(key, id);
    return id;
  }

  // Pass 1: the compute and tensor-parallel program of one tensor-parallel group.
  void emit_tp_group(int d, int r) {
    std::vector<int> members;
    for (int t = 0; t < p_.tp; ++t) {
      int s = sim_index(global(t, d, r));
      if (s >= 0) members.push_back(s);
    }
    const std::vector<int> group = tp_group_gpus(d, r);
    block_summaries_.clear();  // they hold this group's collective times
    const auto& program = programs_[r];
    const int lc = chunk_layers();
    for (int member : members) {
      op_marks_[member].assign(program.size(), Mark{});
      layer_marks_[member].assign(program.size() * lc, Mark{});
      head_marks_[member].assign(program.size(), Mark{});
    }
    const bool collapse = fidelity_ == Fidelity::kFolded;
    const Boundaries bounds = collapse ? boundaries_of_stage(r) : Boundaries{};
    auto before = [&](std::size_t oi, int j) { return collapse && bounds.before[oi * lc + j] != 0; };
    auto after = [&](std::size_t oi, int j) { return collapse && bounds.after[oi * lc + j] != 0; };
    auto head_before = [&](std::size_t oi) { return collapse && bounds.head_before[oi] != 0; };
    auto head_after = [&](std::size_t oi) { return collapse && bounds.head_after[oi] != 0; };
    const int last_vs = num_virtual_stages() - 1;
    for (std::size_t oi = 0; oi < program.size(); ++oi) {
      const PipelineOp& op = program[oi];
      const int vs = virtual_stage(p_.pp, r, op.chunk);
      const int shape = (op.phase == PipelinePhase::kForward ? 1 : 0) | (vs == 0 ? 2 : 0) | (vs == last_vs ? 4 : 0);
      OpEmitter e(*this, members, group, static_cast<int>(oi), op, vs * lc, shape, collapse);
      if (op.phase == PipelinePhase::kForward) {
        if (vs == 0) e.block(embedding_.forward, embedding_ids_.forward, kEmbeddingBlock, false, false);
        for (int j = 0; j < lc; ++j) {
          e.block(layer_.forward, layer_ids_.forward, j, before(oi, j), after(oi, j));
        }
        if (vs == last_vs) e.block(head_.forward, head_ids_.forward, kHeadBlock, head_before(oi), false);
      } else {
        if (vs == last_vs) e.block(head_.backward, head_ids_.backward, kHeadBlock, false, head_after(oi));
        for (int j = lc - 1; j >= 0; --j) {
          e.block(layer_.recompute, layer_ids_.recompute, j, before(oi, j), false);
          e.block(layer_.backward, layer_ids_.backward, j, false, after(oi, j));
        }
        if (vs == 0) e.block(embedding_.backward, embedding_ids_.backward, kEmbeddingBlock, false, false);
      }
      e.finish();
    }
    for (int member : members) {
      if (!program.empty()) last_task_[member] = op_marks_[member].back().last;
    }
  }

  double activation_bytes() const {
    // Megatron's scatter/gather optimisation (Narayanan et al. 2021, section 4.1) and
    // sequence parallelism both send 1/tp of the activation tensor per tensor-parallel rank.
    return static_cast<double>(m_.seq_length) * p_.micro_batch_size * m_.hidden_size *
           dtype_bytes(p_.dtype) / p_.tp;
  }

  // Pass 2: activations and gradients between pipeline stages, in each sender's order.
  void add_pipeline_transfers() {
    if (p_.pp == 1) return;
    const int last_vs = num_virtual_stages() - 1;
    const std::int32_t send_act = label("send activations", Category::kPp, Phase::kForward);
    const std::int32_t send_grad = label("send gradients", Category::kPp, Phase::kBackward);
    for (std::size_t i = 0; i < w_.global_rank.size(); ++i) {
      const int r = w_.stage[i];
      const auto& program = programs_[r];
      for (std::size_t oi = 0; oi < program.size(); ++oi) {
        const PipelineOp& op = program[oi];
        const int vs = virtual_stage(p_.pp, r, op.chunk);
        const bool forward = op.phase == PipelinePhase::kForward;
        if ((forward && vs == last_vs) || (!forward && vs == 0)) continue;
        const int to_vs = forward ? vs + 1 : vs - 1;
        const int to_stage = to_vs % p_.pp;
        const int to_chunk = to_vs / p_.pp;
        const int to_global = global(w_.tp_rank[i], w_.dp_rank[i], to_stage);
        const int j = sim_index(to_global);
        if (j < 0) continue;
        const int to_op = op_index_[to_stage][op_key(op.phase, to_chunk, op.microbatch)];
        TaskInfo info;
        info.microbatch = op.microbatch;
        info.chunk = op.chunk;
        info.bytes = activation_bytes();
        info.peer = j;
        std::int32_t comm = p2p(w_.global_rank[i], to_global);
        TaskId t = w_.graph.add_comm_task({{static_cast<int>(i), StreamKind::kPpSend}}, comm,
                                          forward ? send_act : send_grad, info);
        w_.graph.add_dependency(op_marks_[i][oi].last, t);
        w_.graph.add_dependency(t, op_marks_[j][to_op].first);
      }
    }
  }

  int last_backward_op(int r, int chunk) const {
    int last = -1;
    const auto& program = programs_[r];
    for (int i = 0; i < static_cast<int>(program.size()); ++i) {
      if (program[i].phase == PipelinePhase::kBackward && program[i].chunk == chunk) last = i;
    }
    return last;
  }

  int first_forward_op(int r, int chunk) const {
    const auto& program = programs_[r];
    for (int i = 0; i < static_cast<int>(program.size()); ++i) {
      if (program[i].phase == PipelinePhase::kForward && program[i].chunk == chunk) return i;
    }
    return -1;
  }

  // The tasks of a bucket's edge block in one op: the block that finishes last in
  // the backward and is used first in the forward (the embedding is at the op's end
  // or start).
  const Mark& edge_mark(int member, int op, const GradBucket& b) const {
    const BlockRef& edge = b.blocks.back();
    switch (edge.kind) {
      case ParamBlock::kLayer: return layer_marks_[member][op * chunk_layers() + edge.layer];
      case ParamBlock::kFinalNorm:
      case ParamBlock::kOutputLayer: return head_marks_[member][op];
      case ParamBlock::kWordEmbedding:
      case ParamBlock::kPositionEmbedding: break;
    }
    return op_marks_[member][op];
  }

  // The task after which a bucket's gradients of one backward op are final.
  TaskId bucket_ready(int member, int op, const GradBucket& b) const { return edge_mark(member, op, b).last; }

  // The first task that needs a bucket's weights in a forward op.
  TaskId bucket_first_use(int member, int op, const GradBucket& b) const { return edge_mark(member, op, b).first; }

  TaskId dp_comm(const std::vector<int>& members, std::int32_t comm, std::int32_t lbl,
                 const TaskInfo& info) {
    std::vector<std::pair<int, StreamKind>> slots;
    for (int member : members) slots.emplace_back(member, StreamKind::kDpComm);
    return w_.graph.add_comm_task(slots, comm, lbl, info);
  }

  // Pass 3: gradient reduction, ZeRO gathers, the optimizer step.
  void add_data_parallel_and_step() {
    const double e = dtype_bytes(p_.dtype);  // weights (parameter gathers)
    const double g = p_.grad_bytes();        // gradients (reductions)
    const std::size_t n = w_.global_rank.size();
    std::vector<TaskId> last_dp(n, -1);  // each rank's last gradient-reduction task

    const std::int32_t lbl_ar = label("grad all_reduce", Category::kDp, Phase::kBackward);
    const std::int32_t lbl_rs = label("grad reduce_scatter", Category::kDp, Phase::kBackward);
    const std::int32_t lbl_ag = label("param all_gather", Category::kZero, Phase::kStep);
    const std::int32_t lbl_ag_fwd = label("param all_gather", Category::kZero, Phase::kForward);
    const std::int32_t lbl_ag_bwd = label("param all_gather", Category::kZero, Phase::kBackward);

    for (int r = 0; r < p_.pp; ++r) {
      for (int t = 0; t < p_.tp; ++t) {
        std::vector<int> members;
        for (int d = 0; d < p_.dp; ++d) {
          int s = sim_index(global(t, d, r));
          if (s >= 0) members.push_back(s);
        }
        if (members.empty() || p_.dp == 1) continue;
        const std::vector<int> group = dp_group_gpus(t, r);
        const std::vector<GradBucket>& buckets = buckets_[r];
        const auto& program = programs_[r];

        if (p_.zero_stage == 3) {
          add_zero3(members, group, r, last_dp, lbl_ag_fwd, lbl_ag_bwd, lbl_rs);
          continue;
        }
        // ZeRO-1/2: the weights updated by the last step are gathered at this step's
        // start, overlapped with the forward (Megatron's --overlap-param-gather), each
        // bucket before its first use.
        if (p_.zero_stage >= 1 && p_.overlap_param_gather) {
          // Forward order: chunk by chunk, each chunk's buckets in reverse.
          std::vector<const GradBucket*> forward_order;
          for (auto it = buckets.rbegin(); it != buckets.rend(); ++it) forward_order.push_back(&*it);
          std::stable_sort(forward_order.begin(), forward_order.end(),
                           [](const GradBucket* a, const GradBucket* b) { return a->chunk < b->chunk; });
          for (const GradBucket* bucket : forward_order) {
            const GradBucket& b = *bucket;
            const double bytes = static_cast<double>(b.params) * e;
            TaskInfo info;
            info.chunk = b.chunk;
            info.bytes = bytes;
            TaskId ag = dp_comm(members, collective(CollectiveOp::kAllGather, group, bytes, Category::kZero),
                                lbl_ag_fwd, info);
            const int op = first_forward_op(r, b.chunk);
            for (int member : members) w_.graph.add_dependency(ag, bucket_first_use(member, op, b));
          }
        }
        // Gradient reduction: all-reduce (ZeRO-0) or reduce-scatter (ZeRO-1) once per
        // step after the last micro-batch; ZeRO-2 reduce-scatters every micro-batch.
        const CollectiveOp reduce = p_.zero_stage == 0 ? CollectiveOp::kAllReduce : CollectiveOp::kReduceScatter;
        const std::int32_t lbl = p_.zero_stage == 0 ? lbl_ar : lbl_rs;
        if (p_.zero_stage == 2) {
          for (std::size_t oi = 0; oi < program.size(); ++oi) {
            const PipelineOp& op = program[oi];
            if (op.phase != PipelinePhase::kBackward) continue;
            for (const GradBucket& b : buckets) {
              if (b.chunk != op.chunk) continue;
              const double bytes = static_cast<double>(b.params) * g;
              TaskInfo info;
              info.microbatch = op.microbatch;
              info.chunk = op.chunk;
              info.bytes = bytes;
              TaskId rs = dp_comm(members, collective(reduce, group, bytes, Category::kDp), lbl, info);
              for (int member : members) {
                TaskId ready = p_.overlap_grad_reduce ? bucket_ready(member, static_cast<int>(oi), b)
                                                      : op_marks_[member][oi].last;
                w_.graph.add_dependency(ready, rs);
                last_dp[member] = rs;
              }
            }
          }
        } else {
          for (const GradBucket& b : buckets) {
            const double bytes = static_cast<double>(b.params) * g;
            TaskInfo info;
            info.chunk = b.chunk;
            info.bytes = bytes;
            TaskId red = dp_comm(members, collective(reduce, group, bytes, Category::kDp), lbl, info);
            const int op = last_backward_op(r, b.chunk);
            for (int member : members) {
              TaskId ready = p_.overlap_grad_reduce ? bucket_ready(member, op, b) : last_task_[member];
              w_.graph.add_dependency(ready, red);
              last_dp[member] = red;
            }
          }
        }
        if (p_.zero_stage >= 1 && !p_.overlap_param_gather) {
          for (const GradBucket& b : buckets) {
            const double bytes = static_cast<double>(b.params) * e;
            TaskInfo info;
            info.chunk = b.chunk;
            info.bytes = bytes;
            step_gathers_spec_.push_back({members, collective(CollectiveOp::kAllGather, group, bytes, Category::kZero), info});
          }
        }
      }
    }
    add_embedding_sync(last_dp);
    add_step(last_dp, lbl_ag);
  }

  // ZeRO-3: every layer's weights are gathered before its forward and again before its
  // backward, and its gradients reduce-scattered after its backward, every micro-batch.
  void add_zero3(const std::vector<int>& members, const std::vector<int>& group, int r,
                 std::vector<TaskId>& last_dp, std::int32_t lbl_ag_fwd, std::int32_t lbl_ag_bwd,
                 std::int32_t lbl_rs) {
    const double e = dtype_bytes(p_.dtype);
    const double layer_params = static_cast<double>(layer_params_per_gpu(m_, p_.tp));
    const double layer_bytes = layer_params * e;
    const std::int32_t ag = collective(CollectiveOp::kAllGather, group, layer_bytes, Category::kZero);
    const std::int32_t rs = collective(CollectiveOp::kReduceScatter, group, layer_params * p_.grad_bytes(), Category::kDp);
    const int lc = chunk_layers();
    const auto& program = programs_[r];
    for (std::size_t oi = 0; oi < program.size(); ++oi) {
      const PipelineOp& op = program[oi];
      const bool forward = op.phase == PipelinePhase::kForward;
      // Layers in execution order within this op.
      for (int step = 0; step < lc; ++step) {
        const int j = forward ? step : lc - 1 - step;
        TaskInfo info;
        info.microbatch = op.microbatch;
        info.chunk = op.chunk;
        info.layer = virtual_stage(p_.pp, r, op.chunk) * lc + j;
        info.bytes = layer_bytes;
        TaskId gather = dp_comm(members, ag, forward ? lbl_ag_fwd : lbl_ag_bwd, info);
        // Prefetch: with overlap the gather of a layer may start once the layer two
        // before it has finished (two layers' weights live); without, once the previous
        // layer has finished.
        const int wait_steps = p_.overlap_param_gather ? 2 : 1;
        const int prev_step = step - wait_steps;
        for (int member : members) {
          if (prev_step >= 0) {
            const int pj = forward ? prev_step : lc - 1 - prev_step;
            w_.graph.add_dependency(layer_marks_[member][oi * lc + pj].last, gather);
          }
          w_.graph.add_dependency(gather, layer_marks_[member][oi * lc + j].first);
        }
        if (!forward) {
          TaskId red = dp_comm(members, rs, lbl_rs, info);
          for (int member : members) {
            w_.graph.add_dependency(layer_marks_[member][oi * lc + j].last, red);
            last_dp[member] = red;
          }
        }
      }
    }
  }

  // Tied embeddings with pp > 1: the first and last stages all-reduce the word
  // embedding's gradient (Megatron-LM's embedding group).
  void add_embedding_sync(std::vector<TaskId>& last_dp) {
    if (m_.untie_embeddings_and_output_weights || p_.pp == 1) return;
    const double bytes = static_cast<double>(m_.vocab_size) * m_.hidden_size / p_.tp * p_.grad_bytes();
    const std::int32_t lbl = label("embedding grad all_reduce", Category::kDp, Phase::kBackward);
    for (int d = 0; d < p_.dp; ++d) {
      for (int t = 0; t < p_.tp; ++t) {
        const int a = sim_index(global(t, d, 0));
        const int b = sim_index(global(t, d, p_.pp - 1));
        if (a < 0 || b < 0) continue;
        TaskInfo info;
        info.bytes = bytes;
        std::int32_t comm = collective(CollectiveOp::kAllReduce, {global(t, d, 0), global(t, d, p_.pp - 1)},
                                       bytes, Category::kDp);
        TaskId task = w_.graph.add_comm_task({{a, StreamKind::kDpComm}, {b, StreamKind::kDpComm}}, comm, lbl, info);
        for (int s : {a, b}) {
          w_.graph.add_dependency(last_task_[s], task);
          last_dp[s] = task;
        }
      }
    }
  }

  // The end of the step: a global gradient-norm all-reduce (gradient clipping), the
  // optimizer update of each rank's shard, and the weight gathers not overlapped.
  void add_step(std::vector<TaskId>& last_dp, std::int32_t lbl_ag) {
    const std::size_t n = w_.global_rank.size();
    const int world = layout_.world();
    TaskId norm = -1;
    if (world > 1) {
      std::vector<int> everyone(world);
      for (int g = 0; g < world; ++g) everyone[g] = g;
      // One fp32 partial norm per rank (Megatron-LM's clip_grad_norm_fp32).
      const CommSpec spec = cc_.latency_bound(CollectiveOp::kAllReduce, everyone, 4.0, Category::kDp);
      std::vector<std::pair<int, StreamKind>> slots;
      for (std::size_t i = 0; i < n; ++i) slots.emplace_back(static_cast<int>(i), StreamKind::kDpComm);
      TaskInfo info;
      info.bytes = 4.0;
      norm = w_.graph.add_comm_task(slots, w_.graph.add_comm(spec),
                                    label("grad norm all_reduce", Category::kDp, Phase::kStep), info);
      for (std::size_t i = 0; i < n; ++i) {
        w_.graph.add_dependency(last_task_[i], norm);
        if (last_dp[i] >= 0) w_.graph.add_dependency(last_dp[i], norm);
      }
    }
    const std::int32_t lbl_opt = label("optimizer step", Category::kOptimizer, Phase::kStep);
    const std::int32_t lbl_d2h = label("gradients to host", Category::kCopy, Phase::kStep);
    const std::int32_t lbl_host = label("host optimizer step", Category::kOptimizer, Phase::kStep);
    const std::int32_t lbl_h2d = label("weights to device", Category::kCopy, Phase::kStep);
    std::vector<TaskId> updated(n, -1);
    for (std::size_t i = 0; i < n; ++i) {
      const double params = static_cast<double>(stage_params_per_gpu(m_, p_, w_.stage[i]));
      const double shard = p_.zero_stage >= 1 ? params / p_.dp : params;
      TaskInfo info;
      const int rank = static_cast<int>(i);
      if (p_.offload_optimizer) {
        info.bytes = shard * dtype_bytes(p_.dtype);
        TaskId d2h = w_.graph.add_compute(rank, StreamKind::kCopy, oc_.host_copy_ns(info.bytes), lbl_d2h, info);
        // The three run back to back on the copy stream: gradients down, the host's
        // Adam update, weights back up.
        w_.graph.add_compute(rank, StreamKind::kCopy, oc_.host_optimizer_ns(shard), lbl_host, info);
        TaskId h2d = w_.graph.add_compute(rank, StreamKind::kCopy, oc_.host_copy_ns(info.bytes), lbl_h2d, info);
        w_.graph.add_dependency(norm >= 0 ? norm : last_task_[i], d2h);
        updated[i] = h2d;
      } else {
        // The update reads the gradient in its accumulation dtype.
        info.bytes = shard * (o_.optimizer_bytes_per_param - dtype_bytes(p_.dtype) + p_.grad_bytes());
        TaskId opt = w_.graph.add_compute(rank, StreamKind::kCompute, oc_.optimizer_ns(info.bytes), lbl_opt, info);
        if (norm >= 0) w_.graph.add_dependency(norm, opt);
        updated[i] = opt;
      }
    }
    for (const GatherSpec& g : step_gathers_spec_) {
      TaskId ag = dp_comm(g.members, g.comm, lbl_ag, g.info);
      for (int member : g.members) w_.graph.add_dependency(updated[member], ag);
    }
  }

  struct GatherSpec {
    std::vector<int> members;
    std::int32_t comm;
    TaskInfo info;
  };

  const ModelSpec& m_;
  const PlanSpec& p_;
  const RankLayout layout_;
  const OpCosts& oc_;
  const CommCosts& cc_;
  Fidelity fidelity_;
  WorkloadOptions o_;
  Workload w_;
  std::vector<int> sim_of_global_;
  BlockSegments layer_, embedding_, head_;
  BlockIds layer_ids_, embedding_ids_, head_ids_;
  std::vector<std::vector<PipelineOp>> programs_;
  std::vector<std::vector<int>> op_index_;
  std::vector<std::vector<GradBucket>> buckets_;  // [pipeline rank]
  std::vector<std::vector<Mark>> op_marks_;     // [rank][op]
  std::vector<std::vector<Mark>> layer_marks_;  // [rank][op * chunk_layers + layer]
  std::vector<std::vector<Mark>> head_marks_;   // [rank][op]: the head block
  std::vector<TaskId> last_task_;
  std::vector<GatherSpec> step_gathers_spec_;
  std::map<std::tuple<int, int, int, int, long long, int>, std::int32_t> comm_ids_;
  std::map<std::tuple<std::string, int, int>, std::int32_t> label_ids_;
  std::map<std::pair<int, int>, std::int32_t> p2p_ids_;
  std::unordered_map<std::uint64_t, std::int32_t> detail_ids_;
  std::map<std::tuple<bool, int, int>, std::int32_t> stretch_label_ids_;
  std::unordered_map<const std::vector<Segment>*, BlockSummary> block_summaries_;
};

}  // namespace

Workload build_workload(const ModelSpec& model, const PlanSpec& plan, const OpCosts& op_costs,
                        const CommCosts& comm_costs, Fidelity fidelity,
                        const WorkloadOptions& options) {
  if (plan.dp <= 0) throw InternalError("build_workload: the plan's dp is not resolved");
  return Builder(model, plan, op_costs, comm_costs, fidelity, options).build();
}

}  // namespace strata::sim
