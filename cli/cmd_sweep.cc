// strata sweep: every valid plan for a model on a cluster, pruned by memory,
// simulated, ranked by throughput and explained.
#include <chrono>
#include <thread>

#include <fmt/format.h>

#include "cli/commands.h"
#include "cli/format.h"
#include "cli/validators.h"
#include "core/atomic_file.h"
#include "core/data_paths.h"
#include "core/error.h"
#include "core/json_reader.h"
#include "core/progress.h"
#include "costmodel/framework_profile.h"
#include "jobs/sharded_sweep.h"
#include "plan/moe_spec.h"
#include "runtime/comm/communicator.h"
#include "runtime/launch/mpi_env.h"
#include "sim/scenario.h"
#include "sweep/sweep.h"
#include "sweep/sweep_output.h"

namespace strata::cli {
namespace {

struct SweepArgs {
  std::string model;
  std::string cluster;
  std::string profile;
  int global_batch_size = 0;
  int seq_length = 0;
  int min_cp_tokens = sim::PlanSpaceRequest{}.min_cp_tokens;
  std::string constraints_file;
  std::vector<std::string> where;
  int top = 10;
  int full_top = 3;
  int samples = 0;
  double clock_cv = 0.0;
  double kernel_cv = 0.0;
  std::uint64_t seed = 1;
  std::string rank_by = "mean";
  int threads = 0;
  std::vector<int> nodes;
  bool allow_cross_node_tp = false;
  std::string dtype = "bf16";
  std::string framework = kDefaultFramework;
  std::string moe_dispatcher;  // "" : the request's default (alltoall)
  std::string out_dir;
};

struct Loaded {
  ModelSpec model;
  std::string model_file;
  ClusterSpec cluster;
  std::string cluster_file;
  Profile profile;
  sim::PlanSpaceRequest request;
};

Loaded load(const SweepArgs& a) {
  Loaded l;
  Scenario inputs = load_scenario_inputs(a.model, a.cluster, a.profile);
  require_simulated_model(inputs);
  l.model = std::move(inputs.model);
  l.model_file = std::move(inputs.model_file);
  if (a.seq_length > 0) l.model.seq_length = a.seq_length;
  l.cluster = std::move(inputs.cluster);
  l.cluster_file = std::move(inputs.cluster_file);
  l.profile = std::move(inputs.profile);
  l.request.global_batch_size =
      a.global_batch_size > 0 ? a.global_batch_size : sim::default_global_batch(l.model.seq_length, l.cluster.num_gpus());
  l.request.allow_cross_node_tp = a.allow_cross_node_tp;
  l.request.min_cp_tokens = a.min_cp_tokens;
  l.request.dtype = *parse_dtype(a.dtype);
  try {
    framework_profile(a.framework);  // exists and reads
    l.request.framework = a.framework;
  } catch (const InputError& e) {
    throw InputError("", "--framework", e.message());
  }
  if (!a.moe_dispatcher.empty()) {
    if (!l.model.is_moe()) {
      throw InputError("", "--moe-dispatcher",
                       fmt::format("model {} has no experts (no num_experts): the token dispatcher is an MoE plan's; "
                                   "remove the option",
                                   l.model.name));
    }
    l.request.moe_dispatcher = parse_moe_dispatcher(a.moe_dispatcher);
  }
  if (!a.constraints_file.empty()) l.request.constraints = sim::load_constraints(a.constraints_file);
  for (const std::string& w : a.where) l.request.constraints.push_back(sim::parse_constraint(w, "--where"));
  return l;
}

nlohmann::ordered_json request_json(const SweepArgs& a, const Loaded& l) {
  return sim::sweep_request_json(a.model, a.cluster, a.profile, l.model, l.cluster, l.request);
}

std::string millions(double x) {
  if (x >= 1e6) return fmt::format("{:.2f}M", x / 1e6);
  if (x >= 1e3) return fmt::format("{:.1f}K", x / 1e3);
  return fmt::format("{:.0f}", x);
}

void print_table(const sim::SweepResult& s, int top) {
  // An MoE model's plans show their expert layout ("8/1": ep 8, etp 1) and
  // exposed all-to-all; a dense model's table is as it was.
  const bool moe = !s.plans.empty() && s.plans.front().plan.moe.active;
  // The recompute column as wide as its widest label ("selective(mla_up_proj)"
  // for a multi-head latent attention model), 9 at least.
  std::size_t recompute_width = 9;
  for (const sim::PlanOutcome& o : s.plans) {
    if (o.rank == 0 || o.rank > top) break;
    recompute_width = std::max(recompute_width, recompute_label(o.plan).size());
  }
  fmt::print("{:>4} {:>3} {:>6}{} {:>9} {:>4} {:>3} {:>3} {:<16} {:>4} {:<{}} {:>3} {:>5} {:>9} {:>6} {:>8} {:>7} {:>8} {:>8}{} {:>8} {:>8} {:>8} {}\n",
             "rank", "tp", "cp", moe ? fmt::format(" {:>6}", "ep/etp") : "", "pp", "dp", "vpp", "mbs", "schedule",
             "ZeRO", "recompute", recompute_width, "SP", "flash", "tokens/s", "MFU", "step s", "bubble", "exp tp", "exp cp",
             moe ? fmt::format(" {:>8}", "exp ep") : "", "exp dp+z", "peak GiB", "headroom", "fidelity");
  // A sampled sweep's re-simulated plans end their line with their P50 and P90
  // step times (and the P90's 95% interval).
  for (const sim::PlanOutcome& o : s.plans) {
    if (o.rank == 0 || o.rank > top) break;
    const PlanSpec& p = o.plan;
    // cp with its exchange when not the ring: "2", "2+ag", "4+a2a".
    const std::string cp = std::to_string(p.cp) + (p.cp == 1 || p.cp_comm_type == CpCommType::kP2p ? ""
                                                   : p.cp_comm_type == CpCommType::kAllGather ? "+ag"
                                                                                              : "+a2a");
    // pp with an uneven split's first and last stage layers: "2[17/15]".
    const std::string stages = sim::stage_split_label(p);
    const std::string pp = std::to_string(p.pp) + (stages.empty() ? "" : "[" + stages + "]");
    const std::string ep = moe ? fmt::format(" {:>6}", fmt::format("{}/{}", p.moe.ep, p.moe.etp)) : "";
    const std::string exp_ep =
        moe ? fmt::format(" {:>8}", seconds(o.exposed_s[static_cast<int>(sim::CommKind::kEp)])) : "";
    fmt::print("{:>4} {:>3} {:>6}{} {:>9} {:>4} {:>3} {:>3} {:<16} {:>4} {:<{}} {:>3} {:>5} {:>9} {:>5.1f}% {:>8.3f} {:>6.1f}% {:>8} {:>8}{} {:>8} {:>8.1f} {:>7.1f}% {}{}\n",
               o.rank, p.tp, cp, ep, pp, p.dp, p.vpp, p.micro_batch_size, to_string(p.schedule),
               std::to_string(p.zero_stage) + (p.zero_shard_size > 0 ? "/" + std::to_string(p.zero_shard_size) : "") +
                   (p.offload_optimizer ? "+o" : ""), recompute_label(p), recompute_width,
               p.sequence_parallel ? "on" : "off", p.flash_attention ? "on" : "off", millions(o.tokens_per_s),
               100 * o.mfu, o.step_time_s, 100 * o.bubble_ratio, seconds(o.exposed_s[0]),
               seconds(o.exposed_s[static_cast<int>(sim::CommKind::kCp)]), exp_ep, seconds(o.exposed_s[2] + o.exposed_s[3]), o.peak_bytes / (1024.0 * 1024 * 1024),
               100 * o.headroom(), o.fidelity, o.pareto ? " pareto" : "");
    if (o.p90_step_time_s > 0.0) {
      fmt::print("{:>4} sampled: P50 step {:.4f} s, P90 {:.4f} s [{:.4f}, {:.4f}]\n", "", o.p50_step_time_s,
                 o.p90_step_time_s, o.p90_ci_low_s, o.p90_ci_high_s);
    }
  }
}

struct SweepRun {
  sim::SweepResult result;
  double wall_s = 0.0;    // the folded simulations (and the gather when sharded)
  double full_s = 0.0;    // re-simulating the best at full fidelity
  bool root = true;
  int shards = 1;         // the MPI ranks the plans were split over
};

// The ranks of this launch (one, or those of mpirun), exchanging through host
// memory: a sharded sweep's shards send their outcomes over it.
class SweepWorld {
 public:
  SweepWorld() {
    rt::DeviceOptions options;
    options.cpu_threads = 1;  // only carries the shards' messages
    device_ = rt::make_device(rt::Backend::kCpu, 0, options);
    // Shards are balanced (every size-th plan), but the gather waits for the
    // slowest: give it an hour, not the training step's five minutes.
    rt::CommOptions comm;
    comm.timeout = std::chrono::hours(1);
    world_ = rt::make_world_communicator(*device_, comm);
  }
  rt::Communicator& world() const { return *world_; }
  bool root() const { return world_->rank() == 0; }

