#include "sim/workload/build.h"

#include <algorithm>

#include "core/error.h"
#include "sim/workload/segments.h"

namespace strata::sim {

WorkloadBuild::WorkloadBuild(const ModelSpec& m, const PlanSpec& p, const OpCosts& oc, const CommCosts& cc,
                             Fidelity f, const WorkloadOptions& o)
    : model(m), plan(p), layout(p), expert_layout(p.moe.active ? expert_rank_layout(p) : RankLayout(p)), op_costs(oc), comm_costs(cc), fidelity(f), options(o), stage_split(pipeline_split(m, p)),
      chunk_stride_(stage_split.max_chunk_layers()),
      layer_modules_(module_hooks() ? static_cast<int>(layer_parameter_modules(m, p).size()) : 0) {}

std::vector<int> WorkloadBuild::tp_group_gpus(int d, int r) const {
  std::vector<int> g;
  for (int t = 0; t < plan.tp; ++t) g.push_back(global(t, d, r));
  return g;
}

std::vector<int> WorkloadBuild::cp_group_gpus(int t, int d, int r) const {
  std::vector<int> g;
  const int first = d - d % plan.cp;
  for (int c = 0; c < plan.cp; ++c) g.push_back(global(t, first + c, r));
  return g;
}

double WorkloadBuild::activation_bytes() const {
  // With sequence parallelism each tensor-parallel rank holds, and sends, 1/tp of
  // the activation; without it every rank holds the whole tensor and sends it all
  // (Megatron-Core; strata run), unless the framework scatters it (Megatron-LM's
  // scatter/gather optimisation, Narayanan et al. 2021 section 4.1). The
  // receivers' all-gather that then rebuilds it is not modelled.
  // A context-parallel rank sends its own seq_length / cp tokens.
  const double whole = static_cast<double>(model.seq_length / plan.cp) * plan.micro_batch_size * model.hidden_size *
                       dtype_bytes(plan.dtype);
  const bool split = plan.sequence_parallel || options.pipeline_scatter_gather;
  return split ? whole / plan.tp : whole;
}

WorkloadBuild::BlockSlot WorkloadBuild::block_slot(int op, const BlockRef& block) const {
  switch (block.kind) {
    case ParamBlock::kLayer: return {BlockSlot::In::kLayer, op * chunk_layers() + block.layer};
    case ParamBlock::kFinalNorm:
    case ParamBlock::kOutputLayer:
    case ParamBlock::kMtp: return {BlockSlot::In::kHead, op};
    case ParamBlock::kWordEmbedding:
    case ParamBlock::kPositionEmbedding: break;
  }
  return {BlockSlot::In::kOp, op};
}

const Mark& WorkloadBuild::mark(int sim_rank, const BlockSlot& slot) const {
  switch (slot.in) {
    case BlockSlot::In::kLayer: return layer_marks[sim_rank][slot.index];
    case BlockSlot::In::kHead: return head_marks[sim_rank][slot.index];
    case BlockSlot::In::kOp: break;
  }
  return op_marks[sim_rank][slot.index];
}

void WorkloadBuild::build_programs() {
  const int m = plan.num_microbatches();
  programs.resize(plan.pp);
  op_index.resize(plan.pp);
  buckets.resize(plan.pp);
  last_backward_.assign(plan.pp, std::vector<int>(plan.vpp, -1));
  first_forward_.assign(plan.pp, std::vector<int>(plan.vpp, -1));
  for (int r = 0; r < plan.pp; ++r) {
    programs[r] = pipeline_program(plan.schedule, plan.pp, plan.vpp, m, r);
    buckets[r] = grad_buckets(model, plan, r, programs[r]);
    op_index[r].assign(3 * plan.vpp * m, -1);
    for (int i = 0; i < static_cast<int>(programs[r].size()); ++i) {
      const PipelineOp& op = programs[r][i];
      op_index[r][op_key(op.phase, op.chunk, op.microbatch)] = i;
      if (computes_weight_grads(op, plan.schedule)) last_backward_[r][op.chunk] = i;
      if (op.phase == PipelinePhase::kForward && first_forward_[r][op.chunk] < 0) first_forward_[r][op.chunk] = i;
    }
  }
}

TaskId WorkloadBuild::compute(int rank, StreamKind stream, Duration duration, std::int32_t label,
                              const TaskInfo& info) {
  const TaskId t = w.graph.add_compute(rank, stream_index(stream), duration);
  w.notes.add(t, label, info);
  return t;
}

TaskId WorkloadBuild::shared_compute(const std::vector<int>& ranks, Duration duration, std::int32_t label,
                                     const TaskInfo& info) {
  const TaskId t = w.graph.add_shared_compute(ranks, stream_index(StreamKind::kCompute), duration);
  w.notes.add(t, label, info);
  return t;
}

TaskId WorkloadBuild::comm_task(const std::vector<std::pair<int, int>>& slots, std::int32_t comm,
                                std::int32_t label, const TaskInfo& info) {
  const TaskId t = w.graph.add_comm_task(slots, comm);
  w.notes.add(t, label, info);
  return t;
}

void WorkloadBuild::issue(const std::vector<int>& ranks, TaskId task, std::size_t kernels, Phase phase) {
  if (!options.host_dispatch || kernels == 0) return;
  const double per_kernel_s = options.host_dispatch->per_kernel_us * 1e-6;
  const std::int32_t lbl = label("kernel issue", Category::kHost, phase);
  const int host = stream_index(StreamKind::kHost);
  // Members of a tensor-parallel group issue in lockstep: one shared task.
  TaskId first = w.graph.add_shared_compute(ranks, host, Duration::from_seconds(per_kernel_s));
  w.notes.add(first, lbl, TaskInfo{});
  w.graph.add_dependency(first, task);
  TaskId last = first;
  if (kernels > 1) {
    last = w.graph.add_shared_compute(ranks, host, Duration::from_seconds(per_kernel_s * static_cast<double>(kernels - 1)));
    w.notes.add(last, lbl, TaskInfo{});
  }
  if (issued_by_.size() <= static_cast<std::size_t>(task)) {
    issued_by_.resize(static_cast<std::size_t>(task) + 1, -1);
    issued_first_by_.resize(static_cast<std::size_t>(task) + 1, -1);
  }
  issued_by_[task] = last;
  issued_first_by_[task] = first;
}

void WorkloadBuild::issue_after(TaskId task, TaskId gpu_task) {
  if (static_cast<std::size_t>(task) >= issued_first_by_.size() || issued_first_by_[task] < 0) return;
  w.graph.add_dependency(gpu_task, issued_first_by_[task]);
}

void WorkloadBuild::delay_issue(TaskId task, Duration extra) {
  if (static_cast<std::size_t>(task) >= issued_first_by_.size() || issued_first_by_[task] < 0) return;
  w.graph.extend(issued_first_by_[task], extra);
}

void WorkloadBuild::depend(TaskId before, TaskId task) {
  w.graph.add_dependency(before, task);
  if (static_cast<std::size_t>(before) < issued_by_.size() && issued_by_[before] >= 0) {
    w.graph.add_dependency(issued_by_[before], task);
  }
}

template <typename Cost>
std::int32_t WorkloadBuild::interned_comm(const CommKey& key, Cost&& cost) {
  for (const auto& [recent, id] : recent_comms_) {
    if (id >= 0 && recent == key) return id;
  }
  std::int32_t id = -1;
  if (auto it = comm_ids_.find(key); it != comm_ids_.end()) {
    id = it->second;
  } else {
    id = w.graph.add_comm(cost());
    comm_ids_.emplace(key, id);
  }
  recent_comms_[next_recent_comm_] = {key, id};
  next_recent_comm_ = (next_recent_comm_ + 1) % recent_comms_.size();
  return id;
}

std::int32_t WorkloadBuild::collective(CollectiveOp op, const std::vector<int>& group, double bytes) {
  const CommKey key{static_cast<int>(op), group.front(), group.size() > 1 ? group[1] - group[0] : 0,
                    static_cast<int>(group.size()), static_cast<long long>(bytes), -1, 0LL};
  return interned_comm(key, [&] { return comm_costs.collective(op, group, bytes); });
}

std::vector<int> WorkloadBuild::expert_group(CommGroup which, int global_rank) const {
  switch (which) {
    case CommGroup::kExpert: return expert_layout.group(GroupKind::kExpert, global_rank);
    case CommGroup::kExpertTensor: return expert_layout.group(GroupKind::kTensor, global_rank);
    case CommGroup::kExpertModel: {
      // etp x ep: the ranks of the same expert data-parallel rank and stage.
      std::vector<int> g;
      RankCoord c = expert_layout.coord(global_rank);
      for (int e = 0; e < plan.moe.ep; ++e) {
        for (int t = 0; t < plan.moe.etp; ++t) {
          c.ep = e;
          c.tp = t;
          g.push_back(expert_layout.rank(c));
        }
      }
      std::sort(g.begin(), g.end());
      return g;
    }
    case CommGroup::kExpertNode:
    case CommGroup::kExpertRail: {
      // The expert-parallel group split by node: this rank's node's members, or
      // the members at this rank's place within their nodes.
      const std::vector<int> ep = expert_layout.group(GroupKind::kExpert, global_rank);
      std::vector<int> nodes;  // in the order the group reaches them
      for (int r : ep) {
        if (std::find(nodes.begin(), nodes.end(), node_of(r)) == nodes.end()) nodes.push_back(node_of(r));
      }
      auto on = [&](int node) {
        std::vector<int> members;
        for (int r : ep) {
          if (node_of(r) == node) members.push_back(r);
        }
        return members;
      };
      const std::vector<int> mine = on(node_of(global_rank));
      if (which == CommGroup::kExpertNode) return mine;
      const auto place = std::find(mine.begin(), mine.end(), global_rank) - mine.begin();
      std::vector<int> rail;
      for (int node : nodes) {
        const std::vector<int> members = on(node);
        if (place < static_cast<std::ptrdiff_t>(members.size())) rail.push_back(members[static_cast<std::size_t>(place)]);
      }
      std::sort(rail.begin(), rail.end());
      return rail;
    }
    case CommGroup::kTensor:
    case CommGroup::kContext: break;
  }
  throw InternalError("expert_group: not an expert group");
}

std::int32_t WorkloadBuild::expert_collective(CollectiveOp op, CommGroup which, const std::vector<int>& tp_group,
                                              double bytes) {
  const auto key = std::make_tuple(static_cast<int>(op), static_cast<int>(which), tp_group.front(),
                                   static_cast<long long>(bytes));
  auto it = expert_comm_ids_.find(key);
  if (it != expert_comm_ids_.end()) return it->second;
  std::map<std::vector<int>, int> members_in;  // each member's group -> how many members it holds
  for (int g : tp_group) ++members_in[expert_group(which, g)];
  std::int32_t id = -1;
  const auto& [first_group, first_count] = *members_in.begin();
  if (fidelity == Fidelity::kFolded || (members_in.size() == 1 && first_count == static_cast<int>(first_group.size()))) {
    id = collective(op, fidelity == Fidelity::kFolded ? expert_group(which, tp_group.front()) : first_group, bytes);
  } else {
    std::vector<std::pair<std::vector<int>, double>> shares;
    for (const auto& [group, count] : members_in) {
      shares.emplace_back(group, static_cast<double>(count) / static_cast<double>(group.size()));
    }
    id = w.graph.add_comm(merged_shares(op, shares, bytes));
  }
  expert_comm_ids_.emplace(key, id);
  return id;
}

CommSpec WorkloadBuild::merged_shares(CollectiveOp op, const std::vector<std::pair<std::vector<int>, double>>& shares,
                                      double bytes) const {
  CommSpec merged;
  std::map<std::int32_t, double> load;  // link -> bytes per byte of the collective, summed over the shares
  bool first = true;
  for (const auto& [group, share] : shares) {
    const CommSpec s = comm_costs.collective(op, group, bytes);
    for (std::size_t i = 0; i < s.links.size(); ++i) load[s.links[i]] += s.link_weight(i) * share;
    if (first) {
      merged = s;
      first = false;
    } else if (s.rate_cap_bytes_per_s > 0.0) {
      // The task ends with its slowest share.
      merged.fixed = std::max(merged.fixed, s.fixed);
      merged.rate_cap_bytes_per_s = merged.rate_cap_bytes_per_s > 0.0
                                        ? std::min(merged.rate_cap_bytes_per_s, s.rate_cap_bytes_per_s)
                                        : s.rate_cap_bytes_per_s;
    }
  }
  merged.drop_links();  // one flow over the shares' summed loads
  for (const auto& [link, weight] : load) {
    merged.links.push_back(link);
    merged.link_weights.push_back(weight);
  }
  return merged;
}

std::int32_t WorkloadBuild::cp_ring_transfer(const std::vector<int>& tp_group, double bytes) {
  const auto key = std::make_tuple(tp_group.front(), static_cast<long long>(bytes));
  auto it = cp_ring_comm_ids_.find(key);
  if (it != cp_ring_comm_ids_.end()) return it->second;
  std::vector<std::pair<std::vector<int>, double>> edges;
  for (int g : tp_group) {
    const RankCoord c = layout.coord(g);
    RankCoord next = c;
    next.cp = (c.cp + 1) % plan.cp;
    edges.push_back({{g, layout.rank(next)}, 1.0});
  }
  const std::int32_t id = w.graph.add_comm(merged_shares(CollectiveOp::kSendRecv, edges, bytes));
  cp_ring_comm_ids_.emplace(key, id);
  return id;
}

std::int32_t WorkloadBuild::collective_beside(CollectiveOp op, const std::vector<int>& group, double bytes,
                                              CollectiveOp partner, double partner_bytes) {
  const CommKey key{static_cast<int>(op), group.front(), group.size() > 1 ? group[1] - group[0] : 0,
                    static_cast<int>(group.size()), static_cast<long long>(bytes), static_cast<int>(partner),
                    static_cast<long long>(partner_bytes)};
  return interned_comm(key, [&] { return comm_costs.collective_beside(op, group, bytes, partner, partner_bytes); });
}

std::int32_t WorkloadBuild::p2p(int src_gpu, int dst_gpu) {
  auto key = std::make_pair(src_gpu, dst_gpu);
  auto it = p2p_ids_.find(key);
  if (it != p2p_ids_.end()) return it->second;
  std::int32_t id = w.graph.add_comm(comm_costs.p2p(src_gpu, dst_gpu, activation_bytes()));
  p2p_ids_.emplace(key, id);
  return id;
}

std::int32_t WorkloadBuild::label(const std::string& name, Category category, Phase phase) {
  auto key = std::make_tuple(name, static_cast<int>(category), static_cast<int>(phase));
  auto it = label_ids_.find(key);
  if (it != label_ids_.end()) return it->second;
  std::int32_t id = w.notes.add_label({name, category, phase});
  label_ids_.emplace(key, id);
  return id;
}

}  // namespace strata::sim
