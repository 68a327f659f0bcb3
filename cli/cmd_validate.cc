// strata validate: predictions against what was measured — published training runs
// (--published), and runs of the exported plan on this machine.
#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "cli/commands.h"
#include "cli/validate_run.h"
#include "core/atomic_file.h"
#include "core/error.h"
#include "core/progress.h"
#include "sim/validate.h"

namespace strata::cli {
namespace {

struct ValidateArgs {
  bool published = false;
  std::string fidelity = "folded";
  std::string json_file;
  RunValidationArgs runs;  // --run DIR, --quick (validate_run.h)
};

constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;

// The targets of issue 23 for the published table (median, p90, worst |error|).
constexpr double kTargetMedian = 0.05, kTargetP90 = 0.12, kTargetWorst = 0.25;

std::string summary_line(const sim::ErrorSummary& s) {
  return fmt::format("{:>3} runs  median {:>+6.1f}% (|e| {:>4.1f}%)  p90 |e| {:>5.1f}%  worst {:>+6.1f}%", s.count,
                     100 * s.median_signed, 100 * s.median_abs, 100 * s.p90_abs, 100 * s.worst_signed);
}

nlohmann::ordered_json summary_json(const sim::ErrorSummary& s) {
  return {{"count", s.count},           {"median_abs_error", s.median_abs}, {"p90_abs_error", s.p90_abs},
          {"worst_abs_error", s.worst_abs}, {"median_error", s.median_signed}, {"worst_error", s.worst_signed}};
}

void run_published(const ValidateArgs& args) {
  const auto fidelity = args.fidelity == "full" ? sim::Fidelity::kFull : sim::Fidelity::kFolded;
  std::vector<sim::ValidationCase> cases = sim::load_published_cases();
  std::vector<sim::ValidationRow> rows;
  ProgressLine progress("validate", static_cast<std::int64_t>(cases.size()));
  for (const sim::ValidationCase& c : cases) {
    progress.update(static_cast<std::int64_t>(rows.size()), c.id);
    rows.push_back(sim::validate_case(c, fidelity));
  }
  progress.finish();
  fmt::print("{:<48} {:>5} {:<20} {:<22} {:>10} {:>10} {:>8} {:>8} {:>7} {:>11}\n", "case", "GPUs", "framework",
             "metric", "published", "predicted", "error", "step s", "bubble", "memory GiB");
  int over_capacity = 0;  // runs the source trained that the memory model says do not fit
  for (const sim::ValidationRow& r : rows) {
    fmt::print("{:<48} {:>5} {:<20} {:<22} {:>10.2f} {:>10.2f} {:>+7.1f}% {:>8.2f} {:>6.1f}% {:>5.1f}/{:<3.0f}{}\n",
               r.id, r.num_gpus, r.framework, r.metric, r.published, r.predicted, 100 * r.relative_error,
               r.step_time_s, 100 * r.bubble_ratio, r.peak_memory_bytes / kGiB, r.memory_capacity_bytes / kGiB,
               r.fits ? "" : " over");
    if (!r.fits) ++over_capacity;
  }
  // Families in the order their first case appears (cases are sorted by file name).
  std::vector<std::string> families;
  for (const sim::ValidationRow& r : rows) {
    if (std::find(families.begin(), families.end(), r.family) == families.end()) families.push_back(r.family);
  }
  fmt::print("\nby family (signed: + is a rate predicted too high or a time too long)\n");
  nlohmann::ordered_json family_json = nlohmann::ordered_json::object();
  for (const std::string& f : families) {
    std::vector<sim::ValidationRow> in;
    for (const sim::ValidationRow& r : rows) {
      if (r.family == f) in.push_back(r);
    }
    const sim::ErrorSummary s = sim::summarize_errors(in);
    family_json[f] = summary_json(s);
    if (s.count > 0) fmt::print("  {:<22} {}\n", f, summary_line(s));
  }
  const sim::ErrorSummary all = sim::summarize_errors(rows);
  const bool met = all.median_abs <= kTargetMedian && all.p90_abs <= kTargetP90 && all.worst_abs <= kTargetWorst &&
                   over_capacity == 0;
  if (over_capacity > 0) {
    fmt::print("\n{} run(s) predicted not to fit although the source ran them: an error of the memory model\n",
               over_capacity);
  }
  fmt::print("\nall: {} of {} published runs, {} fidelity\n  median |error| {:.1f}%, p90 {:.1f}%, worst {:.1f}% "
             "(target: median <= {:.0f}%, p90 <= {:.0f}%, none worse than {:.0f}%, every run fitting): "
             "{}\n",
             all.count, rows.size(), sim::to_string(fidelity), 100 * all.median_abs, 100 * all.p90_abs,
             100 * all.worst_abs, 100 * kTargetMedian, 100 * kTargetP90, 100 * kTargetWorst,
             met ? "met" : "not met");
  if (!args.json_file.empty()) {
    nlohmann::ordered_json j;
    j["fidelity"] = sim::to_string(fidelity);
    j["median_abs_error"] = all.median_abs;
    j["p90_abs_error"] = all.p90_abs;
    j["worst_abs_error"] = all.worst_abs;
    j["families"] = family_json;
    nlohmann::ordered_json list = nlohmann::ordered_json::array();
    for (const sim::ValidationRow& r : rows) {
      nlohmann::ordered_json row = {{"id", r.id}, {"family", r.family}, {"framework", r.framework},
                                    {"metric", r.metric}, {"published", r.published}};
      row.update({{"num_gpus", r.num_gpus}, {"predicted", r.predicted}, {"relative_error", r.relative_error},
                  {"step_time_s", r.step_time_s}, {"hw_tflops_per_gpu", r.hw_tflops_per_gpu}, {"mfu", r.mfu},
                  {"tokens_per_sec_per_gpu", r.tokens_per_sec_per_gpu}, {"bubble_ratio", r.bubble_ratio},
                  {"gemm_s", r.gemm_s}, {"peak_memory_bytes", r.peak_memory_bytes},
                  {"memory_capacity_bytes", r.memory_capacity_bytes}, {"fits", r.fits}});
      list.push_back(row);
    }
    j["cases"] = list;
    write_file_atomic(args.json_file, j.dump(2) + "\n");
  }
}

}  // namespace

void add_validate_command(CLI::App& app) {
  auto args = std::make_shared<ValidateArgs>();
  CLI::App* cmd = app.add_subcommand(
      "validate", "Compare predictions with measurements: published training runs (--published)");
  cmd->add_flag("--published", args->published,
                "predict every published run in scenarios/validation/ and report the errors");
  cmd->add_option("--fidelity", args->fidelity, "simulation fidelity for --published (default: folded)")
      ->check(CLI::IsMember({"full", "folded"}));
  cmd->add_option("--json", args->json_file, "also write the table as JSON");
  add_run_validation_options(*cmd, args->runs);
  cmd->callback([args] {
    if (args->published) {
      run_published(*args);
      return;
    }
    if (run_validation_requested(args->runs)) {
      run_validation(args->runs, args->json_file);
      return;
    }
    throw InputError("", "strata validate", "say what to validate: --published, --run DIR or --quick");
  });
}

}  // namespace strata::cli
