#include "gui/model/export_plan.h"

#include <sys/stat.h>

#include "costmodel/profile.h"
#include "core/atomic_file.h"
#include "core/error.h"
#include "export/export.h"
#include "sim/simulate.h"

namespace strata::gui {

ExportedPlan export_plan_to(const Scenario& scenario, const std::string& dir,
                            const ProgressFn& progress) {
  sim::SimulationOptions options;
  options.fidelity = sim::Fidelity::kFull;
  options.progress = progress;
  require_simulated_model(scenario);  // what it does not model: `strata export` writes the flags alone
  const sim::SimulationResult result = sim::simulate(scenario, options);  // Cancelled when asked
  // strata export's defaults (cli/cmd_export.cc): ExportOptions' own.
  sim::ExportOptions o;
  o.command_line = "strata-gui (File > Export Plan)";
  const sim::ExportResult exported = sim::export_plan(scenario, result, o);

  OutputSet out;
  ExportedPlan plan;
  plan.dir = dir;
  for (const sim::ExportFile& f : exported.files) {
    out.add(dir + "/" + f.name, f.content);
    plan.files.push_back(f.name);
  }
  out.commit();
  for (const sim::ExportFile& f : exported.files) {
    if (f.executable) chmod((dir + "/" + f.name).c_str(), 0755);
  }
  plan.notes = exported.notes;
  plan.step_time_s = result.metrics.step_time_s;
  return plan;
}

Scenario scenario_from_result(const ResultData& r) {
  const nlohmann::json& in = r.inputs;
  for (const char* key : {"model", "plan", "cluster", "profile"}) {
    if (!in.is_object() || !in.contains(key) || !in[key].is_object()) {
      throw InputError(r.file, std::string("$.inputs.") + key,
                       "missing: the plan can be exported from a result.json written by "
                       "`strata simulate` (with inputs.model, plan, cluster and profile)");
    }
  }
  Scenario s;
  s.model = read_model_spec(in["model"], r.file, "$.inputs.model");
  // The echoed cluster writes fabric keys left to the preset as 0 (tiers,
  // efficiency, latency_us), which the cluster reader rejects as given values:
  // dropped, they mean what they meant in the original cluster.json.
  nlohmann::json cluster = in["cluster"];
  if (cluster.contains("fabric") && cluster["fabric"].is_object()) {
    for (const char* key : {"tiers", "efficiency", "latency_us"}) {
      auto it = cluster["fabric"].find(key);
      if (it != cluster["fabric"].end() && it->is_number() && it->get<double>() == 0.0) {
        cluster["fabric"].erase(it);
      }
    }
  }
  s.cluster = read_cluster_spec(cluster, r.file, "$.inputs.cluster");
  const nlohmann::json& profile = in["profile"];
  if (!profile.contains("name") || !profile["name"].is_string()) {
    throw InputError(r.file, "$.inputs.profile.name", "missing: the device profile's name");
  }
  s.profile = load_profile(profile["name"].get<std::string>());
  s.model_file = s.cluster_file = r.file;
  // The simulator checked this plan; cross-node TP was allowed if it was used.
  read_scenario_plan(s, in["plan"], r.file, "$.inputs.plan", /*allow_cross_node_tp=*/true);
  return s;
}

}  // namespace strata::gui
