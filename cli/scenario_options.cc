#include "cli/scenario_options.h"

namespace strata::cli {

void add_scenario_options(CLI::App& command, ScenarioArgs& args, bool plan_required) {
  command.add_option("--model", args.model, "model.json path or shipped name (e.g. gpt3-175b)")
      ->required();
  auto* plan = command.add_option("--plan", args.plan, "plan.json path or shipped name");
  if (plan_required) plan->required();
  command.add_option("--cluster", args.cluster, "cluster.json path or shipped name")->required();
  command.add_option("--profile", args.profile,
                     "device profile path or shipped name (default: the cluster's)");
  command.add_flag("--allow-cross-node-tp", args.allow_cross_node_tp,
                   "allow tensor parallelism across nodes");
  command.add_option("--seq-length", args.seq_length, "override the model's sequence length (e.g. a long-context stage)")
      ->check(CLI::PositiveNumber);
  command.add_option("--schedule", args.schedule,
                     "override the plan's pipeline schedule (any but interleaved-1f1b sets vpp 1)")
      ->check(CLI::IsMember(schedule_names()));
}

}  // namespace strata::cli
