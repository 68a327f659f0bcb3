#include "sim/workload/data_parallel.h"

#include <algorithm>
#include <set>
#include <unordered_map>

#include "plan/params.h"
#include "sim/workload/zero3_modules.h"

namespace strata::sim {
namespace {

class DataParallelPass {
 public:
  explicit DataParallelPass(WorkloadBuild& b)
      : b_(b), m_(b.model), p_(b.plan), oc_(b.op_costs), cc_(b.comm_costs) {}

  // The tasks of a bucket's edge block in one op: the block that finishes last in
  // the backward and is used first in the forward (the embedding is at the op's end
  // or start).
  const Mark& edge_mark(int member, int op, const GradBucket& b) const {
    return b_.mark(member, b_.block_slot(op, b.blocks.back()));
  }

  // The task after which a bucket's gradients of one backward op are final.
  TaskId bucket_ready(int member, int op, const GradBucket& b) const { return edge_mark(member, op, b).last; }

  // The first task that needs a bucket's weights in a forward op.
  TaskId bucket_first_use(int member, int op, const GradBucket& b) const { return edge_mark(member, op, b).first; }

  TaskId dp_comm(const std::vector<int>& members, std::int32_t comm, std::int32_t lbl,
                 const TaskInfo& info) {
    return dp_comm(members, StreamKind::kDpComm, comm, lbl, info);
  }
  TaskId dp_comm(const std::vector<int>& members, StreamKind lane, std::int32_t comm, std::int32_t lbl,
                 const TaskInfo& info) {
    slots_.clear();  // reused: a ZeRO-3 step issues thousands
    for (int member : members) slots_.emplace_back(member, stream_index(lane));
    return b_.comm_task(slots_, comm, lbl, info);
  }

  // The simulated ranks of one (tensor rank, stage) across the replicas, each with
  // its replica index d.
  struct Member {
    int d;
    int sim;
  };

  // A partition of one (tensor rank, stage)'s replicas into groups, placed once per
  // pass: each group's simulated members and GPUs, and each member's group.
  struct Placed {
    std::vector<std::vector<int>> sims;  // simulated ranks of each group
    std::vector<std::vector<int>> gpus;  // GPUs of each group (simulated or not)
    std::vector<int> group_of;           // entry i of the members -> its group
  };
  // The ZeRO shard groups (PlanSpec::zero_shard_group_of: consecutive replicas,
  // within a node first) or, with hybrid sharding, the groups across them (the
  // replicas holding the same shard).
  Placed place(const std::vector<Member>& members, int t, int r, bool across) const {
    Placed g;
    const int groups = across ? p_.zero_shards() : p_.zero_shard_groups();
    auto group_of = [&](int d) { return across ? p_.zero_shard_rank_of(d) : p_.zero_shard_group_of(d); };
    g.sims.resize(groups);
    g.gpus.resize(groups);
    for (int d = 0; d < p_.grad_replicas(); ++d) g.gpus[group_of(d)].push_back(b_.global(t, d, r));
    for (const Member& m : members) {
      g.sims[group_of(m.d)].push_back(m.sim);
      g.group_of.push_back(group_of(m.d));
    }
    return g;
  }
  // One (tensor rank, stage)'s members and their two partitions.
  struct Replicas {
    std::vector<Member> members;
    Placed shards, across;
  };

  // One collective per group that has simulated members, costed on that group's
  // GPUs by `cost` (the comm id for a GPU list); returns, per entry of the
  // members, its group's task.
  template <typename Cost>
  std::vector<TaskId> grouped_comm(const Placed& g, StreamKind lane, Cost&& cost, std::int32_t lbl,
                                   const TaskInfo& info) {
    std::vector<TaskId> task(g.sims.size(), -1);
    for (std::size_t k = 0; k < g.sims.size(); ++k) {
      if (!g.sims[k].empty()) task[k] = dp_comm(g.sims[k], lane, cost(g.gpus[k]), lbl, info);
    }
    if (task.size() == 1) return std::vector<TaskId>(g.group_of.size(), task[0]);
    std::vector<TaskId> out;
    for (int k : g.group_of) out.push_back(task[k]);
    return out;
  }
  std::vector<TaskId> grouped_comm(const Placed& g, StreamKind lane, CollectiveOp op, double bytes, std::int32_t lbl,
                                   const TaskInfo& info) {
    return grouped_comm(
        g, lane, [&](const std::vector<int>& gpus) { return b_.collective(op, gpus, bytes); }, lbl, info);
  }

