// strata export: a plan (or a sweep's ranked plan) as the files that launch it:
// strata-run.json, megatron-args.sh, deepspeed.json, launch.slurm,
// launch-mpirun.sh and prediction.json, written together or not at all.
#include <sys/stat.h>

#include <fmt/format.h>

#include "cli/commands.h"
#include "cli/validators.h"
#include "cli/scenario_options.h"
#include "core/atomic_file.h"
#include "core/error.h"
#include "core/progress.h"
#include "core/units.h"
#include "export/export.h"
#include "plan/memory_model.h"
#include "sim/device_memory.h"
#include "sim/simulate.h"

namespace strata::cli {
namespace {

struct ExportArgs {
  ScenarioChoice scenario;
  std::string out_dir;
  bool force = false;
  std::string fidelity = "full";
  std::string backend;
  int steps = 10;
  int warmup = 2;
  std::uint64_t seed = 1234;
  double timeout_s = 20.0;
  std::vector<std::string> argv;
};

std::string command_line(const std::vector<std::string>& argv) {
  std::string s;
  for (const std::string& a : argv) s += (s.empty() ? "" : " ") + a;
  return s;
}

sim::ExportOptions export_options(const ExportArgs& args) {
  sim::ExportOptions o;
  o.training.steps = args.steps;
  o.training.timing_warmup_steps = args.warmup;
  o.training.seed = args.seed;
  o.backend = args.backend;
  o.timeout_s = args.timeout_s;
  o.force = args.force;
  o.command_line = command_line(args.argv);
  if (o.training.timing_warmup_steps >= o.training.steps) {
    throw InputError("", "--warmup-steps", fmt::format("must be less than --steps ({})", o.training.steps));
  }
  return o;
}

void write_files(const std::string& dir, const sim::ExportResult& exported) {
  OutputSet out;
  for (const sim::ExportFile& f : exported.files) out.add(dir + "/" + f.name, f.content);
  out.commit();
  for (const sim::ExportFile& f : exported.files) {
    if (f.executable) chmod((dir + "/" + f.name).c_str(), 0755);
  }
}

void run_export(const ExportArgs& args) {
  const Scenario s = load_chosen_scenario(args.scenario);
  if (!args.backend.empty() && args.backend != "cpu" && args.backend != "cuda") {
    throw InputError("", "--backend", "expected \"cpu\" or \"cuda\", got \"" + args.backend + "\"");
  }
  // A plan the simulator does not take (simulation_refusal) is exported without a
  // prediction: Megatron-LM's flags, checked against the memory model.
  std::optional<sim::SimulationResult> result;
  if (!simulation_refusal(s)) {
    sim::SimulationOptions options;
    options.fidelity = args.fidelity == "full" ? sim::Fidelity::kFull : sim::Fidelity::kFolded;
    result = simulate_with_progress(s, options, "export");
  }
  const MemoryReport memory = result ? result->memory : memory_report(s.model, s.plan, device_memory(s.profile));
  const sim::ExportResult exported = result ? sim::export_plan(s, *result, export_options(args))
                                            : sim::export_megatron_only(s, memory, export_options(args));
  write_files(args.out_dir, exported);
  const std::string experts = s.plan.moe.active ? fmt::format(" ep {} etp {}", s.plan.moe.ep, s.plan.moe.etp) : "";
  const std::string step = result ? fmt::format("predicted step {:.4g} s, ", result->metrics.step_time_s) : "";
  fmt::print("{} with tp {} pp {} dp {}{} on {}: {}peak memory {:.2f} GiB of {:.2f} GiB\n", s.model.name, s.plan.tp,
             s.plan.pp, s.plan.dp, experts, s.cluster.name, step, memory.peak_bytes / kGiB,
             memory.capacity_bytes / kGiB);
  fmt::print("wrote");
  for (const sim::ExportFile& f : exported.files) fmt::print(" {}", f.name);
  fmt::print(" to {}\n", args.out_dir);
  for (const std::string& n : exported.notes) fmt::print("note: {}\n", n);
  if (run_refusal(s.model, s.plan)) {
    fmt::print("run it with Megatron-LM: MEGATRON=/path/to/Megatron-LM bash {}/megatron-args.sh\n", args.out_dir);
  } else {
    fmt::print("run it: bash {}/launch-mpirun.sh   (or sbatch launch.slurm; Megatron-LM: megatron-args.sh)\n",
               args.out_dir);
  }
}

}  // namespace

void add_export_command(CLI::App& app, int argc, char** argv) {
  auto args = std::make_shared<ExportArgs>();
  args->argv.assign(argv, argv + argc);
  CLI::App* cmd = app.add_subcommand(
      "export", "Write a plan's launch files: strata-run.json (strata run), megatron-args.sh, deepspeed.json, "
                "launch.slurm, launch-mpirun.sh and the prediction");
  add_scenario_or_sweep_options(*cmd, args->scenario);
  cmd->add_option("--out", args->out_dir, "directory for the files")->required();
  cmd->add_flag("--force", args->force, "export even when the plan does not fit in memory");
  cmd->add_option("--fidelity", args->fidelity, "simulation fidelity of prediction.json (default: full)")
      ->check(CLI::IsMember({"full", "folded"}));
  cmd->add_option("--backend", args->backend, "runtime backend of strata-run.json (default: the profile's)");
  cmd->add_option("--steps", args->steps, "training steps `strata run` runs (default 10)")->check(CLI::Range(1, 1000000));
  cmd->add_option("--warmup-steps", args->warmup, "first steps left out of the measured median (default 2)")
      ->check(CLI::Range(0, 1000000));
  cmd->add_option("--seed", args->seed, "seed of the parameters and synthetic data (default 1234)");
  cmd->add_option("--timeout", args->timeout_s,
                  "seconds any rank waits for a peer before the run stops (default 20)")
      ->check(finite_in(0.1, 86400.0));
  cmd->callback([args] { run_export(*args); });
}

}  // namespace strata::cli
