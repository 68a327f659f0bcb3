#include "sim/scenario.h"

#include "core/data_paths.h"
#include "core/error.h"
#include "core/json_reader.h"
#include "costmodel/framework_profile.h"

namespace strata {

Profile load_scenario_profile(const ClusterSpec& cluster, const std::string& cluster_file,
                              const std::string& profile) {
  if (!profile.empty()) return load_profile(profile);
  try {
    return load_profile(cluster.profile);
  } catch (const InputError& e) {
    if (e.file() != cluster.profile) throw;  // the profile file itself is at fault
    throw InputError(cluster_file, "$.profile", e.message());
  }
}

Scenario load_scenario_inputs(const std::string& model, const std::string& cluster, const std::string& profile) {
  Scenario s;
  s.model_file = resolve_data_file(model, "scenarios/models", "model");
  s.model = read_model_spec(json::parse_file(s.model_file), s.model_file);
  s.cluster_file = resolve_data_file(cluster, "scenarios/clusters", "cluster");
  s.cluster = read_cluster_spec(json::parse_file(s.cluster_file), s.cluster_file);
  s.profile = load_scenario_profile(s.cluster, s.cluster_file, profile);
  return s;
}

void read_scenario_plan(Scenario& s, const nlohmann::json& doc, const std::string& file, const std::string& path,
                        bool allow_cross_node_tp) {
  s.plan_file = file;
  s.plan = read_plan_spec(doc, file, path);
  const FrameworkProfile* framework = nullptr;
  try {
    framework = &framework_profile(s.plan.framework);
  } catch (const InputError& e) {
    if (e.file() != s.plan.framework) throw;  // the framework file itself is at fault
    throw InputError(file, path + ".framework", e.message());
  }
  if (s.plan.zero_stage == 3 && !framework->sharded) {
    throw InputError(file, path + ".zero_stage",
                     "framework \"" + framework->name + "\" does not shard parameters (ZeRO-3): its profile (" +
                         framework->file + ") has no sharded_data_parallel section; use zero_stage 0-2 or a "
                         "framework that has one");
  }
  if (s.plan.zero_stage == 3 && framework->sharded && framework->sharded->module_gather && s.plan.pp > 1) {
    throw InputError(file, path + ".pp",
                     "framework \"" + framework->name + "\" gathers ZeRO-3 parameters per module, as DeepSpeed "
                     "does, and DeepSpeed's ZeRO-3 does not run with pipeline parallelism: use pp 1, or zero_stage "
                     "0-2 with pp " + std::to_string(s.plan.pp));
  }
  PlanContext context;
  context.num_gpus = s.cluster.num_gpus();
  context.gpus_per_node = s.cluster.gpus_per_node;
  context.allow_cross_node_tp = allow_cross_node_tp;
  resolve_and_check_plan(s.plan, s.model, context, file, path);
}

Scenario load_scenario(const ScenarioArgs& args) {
  Scenario s = load_scenario_inputs(args.model, args.cluster, args.profile);
  if (args.seq_length > 0) s.model.seq_length = args.seq_length;
  const std::string plan_file = resolve_data_file(args.plan, "scenarios/plans", "plan");
  nlohmann::json doc = json::parse_file(plan_file);
  if (!args.schedule.empty() && doc.is_object()) {
    // The interleaved schedule keeps the plan's virtual stages and zb-v runs two
    // chunks per rank; another one runs the pipeline ranks with one chunk each.
    doc["schedule"] = args.schedule;
    if (args.schedule == to_string(Schedule::kZbV)) {
      doc["vpp"] = 2;
    } else if (args.schedule != to_string(Schedule::kInterleaved)) {
      doc["vpp"] = 1;
    }
  }
  if (args.moe_router_imbalance > 0.0) {
    if (!s.model.is_moe()) {
      throw InputError("", "--moe-router-imbalance",
                       "model " + s.model.name + " has no experts: the routing imbalance is an MoE model's what-if");
    }
    if (doc.is_object()) doc["moe_router_imbalance"] = args.moe_router_imbalance;
  }
  read_scenario_plan(s, doc, plan_file, "$", args.allow_cross_node_tp);
  return s;
}

std::optional<InputError> simulation_refusal(const ModelSpec& model, const PlanSpec& plan,
                                             const std::string& plan_file) {
  if (model.is_moe() && plan.zero_stage == 3) {
    return InputError(plan_file, "$.zero_stage",
                      "the event simulator models MoE layers (model " + model.name +
                          ") with ZeRO stages 0 to 2, as Megatron-Core's distributed optimizer shards them; "
                          "ZeRO-3 / FSDP over expert-parallel groups is not modelled yet: use zero_stage 0, 1 or 2");
  }
  if (model.mtp_num_layers > 0 && plan.cp > 1) {
    return InputError(plan_file, "$.cp",
                      "the event simulator does not model multi-token prediction (model " + model.name +
                          ", mtp_num_layers) with context parallelism yet: use cp 1");
  }
  if (model.mtp_num_layers > 0 && plan.zero_stage == 3) {
    return InputError(plan_file, "$.zero_stage",
                      "the event simulator does not model multi-token prediction (model " + model.name +
                          ", mtp_num_layers) with ZeRO-3's per-module gathers yet: use zero_stage 0, 1 or 2");
  }
  if (model.is_moe() && plan.zero_shard_size > 0 && plan.dp > 0 && plan.zero_shard_groups() > 1) {
    return InputError(plan_file, "$.zero_shard_size",
                      "the event simulator does not model hybrid sharding of MoE layers yet (several distributed-"
                      "optimizer instances over the expert data-parallel group): remove zero_shard_size");
  }
  return std::nullopt;
}

std::optional<InputError> simulation_refusal(const Scenario& s) {
  return simulation_refusal(s.model, s.plan, s.plan_file);
}

void require_simulated_model(const Scenario& s) {
  if (std::optional<InputError> refusal = simulation_refusal(s)) throw *refusal;
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
