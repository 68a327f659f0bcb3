// The state one workload build shares between its rooms: the layer program
// (layer_program.h), folding (folding.h), data parallelism and ZeRO
// (data_parallel.h), and the orchestration that ties them (workload.cc).
//
// It holds what the step is (model, plan, rank layout, each pipeline rank's
// program and gradient buckets), which ranks are simulated, the graph being
// built, where each op's and block's tasks are (marks, for the dependencies the
// later passes add), and the interning of collectives and labels, so equal ones
// share one entry.
#pragma once

#include <array>
#include <map>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "plan/bucket_plan.h"
#include "plan/model_spec.h"
#include "plan/pipeline_schedule.h"
#include "plan/pipeline_split.h"
#include "plan/plan_spec.h"
#include "plan/rank_layout.h"
#include "sim/workload/costs.h"
#include "sim/workload/segments.h"
#include "sim/workload/workload.h"

namespace strata::sim {

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
inline constexpr int kEmbeddingBlock = -1;
inline constexpr int kHeadBlock = -2;

class WorkloadBuild {
 public:
  WorkloadBuild(const ModelSpec& m, const PlanSpec& p, const OpCosts& oc, const CommCosts& cc, Fidelity fidelity,
                const WorkloadOptions& o);

  const ModelSpec& model;
  const PlanSpec& plan;
  const RankLayout layout;
  // The MoE layers' layout (etp x ep x edp x pp over the same ranks); the dense
  // layout for a dense model.
  const RankLayout expert_layout;
  const OpCosts& op_costs;
  const CommCosts& comm_costs;
  const Fidelity fidelity;
  const WorkloadOptions options;
  Workload w;

  std::vector<int> sim_of_global;                 // global rank -> simulated rank, -1 if folded away
  std::vector<std::vector<PipelineOp>> programs;  // [pipeline rank]
  std::vector<std::vector<int>> op_index;         // [pipeline rank][op_key] -> index in its program
  std::vector<std::vector<GradBucket>> buckets;   // [pipeline rank]
  std::vector<std::vector<Mark>> op_marks;        // [rank][op]
  std::vector<std::vector<Mark>> layer_marks;     // [rank][op * chunk_layers + layer]
  std::vector<std::vector<Mark>> head_marks;      // [rank][op]: the head block
  std::vector<TaskId> last_task;                  // [rank]: its program's last task
  // With per-module ZeRO-3 gathering (module_hooks()): where each module hook of
  // each layer of each op fell, [rank][layer slot * hook_slots() + hook slot]
  // (layer slot: op * chunk_layers + layer; hook slot: hook_slot()): the first
  // task after the hook, and the task before it in the rank's program (-1: the
  // op's first, and nothing before it in the op).
  std::vector<std::vector<TaskId>> hook_first;
  std::vector<std::vector<TaskId>> hook_prev;

