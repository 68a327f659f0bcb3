#include "sim/validate.h"

#include <algorithm>
#include <cmath>
#include <filesystem>

#include "core/data_paths.h"
#include "core/error.h"
#include "core/json_reader.h"
#include "sim/simulate.h"

namespace strata::sim {
namespace {


double quantile_nearest_rank(std::vector<double> v, double q) {
  std::sort(v.begin(), v.end());
  const auto rank = static_cast<std::size_t>(std::ceil(q * static_cast<double>(v.size())));
  return v[std::max<std::size_t>(rank, 1) - 1];
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  return n % 2 == 1 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

}  // namespace

ValidationCase read_validation_case(const nlohmann::json& doc, const std::string& file) {
  json::ObjectReader r(doc, file);
  ValidationCase c;
  c.file = file;
  c.id = r.string("id");
  c.source = r.string("source");
  c.family = r.string("family");
  r.allow_text("notes");
  r.allow_text("confidence");
  Scenario& s = c.scenario;
  s.model_file = s.cluster_file = file;
  s.model = read_model_spec(r.raw("model"), file, "$.model");
  const nlohmann::json& plan = r.raw("plan");
  s.cluster = read_cluster_spec(r.raw("cluster"), file, "$.cluster");
  json::ObjectReader pub = r.object("published");
  c.metric = pub.choice("metric",
                        {"hw_tflops_per_gpu", "tflops_per_gpu", "step_time_s", "mfu", "hfu", "tokens_per_sec_per_gpu"});
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
  c.framework = s.plan.framework;
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
  ValidationRow row;
  row.id = c.id;
  row.family = c.family;
  row.framework = c.framework;
  row.metric = c.metric;
  row.published = c.published;
  SimulationOptions options;
  options.fidelity = fidelity;
  SimulationResult r = simulate(c.scenario, options);
  row.step_time_s = r.metrics.step_time_s;
  row.hw_tflops_per_gpu = r.hw_tflops_per_gpu;
  row.mfu = r.mfu;
  row.tokens_per_sec_per_gpu = r.tokens_per_s / r.num_gpus;
  row.bubble_ratio = r.metrics.bubble_ratio;
  const TaskAnnotations& notes = r.workload.notes;
  for (TaskId t : r.workload.stream(0, StreamKind::kCompute)) {
    const std::int32_t detail = notes.info(t).detail;
    if (detail < 0) continue;  // the optimizer and copies: no GEMMs
    for (const DetailOp& op : notes.detail(detail)) {
      if (op.category == Category::kGemm && op.lane == StreamKind::kCompute) row.gemm_s += ns_to_seconds(op.duration_ns);
    }
  }
  row.peak_memory_bytes = r.memory.peak_bytes;
  row.memory_capacity_bytes = r.memory.capacity_bytes;
  row.fits = r.memory.fits;
  row.num_gpus = r.num_gpus;
  if (c.metric == "hw_tflops_per_gpu") row.predicted = r.hw_tflops_per_gpu;
  if (c.metric == "tflops_per_gpu") row.predicted = r.tflops_per_gpu;
  if (c.metric == "step_time_s") row.predicted = r.metrics.step_time_s;
  if (c.metric == "mfu") row.predicted = r.mfu;
  if (c.metric == "hfu") row.predicted = r.hfu;
  if (c.metric == "tokens_per_sec_per_gpu") row.predicted = row.tokens_per_sec_per_gpu;
  row.relative_error = (row.predicted - row.published) / row.published;
  return row;
}

ErrorSummary summarize_errors(const std::vector<ValidationRow>& rows) {
  ErrorSummary sum;
  std::vector<double> abs_errors, signed_errors;
  for (const ValidationRow& r : rows) {
    abs_errors.push_back(std::abs(r.relative_error));
    signed_errors.push_back(r.relative_error);
    if (std::abs(r.relative_error) >= sum.worst_abs) {
      sum.worst_abs = std::abs(r.relative_error);
      sum.worst_signed = r.relative_error;
    }
  }
  sum.count = static_cast<int>(abs_errors.size());
  if (sum.count == 0) return sum;
  sum.median_abs = median(abs_errors);
  sum.p90_abs = quantile_nearest_rank(abs_errors, 0.9);
  sum.median_signed = median(signed_errors);
  return sum;
}

double median_abs_error(const std::vector<ValidationRow>& rows) { return summarize_errors(rows).median_abs; }

}  // namespace strata::sim
