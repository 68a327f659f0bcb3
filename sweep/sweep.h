// `strata sweep`: every valid plan, pruned by the memory model, simulated (folded)
// in parallel, ranked by throughput, the best re-simulated at full fidelity, and
// each of the top plans explained against the next.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "sim/simulate.h"
#include "sweep/plan_space.h"

namespace strata::sim {

struct SweepOptions {
  int threads = 1;
  int top_k = 10;      // plans explained and printed
  int full_top = 3;    // best plans re-simulated at full fidelity (0: none)
  // With samples > 0, the plans re-simulated at full fidelity are also sampled
  // `samples` times under clock variation and kernel jitter (sim/sampling.h): their P50 and P90
  // step times; rank_by_p90 then orders them by P90 (the most robust first),
  // ahead of the rest as before.
  int samples = 0;
  double clock_cv = 0.0;
  double kernel_cv = 0.0;  // each kernel's own spread on top (every family alike; an assumption)
  std::uint64_t seed = 1;
  bool rank_by_p90 = false;
  // This process simulates plan indices i with i % shard_count == shard_index
  // (sharded sweeps under mpirun; the caller merges).
  int shard_index = 0;
  int shard_count = 1;
  // Called with (plans done, plans to simulate), from the worker threads; returning
  // false stops the sweep (run_sweep then throws Cancelled). May be empty.
  ProgressFn progress;
};

// One valid plan and what became of it.
// What simulating one plan gave: plain numbers, so a sharded sweep can send them
// between ranks as they are (jobs/sharded_sweep.h).
struct PlanMetrics {
  double step_time_s = 0.0;
  double tokens_per_s = 0.0;
  double mfu = 0.0;
  double hfu = 0.0;
  double tflops_per_gpu = 0.0;
  double bubble_ratio = 0.0;
  double compute_s = 0.0;
  std::array<double, kNumCommKinds> exposed_s{};
  double folded_step_time_s = 0.0;  // kept when re-simulated at full fidelity
};

// One plan of the sweep; its metrics are meaningful when simulated.
struct PlanOutcome : PlanMetrics {
  PlanSpec plan;
  std::string label;
  // Memory model.
  bool fits = false;
  double peak_bytes = 0.0;
  double capacity_bytes = 0.0;
  double model_state_bytes = 0.0;  // weights + gradients + optimizer of the peak stage
  std::string prune_reason;        // why it does not fit, or is too large to simulate
  // Simulation (when it fits).
  bool simulated = false;
  std::string fidelity;            // "folded", or "full" after re-simulation
  // Ranking.
  int rank = 0;         // 1 = best; 0 when not ranked (does not fit)
  bool pareto = false;  // on the front of throughput vs memory headroom
  // Sampled (SweepOptions::samples): the step time's P50 and P90 with the P90's
  // 95% confidence interval; 0 when not sampled.
  double p50_step_time_s = 0.0;
  double p90_step_time_s = 0.0, p90_ci_low_s = 0.0, p90_ci_high_s = 0.0;
  std::string why;      // for the top plans: why it beats the next one

  double headroom() const { return capacity_bytes > 0 ? 1.0 - peak_bytes / capacity_bytes : 0.0; }
};

struct SweepCounts {
  PlanSpaceCounts space;
  std::int64_t valid = 0;
  std::int64_t pruned_memory = 0;
  std::map<std::string, std::int64_t> pruned_by_reason;
  // Plans that fit but whose step is too large to simulate in the memory one
  // simulation may use (sweep_memory_budget_bytes): their prune_reason says so.
  std::int64_t too_large = 0;
  std::int64_t simulated = 0;
  std::int64_t full_fidelity = 0;
  // Uneven-stage variants of the best even pipelines (first / last stage ±2
  // layers) that fit and were simulated; included in `simulated`.
  std::int64_t balanced = 0;
};

struct SweepResult {
  std::vector<PlanOutcome> plans;  // every valid plan; ranked ones first, by rank
  SweepCounts counts;
};

// Memory one of a sweep's simulations may use: core/memory_budget.h's budget
// over the machine's hardware threads (not --threads, so that which plans are
// too large is the same at any thread count).
double sweep_memory_budget_bytes();

// Enumerates, prunes and simulates; when sharded, only this shard's plans are
// simulated (the others keep simulated = false) and no ranking is done.
SweepResult run_sweep(const ModelSpec& model, const Simulator& simulator,
                      const PlanSpaceRequest& request, const SweepOptions& options);

// Ranks the simulated plans, marks the Pareto front, re-simulates the best at full
// fidelity and writes the explanations. Separate so a sharded sweep can merge first.
void rank_sweep(SweepResult& sweep, const ModelSpec& model, const Simulator& simulator,
                const SweepOptions& options);

// The outcome of one simulated plan from a simulation result.
void record_simulation(PlanOutcome& outcome, const SimulationResult& result);

}  // namespace strata::sim