  // A gradient reduction: reduce-scatter (or all-reduce) within each shard group
  // after `ready`, then with hybrid sharding the all-reduce of each shard across
  // the groups (PyTorch FSDP HYBRID_SHARD's reduce-scatter then all-reduce;
  // Megatron-Core's distributed optimizer instances). Returns each member's last task.
  template <typename Ready, typename Cost>
  std::vector<TaskId> reduce_gradients(const Replicas& rep, StreamKind lane, Cost&& shard_cost, double bytes,
                                       std::int32_t lbl, std::int32_t lbl_across, TaskInfo info, Ready&& ready) {
    std::vector<TaskId> red = grouped_comm(rep.shards, lane, shard_cost, lbl, info);
    for (std::size_t i = 0; i < rep.members.size(); ++i) b_.depend(ready(rep.members[i].sim), red[i]);
    if (p_.zero_shard_groups() == 1) return red;
    info.bytes = bytes / p_.zero_shards();
    std::vector<TaskId> across = grouped_comm(rep.across, lane, CollectiveOp::kAllReduce, info.bytes, lbl_across, info);
    for (std::size_t i = 0; i < rep.members.size(); ++i) b_.depend(red[i], across[i]);
    return across;
  }

  // The expert data-parallel groups (MoE layers' routed experts) the pass of
  // tensor rank t of stage r issues: those whose members' lowest dense tensor rank
  // is t (an expert data-parallel group spans several tensor ranks when tp does
  // not divide etp x ep), each once, with its simulated members. (Then a member
  // of a higher tensor rank has its expert reductions queued on its dp-comm
  // stream before its dense ones: an approximation of Megatron's order, which
  // issues each buffer's buckets as they become ready.)
  struct ExpertGroup {
    std::vector<int> sims;
    std::vector<int> gpus;
  };
  std::vector<ExpertGroup> expert_groups(int t, int r) const {
    std::vector<ExpertGroup> out;
    if (!p_.moe.active || p_.expert_data_parallel() == 1) return out;
    std::set<int> seen;
    for (int d = 0; d < p_.grad_replicas(); ++d) {
      const std::vector<int> gpus = b_.expert_layout.group(GroupKind::kData, b_.global(t, d, r));
      if (!seen.insert(gpus.front()).second) continue;
      int lowest = p_.tp;
      for (int g : gpus) lowest = std::min(lowest, b_.layout.coord(g).tp);
      if (lowest != t) continue;
      ExpertGroup e;
      e.gpus = gpus;
      for (int g : gpus) {
        if (b_.sim_index(g) >= 0) e.sims.push_back(b_.sim_index(g));
      }
      if (!e.sims.empty()) out.push_back(std::move(e));
    }
    return out;
  }

  // A bucket's routed-expert gradients reduced over each expert data-parallel
  // group after ready(member); each member's last task into last_dp.
  template <typename Ready>
  void reduce_expert_gradients(const std::vector<ExpertGroup>& groups, const GradBucket& b, CollectiveOp reduce,
                               std::int32_t lbl, TaskInfo info, std::vector<TaskId>& last_dp, Ready&& ready) {
    if (b.expert_params == 0) return;
    info.bytes = static_cast<double>(b.expert_params) * p_.grad_bytes();
    for (const ExpertGroup& g : groups) {
      const TaskId task = dp_comm(g.sims, b_.collective(reduce, g.gpus, info.bytes), lbl, info);
      for (int member : g.sims) {
        b_.depend(ready(member), task);
        last_dp[member] = task;
      }
    }
  }

