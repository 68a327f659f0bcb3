#include "sim/workload/workload.h"

#include <algorithm>
#include <utility>

#include <fmt/format.h>

#include <spdlog/spdlog.h>

#include "core/error.h"
#include "sim/workload/build.h"
#include "sim/workload/data_parallel.h"
#include "sim/workload/folding.h"
#include "sim/workload/layer_program.h"

namespace strata::sim {

const char* to_string(Fidelity f) { return f == Fidelity::kFull ? "full" : "folded"; }

double estimated_tasks(const PlanSpec& p, Fidelity fidelity, int chunk_layers, std::size_t segments_per_layer) {
  const bool folded = fidelity == Fidelity::kFolded;
  const double ranks = folded ? p.pp : static_cast<double>(p.num_gpus());
  const double groups = folded ? ranks : ranks / p.tp;
  const double per_layer = folded ? 1.0 : static_cast<double>(segments_per_layer / 2);
  const double ops = (splits_backward(p.schedule) ? 3.0 : 2.0) * p.vpp * static_cast<double>(p.num_microbatches());
  return groups * (ops * (chunk_layers * per_layer + 8)) + ranks * (ops + 64);
}

WorkloadTooLarge::WorkloadTooLarge(double t, double max, std::int64_t m, int ranks, Fidelity f)
    : std::runtime_error(fmt::format("{:.3g} tasks to simulate, more than {:.3g}", t, max)),
      tasks(t),
      max_tasks(max),
      microbatches(m),
      simulated_ranks(ranks),
      fidelity(f) {}

namespace {

// Sizes the graph's storage from the program: tasks per tensor-parallel group
// times the groups simulated, plus transfers and data-parallel work.
void reserve(WorkloadBuild& b, std::size_t tasks) {
  const PlanSpec& p = b.plan;
  const std::size_t ranks = b.w.global_rank.size();
  const std::size_t ops = (splits_backward(p.schedule) ? 3ull : 2ull) * p.vpp * p.num_microbatches();
  const std::size_t ranks_per_group = b.fidelity == Fidelity::kFolded ? 1 : p.tp;
  b.w.graph.reserve(tasks, tasks * ranks_per_group, tasks + ranks * ops * 2);
  b.w.notes.reserve(tasks);
}

// Pass 2: activations and gradients between pipeline stages, in each sender's order.
void add_pipeline_transfers(WorkloadBuild& b) {
  const PlanSpec& p = b.plan;
  if (p.pp == 1) return;
  const int last_vs = b.num_virtual_stages() - 1;
  const std::int32_t send_act = b.label("send activations", Category::kPp, Phase::kForward);
  const std::int32_t send_grad = b.label("send gradients", Category::kPp, Phase::kBackward);
  for (std::size_t i = 0; i < b.w.global_rank.size(); ++i) {
    const int r = b.w.stage[i];
    const auto& program = b.programs[r];
    for (std::size_t oi = 0; oi < program.size(); ++oi) {
      const PipelineOp& op = program[oi];
      const int vs = virtual_stage(p, r, op.chunk);
      const bool forward = op.phase == PipelinePhase::kForward;
      if (op.phase == PipelinePhase::kWeightGrad) continue;  // W sends nothing
      if ((forward && vs == last_vs) || (!forward && vs == 0)) continue;
      const int to_vs = forward ? vs + 1 : vs - 1;
      const StagePlace to = stage_place(p, to_vs);
      const int to_op = b.op_index[to.rank][b.op_key(op.phase, to.chunk, op.microbatch)];
      if (to.rank == r) {
        // zb-v's turn at the bottom of the V: the next stage is this rank's other chunk.
        b.w.graph.add_dependency(b.op_marks[i][oi].last, b.op_marks[i][to_op].first);
        continue;
      }
      const int to_global = b.global(b.w.tp_rank[i], b.w.dp_rank[i], to.rank);
      const int j = b.sim_index(to_global);
      if (j < 0) continue;
      TaskInfo info;
      info.microbatch = op.microbatch;
      info.chunk = op.chunk;
      info.bytes = b.activation_bytes();
      info.peer = j;
      std::int32_t comm = b.p2p(b.w.global_rank[i], to_global);
      TaskId t = b.comm_task({{static_cast<int>(i), stream_index(StreamKind::kPpSend)}}, comm,
                                        forward ? send_act : send_grad, info);
      b.depend(b.op_marks[i][oi].last, t);
      b.w.graph.add_dependency(t, b.op_marks[j][to_op].first);
      // Megatron waits on its send before the schedule's next op.
      if (b.options.blocking_pipeline_sends && oi + 1 < program.size()) {
        b.w.graph.add_dependency(t, b.op_marks[i][oi + 1].first);
      }
    }
  }
}

}  // namespace

Workload build_workload(const ModelSpec& model, const PlanSpec& plan, const OpCosts& op_costs,
                        const CommCosts& comm_costs, Fidelity fidelity,
                        const WorkloadOptions& options) {
  if (plan.dp <= 0) throw InternalError("build_workload: the plan's dp is not resolved");
  WorkloadBuild b(model, plan, op_costs, comm_costs, fidelity, options);
  b.w.ranks_start_next_step_alone = plan.schedule == Schedule::kZbH2;
  place_ranks(b);
  b.w.graph = TaskGraph(static_cast<int>(b.w.global_rank.size()), kNumStreamKinds);
  LayerProgram layer(b);
  const double tasks = estimated_tasks(plan, fidelity, b.chunk_layers(), layer.segments_per_layer());
  // TaskId is 32 bits; beyond what the caller's memory allows, refuse before building.
  const double limit = options.max_tasks > 0 ? std::min(options.max_tasks, kMaxTasks) : kMaxTasks;
  if (tasks > limit) {
    throw WorkloadTooLarge(tasks, limit, plan.num_microbatches(), static_cast<int>(b.w.global_rank.size()), fidelity);
  }
  b.w.estimated_tasks = tasks;
  b.build_programs();
  reserve(b, static_cast<std::size_t>(tasks));
  for (int r = 0; r < plan.pp; ++r) {
    for (int d = 0; d < plan.grad_replicas(); ++d) {
      if (b.sim_index(b.global(0, d, r)) >= 0) layer.emit_tp_group(d, r);
    }
  }
  add_pipeline_transfers(b);
  add_data_parallel_and_step(b);
  b.w.graph.finalize();
  spdlog::debug("workload: {} tasks ({:.0f} estimated), {} simulated ranks, {} micro-batches, {} fidelity",
                b.w.graph.num_tasks(), tasks, b.w.global_rank.size(), plan.num_microbatches(), to_string(fidelity));
  return std::move(b.w);
}

}  // namespace strata::sim
