// strata simulate: one training step, rank by rank: step time, MFU, bubble,
// exposed communication, memory; result.json and a Perfetto trace.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <functional>
#include <optional>
#include <thread>

#include <fmt/format.h>

#include "cli/commands.h"
#include "cli/validators.h"
#include "cli/format.h"
#include "cli/scenario_options.h"
#include "core/atomic_file.h"
#include "core/error.h"
#include "core/progress.h"
#include "plan/params.h"
#include "sim/sampling.h"
#include "sim/simulate.h"
#include "topologies/topology.h"

namespace strata::cli {
namespace {

struct SimulateArgs {
  ScenarioChoice scenario;
  std::string fidelity = "full";
  std::string out_dir;
  std::vector<int> trace_ranks;
  bool no_trace = false;
  double train_tokens = 0.0;
  std::vector<std::string> slow_ranks;  // "R:F"
  std::vector<std::string> slow_nodes;  // "N:F"
  std::vector<std::string> slow_nics;   // "N:R:F"
  std::vector<std::string> slow_links;  // "A:B:F", vertex names
  int samples = 0;
  std::string trace_sample;  // --trace-sample: "", "slowest" or a sample's index
  std::uint64_t seed = 1;
  std::string clock_cv;   // --clock-cv: "", "measured" or a coefficient of variation
  std::string kernel_cv;  // --kernel-cv: "", "measured" or a coefficient of variation
  int threads = 0;
};

// The `n` numbers of a what-if flag's value, "A:B" or "A:B:C", each read whole;
// nothing when the value has another number of fields or one is not a number.
std::optional<std::vector<double>> colon_numbers(const std::string& text, std::size_t n) {
  std::vector<double> out;
  std::size_t from = 0;
  for (std::size_t i = 0; i < n; ++i) {
    const std::size_t to = i + 1 < n ? text.find(':', from) : text.size();
    if (to == std::string::npos) return std::nullopt;
    const std::string field = text.substr(from, to - from);
    std::size_t used = 0;
    try {
      out.push_back(std::stod(field, &used));
    } catch (const std::logic_error&) {
      return std::nullopt;
    }
    if (used != field.size() || !std::isfinite(out.back())) return std::nullopt;
    from = to + 1;
  }
  return out;
}

// An index field of colon_numbers: a whole number in [0, count).
bool is_index(double v, int count) { return v == std::floor(v) && v >= 0 && v < count; }

// --slow-rank R:F (what = "rank", flag "--slow-rank") or --slow-node N:F, each an
// index below `count` and a factor in (0, 100].
std::vector<sim::SlowRank> parse_slow(const std::vector<std::string>& texts, int count, const char* what,
                                      const char* flag) {
  std::vector<sim::SlowRank> out;
  const std::string index = std::string(what) == "rank" ? "RANK" : "NODE";
  for (const std::string& text : texts) {
    auto fail = [&](const std::string& why) {
      throw InputError("", flag,
                       fmt::format("\"{}\": {} (allowed: {}:FACTOR, {} 0..{}, FACTOR in (0, 100], e.g. 7:1.2 for "
                                   "{} 7's kernels 20% slower)",
                                   text, why, index, index, count - 1, what));
    };
    const std::optional<std::vector<double>> v = colon_numbers(text, 2);
    if (!v) fail(fmt::format("expected two numbers, {}:FACTOR", index));
    if (!is_index((*v)[0], count)) fail(fmt::format("{} {} is not one of the plan's {} {}s", what, (*v)[0], count, what));
    const sim::SlowRank slow{static_cast<int>((*v)[0]), (*v)[1]};
    if (slow.factor <= 0.0 || slow.factor > 100.0) fail(fmt::format("factor {} is outside (0, 100]", slow.factor));
    for (const sim::SlowRank& other : out) {
      if (other.rank == slow.rank) fail(fmt::format("{} {} is given twice", what, slow.rank));
    }
    out.push_back(slow);
  }
  return out;
}

// --slow-nic NODE:NIC:FACTOR, repeatable: a node below `nodes`, a NIC below
// `rails` (the fabric NICs of a node), a factor in (1, 100].
std::vector<sim::SlowNic> parse_slow_nics(const std::vector<std::string>& texts, int nodes, int rails) {
  std::vector<sim::SlowNic> out;
  for (const std::string& text : texts) {
    auto fail = [&](const std::string& why) {
      throw InputError("", "--slow-nic",
                       fmt::format("\"{}\": {} (allowed: NODE:NIC:FACTOR, NODE 0..{}, NIC 0..{} (the node's "
                                   "fabric NICs), FACTOR in (1, 100], e.g. 3:0:2 for node 3's first NIC at half its "
                                   "bandwidth)",
                                   text, why, nodes - 1, rails - 1));
    };
    if (rails < 1) fail("the cluster has no fabric NICs (a single node, or no fabric)");
    const std::optional<std::vector<double>> v = colon_numbers(text, 3);
    if (!v) fail("expected three numbers, NODE:NIC:FACTOR");
    if (!is_index((*v)[0], nodes)) fail(fmt::format("node {} is not one of the cluster's {} nodes", (*v)[0], nodes));
    if (!is_index((*v)[1], rails)) fail(fmt::format("NIC {} is not one of a node's {} fabric NICs", (*v)[1], rails));
    const sim::SlowNic nic{static_cast<int>((*v)[0]), static_cast<int>((*v)[1]), (*v)[2]};
    if (nic.factor <= 1.0 || nic.factor > 100.0) fail(fmt::format("factor {} is outside (1, 100]", nic.factor));
    for (const sim::SlowNic& other : out) {
      if (other.node == nic.node && other.rail == nic.rail) fail("that NIC is given twice");
    }
    out.push_back(nic);
  }
  return out;
}

// --slow-link A:B:FACTOR (repeatable): the two ends' vertex names and a factor in
// (1, 100]; the names are checked on the cluster's topology (Topology::slow_link).
std::vector<sim::SlowLink> parse_slow_links(const std::vector<std::string>& texts, const ClusterSpec& cluster) {
  std::vector<sim::SlowLink> out;
  if (texts.empty()) return out;
  topo::Topology topology = topo::Topology::build(cluster);
  for (const std::string& text : texts) {
    auto fail = [&](const std::string& why) {
      throw InputError("", "--slow-link",
                       fmt::format("\"{}\": {} (allowed: FROM:TO:FACTOR, the two ends of one link as result.json's "
                                   "link_utilization names them, FACTOR in (1, 100], e.g. "
                                   "n0.gpu3:n0.nvswitch:2 for GPU 3's NVLink at half its bandwidth)",
                                   text, why));
    };
    const std::size_t first = text.find(':');
    const std::size_t second = first == std::string::npos ? first : text.find(':', first + 1);
    if (second == std::string::npos) fail("expected FROM:TO:FACTOR");
    sim::SlowLink link{text.substr(0, first), text.substr(first + 1, second - first - 1), 0.0};
    const std::optional<std::vector<double>> factor = colon_numbers(text.substr(second + 1), 1);
    if (!factor) fail("the factor is not a number");
    link.factor = (*factor)[0];
    if (link.factor <= 1.0 || link.factor > 100.0) fail(fmt::format("factor {} is outside (1, 100]", link.factor));
    for (const sim::SlowLink& other : out) {
      if ((other.from == link.from && other.to == link.to) || (other.from == link.to && other.to == link.from)) {
        fail("that link is given twice");
      }
    }
    try {
      topology.slow_link(link.from, link.to, link.factor, "", "--slow-link");
    } catch (const InputError& e) {
      fail(e.message());
    }
    out.push_back(link);
  }
  return out;
}

// --trace-sample's sample: kNoSample when not given, kSlowestSample for
// "slowest", else an index into the samples.
int traced_sample_of(const SimulateArgs& args) {
  if (args.trace_sample.empty()) return sim::kNoSample;
  auto fail = [&](const std::string& why) {
    throw InputError("", "--trace-sample",
                     fmt::format("\"{}\": {} (allowed: \"slowest\" or a sample's index, 0..samples-1, with "
                                 "--samples and a trace)",
                                 args.trace_sample, why));
  };
  if (args.samples <= 0) fail("needs --samples");
  if (args.no_trace) fail("--no-trace writes no trace");
  if (args.trace_sample == "slowest") return sim::kSlowestSample;
  const std::optional<std::vector<double>> k = colon_numbers(args.trace_sample, 1);
  if (!k || !is_index((*k)[0], args.samples)) fail(fmt::format("not one of the {} samples", args.samples));
  return static_cast<int>((*k)[0]);
}

// A spread flag's value: a coefficient of variation in (0, 1], or "measured"
// (measured() then gives it from the profile, nullopt when the profile lacks it);
// only with --samples. The one reader of --clock-cv and --kernel-cv.
template <typename T>
T spread_of(const std::string& flag, const std::string& text, int samples, const char* measured_is,
            const std::function<std::optional<T>()>& measured, const std::function<T(double)>& assumed,
            const std::string& missing) {
  auto fail = [&](const std::string& why) {
    throw InputError("", flag,
                     fmt::format("\"{}\": {} (allowed: a coefficient of variation in (0, 1], e.g. 0.03, or "
                                 "\"measured\": {}; with --samples)",
                                 text, why, measured_is));
  };
  if (samples <= 0) fail("needs --samples");
  if (text == "measured") {
    std::optional<T> m = measured();
    if (!m) fail(missing);
    return *m;
  }
  const std::optional<std::vector<double>> cv = colon_numbers(text, 1);
  if (!cv || !((*cv)[0] > 0.0) || (*cv)[0] > 1.0) fail("not a coefficient of variation in (0, 1]");
  return assumed((*cv)[0]);
}

// --clock-cv and --kernel-cv as the samples' variation: each GPU's speed per
// step (assumed, or the spread across ranks a calibration under mpirun
// recorded) and each kernel's own (assumed, or the profile's repeat spreads).
sim::ClockVariation variation_of(const SimulateArgs& args, const Profile& profile) {
  sim::ClockVariation v(0.0, args.seed);
  if (!args.clock_cv.empty()) {
    v = spread_of<sim::ClockVariation>(
        "--clock-cv", args.clock_cv, args.samples, "the spread across ranks a calibration under mpirun recorded",
        [&] { return sim::measured_clock_variation(profile, args.seed); },
        [&](double cv) { return sim::ClockVariation(cv, args.seed); },
        fmt::format("profile {} ({}) has no rank_spread above 0: run `mpirun -n N strata calibrate` on the GPUs and "
                    "pass its profile with --profile",
                    profile.name, profile.file));
  }
  if (!args.kernel_cv.empty()) {
    v.kernel = spread_of<sim::KernelJitter>(
        "--kernel-cv", args.kernel_cv, args.samples, "the calibrated profile's repeat spread per kernel family",
        [&] { return sim::measured_kernel_jitter(profile); }, &sim::KernelJitter::assumed,
        fmt::format("profile {} ({}) measured no GEMM, attention or memory-bound kernel: run `strata calibrate` on "
                    "the GPUs and pass its profile with --profile",
                    profile.name, profile.file));
  }
  return v;
}

// What the slow ranks and NICs cost the step, against every GPU and NIC at speed.
nlohmann::ordered_json what_if_json(const std::vector<sim::SlowRank>& slow, const std::vector<sim::SlowRank>& nodes,
                                    const std::vector<sim::SlowNic>& nics, const std::vector<sim::SlowLink>& links,
                                    double baseline_s, double step_s) {
  nlohmann::ordered_json j;
  nlohmann::ordered_json ranks = nlohmann::ordered_json::array();
  for (const sim::SlowRank& r : slow) ranks.push_back({{"rank", r.rank}, {"factor", r.factor}});
  j["slow_ranks"] = ranks;
  if (!nodes.empty()) {
    nlohmann::ordered_json n = nlohmann::ordered_json::array();
    for (const sim::SlowRank& r : nodes) n.push_back({{"node", r.rank}, {"factor", r.factor}});
    j["slow_nodes"] = n;
  }
  if (!nics.empty()) {
    nlohmann::ordered_json n = nlohmann::ordered_json::array();
    for (const sim::SlowNic& x : nics) n.push_back({{"node", x.node}, {"nic", x.rail}, {"factor", x.factor}});
    j["slow_nics"] = n;
  }
  if (!links.empty()) {
    nlohmann::ordered_json n = nlohmann::ordered_json::array();
    for (const sim::SlowLink& x : links) n.push_back({{"from", x.from}, {"to", x.to}, {"factor", x.factor}});
    j["slow_links"] = n;
  }
  j["baseline_step_time_s"] = baseline_s;
  j["step_time_s"] = step_s;
  j["slowdown"] = step_s / baseline_s - 1.0;
  return j;
}

nlohmann::ordered_json training_json(const Scenario& s, const sim::SimulationResult& r, double tokens) {
  const double seconds = tokens / r.tokens_per_s;
  // The 6ND rule (Kaplan et al. 2020): 6 FLOPs per parameter per token, at the
  // simulated model-FLOPs rate.
  const double six_nd = 6.0 * static_cast<double>(total_params(s.model)) * tokens /
                        (r.num_gpus * r.tflops_per_gpu * 1e12);
  nlohmann::ordered_json j;
  j["tokens"] = tokens;
  j["days"] = seconds / 86400.0;
  j["gpu_hours"] = seconds / 3600.0 * r.num_gpus;
  j["six_nd_days"] = six_nd / 86400.0;
  return j;
}

void print_summary(const Scenario& s, const sim::SimulationResult& r, double wall_s,
                   const nlohmann::ordered_json& training) {
  const PlanSpec& p = s.plan;
  const std::string cp = p.cp > 1 ? fmt::format(" cp {} ({})", p.cp, to_string(p.cp_comm_type)) : "";
  fmt::print("{} on {} ({} x {}), tp {}{} pp {} dp {} vpp {}, micro-batch {}, global batch {}, {}, "
             "ZeRO {}, recompute {}{}, framework {}\n",
             s.model.name, s.cluster.name, r.num_gpus, s.profile.device.name, p.tp, cp, p.pp, p.dp, p.vpp,
             p.micro_batch_size, p.global_batch_size, to_string(p.schedule), p.zero_stage,
             recompute_label(p), p.sequence_parallel ? ", sequence parallel" : "", p.framework);
  fmt::print("simulated {} of {} ranks ({} fidelity), {} events in {:.2f} s\n\n",
             r.workload.global_rank.size(), r.num_gpus, sim::to_string(r.fidelity), r.events, wall_s);
  fmt::print("step time        {}\n", seconds(r.metrics.step_time_s));
  fmt::print("throughput       {:.0f} tokens/s\n", r.tokens_per_s);
  fmt::print("MFU / HFU        {:.1f}% / {:.1f}%\n", 100 * r.mfu, 100 * r.hfu);
  fmt::print("TFLOP/s per GPU  {:.1f} model, {:.1f} with recompute (peak {:.1f})\n", r.tflops_per_gpu,
             r.hw_tflops_per_gpu, r.peak_flops_per_gpu / 1e12);
  std::string stages;
  for (double b : r.metrics.bubble_ratio_per_stage) stages += fmt::format(" {:.1f}", 100 * b);
  fmt::print("bubble           {:.2f}% (analytic {:.2f}%); per stage %:{}\n", 100 * r.metrics.bubble_ratio,
             100 * r.bubble_ratio_analytic, stages);
  fmt::print("compute          {} per GPU\n", seconds(r.metrics.compute_s));
  fmt::print("exposed comm     tp {}, pp {}, dp {}, zero {}", seconds(r.metrics.exposed_s[0]),
             seconds(r.metrics.exposed_s[1]), seconds(r.metrics.exposed_s[2]), seconds(r.metrics.exposed_s[3]));
  if (r.metrics.exposed_s[4] > 0) fmt::print(", offload {}", seconds(r.metrics.exposed_s[4]));
  if (p.cp > 1) fmt::print(", cp {}", seconds(r.metrics.exposed_s[static_cast<int>(sim::CommKind::kCp)]));
  if (p.moe.active) fmt::print(", ep {}", seconds(r.metrics.exposed_s[static_cast<int>(sim::CommKind::kEp)]));
  fmt::print("\n");
  if (r.metrics.host_s > 0) {
    fmt::print("host dispatch    {} per GPU idle waiting for the host to issue kernels\n", seconds(r.metrics.host_s));
  }
  if (r.metrics.peer_wait_s > 0) {
    fmt::print("peer wait        {} per GPU idle waiting for a slower rank of its stage (stragglers, imbalance)\n",
               seconds(r.metrics.peer_wait_s));
  }
  fmt::print("memory           peak {} on stage {} of {}: {}\n", gib(r.memory.peak_bytes), r.memory.peak_stage,
             gib(r.memory.capacity_bytes), r.memory.fits ? "fits" : "DOES NOT FIT");
  if (!training.is_null()) {
    fmt::print("training         {:.3g} tokens: {:.1f} days, {:.0f} GPU-hours (6ND rule at this rate: {:.1f} days)\n",
               training["tokens"].get<double>(), training["days"].get<double>(),
               training["gpu_hours"].get<double>(), training["six_nd_days"].get<double>());
  }
  if (!r.notes.empty()) {
    fmt::print("notes\n");
    for (const std::string& n : r.notes) fmt::print("  - {}\n", n);
  }
}

void run_simulate(const SimulateArgs& args) {
  if (args.fidelity != "full" && args.fidelity != "folded") {
    throw InputError("", "--fidelity", "expected \"full\" or \"folded\", got \"" + args.fidelity + "\"");
  }
  Scenario s = load_chosen_scenario(args.scenario);
  require_simulated_model(s);
  sim::SimulationOptions options;
  options.fidelity = args.fidelity == "full" ? sim::Fidelity::kFull : sim::Fidelity::kFolded;
  const std::vector<sim::SlowRank> slow_ranks = parse_slow(args.slow_ranks, s.plan.num_gpus(), "rank", "--slow-rank");
  std::vector<sim::SlowRank> slow = slow_ranks;
  // A slow node: each of its GPUs (rank r runs on GPU r, node r / gpus_per_node).
  const int per_node = s.cluster.gpus_per_node;
  const std::vector<sim::SlowRank> slow_nodes =
      parse_slow(args.slow_nodes, s.plan.num_gpus() / per_node, "node", "--slow-node");
  for (const sim::SlowRank& node : slow_nodes) {
    for (int g = node.rank * per_node; g < (node.rank + 1) * per_node; ++g) {
      const auto at = std::find_if(slow.begin(), slow.end(), [g](const sim::SlowRank& x) { return x.rank == g; });
      if (at != slow.end()) {
        at->factor *= node.factor;
      } else {
        slow.push_back({g, node.factor});
      }
    }
  }
  const std::vector<sim::SlowNic> slow_nics =
      parse_slow_nics(args.slow_nics, s.cluster.nodes, s.cluster.nodes > 1 ? s.cluster.fabric.nics_per_node : 0);
  if (!slow_nics.empty() && options.fidelity != sim::Fidelity::kFull) {
    throw InputError("", "--slow-nic",
                     "needs --fidelity full: folded fidelity costs each collective with its symmetric copies at "
                     "full speed, so one slow NIC cannot be told apart");
  }
  const std::vector<sim::SlowLink> slow_links = parse_slow_links(args.slow_links, s.cluster);
  if (!slow_links.empty() && options.fidelity != sim::Fidelity::kFull) {
    throw InputError("", "--slow-link",
                     "needs --fidelity full: folded fidelity costs each collective with its symmetric copies at "
                     "full speed, so one slow link cannot be told apart");
  }
  if (!slow.empty() && options.fidelity != sim::Fidelity::kFull) {
    throw InputError("", args.slow_ranks.empty() ? "--slow-node" : "--slow-rank",
                     "needs --fidelity full: folded fidelity simulates one rank per pipeline stage, which stands for "
                     "its tensor- and data-parallel peers, so one slow GPU cannot be told apart");
  }
  if (args.samples > 0 && options.fidelity != sim::Fidelity::kFull) {
    throw InputError("", "--samples",
                     "needs --fidelity full: folded fidelity simulates one rank per pipeline stage, so the GPUs "
                     "cannot each draw their own speed");
  }
  const sim::ClockVariation variation = variation_of(args, s.profile);
  if (args.samples > 0 && variation.cv <= 0.0 && !variation.kernel.any()) {
    throw InputError("", "--clock-cv",
                     fmt::format("--samples needs a spread to sample: each GPU's speed, --clock-cv 0.03 (an "
                                 "assumption, a coefficient of variation in (0, 1]) or --clock-cv measured (profile "
                                 "{} then needs the rank_spread of a calibration under mpirun), and/or each "
                                 "kernel's, --kernel-cv",
                                 s.profile.name));
  }
  const int trace_sample = traced_sample_of(args);
  // The what-if's baseline: the same step with every GPU at speed.
  double baseline_s = 0.0;
  const bool what_if = !slow.empty() || !slow_nics.empty() || !slow_links.empty();
  if (what_if) {
    sim::SimulationOptions at_speed = options;
    at_speed.keep_timeline = false;
    baseline_s = sim::simulate(s, at_speed).metrics.step_time_s;
    options.slow_ranks = slow;
    options.slow_nics = slow_nics;
    options.slow_links = slow_links;
  }
  sim::SimulationResult r;
  std::optional<sim::StepDistribution> distribution;
  double step_wall_s = 0.0;  // the step's own simulation
  std::optional<sim::SimulationResult> traced_sample;  // --trace-sample's
  int traced_sample_index = -1;
  if (args.samples > 0) {
    // The step and its samples from one build, the step beside the first samples.
    ProgressLine sampling("sampling", args.samples);
    const int threads =
        args.threads > 0 ? args.threads : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
    const sim::Sampling asked{variation, args.samples, threads, trace_sample};
    sim::SampledSimulation both = sim::simulate_sampled(s, options, asked, [&](int done, int total) {
      sampling.update(done, fmt::format("step {} of {}", done, total));
    });
    sampling.finish();
    r = std::move(both.noiseless);
    distribution = std::move(both.distribution);
    step_wall_s = both.noiseless_wall_s;
    traced_sample = std::move(both.traced);
    traced_sample_index = both.traced_index;
  } else {
    const auto t0 = std::chrono::steady_clock::now();
    ProgressLine progress("simulate", 100);
    options.progress = [&](std::int64_t done, std::int64_t total, std::string_view what) {
      progress.update(100 * done / total, std::string(what));
      return true;
    };
    r = sim::simulate(s, options);
    progress.finish();
    step_wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  }

  nlohmann::ordered_json result = sim::result_json(s, r);
  nlohmann::ordered_json training;
  if (args.train_tokens > 0) {
    training = training_json(s, r, args.train_tokens);
    result["training"] = training;
  }
  if (what_if) {
    result["what_if"] = what_if_json(slow, slow_nodes, slow_nics, slow_links, baseline_s, r.metrics.step_time_s);
  }
  if (distribution) result["distribution"] = sim::to_json(*distribution);
  const std::string sample_trace_file = fmt::format("trace-sample-{}.json", traced_sample_index);
  if (traced_sample) {
    result["distribution"]["traced_sample"] = {{"sample", traced_sample_index},
                                               {"step_time_s", traced_sample->metrics.step_time_s},
                                               {"trace", sample_trace_file}};
  }
  OutputSet out;
  out.add(args.out_dir + "/result.json", result.dump(2) + "\n");
  std::vector<int> traced;
  if (!args.no_trace) {
    traced = args.trace_ranks.empty() ? sim::default_trace_ranks(r) : sim::simulated_ranks_of(r, args.trace_ranks);
    out.add(args.out_dir + "/trace.json", sim::result_trace(s, r, traced));
    if (traced_sample) out.add(args.out_dir + "/" + sample_trace_file, sim::result_trace(s, *traced_sample, traced));
  }
  print_summary(s, r, step_wall_s, training);
  if (what_if) {
    std::string who;
    for (const sim::SlowRank& x : slow_ranks) {
      who += fmt::format("{}rank {} x{:.2f}", who.empty() ? "" : ", ", x.rank, x.factor);
    }
    for (const sim::SlowRank& x : slow_nodes) {
      who += fmt::format("{}node {} x{:.2f} ({} GPUs)", who.empty() ? "" : ", ", x.rank, x.factor, per_node);
    }
    const std::string compute = who.empty() ? "" : " (compute)";
    for (const sim::SlowNic& x : slow_nics) {
      who += fmt::format("{}node {} NIC {} at 1/{:.2f} of its bandwidth", who.empty() ? "" : ", ", x.node, x.rail,
                         x.factor);
    }
    for (const sim::SlowLink& x : slow_links) {
      who += fmt::format("{}link {} - {} at 1/{:.2f} of its bandwidth", who.empty() ? "" : ", ", x.from, x.to,
                         x.factor);
    }
    fmt::print("what-if          {}{}: step {} against {} with everything at speed ({:+.1f}%)\n", who, compute,
               seconds(r.metrics.step_time_s), seconds(baseline_s), 100.0 * (r.metrics.step_time_s / baseline_s - 1.0));
  }
  if (distribution) {
    const sim::StepDistribution& d = *distribution;
    auto est = [](const sim::Estimate& e) {
      return fmt::format("{} [{}, {}]", seconds(e.value), seconds(e.ci_low), seconds(e.ci_high));
    };
    const std::string clock = d.variation.cv > 0.0
                                  ? fmt::format("each GPU's speed lognormal with CV {:.2f}% per step ({})",
                                                100.0 * d.variation.cv,
                                                d.variation.clock_origin.empty()
                                                    ? "assumed, --clock-cv"
                                                    : "measured: the calibration's spread across ranks")
                                  : std::string("every GPU at its mean speed");
    const sim::KernelJitter& k = d.variation.kernel;
    const std::string kernels =
        k.any() ? fmt::format(", each kernel's time lognormal with CV {:.2f}% GEMM, {:.2f}% attention, {:.2f}% "
                              "memory-bound ({})",
                              100.0 * k.gemm, 100.0 * k.attention, 100.0 * k.memory_bound,
                              k.measured() ? "measured: the profile's repeat spread" : "assumed, --kernel-cv")
                : "";
    fmt::print("samples          {} steps, {}{}, seed {}; 95% confidence intervals\n", d.step_time_s.size(), clock,
               kernels, d.variation.seed);
    fmt::print("  mean {} ({:+.1f}% against {} at speed)\n", est(d.mean),
               100.0 * (d.mean.value / d.noiseless_step_time_s - 1.0), seconds(d.noiseless_step_time_s));
    fmt::print("  P50 {}, P90 {}, P99 {}\n", est(d.p50), est(d.p90), est(d.p99));
    std::string critical;
    for (const auto& [rank, share] : sim::most_critical_ranks(d, 6)) {
      critical += fmt::format("{}rank {} {:.0f}%", critical.empty() ? "" : ", ", rank, 100.0 * share);
    }
    if (!critical.empty()) fmt::print("  on the critical path (share of samples): {}\n", critical);
    if (traced_sample) {
      fmt::print("  sample {} ({}{}) traced in {}: ranks idle at a collective for a slower peer are marked "
                 "\"waiting for rank N\"\n",
                 traced_sample_index, args.trace_sample == "slowest" ? "the slowest, " : "",
                 seconds(traced_sample->metrics.step_time_s), sample_trace_file);
    }
  }
  out.commit();
  fmt::print("\nwrote {}/result.json", args.out_dir);
  if (!args.no_trace) fmt::print(", {}/trace.json ({} ranks; open in ui.perfetto.dev or strata-gui)", args.out_dir, traced.size());
  if (traced_sample) fmt::print(", {}/{}", args.out_dir, sample_trace_file);
  fmt::print("\n");
}

}  // namespace

void add_simulate_command(CLI::App& app) {
  auto args = std::make_shared<SimulateArgs>();
  CLI::App* cmd = app.add_subcommand(
      "simulate", "Simulate one training step rank by rank: step time, MFU, bubble, exposed "
                  "communication, memory, and a Perfetto trace");
  add_scenario_or_sweep_options(*cmd, args->scenario);
  cmd->add_option("--fidelity", args->fidelity,
                  "full: every rank; folded: one rank per stage (tp and dp peers are symmetric)")
      ->check(CLI::IsMember({"full", "folded"}));
  cmd->add_option("--out", args->out_dir, "directory for result.json and trace.json")->required();
  cmd->add_option("--trace-ranks", args->trace_ranks,
                  "global ranks to write to the trace (default: all up to 16 ranks, else tp/dp rank 0 of each stage)")
      ->delimiter(',');
  cmd->add_flag("--no-trace", args->no_trace, "write result.json only");
  cmd->add_option("--train-tokens", args->train_tokens,
                  "also report the days and GPU-hours to train on this many tokens")
      // Up to 10 quadrillion: 600x Llama 3's 15.6 T tokens.
      ->check(finite_in(1.0, 1e16));
  cmd->add_option("--slow-rank", args->slow_ranks,
                  "RANK:FACTOR, repeatable: what if that GPU's kernels took FACTOR times as long (a throttled "
                  "clock); prints the step against every GPU at speed (full fidelity)");
  cmd->add_option("--slow-nic", args->slow_nics,
                  "NODE:NIC:FACTOR, repeatable: what if that fabric NIC carried 1/FACTOR of its bandwidth (a link "
                  "negotiated down, a bad cable); prints the step against every NIC at speed (full fidelity)");
  cmd->add_option("--slow-link", args->slow_links,
                  "FROM:TO:FACTOR, repeatable: what if the link between those two vertices (names as result.json's "
                  "link_utilization gives them, e.g. n0.gpu3:n0.nvswitch) carried 1/FACTOR of its bandwidth, both ways (a "
                  "degraded NVLink, PCIe or switch cable); prints the step against every link at speed (full fidelity)");
  cmd->add_option("--slow-node", args->slow_nodes,
                  "NODE:FACTOR, repeatable: the same for every GPU of that node (a hot or power-capped node)");
  cmd->add_option("--samples", args->samples,
                  "simulate this many steps with each GPU's speed drawn per step (needs --clock-cv): the "
                  "step-time distribution, P50/P90/P99 with 95% confidence intervals")
      ->check(CLI::Range(1, 100000));
  cmd->add_option("--seed", args->seed, "the samples' seed (the same seed gives the same samples)");
  cmd->add_option("--clock-cv", args->clock_cv,
                  "with --samples: coefficient of variation of each GPU's compute speed per step (an assumption, "
                  "reported as such), or \"measured\": the spread across ranks a calibration under mpirun recorded");
  cmd->add_option("--trace-sample", args->trace_sample,
                  "with --samples: also write the trace of this sample (0-based) or of the slowest one (\"slowest\"): "
                  "trace-sample-K.json, where ranks wait for slower peers");
  cmd->add_option("--kernel-cv", args->kernel_cv,
                  "with --samples: each kernel's own time spread on each GPU, on top of --clock-cv: a coefficient of "
                  "variation (an assumption) or \"measured\" (the calibrated profile's repeat spread per kernel "
                  "family); a tensor-parallel group waits for its slowest member's kernel");
  cmd->add_option("--threads", args->threads,
                  "threads for --samples (default: all cores; the samples do not depend on it)")
      ->check(CLI::PositiveNumber);
  cmd->callback([args] { run_simulate(*args); });
}

}  // namespace strata::cli