  // The ranks that hold the same weights of a stage and reduce their gradients:
  // dp x cp (context-parallel ranks hold different tokens of the same sequences).
  // The workload numbers them d in [0, replicas()), cp fastest, as Megatron-Core's
  // data-parallel group with context parallelism lists them.
  int replicas() const { return plan.grad_replicas(); }
  int global(int t, int d, int r) const {
    return layout.rank({.tp = t, .cp = d % plan.cp, .dp = d / plan.cp, .pp = r});
  }
  // The context-parallel group of tensor-parallel rank t in replica d of stage r, by cp rank.
  std::vector<int> cp_group_gpus(int t, int d, int r) const;
  int sim_index(int global_rank) const { return sim_of_global[global_rank]; }
  // Which layers each virtual stage holds (plan/pipeline_split.h); chunk_layers()
  // is the most any holds: the stride of the per-op layer tables.
  const PipelineSplit stage_split;
  int chunk_layers() const { return chunk_stride_; }
  int layers_of(int vs) const { return stage_split.layers[static_cast<std::size_t>(vs)]; }
  int first_layer_of(int vs) const { return stage_split.first[static_cast<std::size_t>(vs)]; }
  int num_virtual_stages() const { return plan.pp * plan.vpp; }
  int op_key(PipelinePhase phase, int chunk, int mb) const {
    return (static_cast<int>(phase) * plan.vpp + chunk) * plan.num_microbatches() + mb;
  }
  // Where a parameter block's tasks sit in pipeline op `op` of a rank: a layer's
  // slot (index op * chunk_layers + layer in layer_marks), the op's head slot
  // (final norm, output layer), or, for the embeddings, the whole op.
  struct BlockSlot {
    enum class In { kLayer, kHead, kOp } in;
    int index;
  };
  BlockSlot block_slot(int op, const BlockRef& block) const;
  const Mark& mark(int sim_rank, const BlockSlot& slot) const;
  // The node a global rank's GPU is on (options.gpus_per_node; 0 when unset).
  int node_of(int global_rank) const {
    return options.gpus_per_node > 0 ? global_rank / options.gpus_per_node : 0;
  }
  std::vector<int> tp_group_gpus(int d, int r) const;
  // Index in pipeline rank r's program of chunk's last op computing weight
  // gradients (its last backward, or W) and of its first forward op (-1: none);
  // looked up per bucket and op, so kept from build_programs.
  int last_backward_op(int r, int chunk) const { return last_backward_[r][chunk]; }
  int first_forward_op(int r, int chunk) const { return first_forward_[r][chunk]; }
  // Bytes of one activation tensor a pipeline stage sends one tensor-parallel peer.
  double activation_bytes() const;

  // Each pipeline rank's program and buckets.
  void build_programs();
  // Tasks, added to the graph and annotated.
  TaskId compute(int rank, StreamKind stream, Duration duration, std::int32_t label, const TaskInfo& info);
  TaskId shared_compute(const std::vector<int>& ranks, Duration duration, std::int32_t label,
                        const TaskInfo& info);
  // slots: (rank, stream_index(StreamKind)).
  TaskId comm_task(const std::vector<std::pair<int, int>>& slots, std::int32_t comm, std::int32_t label,
                   const TaskInfo& info);

  // Host dispatch (options.host_dispatch): compute task `task` of `kernels`
  // kernels on `ranks` is issued by their host threads, on the host lane: one host
  // task issues its first kernel, and the task starts no earlier; a second issues
  // the rest (so the next task, issued after it, starts no earlier than the host
  // has issued all of this one). The host runs ahead of the GPU as far as it can.
  // Approximation: a task of many small kernels may finish before the host has
  // issued its last; what follows it (depend()) waits for the issue too.
  // Call in program order, after the task is annotated. No-op without dispatch.
  void issue(const std::vector<int>& ranks, TaskId task, std::size_t kernels, Phase phase);
  // `task` runs after `before`, and, where the host issued `before`, after the host
  // has issued all of it (a collective is issued after the kernels before it).
  void depend(TaskId before, TaskId task);
  bool has_host_dispatch() const { return options.host_dispatch.has_value(); }
  // The host spends `extra` more just before issuing compute task `task` (work it
  // does between two kernels: a list collective's per-rank copies). No-op without
  // host dispatch or for a task the host did not issue.
  void delay_issue(TaskId task, Duration extra);
  // The host issues compute task `task` only after GPU task `gpu_task` finished
  // (it blocked in a device synchronize between them). No-op without host dispatch.
  void issue_after(TaskId task, TaskId gpu_task);

  // ZeRO-3 gathers each module's parameters at hooks around it (the framework's
  // module_gather): the layer program marks where each hook falls.
  bool module_hooks() const { return plan.zero_stage == 3 && options.sharded.module_gather.has_value(); }
  // Modules with parameters in one layer (layer_parameter_modules); hook slots
  // per layer and op: each module's forward hook (or, in a backward op, its
  // recompute's) and, in a backward op, its backward hook.
  int layer_modules() const { return layer_modules_; }
  int hook_slots() const { return 2 * layer_modules_; }
  int hook_slot(bool backward_hook, int module) const { return (backward_hook ? layer_modules_ : 0) + module; }

