#include "sim/validate.h"

#include <algorithm>
#include <cmath>
#include <filesystem>

#include "core/data_paths.h"
#include "core/error.h"
#include "core/json_reader.h"
#include "sim/simulate.h"

namespace strata::sim {

ValidationCase read_validation_case(const nlohmann::json& doc, const std::string& file) {
  json::ObjectReader r(doc, file);
  ValidationCase c;
  c.file = file;
  c.id = r.string("id");
  c.source = r.string("source");
  r.allow_text("notes");
  r.allow_text("confidence");
  Scenario& s = c.scenario;
  s.model_file = s.cluster_file = file;
  s.model = read_model_spec(r.raw("model"), file, "$.model");
  const nlohmann::json& plan = r.raw("plan");
  s.cluster = read_cluster_spec(r.raw("cluster"), file, "$.cluster");
  json::ObjectReader pub = r.object("published");
  c.metric = pub.choice("metric", {"hw_tflops_per_gpu", "tflops_per_gpu", "step_time_s", "mfu", "hfu"});
  c.published = pub.number("value", 1e-9, 1e12);
  pub.allow_text("note");
  pub.finish();
  r.finish();
  try {
    s.profile = load_profile(s.cluster.profile);
  } catch (const InputError& e) {
    throw InputError(file, "$.cluster.profile", e.message());
  }
  read_scenario_plan(s, plan, file, "$.plan", /*allow_cross_node_tp=*/false);
  return c;
}

std::vector<ValidationCase> load_published_cases() {
  std::vector<ValidationCase> cases;
  for (const std::string& name : shipped_names("scenarios/validation")) {
    std::string path = resolve_data_file(name, "scenarios/validation", "validation case");
    cases.push_back(read_validation_case(json::parse_file(path), path));
  }
  return cases;
}

ValidationRow validate_case(const ValidationCase& c, Fidelity fidelity) {
  SimulationOptions options;
  options.fidelity = fidelity;
  SimulationResult r = simulate(c.scenario, options);
  ValidationRow row;
  row.id = c.id;
  row.metric = c.metric;
  row.published = c.published;
  row.step_time_s = r.metrics.step_time_s;
  row.hw_tflops_per_gpu = r.hw_tflops_per_gpu;
  row.mfu = r.mfu;
  row.bubble_ratio = r.metrics.bubble_ratio;
  row.num_gpus = r.num_gpus;
  if (c.metric == "hw_tflops_per_gpu") row.predicted = r.hw_tflops_per_gpu;
  if (c.metric == "tflops_per_gpu") row.predicted = r.tflops_per_gpu;
  if (c.metric == "step_time_s") row.predicted = r.metrics.step_time_s;
  if (c.metric == "mfu") row.predicted = r.mfu;
  if (c.metric == "hfu") row.predicted = r.hfu;
  row.relative_error = (row.predicted - row.published) / row.published;
  return row;
}

double median_abs_error(const std::vector<ValidationRow>& rows) {
  if (rows.empty()) return 0.0;
  std::vector<double> e;
  for (const ValidationRow& r : rows) e.push_back(std::abs(r.relative_error));
  std::sort(e.begin(), e.end());
  const std::size_t n = e.size();
  return n % 2 == 1 ? e[n / 2] : 0.5 * (e[n / 2 - 1] + e[n / 2]);
}

}  // namespace strata::sim
