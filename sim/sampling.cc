#include "sim/sampling.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <map>
#include <mutex>
#include <numbers>
#include <thread>

#include <fmt/format.h>

#include "core/error.h"
#include "costmodel/cost_model.h"
#include "costmodel/fitting.h"

namespace strata::sim {
namespace {

// splitmix64 (Steele, Lea and Flood 2014): a counter hashed to 64 random bits.
std::uint64_t splitmix64(std::uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

// A lognormal of mean 1 and coefficient of variation cv (sigma^2 = ln(1 + cv^2),
// mu = -sigma^2 / 2) from the uniforms at counters (a, b, c, d) and (a, b, c, d + 1),
// by Box-Muller.
double lognormal(double cv, std::uint64_t a, std::uint64_t b, std::uint64_t c, std::uint64_t d);

Estimate bootstrap(const std::vector<double>& values, std::uint64_t seed, const std::function<double(std::vector<double>)>& stat) {
  constexpr int kResamples = 2000;
  Estimate e;
  e.value = stat(values);
  std::vector<double> estimates;
  estimates.reserve(kResamples);
  std::vector<double> resample(values.size());
  const auto n = static_cast<std::uint64_t>(values.size());
  for (int b = 0; b < kResamples; ++b) {
    for (std::size_t i = 0; i < values.size(); ++i) {
      const auto at = static_cast<std::size_t>(counter_uniform(seed, kBootstrapStream, static_cast<std::uint64_t>(b), i) *
                                               static_cast<double>(n));
      resample[i] = values[std::min<std::size_t>(at, values.size() - 1)];
    }
    estimates.push_back(stat(resample));
  }
  e.ci_low = quantile(estimates, 0.025);
  e.ci_high = quantile(estimates, 0.975);
  return e;
}

nlohmann::ordered_json estimate_json(const Estimate& e) {
  return {{"value", e.value}, {"ci95", {e.ci_low, e.ci_high}}};
}

}  // namespace

double counter_uniform(std::uint64_t a, std::uint64_t b, std::uint64_t c, std::uint64_t d) {
  const std::uint64_t h = splitmix64(splitmix64(splitmix64(splitmix64(a) ^ b) ^ c) ^ d);
  return (static_cast<double>(h >> 11) + 0.5) * 0x1.0p-53;
}

namespace {

double lognormal(double cv, std::uint64_t a, std::uint64_t b, std::uint64_t c, std::uint64_t d) {
  const double sigma2 = std::log1p(cv * cv);
  const double u1 = counter_uniform(a, b, c, d);
  const double u2 = counter_uniform(a, b, c, d + 1);
  const double z = std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * std::numbers::pi * u2);
  return std::exp(-0.5 * sigma2 + std::sqrt(sigma2) * z);
}

}  // namespace

std::vector<double> clock_factors(const ClockVariation& v, int sample, int ranks) {
  std::vector<double> f(static_cast<std::size_t>(ranks));
  for (int r = 0; r < ranks; ++r) {
    f[static_cast<std::size_t>(r)] =
        lognormal(v.cv, v.seed, kClockStream, static_cast<std::uint64_t>(sample), 2 * static_cast<std::uint64_t>(r));
  }
  return f;
}

double kernel_factor(const ClockVariation& v, int sample, TaskId task, int rank, double cv) {
  if (cv <= 0.0) return 1.0;
  // Tasks below 2^31, ranks below 2^24: one counter per (task, rank), two draws each.
  const std::uint64_t at = (static_cast<std::uint64_t>(task) << 24 | static_cast<std::uint64_t>(rank)) * 2;
  return lognormal(cv, v.seed, kKernelStream, static_cast<std::uint64_t>(sample), at);
}

double KernelJitter::cv_of(Category c) const {
  switch (c) {
    case Category::kGemm: return gemm;
    case Category::kAttention: return attention;
    default: return memory_bound;
  }
}

KernelJitter KernelJitter::assumed(double cv) {
  KernelJitter j;
  j.gemm = j.attention = j.memory_bound = cv;
  j.origin = "assumed (--kernel-cv): each kernel's time on each GPU lognormal, mean 1";
  return j;
}

std::optional<ClockVariation> measured_clock_variation(const Profile& profile, std::uint64_t seed) {
  const std::optional<RankSpread> spread = CostModel(profile).rank_spread();
  if (!spread || !(spread->median_cv > 0.0)) return std::nullopt;
  return ClockVariation(std::min(spread->median_cv, 1.0), seed, {},
                        fmt::format("measured: profile {}'s rank_spread, how differently its calibration's ranks ran "
                                    "the same kernels (a persistent difference between GPUs, drawn afresh each step)",
                                    profile.name));
}

std::optional<KernelJitter> measured_kernel_jitter(const Profile& profile) {
  // A normal's interquartile range is 2 x 0.6745 = 1.349 standard deviations.
  constexpr double kIqrPerSd = 1.349;
  const std::map<std::string, double> spread = median_spread(profile);
  KernelJitter j;
  auto cv = [&](const char* section) {
    const auto it = spread.find(section);
    return it == spread.end() ? 0.0 : it->second / kIqrPerSd;
  };
  j.gemm = cv("gemm");
  j.attention = cv("attention");
  j.memory_bound = cv("memory_bound");
  if (!j.any()) return std::nullopt;
  j.origin = fmt::format("measured: profile {}'s median repeat spread per kernel family (IQR / median / 1.349)",
                         profile.name);
  return j;
}

SimulationOptions sample_options(const SimulationOptions& options, const ClockVariation& v, int sample, int ranks,
                                 const Workload& built) {
  SimulationOptions o = options;
  if (v.cv > 0.0) o.rank_factors = clock_factors(v, sample, ranks);
  if (v.kernel.any()) {
    o.kernel_factor = [&built, v, sample](TaskId t, int rank) {
      return kernel_factor(v, sample, t, rank, v.kernel.cv_of(built.notes.label_of_task(t).category));
    };
  }
  return o;
}

double quantile(std::vector<double> values, double p) {
  if (values.empty()) throw InternalError("quantile of no values");
  std::sort(values.begin(), values.end());
  const double h = (static_cast<double>(values.size()) - 1.0) * p;
  const auto lo = static_cast<std::size_t>(std::floor(h));
  const std::size_t hi = std::min(lo + 1, values.size() - 1);
  return values[lo] + (h - static_cast<double>(lo)) * (values[hi] - values[lo]);
}

namespace {

// The samples of one built step on `threads` threads, each sample its own run;
// `beside`, when given, is run once by the first thread that is not the caller's
// (by the caller, first, with one thread), so that it overlaps the samples.
StepDistribution run_samples(const Simulator& simulator, const Workload& built, const ModelSpec& model,
                             const PlanSpec& plan, const SimulationOptions& options, const ClockVariation& variation,
                             int samples, int threads, const std::function<void(int, int)>& progress,
                             const std::function<void()>& beside) {
  if (options.fidelity != Fidelity::kFull) throw InternalError("sample_steps: full fidelity only");
  StepDistribution d;
  d.variation = variation;
  d.step_time_s.assign(static_cast<std::size_t>(samples), 0.0);
  std::vector<std::vector<int>> critical(static_cast<std::size_t>(samples));
  std::atomic<int> next{0}, done{0};
  std::mutex failure_mutex;
  std::exception_ptr failure;
  auto fail = [&] {
    const std::lock_guard<std::mutex> lock(failure_mutex);
    if (!failure) failure = std::current_exception();
    next = samples;
  };
  // Each thread takes the next sample; the calling thread also reports progress.
  auto work = [&](bool reports, bool runs_beside) {
    if (runs_beside) {
      try {
        beside();
      } catch (...) {
        fail();
      }
    }
    SimulationOptions base = options;
    base.keep_timeline = false;
    base.step_time_only = true;
    base.critical_path = true;
    base.progress = {};
    for (int k = next++; k < samples; k = next++) {
      try {
        const SimulationOptions o = sample_options(base, variation, k, plan.num_gpus(), built);
        SimulationResult r = simulator.run(built, model, plan, o);
        d.step_time_s[static_cast<std::size_t>(k)] = r.metrics.step_time_s;
        critical[static_cast<std::size_t>(k)] = std::move(r.critical_ranks);
      } catch (...) {
        fail();
      }
      ++done;
      if (reports && progress) progress(done, samples);
    }
  };
  const int pool_size = std::min(threads, samples) - 1;
  std::vector<std::thread> pool;
  for (int t = 0; t < pool_size; ++t) pool.emplace_back(work, false, beside && t == 0);
  work(true, beside && pool_size == 0);
  for (std::thread& t : pool) t.join();
  if (failure) std::rethrow_exception(failure);
  std::vector<int> on_path(static_cast<std::size_t>(plan.num_gpus()), 0);
  for (const std::vector<int>& ranks : critical) {
    for (int rank : ranks) ++on_path[static_cast<std::size_t>(rank)];
  }
  for (int n : on_path) d.critical_share.push_back(static_cast<double>(n) / samples);
  auto mean = [](std::vector<double> v) {
    double sum = 0.0;
    for (double x : v) sum += x;
    return sum / static_cast<double>(v.size());
  };
  d.mean = bootstrap(d.step_time_s, variation.seed, mean);
  d.p50 = bootstrap(d.step_time_s, variation.seed, [](std::vector<double> v) { return quantile(std::move(v), 0.5); });
  d.p90 = bootstrap(d.step_time_s, variation.seed, [](std::vector<double> v) { return quantile(std::move(v), 0.9); });
  d.p99 = bootstrap(d.step_time_s, variation.seed, [](std::vector<double> v) { return quantile(std::move(v), 0.99); });
  return d;
}

SimulationOptions build_options_of(const SimulationOptions& options) {
  SimulationOptions o = options;
  o.progress = {};
  return o;
}

}  // namespace

StepDistribution sample_steps(const Simulator& simulator, const ModelSpec& model, const PlanSpec& plan,
                              const SimulationOptions& options, const ClockVariation& variation, int samples,
                              double noiseless_step_time_s, int threads,
                              const std::function<void(int, int)>& progress) {
  // The step is built once: the samples differ only in their compute durations.
  const std::shared_ptr<const Workload> built = simulator.build(model, plan, build_options_of(options));
  StepDistribution d =
      run_samples(simulator, *built, model, plan, options, variation, samples, threads, progress, {});
  d.noiseless_step_time_s = noiseless_step_time_s;
  return d;
}

SampledSimulation simulate_sampled(const Simulator& simulator, const ModelSpec& model, const PlanSpec& plan,
                                   const SimulationOptions& options, const Sampling& sampling,
                                   const std::function<void(int, int)>& progress) {
  const std::shared_ptr<const Workload> built = simulator.build(model, plan, build_options_of(options));
  SampledSimulation out;
  const SimulationOptions noiseless_options = build_options_of(options);
  out.distribution = run_samples(simulator, *built, model, plan, options, sampling.variation, sampling.samples,
                                 sampling.threads, progress, [&] {
                                   const auto t0 = std::chrono::steady_clock::now();
                                   out.noiseless = simulator.run(*built, model, plan, noiseless_options);
                                   out.noiseless_wall_s =
                                       std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
                                 });
  out.distribution.noiseless_step_time_s = out.noiseless.metrics.step_time_s;
  if (sampling.traced != kNoSample) {
    const std::vector<double>& steps = out.distribution.step_time_s;
    const int k = sampling.traced == kSlowestSample
                      ? static_cast<int>(std::max_element(steps.begin(), steps.end()) - steps.begin())
                      : sampling.traced;
    if (k < 0 || k >= sampling.samples) throw InternalError(fmt::format("simulate_sampled: no sample {}", k));
    SimulationOptions o = sample_options(noiseless_options, sampling.variation, k, plan.num_gpus(), *built);
    o.keep_timeline = true;
    out.traced = simulator.run(*built, model, plan, o);
    out.traced_index = k;
  }
  return out;
}

SampledSimulation simulate_sampled(const Scenario& s, const SimulationOptions& options, const Sampling& sampling,
                                   const std::function<void(int, int)>& progress) {
  try {
    const Simulator simulator(s.cluster, s.profile, options.slow_nics, options.slow_links);
    return simulate_sampled(simulator, s.model, s.plan, options, sampling, progress);
  } catch (const WorkloadTooLarge& e) {
    throw_too_large(s, options, e);
  }
}

std::vector<std::pair<int, double>> most_critical_ranks(const StepDistribution& d, std::size_t limit) {
  std::vector<std::pair<int, double>> ranks;
  for (std::size_t r = 0; r < d.critical_share.size(); ++r) {
    if (d.critical_share[r] > 0.0) ranks.emplace_back(static_cast<int>(r), d.critical_share[r]);
  }
  std::stable_sort(ranks.begin(), ranks.end(), [](const auto& a, const auto& b) { return a.second > b.second; });
  if (ranks.size() > limit) ranks.resize(limit);
  return ranks;
}

nlohmann::ordered_json critical_path_json(const StepDistribution& d, std::size_t limit) {
  nlohmann::ordered_json out = nlohmann::ordered_json::array();
  for (const auto& [rank, share] : most_critical_ranks(d, limit)) out.push_back({{"rank", rank}, {"share", share}});
  return out;
}

nlohmann::ordered_json to_json(const StepDistribution& d) {
  nlohmann::ordered_json j;
  j["samples"] = d.step_time_s.size();
  j["seed"] = d.variation.seed;
  j["clock_cv"] = d.variation.cv;
  j["origin"] = d.variation.cv <= 0.0                 ? "none: every GPU at its mean speed (kernel jitter only)"
                : !d.variation.clock_origin.empty() ? d.variation.clock_origin
                                                    : "assumed (--clock-cv): each GPU's compute speed per step "
                                                      "lognormal, mean 1";
  if (d.variation.kernel.any()) {
    const KernelJitter& k = d.variation.kernel;
    j["kernel_cv"] = {{"gemm", k.gemm}, {"attention", k.attention}, {"memory_bound", k.memory_bound}};
    j["kernel_origin"] = k.origin;
  }
  j["noiseless_step_time_s"] = d.noiseless_step_time_s;
  j["mean_s"] = estimate_json(d.mean);
  j["p50_s"] = estimate_json(d.p50);
  j["p90_s"] = estimate_json(d.p90);
  j["p99_s"] = estimate_json(d.p99);
  j["critical_path"] = critical_path_json(d, 16);
  j["step_time_s"] = d.step_time_s;
  return j;
}

}  // namespace strata::sim