  // Pass 3: gradient reduction, ZeRO gathers, the optimizer step.
  void run() {
    const double e = dtype_bytes(p_.dtype);  // weights (parameter gathers)
    const double g = p_.grad_bytes();        // gradients (reductions)
    const std::size_t n = b_.w.global_rank.size();
    std::vector<TaskId> last_dp(n, -1);  // each rank's last gradient-reduction task

    const std::int32_t lbl_ar = b_.label("grad all_reduce", Category::kDp, Phase::kBackward);
    const std::int32_t lbl_rs = b_.label("grad reduce_scatter", Category::kDp, Phase::kBackward);
    const std::int32_t lbl_ag = b_.label("param all_gather", Category::kZero, Phase::kStep);
    const std::int32_t lbl_ag_fwd = b_.label("param all_gather", Category::kZero, Phase::kForward);
    const std::int32_t lbl_ag_bwd = b_.label("param all_gather", Category::kZero, Phase::kBackward);
    // Hybrid sharding's second reduction, across the shard groups.
    const std::int32_t lbl_across = b_.label("grad all_reduce across shard groups", Category::kDp, Phase::kBackward);
    // The routed experts' gradients, over the expert data-parallel group.
    const std::int32_t lbl_expert_ar = b_.label("expert grad all_reduce", Category::kDp, Phase::kBackward);
    const std::int32_t lbl_expert_rs = b_.label("expert grad reduce_scatter", Category::kDp, Phase::kBackward);

    for (int r = 0; r < p_.pp; ++r) {
      for (int t = 0; t < p_.tp; ++t) {
        Replicas rep;
        for (int d = 0; d < p_.grad_replicas(); ++d) {
          int s = b_.sim_index(b_.global(t, d, r));
          if (s >= 0) rep.members.push_back({d, s});
        }
        // The routed experts can have data-parallel peers where the dense layers
        // have none (dp x cp = 1, etp x ep < tp): their reductions still run (the
        // dense ones then over groups of one, which cost nothing).
        const std::vector<ExpertGroup> experts = expert_groups(t, r);
        if (rep.members.empty() || (p_.grad_replicas() == 1 && experts.empty())) continue;
        rep.shards = place(rep.members, t, r, false);
        if (p_.zero_shard_groups() > 1) rep.across = place(rep.members, t, r, true);
        const std::vector<Member>& replicas = rep.members;
        const std::vector<GradBucket>& buckets = b_.buckets[r];
        const auto& program = b_.programs[r];

        if (p_.zero_stage == 3 && b_.module_hooks()) {
          add_zero3_modules(rep, r, last_dp, lbl_rs, lbl_across);
          continue;
        }
        if (p_.zero_stage == 3) {
          add_zero3(rep, r, last_dp, lbl_ag_fwd, lbl_ag_bwd, lbl_rs, lbl_across);
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
            const std::vector<TaskId> ag = grouped_comm(rep.shards, StreamKind::kDpComm,
                                                        CollectiveOp::kAllGather, bytes, lbl_ag_fwd, info);
            const int op = b_.first_forward_op(r, b.chunk);
            for (std::size_t i = 0; i < replicas.size(); ++i) {
              b_.w.graph.add_dependency(ag[i], bucket_first_use(replicas[i].sim, op, b));
            }
            if (b.expert_params == 0) continue;
            info.bytes = static_cast<double>(b.expert_params) * e;
            for (const ExpertGroup& group : experts) {
              const TaskId task = dp_comm(group.sims, b_.collective(CollectiveOp::kAllGather, group.gpus, info.bytes),
                                          lbl_ag_fwd, info);
              for (int member : group.sims) b_.w.graph.add_dependency(task, bucket_first_use(member, op, b));
            }
          }
        }
        // Gradient reduction: all-reduce (ZeRO-0) or reduce-scatter (ZeRO-1) once per
        // step after the last micro-batch; ZeRO-2 reduce-scatters every micro-batch.
        const CollectiveOp reduce = p_.zero_stage == 0 ? CollectiveOp::kAllReduce : CollectiveOp::kReduceScatter;
        const std::int32_t lbl = p_.zero_stage == 0 ? lbl_ar : lbl_rs;
        if (p_.zero_stage == 2) {
          for (std::size_t oi = 0; oi < program.size(); ++oi) {
            const PipelineOp& op = program[oi];
            if (!computes_weight_grads(op, p_.schedule)) continue;
            for (const GradBucket& b : buckets) {
              if (b.chunk != op.chunk) continue;
              const double bytes = static_cast<double>(b.params) * g;
              TaskInfo info;
              info.microbatch = op.microbatch;
              info.chunk = op.chunk;
              info.bytes = bytes;
              auto ready = [&](int member) {
                return p_.overlap_grad_reduce ? bucket_ready(member, static_cast<int>(oi), b)
                                              : b_.op_marks[member][oi].last;
              };
              const std::vector<TaskId> done = reduce_gradients(
                  rep, StreamKind::kDpComm,
                  [&](const std::vector<int>& gpus) { return b_.collective(reduce, gpus, bytes); }, bytes, lbl,
                  lbl_across, info, ready);
              for (std::size_t i = 0; i < replicas.size(); ++i) last_dp[replicas[i].sim] = done[i];
              reduce_expert_gradients(experts, b, reduce, lbl_expert_rs, info, last_dp, ready);
            }
          }
        } else {
          for (const GradBucket& b : buckets) {
            const double bytes = static_cast<double>(b.params) * g;
            TaskInfo info;
            info.chunk = b.chunk;
            info.bytes = bytes;
            const int op = b_.last_backward_op(r, b.chunk);
            auto ready = [&](int member) {
              return p_.overlap_grad_reduce ? bucket_ready(member, op, b) : b_.last_task[member];
            };
            const std::vector<TaskId> done = reduce_gradients(
                rep, StreamKind::kDpComm,
                [&](const std::vector<int>& gpus) { return b_.collective(reduce, gpus, bytes); }, bytes, lbl,
                lbl_across, info, ready);
            for (std::size_t i = 0; i < replicas.size(); ++i) last_dp[replicas[i].sim] = done[i];
            reduce_expert_gradients(experts, b, reduce, p_.zero_stage == 0 ? lbl_expert_ar : lbl_expert_rs, info,
                                    last_dp, ready);
          }
        }
        if (p_.zero_stage >= 1 && !p_.overlap_param_gather) {
          for (const GradBucket& b : buckets) {
            const double bytes = static_cast<double>(b.params) * e;
            TaskInfo info;
            info.chunk = b.chunk;
            info.bytes = bytes;
            for (std::size_t k = 0; k < rep.shards.sims.size(); ++k) {
              if (rep.shards.sims[k].empty()) continue;
              step_gathers_.push_back(
                  {rep.shards.sims[k], b_.collective(CollectiveOp::kAllGather, rep.shards.gpus[k], bytes), info});
            }
            if (b.expert_params == 0) continue;
            info.bytes = static_cast<double>(b.expert_params) * e;
            for (const ExpertGroup& group : experts) {
              step_gathers_.push_back(
                  {group.sims, b_.collective(CollectiveOp::kAllGather, group.gpus, info.bytes), info});
            }
          }
        }
      }
    }
    add_replicated_sync(last_dp);
    add_embedding_sync(last_dp);
    add_step(last_dp, lbl_ag);
  }

