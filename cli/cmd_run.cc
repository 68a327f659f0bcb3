// strata run: execute an exported plan for real (runtime/executor) under
// mpirun or srun, or as one process driving all local GPUs; rank 0 writes
// measured.json and measured-trace.json beside the prediction.
#include <unistd.h>

#include <cstdio>
#include <exception>
#include <filesystem>
#include <thread>

#include <fmt/format.h>

#include "cli/commands.h"
#include "cli/validators.h"
#include "core/atomic_file.h"
#include "core/error.h"
#include "core/progress.h"
#include "core/units.h"
#include "runtime/device/backend.h"
#include "runtime/comm/communicator.h"
#include "runtime/executor/measured.h"
#include "runtime/executor/run_config.h"
#include "runtime/launch/gpu_binding.h"
#include "runtime/launch/mpi_env.h"

namespace strata::cli {
namespace {

struct RunArgs {
  std::string config;
  std::string out_dir;
  int steps = 0;
  double timeout_s = 0.0;
};

// A rank that fails before its communicators exist cannot end the job through
// them: report and exit at once (mpirun then ends the other ranks).
[[noreturn]] void exit_rank(const std::exception& e) {
  const bool input = dynamic_cast<const InputError*>(&e) != nullptr;
  std::fprintf(stderr, "%s: %s\n", input ? "error" : "internal error", e.what());
  std::fflush(stderr);
  std::_Exit(input ? kExitBadInput : kExitInternal);
}

std::string output_dir(const RunArgs& args) {
  if (!args.out_dir.empty()) return args.out_dir;
  const std::string dir = std::filesystem::path(args.config).parent_path().string();
  return dir.empty() ? "." : dir;
}

void check_writable(const std::string& dir) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec || access(dir.c_str(), W_OK) != 0) {
    throw InputError("", "--out", fmt::format("cannot write into directory {}", dir));
  }
}

std::string relative(double measured, double predicted) {
  if (predicted <= 0.0) return "-";
  return fmt::format("{:+.1f}%", 100.0 * (measured - predicted) / predicted);
}

void print_summary(const rt::RunConfig& c, const rt::MeasuredRun& run, const std::string& dir) {
  const PlanSpec& p = c.plan;
  const std::string cp = p.cp > 1 ? fmt::format(" cp {} ({})", p.cp, to_string(p.cp_comm_type)) : std::string();
  const std::string ep = p.moe.active ? fmt::format(" ep {} ({} experts, top-{})", p.moe.ep, c.model.moe.num_experts,
                                                    c.model.moe.moe_router_topk)
                                      : std::string();
  fmt::print("{}: tp {}{} pp {} dp {}{}, micro-batch {} x {}, {}, ZeRO {}, recompute {}{} on {} ({} ranks x {} "
             "thread(s), {})\n",
             c.model.name, p.tp, cp, p.pp, p.dp, ep, p.micro_batch_size, p.num_microbatches(), to_string(p.schedule),
             p.zero_stage, to_string(p.recompute), p.sequence_parallel ? ", sequence parallel" : "", run.backend,
             run.ranks.size(), run.threads_per_rank, run.transport);
  fmt::print("{:>5} {:>12} {:>10} {:>11}\n", "step", "time", "loss", "grad norm");
  for (std::size_t i = 0; i < run.steps.size(); ++i) {
    fmt::print("{:>5} {:>10.4f} s {:>10.4f} {:>11.4g}{}\n", i + 1, run.steps[i].step_time_s, run.steps[i].loss,
               run.steps[i].grad_norm, static_cast<int>(i) < c.training.timing_warmup_steps ? "  (warm-up)" : "");
  }
  const double median = rt::median_step_time_s(c, run);
  const double predicted = c.prediction.value("step_time_s", 0.0);
  fmt::print("\nstep time   measured {:.4f} s (median of steps {}-{}), predicted {:.4f} s: {}\n", median,
             c.training.timing_warmup_steps + 1, c.training.steps, predicted, relative(median, predicted));
  const std::vector<std::int64_t> stages = rt::peak_memory_per_stage(c, run);
  std::vector<double> predicted_stages;
  if (c.prediction.contains("memory_per_stage_bytes")) {
    predicted_stages = c.prediction["memory_per_stage_bytes"].get<std::vector<double>>();
  }
  for (std::size_t st = 0; st < stages.size(); ++st) {
    const double want = st < predicted_stages.size() ? predicted_stages[st] : 0.0;
    fmt::print("memory      stage {} peak {:.2f} MiB, predicted {:.2f} MiB: {}\n", st, stages[st] / kMiB, want / kMiB,
               relative(static_cast<double>(stages[st]), want));
  }
  if (p.moe.active) {
    fmt::print("experts     the busiest ep rank took {:.2f} x the mean of the routed tokens (predicted with "
               "moe_router_imbalance {:.2f})\n",
               rt::mean_expert_load(c, run), p.moe.router_imbalance);
  }
  for (const std::string& n : run.notes) fmt::print("note: {}\n", n);
  fmt::print("wrote {}/measured.json, {}/measured-trace.json (open beside the prediction in strata-gui)\n", dir, dir);
}

void write_outputs(const rt::RunConfig& c, const rt::MeasuredRun& run, const std::string& dir) {
  OutputSet out;
  out.add(dir + "/measured.json", rt::measured_json(c, run).dump(2) + "\n");
  out.add(dir + "/measured-trace.json", rt::measured_trace_json(c, run));
  out.commit();
  print_summary(c, run, dir);
}

