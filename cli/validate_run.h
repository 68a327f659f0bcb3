// The measured side of `strata validate`: predicted vs measured step time and
// memory for runs of exported plans.
//   --run DIR   (repeatable) compares DIR/prediction.json with DIR/measured.json
//               written by `strata export` and `strata run`;
//   --quick     does the whole loop on this machine with the cpu backend:
//               calibrate (quick, 2 ranks) -> simulate -> export -> mpirun -n 2
//               strata run -> compare, over 2-rank plans (tp 2, pp 2, dp 2 with
//               several micro-batch counts and ZeRO stages).
#pragma once

#include <string>
#include <vector>

#include <CLI/CLI.hpp>

namespace strata::cli {

struct RunValidationArgs {
  std::vector<std::string> run_dirs;
  bool quick = false;
  std::string work_dir;  // --quick: keep the files here (default: a temporary directory, removed)
};

// Adds --run, --quick and --work-dir to `strata validate`.
void add_run_validation_options(CLI::App& validate, RunValidationArgs& args);
bool run_validation_requested(const RunValidationArgs& args);

// Prints the table; json_file (may be empty) also gets it as JSON. Throws
// InputError for missing or mismatched files, InternalError when a step of
// --quick fails (with the tail of its log).
void run_validation(const RunValidationArgs& args, const std::string& json_file);

// One compared run.
struct RunComparison {
  std::string label;   // "tp 2, m 4, ZeRO 1"
  std::string dir;
  int ranks = 0;
  double predicted_step_s = 0.0;
  double measured_step_s = 0.0;
  double predicted_peak_bytes = 0.0;
  double measured_peak_bytes = 0.0;
  double step_error() const { return measured_step_s / predicted_step_s - 1.0; }
  double memory_error() const { return measured_peak_bytes / predicted_peak_bytes - 1.0; }
};

// Reads DIR/prediction.json and DIR/measured.json. Throws InputError when one is
// missing, malformed, or they describe different plans.
RunComparison compare_run(const std::string& dir);

}  // namespace strata::cli