  // ZeRO-3: every layer's weights are gathered before its forward and again before its
  // backward, and its gradients reduce-scattered after its backward, every micro-batch,
  // in the order and with the overlap of the plan's framework (ShardedDataParallel):
  // - a layer's gather may start once the layer `live` before it has finished (its
  //   weights freed): `unsharded_layers` in the forward and, with BACKWARD_PRE, in the
  //   backward; 1 with BACKWARD_POST or no prefetch, or without overlap_param_gather;
  // - on one stream the collectives run in issue order: with prefetch the next
  //   layer's gather is issued before this layer's reduce-scatter, without it after;
  // - reduce-scatters on a stream of their own do not wait behind gathers at all.
  // With hybrid sharding the gathers and reduce-scatters run within each shard
  // group and every reduce-scatter is followed by the shard's all-reduce across
  // the groups (FSDP HYBRID_SHARD, on the reduce stream).
  void add_zero3(const Replicas& rep, int r, std::vector<TaskId>& last_dp, std::int32_t lbl_ag_fwd,
                 std::int32_t lbl_ag_bwd, std::int32_t lbl_rs, std::int32_t lbl_across) {
    const std::vector<Member>& replicas = rep.members;
    const ShardedDataParallel& z = b_.options.sharded;
    const double e = dtype_bytes(p_.dtype);
    const double layer_params = static_cast<double>(layer_params_per_gpu(m_, p_.tp));
    const double layer_bytes = layer_params * e;
    const double grad_bytes = layer_params * p_.grad_bytes();
    const StreamKind reduce_lane = z.reduce_stream == ReduceStream::kOwn ? StreamKind::kDpReduce : StreamKind::kDpComm;
    const bool prefetch = p_.overlap_param_gather && z.backward_prefetch != BackwardPrefetch::kNone;
    // In the backward a layer's reduce-scatter and the next layer's prefetched gather
    // run at the same time when they have streams of their own: costed side by side
    // (the folded fidelity's static costs would otherwise give each the links alone).
    const bool side_by_side = prefetch && z.reduce_stream == ReduceStream::kOwn;
    auto ag = [&](const std::vector<int>& group) { return b_.collective(CollectiveOp::kAllGather, group, layer_bytes); };
    auto ag_bwd = [&](const std::vector<int>& group) {
      return side_by_side ? b_.collective_beside(CollectiveOp::kAllGather, group, layer_bytes,
                                                 CollectiveOp::kReduceScatter, grad_bytes)
                          : ag(group);
    };
    auto rs = [&](const std::vector<int>& group) {
      return side_by_side ? b_.collective_beside(CollectiveOp::kReduceScatter, group, grad_bytes,
                                                 CollectiveOp::kAllGather, layer_bytes)
                          : b_.collective(CollectiveOp::kReduceScatter, group, grad_bytes);
    };
    const int forward_live = p_.overlap_param_gather ? z.unsharded_layers : 1;
    const int backward_live = p_.overlap_param_gather && z.backward_prefetch == BackwardPrefetch::kPre ? z.unsharded_layers : 1;
    const int stride = b_.chunk_layers();
    const auto& program = b_.programs[r];
    for (std::size_t oi = 0; oi < program.size(); ++oi) {
      const PipelineOp& op = program[oi];
      const bool forward = op.phase == PipelinePhase::kForward;
      const int live = forward ? forward_live : backward_live;
      const int vs = virtual_stage(p_, r, op.chunk);
      const int lc = b_.layers_of(vs);
      // The layer of execution step `step` within this op, and its marks.
      auto layer_of = [&](int step) { return forward ? step : lc - 1 - step; };
      auto layer_mark = [&](int member, int step) -> const Mark& {
        return b_.layer_marks[member][oi * stride + layer_of(step)];
      };
      auto info_of = [&](int step, double bytes) {
        TaskInfo info;
        info.microbatch = op.microbatch;
        info.chunk = op.chunk;
        info.layer = b_.first_layer_of(vs) + layer_of(step);
        info.bytes = bytes;
        return info;
      };
      auto gather = [&](int step) {
        const TaskInfo info = info_of(step, layer_bytes);
        const std::vector<TaskId> g =
            forward ? grouped_comm(rep.shards, StreamKind::kDpComm, ag, lbl_ag_fwd, info)
                    : grouped_comm(rep.shards, StreamKind::kDpComm, ag_bwd, lbl_ag_bwd, info);
        for (std::size_t i = 0; i < replicas.size(); ++i) {
          const int member = replicas[i].sim;
          if (step - live >= 0) b_.depend(layer_mark(member, step - live).last, g[i]);
          b_.w.graph.add_dependency(g[i], layer_mark(member, step).first);
        }
      };
      auto reduce = [&](int step) {
        const std::vector<TaskId> done =
            reduce_gradients(rep, reduce_lane, rs, grad_bytes, lbl_rs, lbl_across, info_of(step, grad_bytes),
                             [&](int member) { return layer_mark(member, step).last; });
        for (std::size_t i = 0; i < replicas.size(); ++i) last_dp[replicas[i].sim] = done[i];
      };
      if (forward) {
        for (int step = 0; step < lc; ++step) gather(step);
        continue;
      }
      // Issue order (the order of tasks on a stream): G0, then per layer the next
      // gather before (prefetch) or after (none) the layer's reduce-scatter.
      gather(0);
      for (int step = 0; step < lc; ++step) {
        if (prefetch && step + 1 < lc) gather(step + 1);
        reduce(step);
        if (!prefetch && step + 1 < lc) gather(step + 1);
      }
    }
  }