  // The CommSpec of a collective, interned so repeated collectives share one entry.
  std::int32_t collective(CollectiveOp op, const std::vector<int>& group, double bytes);
  // The expert layout's group `which` (an expert CommGroup) of a global rank.
  std::vector<int> expert_group(CommGroup which, int global_rank) const;
  // An MoE layer's collective on the expert groups of the members of a tensor-
  // parallel group (`tp_group`, global ranks), which share one task. A member's
  // expert group holds ranks of other tensor-parallel groups, whose tasks run the
  // same collective: at full fidelity the task carries its members' shares of
  // their groups' collectives (each group's flows weighted by the members in it
  // over the group's size), so the tasks that make up one collective load its
  // links once between them, and alone it takes the collective's time. Folded,
  // the first member's group's collective (its copies already share the links).
  std::int32_t expert_collective(CollectiveOp op, CommGroup which, const std::vector<int>& tp_group, double bytes);
  // A context-parallel ring step's transfer for the members of a tensor-parallel
  // group (global ranks) at full fidelity: each member sends `bytes` to its next
  // context-parallel rank, all at once, as one task (merged_shares).
  std::int32_t cp_ring_transfer(const std::vector<int>& tp_group, double bytes);
  // One flow for several groups' collectives run by one task: each group's links
  // loaded by its share (the part of the collective the task stands for), the
  // slowest group's latency and rate.
  CommSpec merged_shares(CollectiveOp op, const std::vector<std::pair<std::vector<int>, double>>& shares,
                         double bytes) const;
  // CommCosts::collective_beside, added to the graph once.
  std::int32_t collective_beside(CollectiveOp op, const std::vector<int>& group, double bytes, CollectiveOp partner,
                                 double partner_bytes);
  // The CommSpec of a pipeline transfer of one activation tensor, interned.
  std::int32_t p2p(int src_gpu, int dst_gpu);
  // A task label, interned.
  std::int32_t label(const std::string& name, Category category, Phase phase);

 private:
  // (op, first GPU, stride, size, bytes, partner op or -1, partner bytes)
  using CommKey = std::tuple<int, int, int, int, long long, int, long long>;
  // The comm id of `key`, costed by cost() the first time. The last few looked up
  // are checked first: a pass asks for the same few collectives in turn (ZeRO-3's
  // gather, gather beside a reduce-scatter, reduce-scatter, layer after layer).
  template <typename Cost>
  std::int32_t interned_comm(const CommKey& key, Cost&& cost);
  std::map<CommKey, std::int32_t> comm_ids_;
  std::array<std::pair<CommKey, std::int32_t>, 4> recent_comms_{
      {{CommKey{}, -1}, {CommKey{}, -1}, {CommKey{}, -1}, {CommKey{}, -1}}};  // id -1: empty
  std::size_t next_recent_comm_ = 0;
  std::map<std::tuple<std::string, int, int>, std::int32_t> label_ids_;
  std::map<std::pair<int, int>, std::int32_t> p2p_ids_;
  std::map<std::tuple<int, int, int, long long>, std::int32_t> expert_comm_ids_;  // (op, which, tp_group[0], bytes)
  std::map<std::tuple<int, long long>, std::int32_t> cp_ring_comm_ids_;           // (tp_group[0], bytes)
  std::vector<std::vector<int>> last_backward_;  // [pipeline rank][chunk]
  std::vector<std::vector<int>> first_forward_;  // [pipeline rank][chunk]
  std::vector<TaskId> issued_by_;                // [task]: the host task issuing its last kernel, -1: none
  std::vector<TaskId> issued_first_by_;          // [task]: the host task issuing its first kernel, -1: none
  int chunk_stride_ = 1;
  int layer_modules_ = 0;
};

}  // namespace strata::sim
