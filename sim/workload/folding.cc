#include "sim/workload/folding.h"

#include <algorithm>
#include <array>
#include <map>
#include <string>

#include <fmt/format.h>

namespace strata::sim {

void place_ranks(WorkloadBuild& b) {
  const PlanSpec& p = b.plan;
  b.sim_of_global.assign(b.layout.world(), -1);
  for (int r = 0; r < p.pp; ++r) {
    for (int d = 0; d < p.grad_replicas(); ++d) {
      for (int t = 0; t < p.tp; ++t) {
        if (b.fidelity == Fidelity::kFolded && (t != 0 || d != 0)) continue;
        const int g = b.global(t, d, r);
        b.sim_of_global[g] = static_cast<int>(b.w.global_rank.size());
        b.w.global_rank.push_back(g);
        b.w.stage.push_back(r);
        b.w.tp_rank.push_back(t);
        b.w.dp_rank.push_back(d);
      }
    }
  }
  b.w.fidelity = b.fidelity;
  const std::size_t n = b.w.global_rank.size();
  b.op_marks.resize(n);
  b.layer_marks.resize(n);
  b.head_marks.resize(n);
  if (b.module_hooks()) {
    b.hook_first.resize(n);
    b.hook_prev.resize(n);
  }
  b.last_task.assign(n, -1);
}

namespace {

// Marks a block's slot (WorkloadBuild::block_slot) as a boundary before (forward)
// or after (backward) it; the embeddings' slot is the whole op, already bounded.
void set_boundary(Boundaries& bounds, bool forward, const WorkloadBuild::BlockSlot& slot) {
  using In = WorkloadBuild::BlockSlot::In;
  switch (slot.in) {
    case In::kLayer: (forward ? bounds.before : bounds.after)[slot.index] = 1; break;
    case In::kHead: (forward ? bounds.head_before : bounds.head_after)[slot.index] = 1; break;
    case In::kOp: break;
  }
}

}  // namespace

Boundaries collapse_boundaries(const WorkloadBuild& b, int r) {
  const PlanSpec& p = b.plan;
  const auto& program = b.programs[r];
  const int lc = b.chunk_layers();
  Boundaries bounds;
  bounds.before.assign(program.size() * lc, 0);
  bounds.after.assign(program.size() * lc, 0);
  bounds.head_before.assign(program.size(), 0);
  bounds.head_after.assign(program.size(), 0);
  if (p.grad_replicas() > 1 && p.zero_stage == 3) {
    std::fill(bounds.before.begin(), bounds.before.end(), 1);
    std::fill(bounds.after.begin(), bounds.after.end(), 1);
    return bounds;
  }
  if (p.grad_replicas() == 1) return bounds;
  // The ops that compute each chunk's weight gradients, in program order.
  std::vector<std::vector<int>> weight_grad_ops;
  for (int oi = 0; oi < static_cast<int>(program.size()); ++oi) {
    const PipelineOp& op = program[oi];
    if (!computes_weight_grads(op, p.schedule)) continue;
    if (static_cast<int>(weight_grad_ops.size()) <= op.chunk) weight_grad_ops.resize(op.chunk + 1);
    weight_grad_ops[op.chunk].push_back(oi);
  }
  for (const GradBucket& bucket : b.buckets[r]) {
    const BlockRef& edge = bucket.blocks.back();  // first used in the forward, last final in the backward
    if (p.zero_stage >= 1 && p.overlap_param_gather) {
      set_boundary(bounds, true, b.block_slot(b.first_forward_op(r, bucket.chunk), edge));
    }
    if (!p.overlap_grad_reduce || bucket.chunk >= static_cast<int>(weight_grad_ops.size())) continue;
    if (p.zero_stage == 2) {  // reduce-scattered after every op that computes them
      for (int oi : weight_grad_ops[bucket.chunk]) set_boundary(bounds, false, b.block_slot(oi, edge));
      continue;
    }
    // Reduced once, after the chunk's last backward (if that op computes them).
    const int last = b.last_backward_op(r, bucket.chunk);
    if (computes_weight_grads(program[static_cast<std::size_t>(last)], p.schedule)) {
      set_boundary(bounds, false, b.block_slot(last, edge));
    }
  }
  return bounds;
}

Category comm_category(const Segment& s) {
  if (s.group == CommGroup::kContext) return Category::kCp;
  return is_expert_group(s.group) ? Category::kEp : Category::kTp;
}

const OpName& op_name(CollectiveOp op) {
  constexpr std::size_t kOps = static_cast<std::size_t>(CollectiveOp::kSendRecv) + 1;  // the last kind
  static const std::array<OpName, kOps> names = [] {
    std::array<OpName, kOps> out;
    for (std::size_t i = 0; i < kOps; ++i) out[i] = OpName(to_string(static_cast<CollectiveOp>(i)));
    return out;
  }();
  return names[static_cast<std::size_t>(op)];
}

TimeNs collapsed_comm_ns(const CommSpec& spec) {
  TimeNs ns = spec.fixed.ns();
  if (spec.bytes > 0.0 && spec.rate_cap_bytes_per_s > 0.0) ns += seconds_to_ns(spec.bytes / spec.rate_cap_bytes_per_s);
  return ns;
}

TimeNs beside_exposed_ns(const std::vector<Segment>& segs, std::size_t k, TimeNs comm_ns) {
  if (!segs[k].beside_next) return comm_ns;
  TimeNs run = 0;
  for (std::size_t i = k + 1; i < segs.size(); ++i) {
    if (segs[i].is_comm) continue;  // queued behind the exchange: counted on its own
    run += segs[i].duration_ns;
    if (segs[i].beside_end) break;
  }
  return std::max<TimeNs>(0, comm_ns - run);
}

const CollapsedStretches::BlockSummary& CollapsedStretches::summary(const std::vector<Segment>& segs,
                                                                    const CommOf& comm_of) {
  auto it = block_summaries_.find(&segs);
  if (it != block_summaries_.end()) return it->second;
  BlockSummary sum;
  for (const Segment& s : segs) {
    if (s.is_comm) sum.comms.push_back(comm_of(s));
  }
  // Its time is its ops' (each collective's as the block exposes it), its bytes and
  // kernels its compute ops'.
  for_each_block_op(segs, sum.comms, b_.w.graph, 0, [&sum](const DetailOp& op, const Segment& s) {
    sum.ns += op.duration_ns;
    if (!s.is_comm) {
      sum.bytes += op.bytes;
      ++sum.kernels;
    }
    sum.totals.add(op);
  });
  return block_summaries_.emplace(&segs, sum).first->second;
}

std::int32_t CollapsedStretches::detail(std::uint64_t key, const std::vector<Block>& blocks) {
  if (const int* id = detail_ids_.find(key)) return *id;
  std::int32_t id = -1;
  if (b_.options.detail_ops) {
    std::vector<DetailOp> ops;
    for (const Block& block : blocks) {
      for_each_block_op(*block.segments, block.summary->comms, b_.w.graph, block.layer,
                        [&ops](const DetailOp& op, const Segment&) { ops.push_back(op); });
    }
    id = b_.w.notes.add_detail(std::move(ops));
  } else {
    DetailTotals totals;
    for (const Block& block : blocks) totals.add(block.summary->totals);
    id = b_.w.notes.add_detail_totals(totals);
  }
  detail_ids_.insert(key, id);
  return id;
}

std::int32_t CollapsedStretches::label(Phase phase, int first, int last) {
  // Layers from -1 (none) up, below 2^24.
  const std::uint64_t key = static_cast<std::uint64_t>(phase) << 48 | static_cast<std::uint64_t>(first + 1) << 24 |
                            static_cast<std::uint64_t>(last + 1);
  if (const int* id = stretch_label_ids_.find(key)) return *id;
  // The name, formatted once per thread for every plan it builds (a sweep's
  // plans name the same few hundred layer ranges).
  thread_local std::map<std::uint64_t, std::string> names;
  auto named = names.find(key);
  if (named == names.end()) {
    const char* what = phase == Phase::kForward ? "forward" : phase == Phase::kBackward ? "backward" : "weight grads";
    named = names.emplace(key, first < 0 ? std::string(what) : fmt::format("{} layers {}-{}", what, first, last)).first;
  }
  // Only collapsed stretches make these names, and this map already keeps one per
  // (phase, layers): straight to the annotations.
  const std::int32_t id = b_.w.notes.add_label({named->second, Category::kGemm, phase});
  stretch_label_ids_.insert(key, id);
  return id;
}

}  // namespace strata::sim
