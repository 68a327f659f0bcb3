#include "cli/validate_run.h"

#include <algorithm>
#include <filesystem>

#include <fmt/format.h>

#include "core/atomic_file.h"
#include "core/progress.h"
#include "core/units.h"
#include "jobs/run_validation.h"

namespace strata::cli {
namespace {

using jobs::RunComparison;

// "100%", "71%": the host's speed during a run against the loop's start; "" when
// not probed (--run DIR).
std::string host_speed_cell(const RunComparison& r) {
  if (r.host_speed == 0.0) return "";
  return fmt::format("{:.0f}%{}", 100 * r.host_speed, r.host_steady() ? "" : "*");
}

void print_step_summary(const char* what, const std::vector<RunComparison>& rows) {
  std::vector<double> errors;
  for (const RunComparison& r : rows) errors.push_back(r.step_error());
  fmt::print("step time{}: median |error| {:.1f}%, worst {:.1f}% over {} run(s) (target on the cpu backend: median "
             "<= 10%, worst <= 20%)\n",
             what, 100 * jobs::median_abs(errors), 100 * jobs::max_abs(errors), rows.size());
}

void print_table(const std::vector<RunComparison>& rows) {
  const bool probed = std::any_of(rows.begin(), rows.end(), [](const RunComparison& r) { return r.host_speed > 0; });
  fmt::print("{:<40} {:>5} {:>12} {:>12} {:>8} {:>11} {:>11} {:>8}{}\n", "plan", "ranks", "predicted", "measured",
             "error", "pred. mem", "meas. mem", "error", probed ? "    host" : "");
  std::vector<double> memory_errors;
  for (const RunComparison& r : rows) {
    fmt::print("{:<40} {:>5} {:>10.2f}ms {:>10.2f}ms {:>+7.1f}% {:>8.2f}MiB {:>8.2f}MiB {:>+7.1f}%{}\n", r.label,
               r.ranks, 1e3 * r.predicted_step_s, 1e3 * r.measured_step_s, 100 * r.step_error(),
               r.predicted_peak_bytes / kMiB, r.measured_peak_bytes / kMiB, 100 * r.memory_error(),
               probed ? fmt::format(" {:>7}", host_speed_cell(r)) : "");
    memory_errors.push_back(r.memory_error());
  }
  fmt::print("\n");
  const std::vector<RunComparison> steady = jobs::steady_host_runs(rows);
  if (steady.size() == rows.size()) {
    print_step_summary("", rows);
  } else {
    // Runs during which the host's own speed changed say nothing about the model:
    // the prediction assumes the host the calibration measured.
    fmt::print("* the host ran the probe GEMM more than 10% faster or slower than at the start during this run "
               "(jobs/host_speed.h): its step time measures the host, not the model\n");
    print_step_summary(" (steady host)", steady);
    print_step_summary(" (all runs)", rows);
  }
  fmt::print("peak memory: median |error| {:.1f}%, worst {:.1f}%\n", 100 * jobs::median_abs(memory_errors),
             100 * jobs::max_abs(memory_errors));
}

std::vector<RunComparison> run_quick(const RunValidationArgs& args) {
  const jobs::HostLoad before = jobs::host_load();
  if (before.busy()) {
    fmt::print(stderr,
               "warning: load average {:.1f} on {} cores before --quick: other work on this host will slow the "
               "measured runs (a rank that waits for its peer loses its core) and distort the calibration\n",
               before.load, before.cores);
  }
  jobs::QuickValidationOptions options;
  options.strata = std::filesystem::read_symlink("/proc/self/exe").string();
  options.work_dir = args.work_dir;
  options.profile = args.profile;
  ProgressLine progress("validate --quick", 0);
  options.progress = progress.callback();
  const jobs::QuickValidation q = jobs::run_quick_validation(options);
  progress.finish();
  fmt::print("strata validate --quick: calibrate (cpu, 2 ranks) -> simulate -> export -> mpirun -n 2 strata run, "
             "models tiny and tiny-moe, {:.0f} s{}; load average {:.1f} before, {:.1f} after, on {} cores{}\n\n",
             q.wall_s, q.kept_dir.empty() ? "" : ", files in " + q.kept_dir, q.before.load, q.after.load,
             q.before.cores,
             q.before.busy() || q.after.busy() ? " (busy: the measured times include waits for a core)" : "");
  if (q.probe_after_calibration_s != q.probe_start_s) {
    fmt::print("host speed (a 512^3 fp32 GEMM on one core): {:.2f} ms at the start, {:.2f} ms after calibrating\n",
               1e3 * q.probe_start_s, 1e3 * q.probe_after_calibration_s);
  }
  return q.runs;
}

}  // namespace

void add_run_validation_options(CLI::App& validate, RunValidationArgs& args) {
  validate.add_option("--run", args.run_dirs,
                      "compare DIR/prediction.json (strata export) with DIR/measured.json (strata run); repeatable");
  validate.add_flag("--quick", args.quick,
                    "on this machine: calibrate cpu (quick) -> simulate -> export -> mpirun -n 2 strata run -> "
                    "compare, over 2-rank plans");
  validate.add_option("--work-dir", args.work_dir, "--quick: keep its files in this directory");
  validate.add_option("--profile", args.profile,
                      "--quick: the cpu profile `mpirun -n 2 strata calibrate --backend cpu --quick --model tiny "
                      "--model tiny-moe` wrote on this host (default: calibrate first)");
}

bool run_validation_requested(const RunValidationArgs& args) { return args.quick || !args.run_dirs.empty(); }

void run_validation(const RunValidationArgs& args, const std::string& json_file) {
  std::vector<RunComparison> rows;
  for (const std::string& d : args.run_dirs) rows.push_back(jobs::compare_run(d));
  if (args.quick) {
    std::vector<RunComparison> quick = run_quick(args);
    rows.insert(rows.end(), quick.begin(), quick.end());
  }
  print_table(rows);
  if (!json_file.empty()) {
    write_file_atomic(json_file, jobs::run_validation_json(rows, jobs::host_load()).dump(2) + "\n");
  }
}

}  // namespace strata::cli
