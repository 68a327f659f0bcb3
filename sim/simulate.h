// `strata simulate`: one training step of a scenario, rank by rank, and what it
// means: step time, MFU/HFU, bubble, exposed communication, memory, and a trace.
#pragma once

#include "core/progress.h"

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "costmodel/cost_model.h"
#include "sim/engine/engine.h"
#include "plan/flops.h"
#include "plan/memory_model.h"
#include "sim/metrics.h"
#include "sim/scenario.h"
#include "sim/workload/workload.h"

namespace strata::sim {

// A what-if: one GPU's compute kernels take `factor` times as long (a throttled
// clock, a slower part). Full fidelity only: folded simulates one rank per stage.
struct SlowRank {
  int rank = 0;  // global rank
  double factor = 1.0;
};

// A NIC on the fabric at 1/factor of its bandwidth (topo::Topology::slow_nic).
struct SlowNic {
  int node = 0;
  int rail = 0;
  double factor = 1.0;
};

// The links between two vertices at 1/factor of their bandwidth
// (topo::Topology::slow_link).
struct SlowLink {
  std::string from;  // vertex names, "n0.gpu3"
  std::string to;
  double factor = 1.0;
};

struct SimulationOptions {
  Fidelity fidelity = Fidelity::kFull;
  std::vector<SlowRank> slow_ranks;
  // Slowed NICs: the whole step is simulated on a topology with them (the
  // free function simulate() builds that Simulator; Simulator::run takes its
  // own topology and ignores this).
  std::vector<SlowNic> slow_nics;
  std::vector<SlowLink> slow_links;  // the same, for any link
  // Full fidelity: find the step's critical-path ranks (SimulationResult::
  // critical_ranks), one more pass over the tasks; sampled steps ask for it.
  bool critical_path = false;
  // Each global rank's compute factor for this step (sim/sampling.h's clock
  // variation); empty: every GPU at speed. Full fidelity only; with slow_ranks
  // the factors multiply.
  std::vector<double> rank_factors;
  // Each compute task's own factor on one member rank, (task, global rank) ->
  // factor, on top of rank_factors (sampled kernel jitter; a task shared by a
  // tensor-parallel group takes its slowest member's); empty: none. Full fidelity.
  std::function<double(TaskId, int)> kernel_factor;
  // Only the step's time in metrics (no per-rank accounting: ranks, exposed
  // communication and bubble stay empty); sampled steps want nothing else.
  bool step_time_only = false;
  // Keep the task graph and event times for traces and link utilization
  // (sweeps turn this off: thousands of plans, metrics only).
  bool keep_timeline = true;
  // Memory the simulation may use; 0: core/memory_budget.h's (half this
  // machine's). A step whose estimate exceeds it is refused (WorkloadTooLarge).
  double memory_budget_bytes = 0.0;
  // Called with the work done of kSimulationWork (core/progress.h) and what is
  // being done: building the step is the first 30%, running it the next 60% (by
  // tasks finished, with the events so far), the results the rest. Returning
  // false cancels (simulate then throws Cancelled). May be empty.
  ProgressFn progress;
};

// What a simulation costs per task of workload.h's estimated_tasks: the graph,
// the engine's times and a trace of the default ranks. Measured with
// /usr/bin/time on llama3-70b tp 2 cp 2 pp 4 dp 4 on 64 H100s (full fidelity):
// 128 -> 256 micro-batches grew the peak RSS by 87 bytes per estimated task
// without a trace; with the default trace the whole run is 155 bytes per task.
inline constexpr double kBytesPerEstimatedTask = 160.0;

// The units of SimulationOptions::progress (thousandths of the simulation).
inline constexpr std::int64_t kSimulationWork = 1000;

struct LinkUse {
  std::string from;  // vertex names, "n0.gpu3", "leaf2"
  std::string to;
  std::string kind;  // "nvlink", "pcie", ...
  double bandwidth_bytes_per_s = 0.0;
  double bytes = 0.0;
  double utilization = 0.0;  // bytes / (bandwidth * step time)
  // The busiest links only (kBusiestLinksOverTime of them): utilization over the
  // step, each point holding until the next. A transfer's bytes are spread evenly
  // over its task's time on its links (its mean rate; under contention the rate
  // varies within the task, which this smooths).
  std::vector<std::pair<TimeNs, double>> utilization_over_time;
};
inline constexpr int kBusiestLinksOverTime = 4;

struct SimulationResult {
  Fidelity fidelity = Fidelity::kFull;
  int num_gpus = 0;
  StepMetrics metrics;
  StepFlops flops;
  MemoryReport memory;
  double peak_flops_per_gpu = 0.0;
  double mfu = 0.0;
  double hfu = 0.0;
  double tflops_per_gpu = 0.0;     // model FLOPs
  double hw_tflops_per_gpu = 0.0;  // with recompute
  double tokens_per_s = 0.0;
  double bubble_ratio_analytic = 0.0;
  std::int64_t events = 0;
  std::vector<LinkUse> links;               // full fidelity only, links that carried bytes
  std::vector<SectionOrigin> cost_origins;  // which cost figures are measured
  std::vector<std::string> notes;
  // Full fidelity with SimulationOptions::critical_path: the global ranks whose compute lies on the step's critical path
  // (from the task that ends last, back through what let each task start), in
  // increasing order. Which GPUs a faster step would need faster.
  std::vector<int> critical_ranks;
  // Kept for the trace.
  Workload workload;
  RunResult run;
};

// The global ranks with compute tasks on the chain that ends the step: from the
// task that ends last, each task's blocker (what let it start) back to the
// start; in increasing order (SimulationResult::critical_ranks).
std::vector<int> critical_path_ranks(const Workload& workload, const RunResult& run);

// Simulates plans on one cluster with one device profile. Building it costs the
// topology and the collective model once; run() may then be called for many plans,
// from several threads at once (sweeps).
class Simulator {
 public:
  // slow_nics, slow_links: a what-if topology, those NICs and links slowed
  // before anything is costed.
  Simulator(const ClusterSpec& cluster, const Profile& profile, const std::vector<SlowNic>& slow_nics = {},
            const std::vector<SlowLink>& slow_links = {});
  ~Simulator();
  Simulator(const Simulator&) = delete;
  Simulator& operator=(const Simulator&) = delete;