// One process driving every local GPU: a thread per GPU, NCCL without MPI.
void run_local_gpus(const rt::RunConfig& c, const std::string& dir) {
  const int world = c.plan.num_gpus();
  std::vector<std::unique_ptr<rt::Device>> devices;
  std::vector<rt::Device*> raw;
  for (int i = 0; i < world; ++i) {
    devices.push_back(rt::make_device(rt::Backend::kCuda, i));
    raw.push_back(devices.back().get());
  }
  rt::CommOptions options;
  options.timeout = c.timeout;
  std::vector<std::unique_ptr<rt::Communicator>> comms = rt::make_local_communicators(raw, options);
  std::vector<rt::MeasuredRun> runs(world);
  std::vector<std::exception_ptr> errors(world);
  std::vector<std::thread> threads;
  for (int i = 0; i < world; ++i) {
    threads.emplace_back([&, i] {
      try {
        runs[i] = rt::run_training(c, *devices[i], *comms[i], {});
      } catch (...) {
        errors[i] = std::current_exception();
      }
    });
  }
  for (std::thread& t : threads) t.join();
  for (const std::exception_ptr& e : errors) {
    if (e) std::rethrow_exception(e);
  }
  write_outputs(c, runs[0], dir);
}

void run_plan(const RunArgs& args) {
  rt::RunConfig c = rt::load_run_config(args.config);
  if (args.steps > 0) {
    c.training.steps = args.steps;
    if (c.training.timing_warmup_steps >= c.training.steps) c.training.timing_warmup_steps = c.training.steps - 1;
  }
  if (args.timeout_s > 0.0) c.timeout = std::chrono::milliseconds(static_cast<std::int64_t>(args.timeout_s * 1000));
  const std::string dir = output_dir(args);
  check_writable(dir);
  const int world = c.plan.num_gpus();

  // Checked before MPI starts, so a wrong launch ends every rank at once.
  const rt::LaunchInfo launch = rt::detect_launch();
  if (!launch.launched() && world > 1 && c.backend == rt::Backend::kCuda && rt::cuda_device_count() >= world) {
    run_local_gpus(c, dir);
    return;
  }
  if (launch.size != world) {
    const std::string how = launch.launched()
                                ? fmt::format("this launch has {} ranks", launch.size)
                                : std::string("it was started as one process");
    const InputError e(c.file, "$.parallel.world_size",
                       fmt::format("the plan has {} ranks (tp {} x cp {} x pp {} x dp {}) but {}: run `mpirun -n {} "
                                   "strata run {}` or the exported launch-mpirun.sh / launch.slurm",
                                   world, c.plan.tp, c.plan.cp, c.plan.pp, c.plan.dp, how, world, args.config));
    if (launch.size > 1) exit_rank(e);
    throw e;
  }
  rt::MpiSession session;
  std::unique_ptr<rt::Device> device;
  std::unique_ptr<rt::Communicator> comm;
  try {
    rt::DeviceOptions device_options;
    device_options.cpu_threads = c.cpu_threads;
    // The GPU this rank's process sees as its own (runtime/launch/gpu_binding.h):
    // under srun --gpus-per-task=1 that is device 0 on every rank.
    const int ordinal = c.backend == rt::Backend::kCuda
                            ? rt::cuda_ordinal_for_rank(rt::cuda_device_count(), session.launch().local_rank,
                                                        session.launch().local_size)
                            : 0;
    device = rt::make_device(c.backend, ordinal, device_options);
    rt::CommOptions options;
    options.timeout = c.timeout;
    comm = rt::make_world_communicator(*device, options);
  } catch (const std::exception& e) {
    if (launch.size > 1) exit_rank(e);
    throw;
  }
  const bool root = comm->rank() == 0;
  ProgressLine progress("run", c.training.steps);
  if (!root) progress.set_enabled(false);
  rt::MeasuredRun run;
  try {
    run = rt::run_training(c, *device, *comm, [&](std::int64_t done, std::int64_t total, std::string_view) {
      progress.update(done, fmt::format("step {}/{}", done, total));
      return true;
    });
  } catch (const std::exception& e) {
    progress.finish();
    // Peers may be waiting on this rank: end the whole job now, loudly, rather
    // than leave them to their own timeouts.
    if (comm->size() > 1) comm->abort(fmt::format("strata run failed on rank {}: {}", comm->rank(), e.what()));
    throw;
  }
  progress.finish();
  if (root) write_outputs(c, run, dir);
}

}  // namespace

void add_run_command(CLI::App& app) {
  auto args = std::make_shared<RunArgs>();
  CLI::App* cmd = app.add_subcommand(
      "run", "Run an exported plan for real (strata-run.json): under `mpirun -n N`, srun, or one process for all "
             "local GPUs; writes measured.json and measured-trace.json");
  cmd->add_option("config", args->config, "strata-run.json from `strata export`")->required();
  cmd->add_option("--out", args->out_dir, "directory for measured.json and measured-trace.json (default: the config's)");
  cmd->add_option("--steps", args->steps, "override the number of training steps")->check(CLI::Range(1, 1000000));
  cmd->add_option("--timeout", args->timeout_s, "override the seconds a rank waits for a peer")
      ->check(finite_in(0.1, 86400.0));
  cmd->callback([args] { run_plan(*args); });
}

}  // namespace strata::cli
