// Model + plan -> the task graph of one training step, rank by rank.
//
// Ranks are numbered by the plan's RankLayout (plan/rank_layout.h; Megatron's
// order by default), and rank r runs on GPU r.
//
// Two fidelities share this code. Full builds every rank. Folded builds one rank per
// pipeline stage (tp_rank 0, dp_rank 0): tensor-parallel peers and data-parallel
// replicas are symmetric by construction, so their tasks would be copies; the
// collectives of the folded ranks are still costed over their whole groups.
//
// The builder's rooms: the layer program (layer_program.h: compute and
// tensor-parallel collectives of each pipeline op), folding (folding.h: which ranks
// stand for which, how a folded op collapses), data parallelism and ZeRO
// (data_parallel.h), and the orchestration that ties them with the pipeline
// transfers (workload.cc); build.h is the state they share.
#pragma once

#include <cstdint>
#include <optional>
#include <stdexcept>
#include <vector>

#include "costmodel/framework_profile.h"
#include "sim/engine/task_graph.h"
#include "sim/workload/task_annotations.h"
#include "plan/model_spec.h"
#include "plan/plan_spec.h"
#include "sim/workload/costs.h"

namespace strata::sim {

enum class Fidelity { kFull, kFolded };
const char* to_string(Fidelity f);

struct WorkloadOptions {
  // Bytes an Adam update streams per parameter: reads fp32 master weight, both moments
  // and the 16-bit gradient (14), writes master weight, moments and the 16-bit weight (14).
  double optimizer_bytes_per_param = 28.0;
  // How ZeRO-3 orders its gathers and reduce-scatters: the plan's framework's.
  ShardedDataParallel sharded;
  // What issuing a kernel costs the host (the framework's); absent: nothing, and
  // no host tasks are built.
  std::optional<HostDispatch> host_dispatch;
  // Tensor-parallel collectives under GEMMs (the framework's; applies with tp > 1
  // and sequence parallelism) and the GPU's SMs they share (0: unknown).
  std::optional<TpOverlap> tp_overlap;
  // Column-parallel backward collectives beside their GEMMs (the framework's; any tp > 1).
  std::optional<TpAsyncBackward> tp_async_backward;
  // A stage's next pipeline op waits for its sends to finish (the framework's
  // pipeline_p2p for this plan's schedule); false: sends run beside it.
  bool blocking_pipeline_sends = false;
  // Without sequence parallelism each tensor-parallel rank sends 1/tp of the
  // activation (Megatron-LM's scatter/gather); false: the whole tensor, as
  // Megatron-Core and Strata's runtime do.
  bool pipeline_scatter_gather = false;
  int compute_units = 0;
  // GPUs per node of the cluster (rank r runs on GPU r): where an expert-parallel
  // group's ranks sit, for the flex dispatcher's two hops; 0: every rank on one node.
  int gpus_per_node = 0;
  // Refuse (WorkloadTooLarge) a step whose estimated_tasks exceed this; 0: no limit.
  double max_tasks = 0.0;
  // Keep every collapsed stretch's ops (TaskAnnotations::detail: traces, the
  // validation's GEMM time); false: only their totals, all the metrics read (a
  // step simulated for its numbers, as each plan of a sweep).
  bool detail_ops = true;
};

// Tasks a step's graph holds at most, from the plan alone: each simulated
// tensor-parallel group's pipeline ops (forward, backward, and the zero-bubble
// schedules' weight-gradient passes, per micro-batch and model chunk) times the
// tasks of an op (at full fidelity its layers' compute segments and collectives,
// segments_per_layer / 2 per layer and pass; folded at most one per layer), plus
// each rank's transfers and data-parallel work. Full fidelity simulates every
// rank, folded one per pipeline stage. A double: 2^30 micro-batches on a million
// ranks overflow 64 bits. Measured against built graphs: llama3-70b tp 2 cp 2
// pp 4 dp 4, 128 micro-batches: 1,930,657 tasks, estimated 2,449,408 (full);
// 22,445 and 29,952 (folded).
double estimated_tasks(const PlanSpec& plan, Fidelity fidelity, int chunk_layers, std::size_t segments_per_layer);

// The most tasks a graph can hold: TaskId is 32 bits.
inline constexpr double kMaxTasks = 2147483647.0;

// A step too large to build in the memory allowed, thrown before any of it is built.
class WorkloadTooLarge : public std::runtime_error {
 public:
  WorkloadTooLarge(double tasks, double max_tasks, std::int64_t microbatches, int simulated_ranks, Fidelity fidelity);
  double tasks, max_tasks;
  std::int64_t microbatches;
  int simulated_ranks;
  Fidelity fidelity;
};

struct Workload {
  TaskGraph graph{0, kNumStreamKinds};
  TaskAnnotations notes;  // what each task is, for traces and metrics
  Fidelity fidelity = Fidelity::kFull;
  std::vector<int> global_rank;  // simulated rank -> global rank (= GPU index)
  std::vector<int> stage;        // simulated rank -> pipeline rank
  std::vector<int> tp_rank;
  std::vector<int> dp_rank;
  // ZB-H2 with the optimizer step's post-validation (Qi et al. 2024, section 4):
  // no step-wide synchronisation, so each rank starts the next iteration when
  // its own ends and consecutive steps overlap. The step time is then the
  // steady-state period, the longest rank's span from its first task to its
  // last (metrics.h), not the simulated step's makespan.
  bool ranks_start_next_step_alone = false;
  // estimated_tasks for this step, as build_workload checked and sized it.
  double estimated_tasks = 0.0;
  // Rank r's tasks on one of its streams, in program order.
  std::span<const TaskId> stream(int rank, StreamKind s) const { return graph.stream(rank, stream_index(s)); }
};

Workload build_workload(const ModelSpec& model, const PlanSpec& plan, const OpCosts& op_costs,
                        const CommCosts& comm_costs, Fidelity fidelity,
                        const WorkloadOptions& options = {});

}  // namespace strata::sim