  // The plan must already be checked against the model and cluster (check_plan).
  SimulationResult run(const ModelSpec& model, const PlanSpec& plan,
                       const SimulationOptions& options = {}) const;
  // The same in two halves, for a step run many times with different GPU speeds
  // (sampled steps): build() builds the step once (options' fidelity, budget and
  // progress; its speeds are not applied), run() runs it with options' slow ranks
  // and rank factors as durations beside the graph, which stays as built, so
  // several threads may run one built step at once. build() then run() gives
  // what run(model, plan, options) gives.
  std::shared_ptr<const Workload> build(const ModelSpec& model, const PlanSpec& plan,
                                        const SimulationOptions& options = {}) const;
  SimulationResult run(const Workload& built, const ModelSpec& model, const PlanSpec& plan,
                       const SimulationOptions& options = {}) const;

  const ClusterSpec& cluster() const;
  const Profile& profile() const;

 private:
  // detail_ops: WorkloadOptions::detail_ops (false only where the step is run once
  // and dropped, its timeline not kept).
  Workload build_workload_of(const ModelSpec& model, const PlanSpec& plan, const SimulationOptions& options,
                             bool detail_ops) const;
  // Runs a built step; `owned`, when given, is `built` itself, moved into the
  // result when the options keep the timeline (else that copies it).
  SimulationResult run_built(const Workload& built, Workload* owned, const ModelSpec& model, const PlanSpec& plan,
                             const SimulationOptions& options) const;
  struct State;
  std::unique_ptr<State> state_;
};

// One scenario, one plan: a Simulator used once. A step too large to simulate in
// the memory allowed is an InputError naming the key that makes it so (the
// plan's global_batch_size, or the cluster's nodes) and what to change.
SimulationResult simulate(const Scenario& scenario, const SimulationOptions& options = {});

// That InputError for a step of the scenario too large to simulate.
[[noreturn]] void throw_too_large(const Scenario& scenario, const SimulationOptions& options,
                                  const WorkloadTooLarge& e);

// result.json (docs/formats.md).
nlohmann::ordered_json result_json(const Scenario& scenario, const SimulationResult& result);

// Default traced ranks: every simulated rank up to 16 (a 64-rank trace is
// hundreds of MB), else the ranks with
// tensor- and data-parallel rank 0 (one per stage). Values are simulated-rank indices.
std::vector<int> default_trace_ranks(const SimulationResult& result);
// trace.json for the given simulated ranks (global rank numbers are mapped).
std::string result_trace(const Scenario& scenario, const SimulationResult& result,
                         const std::vector<int>& simulated_ranks);
// Maps global ranks (as users name them) to simulated ranks; InputError for ranks
// not simulated (folded fidelity simulates one rank per stage).
std::vector<int> simulated_ranks_of(const SimulationResult& result, const std::vector<int>& global_ranks);

}  // namespace strata::sim
