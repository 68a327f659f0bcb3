// strata goodput: the time to train with failures and checkpoints — the
// simulated step, the job's mean time between failures, the checkpoint's size
// and write time, the optimal checkpoint interval (Young, Daly, and the sampled
// optimum), and the days to train with their spread (sim/goodput.h).
#include <cmath>

#include <fmt/format.h>

#include "cli/commands.h"
#include "cli/format.h"
#include "cli/scenario_options.h"
#include "cli/validators.h"
#include "core/atomic_file.h"
#include "core/error.h"
#include "core/dtype.h"
#include "costmodel/cost_model.h"
#include "plan/memory_model.h"
#include "plan/params.h"
#include "sim/goodput.h"
#include "sim/scenario.h"
#include "sim/simulate.h"
#include "sweep/plan_space.h"

namespace strata::cli {
namespace {

struct GoodputArgs {
  ScenarioChoice scenario;
  std::string fidelity = "folded";
  double train_tokens = 0.0;
  double gpu_mtbf_hours = sim::kLlama3GpuMtbfHours;
  double node_mtbf_hours = 0.0;  // 0: node failures are in the GPUs' figure (Llama 3's counts every cause)
  double storage_gbytes_per_s = 0.0;  // 0: Tectonic's per-GPU share times the job's GPUs
  double restart_minutes = -1.0;      // required: no public figure to default to
  int save_interval = 0;              // 0: Daly's
  bool async_checkpoint = false;
  double planned_every_hours = 0.0;   // 0: no planned stops
  int samples = 100;
  std::uint64_t seed = 1;
  std::string json_file;
};

std::string days(double s) { return fmt::format("{:.2f} days", s / 86400.0); }

// A span of time in the unit that reads best: "2.84 s", "4.2 min", "7.46 h".
std::string span(double s) {
  if (s >= 3600.0) return fmt::format("{:.2f} h", s / 3600.0);
  if (s >= 120.0) return fmt::format("{:.1f} min", s / 60.0);
  return seconds(s);
}

void run_goodput(const GoodputArgs& args) {
  Scenario s = load_chosen_scenario(args.scenario);
  require_simulated_model(s);
  if (args.restart_minutes < 0.0) {
    throw InputError("", "--restart-minutes",
                     "give the time from a failure to training again (detecting it, rescheduling the job, loading "
                     "the checkpoint), in minutes: it sets the cost of every failure, and no published figure is "
                     "general enough to default to (e.g. --restart-minutes 10)");
  }
  sim::SimulationOptions options;
  options.fidelity = args.fidelity == "full" ? sim::Fidelity::kFull : sim::Fidelity::kFolded;
  options.keep_timeline = false;
  const sim::SimulationResult r = simulate_with_progress(s, options, "goodput");
  const double step_s = r.metrics.step_time_s;
  const double tokens_per_step = static_cast<double>(s.plan.global_batch_size) * s.model.seq_length;
  const double steps = std::ceil(args.train_tokens / tokens_per_step);
  const double work_s = steps * step_s;
  const int gpus = s.plan.num_gpus();

  // A checkpoint holds every parameter once: the weights in the training dtype
  // and the optimizer's state (fp32 master weights and Adam's two moments:
  // plan/memory_model.h MemoryModelOptions, Rajbhandari et al. 2020's K = 12;
  // fp32 training keeps only the moments).
  const double params = static_cast<double>(total_params(s.model));
  const double state_bytes = s.plan.dtype == DType::kFp32 ? 8.0 : MemoryModelOptions{}.optimizer_bytes_per_param;
  const double checkpoint_bytes = params * (dtype_bytes(s.plan.dtype) + state_bytes);
  const bool default_storage = args.storage_gbytes_per_s <= 0.0;
  const double storage = default_storage ? sim::kTectonicSustainedBytesPerS / sim::kLlama3Gpus * gpus
                                         : args.storage_gbytes_per_s * 1e9;
  sim::FailureModel f;
  // Failures of the job's GPUs and, when given apart, of its nodes (host,
  // NICs, cables: whatever takes a whole node down), as independent Poisson
  // processes: their rates add.
  const int nodes = (gpus + s.cluster.gpus_per_node - 1) / s.cluster.gpus_per_node;
  const double failures_per_hour =
      gpus / args.gpu_mtbf_hours + (args.node_mtbf_hours > 0.0 ? nodes / args.node_mtbf_hours : 0.0);
  f.job_mtbf_s = 3600.0 / failures_per_hour;
  f.restart_s = args.restart_minutes * 60.0;
  const double write_s = checkpoint_bytes / storage;
  // Asynchronously the job stalls only while each GPU copies its share of the
  // checkpoint to host memory (the device profile's host copy); the write follows.
  const double snapshot_s = CostModel(s.profile).host_copy_seconds(checkpoint_bytes / gpus);
  f.checkpoint_s = args.async_checkpoint ? snapshot_s : write_s;
  f.persist_s = args.async_checkpoint ? write_s : 0.0;
  f.planned_interval_s = args.planned_every_hours * 3600.0;
  const sim::GoodputEstimate e = sim::estimate_goodput(f, work_s, step_s, args.samples, args.seed, args.save_interval);

  const double lost_saves = e.mean_checkpoints_s / e.mean_wall_s;
  const double lost_rework = e.mean_lost_s / e.mean_wall_s;
  const double lost_restarts = e.mean_restarts_s / e.mean_wall_s;
  const double lost_planned = e.mean_planned_s / e.mean_wall_s;
  nlohmann::ordered_json j;
  j["schema"] = "strata-goodput/1";
  j["step_time_s"] = step_s;
  j["fidelity"] = to_string(r.fidelity);
  j["num_gpus"] = gpus;
  j["train_tokens"] = args.train_tokens;
  j["steps"] = steps;
  j["work_s"] = work_s;
  j["failures"] = {{"gpu_mtbf_hours", args.gpu_mtbf_hours},
                   {"node_mtbf_hours", args.node_mtbf_hours},
                   {"nodes", nodes},
                   {"gpu_mtbf_origin", args.gpu_mtbf_hours == sim::kLlama3GpuMtbfHours
                                           ? "published: Llama 3 405B, 419 unexpected interruptions in 54 days on "
                                             "16,384 H100 (arXiv 2407.21783, section 3.3.4)"
                                           : "given (--gpu-mtbf-hours)"},
                   {"job_mtbf_s", f.job_mtbf_s},
                   {"restart_s", f.restart_s},
                   {"restart_origin", "given (--restart-minutes)"},
                   {"planned_interval_s", f.planned_interval_s}};
  j["checkpoint"] = {{"bytes", checkpoint_bytes},
                     {"storage_bytes_per_s", storage},
                     {"storage_origin", default_storage
                                            ? "published: Tectonic's 2 TB/s sustained for Llama 3's 16,384 GPUs "
                                              "(arXiv 2407.21783, section 3.3.1), this job's share by GPUs"
                                            : "given (--storage-gbytes-per-s)"},
                     {"write_s", write_s},
                     {"async", args.async_checkpoint},
                     {"stall_s", f.checkpoint_s}};
  j["interval"] = {{"young_s", e.young_s},
                   {"daly_s", e.daly_s},
                   {"used_steps", e.interval_steps},
                   {"used_s", e.interval_s},
                   {"sampled_best_steps", e.best_interval_steps},
                   {"sampled_best_mean_wall_s", e.best_mean_wall_s}};
  j["wall"] = {{"expected_s", e.expected_wall_s},
               {"samples", args.samples},
               {"seed", args.seed},
               {"mean_s", e.mean_wall_s},
               {"p025_s", e.p025_wall_s},
               {"p975_s", e.p975_wall_s},
               {"mean_failures", e.mean_failures},
               {"goodput", e.goodput()},
               {"lost_to_checkpoints", lost_saves},
               {"lost_to_rework", lost_rework},
               {"lost_to_restarts", lost_restarts},
               {"mean_planned_stops", e.mean_planned},
               {"lost_to_planned_stops", lost_planned},
               {"gpu_hours", e.mean_wall_s / 3600.0 * gpus},
               {"gpu_hours_at_speed", work_s / 3600.0 * gpus}};
  j["inputs"] = inputs_json(s);
  if (!args.json_file.empty()) write_file_atomic(args.json_file, j.dump(2) + "\n");

  fmt::print("goodput     {} on {} ({} GPUs), {}: step {} ({} fidelity)\n", s.model.name, s.cluster.name, gpus,
             sim::plan_label(s.plan), seconds(step_s), to_string(r.fidelity));
  fmt::print("failures    job MTBF {:.2f} h: GPU MTBF {:.0f} h{} over {} GPUs{}; restart {:.1f} min (given)\n",
             f.job_mtbf_s / 3600.0, args.gpu_mtbf_hours,
             args.gpu_mtbf_hours == sim::kLlama3GpuMtbfHours ? " (Llama 3's fleet: 419 failures, 54 days, 16,384 H100)"
                                                             : " (given)",
             gpus,
             args.node_mtbf_hours > 0.0
                 ? fmt::format(", node MTBF {:.0f} h (given) over {} nodes", args.node_mtbf_hours, nodes)
                 : "",
             args.restart_minutes);
  fmt::print("checkpoint  {:.2f} TB ({:.0f} B per parameter) at {:.1f} GB/s{}: {} a save{}\n",
             checkpoint_bytes / 1e12, dtype_bytes(s.plan.dtype) + state_bytes, storage / 1e9,
             default_storage ? " (Tectonic's 2 TB/s for 16,384 GPUs, this job's share)" : " (given)", span(write_s),
             args.async_checkpoint
                 ? fmt::format(", written behind the training after a {} snapshot to host memory (async)",
                               span(f.checkpoint_s))
                 : "");
  const std::string optimum =
      e.best_interval_steps == e.interval_steps
          ? "the sampled runs' optimum too"
          : fmt::format("sampled optimum {} steps ({:+.2f}% wall time)", e.best_interval_steps,
                        100.0 * (e.best_mean_wall_s / e.mean_wall_s - 1.0));
  fmt::print("interval    Young {}, Daly {}: every {} steps ({}; Megatron-LM --save-interval {}), {}\n",
             span(e.young_s), span(e.daly_s), e.interval_steps, span(e.interval_s), e.interval_steps, optimum);
  fmt::print("train       {:.3g} tokens, {:.0f} steps: {} at speed; with failures {} (95% of {} runs: {} to {}; "
             "Daly's formula{} {}), {:.0f} failures\n",
             args.train_tokens, steps, days(work_s), days(e.mean_wall_s), args.samples, days(e.p025_wall_s),
             days(e.p975_wall_s),
             std::string(args.async_checkpoint ? " with the snapshot as the save" : "") +
                 (f.planned_interval_s > 0.0 ? ", failures only" : ""),
             days(e.expected_wall_s), e.mean_failures);
  if (f.planned_interval_s > 0.0) {
    fmt::print("planned     a stop every {} of wall time (given): {:.1f} stops, each a checkpoint{} and a restart, "
               "nothing lost\n",
               span(f.planned_interval_s), e.mean_planned, args.async_checkpoint ? " written out" : "");
  }
  fmt::print("goodput     {:.1f}%: lost to checkpoints {:.1f}%, to work redone {:.1f}%, to restarts {:.1f}%{}; "
             "{:.0f} GPU-hours against {:.0f} at speed\n",
             100.0 * e.goodput(), 100.0 * lost_saves, 100.0 * lost_rework, 100.0 * lost_restarts,
             f.planned_interval_s > 0.0 ? fmt::format(", to planned stops {:.1f}%", 100.0 * lost_planned) : "",
             e.mean_wall_s / 3600.0 * gpus, work_s / 3600.0 * gpus);
  if (!args.json_file.empty()) fmt::print("\nwrote {}\n", args.json_file);
}

}  // namespace

void add_goodput_command(CLI::App& app) {
  auto args = std::make_shared<GoodputArgs>();
  CLI::App* cmd = app.add_subcommand(
      "goodput", "Time to train with failures and checkpoints: the optimal checkpoint interval (Young, Daly, "
                 "sampled), days to train with their spread, and what failures cost");
  add_scenario_or_sweep_options(*cmd, args->scenario);
  cmd->add_option("--train-tokens", args->train_tokens, "tokens to train on")->required()->check(finite_in(1.0, 1e16));
  cmd->add_option("--restart-minutes", args->restart_minutes,
                  "from a failure to training again: detection, rescheduling, loading the checkpoint (required)")
      ->check(finite_in(0.0, 10080.0));
  cmd->add_option("--gpu-mtbf-hours", args->gpu_mtbf_hours,
                  "a GPU's mean time between failures that stop the job (default 50,676 h: Llama 3's 419 "
                  "unexpected interruptions in 54 days on 16,384 H100)")
      ->check(finite_in(1e-3, 1e9));
  cmd->add_option("--node-mtbf-hours", args->node_mtbf_hours,
                  "a node's mean time between failures of its own (host, NICs, cables), added to the GPUs' "
                  "(default: none apart; Llama 3's fleet figure counts every cause)")
      ->check(finite_in(1e-3, 1e9));
  cmd->add_option("--storage-gbytes-per-s", args->storage_gbytes_per_s,
                  "checkpoint write bandwidth the job gets, GB/s (default: Tectonic's 2 TB/s for 16,384 GPUs, "
                  "scaled to this job's GPUs)")
      ->check(finite_in(1e-3, 1e9));
  cmd->add_option("--save-interval", args->save_interval,
                  "checkpoint every this many steps instead of Daly's optimum")
      ->check(CLI::Range(1, 100000000));
  cmd->add_flag("--async-checkpoint", args->async_checkpoint,
                "asynchronous saves (Megatron-LM --async-save): the job stalls only to copy each GPU's share to "
                "host memory; a failure before the write completes falls back to the checkpoint before");
  cmd->add_option("--planned-every-hours", args->planned_every_hours,
                  "a planned stop (maintenance, upgrades, changes to the training) every this many hours of wall "
                  "time: a checkpoint, then a restart, nothing lost (default: none; Llama 3 had 47 in 54 days, one "
                  "every 27.6 h)")
      ->check(finite_in(1e-3, 1e6));
  cmd->add_option("--samples", args->samples, "sampled runs (default 100)")->check(CLI::Range(1, 100000));
  cmd->add_option("--seed", args->seed, "seed of the sampled failures (default 1)");
  cmd->add_option("--fidelity", args->fidelity, "simulation fidelity of the step (default folded)")
      ->check(CLI::IsMember({"full", "folded"}));
  cmd->add_option("--json", args->json_file, "also write the figures to this file");
  cmd->callback([args] { run_goodput(*args); });
}

}  // namespace strata::cli