  // ZeRO-3 gathered per module (zero3_modules.h), on this pass's shard groups.
  void add_zero3_modules(const Replicas& rep, int r, std::vector<TaskId>& last_dp, std::int32_t lbl_rs,
                         std::int32_t lbl_across) {
    std::vector<int> members;
    std::unordered_map<int, std::size_t> index_of;  // simulated rank -> its index in members
    for (const Member& m : rep.members) {
      index_of[m.sim] = members.size();
      members.push_back(m.sim);
    }
    const StreamKind reduce_lane =
        b_.options.sharded.reduce_stream == ReduceStream::kOwn ? StreamKind::kDpReduce : StreamKind::kDpComm;
    Zero3Collectives c;
    c.group_size = p_.zero_shards();
    c.reduce_lane = reduce_lane;
    c.gather = [&](double bytes, std::int32_t label, const TaskInfo& info) {
      return grouped_comm(rep.shards, StreamKind::kDpComm, CollectiveOp::kAllGather, bytes, label, info);
    };
    c.reduce = [&](double bytes, const TaskInfo& info, const std::function<TaskId(std::size_t)>& ready) {
      return reduce_gradients(
          rep, reduce_lane,
          [&](const std::vector<int>& gpus) { return b_.collective(CollectiveOp::kReduceScatter, gpus, bytes); }, bytes,
          lbl_rs, lbl_across, info, [&](int member) { return ready(index_of.at(member)); });
    };
    add_zero3_by_module(b_, r, members, c, last_dp);
  }

