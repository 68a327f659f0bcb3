// The measured side of `strata validate`: predicted vs measured step time and
// memory for runs of exported plans, and the whole loop on this machine
// (calibrate -> simulate -> export -> mpirun strata run -> compare).
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/progress.h"

namespace strata::jobs {

// One compared run.
struct RunComparison {
  std::string label;  // "tp 2, m 4, ZeRO 1"
  std::string dir;
  int ranks = 0;
  double predicted_step_s = 0.0;
  double measured_step_s = 0.0;
  double predicted_peak_bytes = 0.0;
  double measured_peak_bytes = 0.0;
  // The host's speed during the run relative to the loop's start, from GEMM
  // probes before and after it (jobs/host_speed.h); 0: not probed (--run DIR).
  double host_speed = 0.0;
  // Whether the step time tests the model: not probed, or the host's speed held.
  bool host_steady() const;
  double step_error() const { return measured_step_s / predicted_step_s - 1.0; }
  double memory_error() const { return measured_peak_bytes / predicted_peak_bytes - 1.0; }
};

// The runs whose host speed held (RunComparison::host_steady).
std::vector<RunComparison> steady_host_runs(const std::vector<RunComparison>& runs);

// Reads DIR/prediction.json (strata export) and DIR/measured.json (strata run).
// Throws InputError when one is missing, malformed, or they describe different plans.
RunComparison compare_run(const std::string& dir);
// The same for the two documents already read (dir left empty): measured.json's
// loader, as its fuzz target calls it (tests/loaders/loaders.h).
RunComparison compare_run_documents(const nlohmann::json& prediction, const std::string& prediction_file,
                                    const nlohmann::json& measured, const std::string& measured_file);

// The host's 1-minute load average and online cores (load < 0: unknown): a busy
// host slows measured runs (a rank waiting for its peer loses its core).
struct HostLoad {
  double load = -1.0;
  long cores = 0;
  bool busy() const { return load > 0.75 * static_cast<double>(cores); }
};
HostLoad host_load();

struct QuickValidationOptions {
  std::string strata;    // the strata executable the loop runs under mpirun
  std::string work_dir;  // keep the files here (empty: a temporary directory, removed)
  // A cpu profile calibrated on this host (2 ranks) to use instead of calibrating
  // again; empty: calibrate first.
  std::string profile;
  ProgressFn progress;   // one unit for the calibration, one per plan
};

struct QuickValidation {
  std::vector<RunComparison> runs;
  double wall_s = 0.0;
  HostLoad before, after;
  // The GEMM probe's seconds at the start and after the calibration (the two
  // are equal when a profile was given: nothing ran between them).
  double probe_start_s = 0.0, probe_after_calibration_s = 0.0;
  std::string kept_dir;  // where the files are (empty when they were temporary)
};

// --quick: calibrates the cpu backend (quick, 2 ranks) unless given a profile, then for each of its
// 2-rank plans on the shipped "tiny" model (tp 2, pp 2, dp 2 with several
// micro-batch counts and ZeRO stages) simulates, exports, runs it under
// `mpirun -n 2` and compares. Throws InputError without mpirun, InternalError
// when a step fails (with the tail of its log).
QuickValidation run_quick_validation(const QuickValidationOptions& options);

// Median and worst |relative error| of a list.
double median_abs(std::vector<double> values);
double max_abs(const std::vector<double>& values);

// The comparisons and their summary, as `strata validate --json` writes them.
nlohmann::ordered_json run_validation_json(const std::vector<RunComparison>& runs, const HostLoad& host);

}  // namespace strata::jobs