 private:
  std::unique_ptr<rt::Device> device_;
  std::unique_ptr<rt::Communicator> world_;
};

SweepRun sweep_once(const SweepArgs& a, const Loaded& l, const SweepWorld& ranks) {
  sim::Simulator simulator(l.cluster, l.profile);
  sim::SweepOptions options;
  options.threads = a.threads > 0 ? a.threads : std::max(1u, std::thread::hardware_concurrency());
  options.top_k = a.top;
  options.full_top = a.full_top;
  options.samples = a.samples;
  options.clock_cv = a.clock_cv;
  options.kernel_cv = a.kernel_cv;
  options.seed = a.seed;
  options.rank_by_p90 = a.rank_by == "p90";
  ProgressLine progress("sweep", 0);
  if (!ranks.root()) progress.set_enabled(false);
  options.progress = [&](std::int64_t done, std::int64_t total, std::string_view) {
    progress.update(done, fmt::format("of {} plans", total));
    return true;
  };
  const auto t0 = std::chrono::steady_clock::now();
  SweepRun run;
  run.result = jobs::run_sharded_sweep(l.model, simulator, l.request, options, ranks.world());
  progress.finish();
  run.root = ranks.root();
  run.shards = ranks.world().size();
  const auto t1 = std::chrono::steady_clock::now();
  run.wall_s = std::chrono::duration<double>(t1 - t0).count();
  if (run.root) sim::rank_sweep(run.result, l.model, simulator, options);
  run.full_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t1).count();
  return run;
}

void print_summary(const SweepArgs& a, const Loaded& l, const SweepRun& run) {
  const sim::SweepCounts& c = run.result.counts;
  fmt::print("sweep    {} on {} ({} x {}), global batch {} ({} tokens), seq {}, {}, framework {}{}\n", l.model.name,
             l.cluster.name, l.cluster.num_gpus(), l.profile.device.name, l.request.global_batch_size,
             millions(static_cast<double>(l.request.global_batch_size) * l.model.seq_length), l.model.seq_length,
             a.dtype, l.request.framework,
             l.model.is_moe() ? fmt::format(", {} dispatcher", to_string(l.request.moe_dispatcher)) : std::string());
  std::string reasons;
  for (const auto& [reason, n] : c.pruned_by_reason) reasons += fmt::format("{}{} {}", reasons.empty() ? "" : ", ", n, reason);
  fmt::print("plans    {} valid ({} combinations, {} excluded by constraints, {} invalid); {} do not fit{}\n",
             c.valid, c.space.candidates, c.space.constrained, c.space.invalid, c.pruned_memory,
             reasons.empty() ? "" : " (" + reasons + ")");
  if (c.too_large > 0) {
    fmt::print("         {} fit but are too large to simulate here: each would build more than {:.0f} MiB of "
               "events (sweep.csv's prune_reason); use a smaller --global-batch-size\n",
               c.too_large, sim::sweep_memory_budget_bytes() / (1 << 20));
  }
  const std::string sharded =
      run.shards > 1 ? fmt::format(" sharded over {} MPI ranks (every {}th plan each),", run.shards, run.shards) : "";
  fmt::print("         {} simulated (folded){} in {:.2f} s, {:.0f} plans/s; best {} re-simulated at full fidelity in {:.2f} s\n\n",
             c.simulated, sharded, run.wall_s, c.simulated / std::max(run.wall_s, 1e-9), c.full_fidelity, run.full_s);
  if (c.simulated == 0) {
    fmt::print("{}\n", c.too_large > 0 ? "no plan was simulated"
                                       : "no plan fits: try more GPUs, ZeRO, recompute, or a smaller micro-batch");
    return;
  }
  print_table(run.result, a.top);
  fmt::print("\nwhy\n");
  for (const sim::PlanOutcome& o : run.result.plans) {
    if (o.why.empty()) break;
    fmt::print("  #{} {}: {}\n", o.rank, o.label, o.why);
  }
}

void write_outputs(const std::string& dir, const SweepArgs& a, const Loaded& l, const SweepRun& run) {
  OutputSet out;
  out.add(dir + "/sweep.csv", sim::sweep_csv(run.result));
  out.add(dir + "/sweep.json", sim::sweep_json(run.result, request_json(a, l)).dump(2) + "\n");
  out.commit();
}

void run_sweep_command(const SweepArgs& a) {
  if (a.samples > 0 && a.clock_cv <= 0.0 && a.kernel_cv <= 0.0) {
    throw InputError("", "--clock-cv",
                     "--samples needs the spread of each GPU's speed per step, an assumption: e.g. --clock-cv 0.03 "
                     "(and/or each kernel's, --kernel-cv)");
  }
  if (a.kernel_cv > 0.0 && a.samples <= 0) {
    throw InputError("", "--kernel-cv", "needs --samples N: each kernel's spread is drawn in the sampled steps");
  }
  if (a.samples > 0 && a.full_top < 1) {
    throw InputError("", "--samples", "samples the plans re-simulated at full fidelity: --full-top must be at least 1");
  }
  if (a.rank_by == "p90" && a.samples <= 0) {
    throw InputError("", "--rank-by", "p90 needs the sampled step times: give --samples N --clock-cv X");
  }
  rt::MpiSession mpi;  // a sharded sweep when launched under mpirun
  const SweepWorld ranks;
  Loaded base = load(a);
  if (a.nodes.empty()) {
    SweepRun run = sweep_once(a, base, ranks);
    if (!run.root) return;
    print_summary(a, base, run);
    write_outputs(a.out_dir, a, base, run);
    fmt::print("\nwrote {}/sweep.csv ({} plans), {}/sweep.json\n", a.out_dir, run.result.plans.size(), a.out_dir);
    return;
  }
  // What if we had more nodes: the best plan at each size.
  std::vector<std::tuple<int, std::string, double, double>> rows;
  OutputSet out;
  std::string csv = "nodes,gpus,best_plan,tokens_per_s,step_time_s,mfu,scaling_efficiency\n";
  double base_tput = 0.0;
  int base_nodes = 0;
  for (int n : a.nodes) {
    Loaded l = base;
    // The cluster read again with the new node count, so every check the
    // cluster file gets (node range, switch radix) holds for this size too.
    nlohmann::json resized = to_json(base.cluster);
    resized["nodes"] = n;
    l.cluster = read_cluster_spec(resized, base.cluster_file + " (with --nodes " + std::to_string(n) + ")", "$");
    if (n > 1 && l.cluster.fabric.nics_per_node <= 0) {
      throw InputError(l.cluster_file, "$.fabric", fmt::format("--nodes {} needs a fabric in the cluster", n));
    }
    if (a.global_batch_size <= 0) {
      l.request.global_batch_size = sim::default_global_batch(l.model.seq_length, l.cluster.num_gpus());
    }
    SweepRun run = sweep_once(a, l, ranks);
    if (!run.root) continue;
    const sim::PlanOutcome* best = run.result.plans.empty() || !run.result.plans[0].simulated ? nullptr : &run.result.plans[0];
    const std::string dir = fmt::format("{}/nodes-{}", a.out_dir, n);
    out.add(dir + "/sweep.csv", sim::sweep_csv(run.result));
    out.add(dir + "/sweep.json", sim::sweep_json(run.result, request_json(a, l)).dump(2) + "\n");
    if (best == nullptr) {
      fmt::print("{:>5} nodes: no plan fits\n", n);
      csv += fmt::format("{},{},,,,,\n", n, l.cluster.num_gpus());
      continue;
    }
    if (base_nodes == 0) {
      base_nodes = n;
      base_tput = best->tokens_per_s;
    }
    const double eff = (best->tokens_per_s / base_tput) / (static_cast<double>(n) / base_nodes);
    fmt::print("{:>5} nodes {:>6} GPUs  {:<48} {:>9} tokens/s  MFU {:>5.1f}%  step {:>7.3f} s  scaling {:>5.1f}%\n", n,
               l.cluster.num_gpus(), best->label, millions(best->tokens_per_s), 100 * best->mfu, best->step_time_s,
               100 * eff);
    csv += fmt::format("{},{},{},{:.6g},{:.6g},{:.6g},{:.6g}\n", n, l.cluster.num_gpus(), best->label,
                       best->tokens_per_s, best->step_time_s, best->mfu, eff);
  }
  if (!ranks.root()) return;
  out.add(a.out_dir + "/scaling.csv", csv);
  out.commit();
  fmt::print("\nwrote {}/scaling.csv and a sweep per size in {}/nodes-N/\n", a.out_dir, a.out_dir);
}

}  // namespace