  // Sequence parallelism: after the data-parallel reduction each tensor-parallel
  // group all-reduces the gradients of the parameters its ranks hold whole
  // (sequence_parallel_replicated_params: norms, row-parallel biases, MLA's
  // down-projections, the router), one coalesced all-reduce per group, on the
  // model-parallel lane (Megatron-Core's finalize_model_grads).
  void add_replicated_sync(std::vector<TaskId>& last_dp) {
    if (p_.tp < 2 || !p_.sequence_parallel) return;
    const std::int32_t lbl = b_.label("replicated grad all_reduce", Category::kTp, Phase::kStep);
    for (int r = 0; r < p_.pp; ++r) {
      const double bytes = static_cast<double>(sequence_parallel_replicated_params(m_, p_, r)) * p_.grad_bytes();
      if (bytes <= 0.0) continue;
      for (int d = 0; d < p_.grad_replicas(); ++d) {
        std::vector<std::pair<int, int>> slots;
        for (int t = 0; t < p_.tp; ++t) {
          if (const int s = b_.sim_index(b_.global(t, d, r)); s >= 0) slots.emplace_back(s, stream_index(StreamKind::kTpComm));
        }
        if (slots.empty()) continue;
        TaskInfo info;
        info.bytes = bytes;
        const TaskId task =
            b_.comm_task(slots, b_.collective(CollectiveOp::kAllReduce, b_.tp_group_gpus(d, r), bytes), lbl, info);
        for (const auto& [sim, lane] : slots) {
          auto& last = last_dp[static_cast<std::size_t>(sim)];
          b_.depend(b_.last_task[sim], task);  // the backward's last kernel
          if (last >= 0) b_.depend(last, task);  // and the data-parallel reduction
          last = task;
        }
      }
    }
  }

