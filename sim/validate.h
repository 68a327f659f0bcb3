// Published training runs, encoded as validation cases (scenarios/validation/),
// and how far Strata's predictions land from them. Used to check the simulator,
// never to fit it: no profile figure is tuned to these results.
#pragma once

#include <string>
#include <vector>

#include "sim/scenario.h"
#include "sim/workload/workload.h"

namespace strata::sim {

struct ValidationCase {
  std::string id;
  std::string file;
  std::string source;
  std::string family;     // the source and software the run belongs to ("sc21-table1", "mosaicml-fsdp", ...)
  std::string framework;  // the framework profile the plan names
  Scenario scenario;
  // "hw_tflops_per_gpu", "tflops_per_gpu", "step_time_s", "mfu", "hfu", "tokens_per_sec_per_gpu"
  std::string metric;
  double published = 0.0;
};

// Reads one case (model, plan and cluster inline; the profile by name).
ValidationCase read_validation_case(const nlohmann::json& doc, const std::string& file);
// Every case shipped in scenarios/validation/, sorted by file name.
std::vector<ValidationCase> load_published_cases();

struct ValidationRow {
  std::string id;
  std::string family;
  std::string framework;
  std::string metric;
  double published = 0.0;
  double predicted = 0.0;
  double relative_error = 0.0;  // (predicted - published) / published
  double step_time_s = 0.0;
  double hw_tflops_per_gpu = 0.0;
  double mfu = 0.0;
  double tokens_per_sec_per_gpu = 0.0;
  double bubble_ratio = 0.0;
  // GEMM time of the first simulated rank's compute stream: what a GEMM ceiling
  // lower than the profile's moves (docs/validation.md, "GEMM ceiling").
  double gemm_s = 0.0;
  double peak_memory_bytes = 0.0;      // the fullest GPU's predicted memory
  double memory_capacity_bytes = 0.0;
  bool fits = false;  // the source ran it, so false is an error of the memory model
  int num_gpus = 0;
};

ValidationRow validate_case(const ValidationCase& c, Fidelity fidelity);

// Error statistics over the rows.
struct ErrorSummary {
  int count = 0;
  double median_abs = 0.0;     // median of |relative error|
  double p90_abs = 0.0;        // 90th percentile of |relative error| (nearest rank)
  double worst_abs = 0.0;      // largest |relative error|
  double median_signed = 0.0;  // median of the signed errors: + optimistic for rates, pessimistic for times
  double worst_signed = 0.0;   // the signed error of the worst row
};
ErrorSummary summarize_errors(const std::vector<ValidationRow>& rows);

// Median of |relative error| over the rows that ran.
double median_abs_error(const std::vector<ValidationRow>& rows);

}  // namespace strata::sim