void add_sweep_command(CLI::App& app) {
  auto a = std::make_shared<SweepArgs>();
  CLI::App* cmd = app.add_subcommand(
      "sweep", "Every valid plan for a model on a cluster: pruned by memory, simulated, ranked by "
               "throughput, and why the winner wins (shards over ranks under mpirun)");
  cmd->add_option("--model", a->model, "model.json path or shipped name")->required();
  cmd->add_option("--cluster", a->cluster, "cluster.json path or shipped name")->required();
  cmd->add_option("--profile", a->profile, "device profile (default: the cluster's)");
  cmd->add_option("--global-batch-size", a->global_batch_size,
                  "sequences per step (default: about 4M tokens, a multiple of the GPU count)")
      ->check(CLI::PositiveNumber);
  // model.json's own range for seq_length (plan/model_spec.cc).
  cmd->add_option("--seq-length", a->seq_length, "override the model's sequence length")->check(CLI::Range(1, 1 << 24));
  cmd->add_option("--min-cp-tokens", a->min_cp_tokens,
                  "context parallelism is tried while each rank keeps this many tokens of a sequence "
                  "(default 4096; a constraint on cp replaces it)")
      ->check(CLI::PositiveNumber);
  cmd->add_option("--constraints", a->constraints_file, "JSON file pinning or restricting plan keys");
  cmd->add_option("--where", a->where, "a constraint such as 'tp<=4', 'zero_stage in [1,2]', 'recompute=full'");
  cmd->add_option("--top", a->top, "plans to print and explain (default 10)")->check(CLI::PositiveNumber);
  cmd->add_option("--full-top", a->full_top, "best plans re-simulated at full fidelity (default 3)")
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("--samples", a->samples,
                  "sample the --full-top plans' step this many times with each GPU's speed drawn per step (needs "
                  "--clock-cv): their P50 and P90 step times")
      ->check(CLI::Range(1, 100000));
  cmd->add_option("--clock-cv", a->clock_cv,
                  "with --samples: coefficient of variation of each GPU's speed per step (an assumption, e.g. 0.03)")
      ->check(finite_in(1e-6, 1.0));
  cmd->add_option("--kernel-cv", a->kernel_cv,
                  "with --samples: each kernel's own time spread on each GPU, on top of --clock-cv (an assumption, "
                  "e.g. 0.02)")
      ->check(finite_in(1e-6, 1.0));
  cmd->add_option("--seed", a->seed, "with --samples: the seed of the sampled speeds (default 1)");
  cmd->add_option("--rank-by", a->rank_by,
                  "mean (default) or p90: order the sampled --full-top plans by their P90 step time, the most "
                  "robust to slow steps first")
      ->check(CLI::IsMember({"mean", "p90"}));
  cmd->add_option("--threads", a->threads, "simulation threads (default: all cores)")->check(CLI::PositiveNumber);
  cmd->add_option("--nodes", a->nodes, "node counts to compare, e.g. 16,32,64,128")
      ->delimiter(',')
      ->check(CLI::Range(1, 1 << 20));
  cmd->add_option("--dtype", a->dtype, "training precision")->check(CLI::IsMember({"bf16", "fp16"}));
  cmd->add_option("--framework", a->framework,
                  "training software every plan runs with: a framework profile (scenarios/frameworks/, default "
                  "strata-runtime); ZeRO-3 is tried only if it shards parameters");
  cmd->add_option("--moe-dispatcher", a->moe_dispatcher,
                  "MoE models: the token dispatcher every plan uses (default alltoall; flex: DeepEP, a token over "
                  "the network once per node)")
      ->check(CLI::IsMember({"alltoall", "allgather", "flex"}));
  cmd->add_flag("--allow-cross-node-tp", a->allow_cross_node_tp, "allow tensor parallelism across nodes");
  cmd->add_option("--out", a->out_dir, "directory for sweep.csv and sweep.json")->required();
  cmd->callback([a] { run_sweep_command(*a); });
}

}  // namespace strata::cli
