#include "cli/scenario_options.h"

#include "core/error.h"
#include "core/progress.h"
#include "export/export.h"

namespace strata::cli {
namespace {

// model.json's own range for seq_length (plan/model_spec.cc).
constexpr int kMaxSeqLength = 1 << 24;

void add_shared_options(CLI::App& command, ScenarioArgs& args) {
  command.add_option("--profile", args.profile,
                     "device profile path or shipped name (default: the cluster's)");
  command.add_flag("--allow-cross-node-tp", args.allow_cross_node_tp,
                   "allow tensor parallelism across nodes");
  command.add_option("--seq-length", args.seq_length, "override the model's sequence length (e.g. a long-context stage)")
      ->check(CLI::Range(1, kMaxSeqLength));
  command.add_option("--schedule", args.schedule,
                     "override the plan's pipeline schedule (zb-v sets vpp 2, any but interleaved-1f1b vpp 1)")
      ->check(CLI::IsMember(schedule_names()));
  command.add_option("--moe-router-imbalance", args.moe_router_imbalance,
                     "MoE what-if: the busiest expert's tokens as a multiple of its balanced share (dropless; "
                     "replaces the plan's moe_router_imbalance)")
      ->check(CLI::Range(1.0, 1e6));
}

}  // namespace

void add_scenario_options(CLI::App& command, ScenarioArgs& args, bool plan_required) {
  command.add_option("--model", args.model, "model.json path or shipped name (e.g. gpt3-175b)")
      ->required();
  auto* plan = command.add_option("--plan", args.plan, "plan.json path or shipped name");
  if (plan_required) plan->required();
  command.add_option("--cluster", args.cluster, "cluster.json path or shipped name")->required();
  add_shared_options(command, args);
}

void add_scenario_or_sweep_options(CLI::App& command, ScenarioChoice& choice) {
  command.add_option("--model", choice.scenario.model, "model.json path or shipped name");
  command.add_option("--plan", choice.scenario.plan, "plan.json path or shipped name");
  command.add_option("--cluster", choice.scenario.cluster, "cluster.json path or shipped name");
  command.add_option("--from-sweep", choice.from_sweep, "a sweep.json from `strata sweep` (with --rank)");
  command.add_option("--rank", choice.rank, "which of the sweep's ranked plans (1: the best)");
  add_shared_options(command, choice.scenario);
}

Scenario load_chosen_scenario(const ScenarioChoice& choice) {
  const ScenarioArgs& a = choice.scenario;
  if (!choice.from_sweep.empty()) {
    if (!a.model.empty() || !a.plan.empty() || !a.cluster.empty()) {
      throw InputError("", "--from-sweep", "give either --from-sweep FILE --rank K or --model/--plan/--cluster, not both");
    }
    if (choice.rank < 1) throw InputError("", "--rank", "--from-sweep needs --rank K (1 is the best plan)");
    if (a.seq_length > 0 || !a.schedule.empty() || !a.profile.empty() || a.moe_router_imbalance > 0.0) {
      throw InputError("", "--from-sweep",
                       "a sweep's plan is simulated with the sweep's own model, profile and sequence length: "
                       "--seq-length, --schedule, --profile and --moe-router-imbalance go with "
                       "--model/--plan/--cluster");
    }
    return sim::scenario_from_sweep(choice.from_sweep, choice.rank, a.allow_cross_node_tp);
  }
  if (choice.rank != 0) throw InputError("", "--rank", "--rank K goes with --from-sweep FILE");
  if (a.model.empty() || a.plan.empty() || a.cluster.empty()) {
    throw InputError("", "--model", "give --model, --plan and --cluster (or --from-sweep FILE --rank K)");
  }
  return load_scenario(a);
}

sim::SimulationResult simulate_with_progress(const Scenario& s, sim::SimulationOptions options,
                                             const std::string& command) {
  ProgressLine progress(command, 100);
  options.progress = [&](std::int64_t done, std::int64_t total, std::string_view) {
    progress.update(100 * done / total, "simulating the plan");
    return true;
  };
  sim::SimulationResult r = sim::simulate(s, options);
  progress.finish();
  return r;
}

}  // namespace strata::cli
