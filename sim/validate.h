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
  Scenario scenario;
  std::string metric;     // "hw_tflops_per_gpu", "tflops_per_gpu", "step_time_s", "mfu", "hfu"
  double published = 0.0;
};

// Reads one case (model, plan and cluster inline; the profile by name).
ValidationCase read_validation_case(const nlohmann::json& doc, const std::string& file);
// Every case shipped in scenarios/validation/, sorted by file name.
std::vector<ValidationCase> load_published_cases();

struct ValidationRow {
  std::string id;
  std::string metric;
  double published = 0.0;
  double predicted = 0.0;
  double relative_error = 0.0;  // (predicted - published) / published
  double step_time_s = 0.0;
  double hw_tflops_per_gpu = 0.0;
  double mfu = 0.0;
  double bubble_ratio = 0.0;
  int num_gpus = 0;
};

ValidationRow validate_case(const ValidationCase& c, Fidelity fidelity);

// Median of |relative error|.
double median_abs_error(const std::vector<ValidationRow>& rows);

}  // namespace strata::sim