  // Tied embeddings with pp > 1: the first and last stages all-reduce the word
  // embedding's gradient (Megatron-LM's embedding group).
  void add_embedding_sync(std::vector<TaskId>& last_dp) {
    if (m_.untie_embeddings_and_output_weights || embedding_on_head_rank(p_)) return;
    const double bytes = static_cast<double>(vocab_rows_per_gpu(m_, p_)) * m_.hidden_size * p_.grad_bytes();
    const std::int32_t lbl = b_.label("embedding grad all_reduce", Category::kDp, Phase::kBackward);
    for (int d = 0; d < p_.grad_replicas(); ++d) {
      for (int t = 0; t < p_.tp; ++t) {
        const int a = b_.sim_index(b_.global(t, d, 0));
        const int b = b_.sim_index(b_.global(t, d, head_rank(p_)));
        if (a < 0 || b < 0) continue;
        TaskInfo info;
        info.bytes = bytes;
        std::int32_t comm = b_.collective(CollectiveOp::kAllReduce, {b_.global(t, d, 0), b_.global(t, d, head_rank(p_))},
                                       bytes);
        TaskId task = b_.comm_task({{a, stream_index(StreamKind::kDpComm)}, {b, stream_index(StreamKind::kDpComm)}}, comm, lbl, info);
        for (int s : {a, b}) {
          b_.depend(b_.last_task[s], task);
          if (last_dp[s] >= 0) b_.depend(last_dp[s], task);  // after the replicated gradients' sum (another lane)
          last_dp[s] = task;
        }
      }
    }
  }

  // The end of the step, after the gradients are reduced: each rank's pass over
  // its gradient shard for the norm (gradient clipping: Megatron-LM's
  // clip_grad_norm_fp32, torch's clip_grad_norm_), with fp16 first the loss
  // scaler's unscale and inf check (Megatron-LM's
  // _unscale_main_grads_and_check_for_nan, torch's GradScaler.unscale_: one
  // read and one write of every gradient); then the global norm all-reduce, the
  // optimizer update of each rank's shard, and the weight gathers not overlapped.
  void add_step(std::vector<TaskId>& last_dp, std::int32_t lbl_ag) {
    const std::size_t n = b_.w.global_rank.size();
    const int world = b_.layout.world();
    const std::int32_t lbl_unscale = b_.label("unscale and inf check", Category::kOptimizer, Phase::kStep);
    const std::int32_t lbl_norm = b_.label("gradient norm", Category::kOptimizer, Phase::kStep);
    std::vector<TaskId> norm_pass(n, -1);
    for (std::size_t i = 0; i < n; ++i) {
      const int rank = static_cast<int>(i);
      TaskInfo info;
      info.bytes = shard_params(rank) * p_.grad_bytes();
      if (p_.dtype == DType::kFp16) {
        TaskId unscale = b_.compute(rank, StreamKind::kCompute, oc_.optimizer(2.0 * info.bytes), lbl_unscale, info);
        b_.issue({rank}, unscale, 1, Phase::kStep);
        if (last_dp[i] >= 0) b_.w.graph.add_dependency(last_dp[i], unscale);
      }
      norm_pass[i] = b_.compute(rank, StreamKind::kCompute, oc_.optimizer(info.bytes), lbl_norm, info);
      b_.issue({rank}, norm_pass[i], 1, Phase::kStep);
      if (last_dp[i] >= 0) b_.w.graph.add_dependency(last_dp[i], norm_pass[i]);
    }
    // The norm all-reduce each rank's update waits for (-1: none).
    std::vector<TaskId> norm_of(n, -1);
    // ZB-H2's post-validation (Qi et al. 2024, section 4) steps each stage on the
    // norm of the stages before it, passed along the pipeline, and checks the
    // global one during the next step: only a stage's own ranks synchronise.
    const bool per_stage = b_.w.ranks_start_next_step_alone && p_.pp > 1;
    for (int stage = 0; stage < (per_stage ? p_.pp : 1); ++stage) {
      std::vector<int> group;
      std::vector<std::pair<int, int>> slots;
      for (int g = 0; g < world; ++g) {
        if (!per_stage || b_.layout.coord(g).pp == stage) group.push_back(g);
      }
      for (std::size_t i = 0; i < n; ++i) {
        if (!per_stage || b_.w.stage[i] == stage) slots.emplace_back(static_cast<int>(i), stream_index(StreamKind::kDpComm));
      }
      if (group.size() < 2 || slots.empty()) continue;
      // One fp32 partial norm per rank (Megatron-LM's clip_grad_norm_fp32); the fp16
      // inf flag's all-reduce is as small and runs beside it.
      const CommSpec spec = cc_.latency_bound(CollectiveOp::kAllReduce, group, 4.0);
      TaskInfo info;
      info.bytes = 4.0;
      const TaskId norm = b_.comm_task(slots, b_.w.graph.add_comm(spec),
                                       b_.label("grad norm all_reduce", Category::kDp, Phase::kStep), info);
      for (const auto& [sim, lane] : slots) {
        b_.depend(norm_pass[sim], norm);
        norm_of[sim] = norm;
      }
    }
    const std::int32_t lbl_opt = b_.label("optimizer step", Category::kOptimizer, Phase::kStep);
    const std::int32_t lbl_d2h = b_.label("gradients to host", Category::kCopy, Phase::kStep);
    const std::int32_t lbl_host = b_.label("host optimizer step", Category::kOptimizer, Phase::kStep);
    const std::int32_t lbl_h2d = b_.label("weights to device", Category::kCopy, Phase::kStep);
    std::vector<TaskId> updated(n, -1);
    for (std::size_t i = 0; i < n; ++i) {
      const double shard = shard_params(static_cast<int>(i));
      TaskInfo info;
      const int rank = static_cast<int>(i);
      if (p_.offload_optimizer) {
        info.bytes = shard * dtype_bytes(p_.dtype);
        TaskId d2h = b_.compute(rank, StreamKind::kCopy, oc_.host_copy(info.bytes), lbl_d2h, info);
        // The three run back to back on the copy stream: gradients down, the host's
        // Adam update, weights back up.
        b_.compute(rank, StreamKind::kCopy, oc_.host_optimizer(shard), lbl_host, info);
        TaskId h2d = b_.compute(rank, StreamKind::kCopy, oc_.host_copy(info.bytes), lbl_h2d, info);
        b_.depend(norm_of[i] >= 0 ? norm_of[i] : norm_pass[i], d2h);
        updated[i] = h2d;
      } else {
        // The update reads the gradient in its accumulation dtype.
        info.bytes = shard * (b_.options.optimizer_bytes_per_param - dtype_bytes(p_.dtype) + p_.grad_bytes());
        TaskId opt = b_.compute(rank, StreamKind::kCompute, oc_.optimizer(info.bytes), lbl_opt, info);
        // One fused multi-tensor update: one kernel for the host to issue.
        b_.issue({rank}, opt, 1, Phase::kStep);
        if (norm_of[i] >= 0) b_.w.graph.add_dependency(norm_of[i], opt);
        updated[i] = opt;
      }
    }
    for (const GatherSpec& g : step_gathers_) {
      TaskId ag = dp_comm(g.members, g.comm, lbl_ag, g.info);
      for (int member : g.members) b_.w.graph.add_dependency(updated[member], ag);
    }
  }

