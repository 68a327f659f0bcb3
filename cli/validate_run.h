// The measured side of `strata validate` (the work is in jobs/run_validation.h):
//   --run DIR   (repeatable) compares DIR/prediction.json with DIR/measured.json
//               written by `strata export` and `strata run`;
//   --quick     does the whole loop on this machine with the cpu backend:
//               calibrate (quick, 2 ranks) -> simulate -> export -> mpirun -n 2
//               strata run -> compare, over 2-rank plans.
#pragma once

#include <string>
#include <vector>

#include <CLI/CLI.hpp>

namespace strata::cli {

struct RunValidationArgs {
  std::vector<std::string> run_dirs;
  bool quick = false;
  std::string work_dir;  // --quick: keep the files here (default: a temporary directory, removed)
  std::string profile;   // --quick: a cpu profile already calibrated here (default: calibrate first)
};

// Adds --run, --quick and --work-dir to `strata validate`.
void add_run_validation_options(CLI::App& validate, RunValidationArgs& args);
bool run_validation_requested(const RunValidationArgs& args);

// Prints the table; json_file (may be empty) also gets it as JSON. Throws
// InputError for missing or mismatched files, InternalError when a step of
// --quick fails (with the tail of its log).
void run_validation(const RunValidationArgs& args, const std::string& json_file);

}  // namespace strata::cli
