#include "gui/model/run_simulation.h"

#include "costmodel/profile.h"
#include "core/atomic_file.h"
#include "core/error.h"
#include "gui/model/trace_reader.h"
#include "sim/simulate.h"
#include "plan/model_spec.h"
#include "plan/plan_spec.h"
#include "topologies/cluster_spec.h"

namespace strata::gui {
namespace {

std::string request_string(const SweepData& sweep, const char* key) {
  if (!sweep.request.is_object()) return "";
  auto it = sweep.request.find(key);
  return it != sweep.request.end() && it->is_string() ? it->get<std::string>() : "";
}

}  // namespace

SimulationOutput run_simulation(const Scenario& scenario, sim::Fidelity fidelity,
                                const ProgressFn& progress) {
  sim::SimulationOptions options;
  options.fidelity = fidelity;
  options.progress = progress;
  require_simulated_model(scenario);
  const sim::SimulationResult r = sim::simulate(scenario, options);  // Cancelled when asked
  SimulationOutput out;
  out.result_json = sim::result_json(scenario, r).dump(2) + "\n";
  out.trace_json = sim::result_trace(scenario, r, sim::default_trace_ranks(r));
  const std::string label = "simulation of " + scenario.model.name;
  out.result = read_result_object(nlohmann::json::parse(out.result_json), label, "$");
  out.trace = std::make_shared<const TraceModel>(read_trace_text(out.trace_json, label));
  return out;
}

Scenario scenario_for_sweep_plan(const SweepData& sweep, const SweepRow& row) {
  const std::string model = request_string(sweep, "model");
  const std::string cluster = request_string(sweep, "cluster");
  if (model.empty() || cluster.empty()) {
    throw InputError(sweep.file, "$.request",
                     "this needs the sweep's model and cluster: open the sweep.json written "
                     "beside sweep.csv");
  }
  Scenario s = load_scenario_inputs(model, cluster, request_string(sweep, "profile"));
  // The sweep already checked its plans, cross-node TP included when it was asked for.
  read_scenario_plan(s, row.plan, sweep.file, "$", /*allow_cross_node_tp=*/true);
  return s;
}

void save_simulation(const SimulationOutput& output, const std::string& dir) {
  OutputSet out;
  out.add(dir + "/result.json", output.result_json);
  out.add(dir + "/trace.json", output.trace_json);
  out.commit();
}

}  // namespace strata::gui
