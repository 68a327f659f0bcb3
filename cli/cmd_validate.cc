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
  fmt::print("{:<34} {:>6} {:>18} {:>10} {:>10} {:>8} {:>8} {:>7}\n", "case", "GPUs", "metric", "published",
             "predicted", "error", "step s", "bubble");
  double worst = 0.0;
  for (const sim::ValidationRow& r : rows) {
    fmt::print("{:<34} {:>6} {:>18} {:>10.2f} {:>10.2f} {:>+7.1f}% {:>8.2f} {:>6.1f}%\n", r.id, r.num_gpus,
               r.metric, r.published, r.predicted, 100 * r.relative_error, r.step_time_s,
               100 * r.bubble_ratio);
    worst = std::max(worst, std::abs(r.relative_error));
  }
  const double median = sim::median_abs_error(rows);
  fmt::print("\nmedian |error| {:.1f}%, worst {:.1f}% over {} published runs ({} fidelity; target: median <= 10%, "
             "worst <= 20%)\n",
             100 * median, 100 * worst, rows.size(), sim::to_string(fidelity));
  if (!args.json_file.empty()) {
    nlohmann::ordered_json j;
    j["fidelity"] = sim::to_string(fidelity);
    j["median_abs_error"] = median;
    j["worst_abs_error"] = worst;
    nlohmann::ordered_json list = nlohmann::ordered_json::array();
    for (const sim::ValidationRow& r : rows) {
      list.push_back({{"id", r.id}, {"num_gpus", r.num_gpus}, {"metric", r.metric}, {"published", r.published},
                      {"predicted", r.predicted}, {"relative_error", r.relative_error},
                      {"step_time_s", r.step_time_s}, {"hw_tflops_per_gpu", r.hw_tflops_per_gpu},
                      {"mfu", r.mfu}, {"bubble_ratio", r.bubble_ratio}});
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
