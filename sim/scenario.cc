#include "sim/scenario.h"

#include "core/data_paths.h"
#include "core/error.h"
#include "core/json_reader.h"

namespace strata {

void check_plan(PlanSpec& plan, const ModelSpec& model, const ClusterSpec& cluster,
                bool allow_cross_node_tp, const std::string& plan_file) {
  PlanContext context;
  context.num_gpus = cluster.num_gpus();
  context.gpus_per_node = cluster.gpus_per_node;
  context.allow_cross_node_tp = allow_cross_node_tp;
  resolve_and_check_plan(plan, model, context, plan_file);
}

Scenario load_scenario(const ScenarioArgs& args) {
  Scenario s;
  s.model_file = resolve_data_file(args.model, "scenarios/models", "model");
  s.model = read_model_spec(json::parse_file(s.model_file), s.model_file);
  s.cluster_file = resolve_data_file(args.cluster, "scenarios/clusters", "cluster");
  s.cluster = read_cluster_spec(json::parse_file(s.cluster_file), s.cluster_file);
  s.plan_file = resolve_data_file(args.plan, "scenarios/plans", "plan");
  s.plan = read_plan_spec(json::parse_file(s.plan_file), s.plan_file);
  if (!args.profile.empty()) {
    s.profile = load_profile(args.profile);
  } else {
    try {
      s.profile = load_profile(s.cluster.profile);
    } catch (const InputError& e) {
      if (e.file() != s.cluster.profile) throw;  // the profile file itself is at fault
      throw InputError(s.cluster_file, "$.profile", e.message());
    }
  }
  check_plan(s.plan, s.model, s.cluster, args.allow_cross_node_tp, s.plan_file);
  return s;
}

nlohmann::ordered_json inputs_json(const Scenario& s) {
  nlohmann::ordered_json j;
  j["model"] = to_json(s.model);
  j["plan"] = to_json(s.plan);
  j["cluster"] = to_json(s.cluster);
  j["profile"] = {{"name", s.profile.name}, {"kind", s.profile.kind}, {"device", s.profile.device.name}};
  return j;
}

}  // namespace strata