  // Parameters whose gradients and optimizer state simulated rank `rank` holds:
  // with ZeRO the dense ones sharded over dp x cp, the routed experts' over the
  // expert data-parallel group.
  double shard_params(int rank) const {
    const int stage = b_.w.stage[rank];
    const double experts = static_cast<double>(stage_expert_params_per_gpu(m_, p_, stage));
    const double dense = static_cast<double>(stage_params_per_gpu(m_, p_, stage)) - experts;
    if (p_.zero_stage == 0) return dense + experts;
    return dense / p_.zero_shards() + (experts > 0.0 ? experts / p_.expert_data_parallel() : 0.0);
  }

  struct GatherSpec {
    std::vector<int> members;
    std::int32_t comm;
    TaskInfo info;
  };

  WorkloadBuild& b_;
  const ModelSpec& m_;
  const PlanSpec& p_;
  const OpCosts& oc_;
  const CommCosts& cc_;
  std::vector<GatherSpec> step_gathers_;  // ZeRO-1/2 weight gathers after the update (no overlap)
  std::vector<std::pair<int, int>> slots_;  // dp_comm's (member, stream) list
};

}  // namespace

void add_data_parallel_and_step(WorkloadBuild& b) { DataParallelPass(b).run(); }

}  // namespace strata::sim
