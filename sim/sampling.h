// Step-time distributions under clock variation: the spread a synchronous step
// gets from GPUs that do not all run at the same speed. Each sampled step gives
// every GPU a compute factor drawn from a lognormal of mean 1 and coefficient of
// variation cv (GPU clocks boost and throttle with temperature and power; the cv
// is an assumption the caller names, until the calibration records each kernel
// family's measured spread), and simulates the whole step at full fidelity: a
// tensor-parallel group runs at its slowest member's pace, the other replicas
// wait for it at the gradient reduction, so the step's expected time grows with
// the number of GPUs (the expected maximum of more draws).
//
// Deterministic: sample k of seed s gives rank r the same factor on every run and
// thread (a counter-based generator, splitmix64 of (seed, k, r), and Box-Muller,
// not std::lognormal_distribution, whose values the standard leaves to each library).
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "costmodel/profile.h"
#include "sim/simulate.h"

namespace strata::sim {

// A uniform double in (0, 1) from the counter (a, b, c, d): splitmix64 of the
// four, the same on every platform and thread (what every sampled figure draws).
double counter_uniform(std::uint64_t a, std::uint64_t b, std::uint64_t c, std::uint64_t d);

// The counters' second word: one stream per kind of draw, so that no two kinds
// share draws for the same seed.
enum RandomStream : std::uint64_t {
  kClockStream = 1,      // each GPU's speed per sampled step
  kBootstrapStream = 2,  // the confidence intervals' resamples
  kFailureStream = 3,    // sim/goodput.h's failure times
  kKernelStream = 4,     // each kernel's own time per sampled step
};

// Each kernel's own time spread, per kernel family: the coefficient of variation
// of one kernel's time on one GPU (a lognormal of mean 1 per kernel and rank).
struct KernelJitter {
  double gemm = 0.0;
  double attention = 0.0;
  double memory_bound = 0.0;  // every other compute kernel (norms, activations, optimizer)
  std::string origin;         // where the figures come from, for the result
  bool any() const { return gemm > 0.0 || attention > 0.0 || memory_bound > 0.0; }
  bool measured() const { return origin.rfind("measured", 0) == 0; }
  double cv_of(Category c) const;
  // Every family at one assumed coefficient of variation (--kernel-cv X).
  static KernelJitter assumed(double cv);
};

// The jitter a calibrated profile measured: per family, the median over its
// measurements of the repeats' relative interquartile range (costmodel/fitting.h
// median_spread) over 1.349, a normal's IQR in standard deviations. Repeats of
// one kernel back to back on one GPU: the run-to-run noise of a kernel, not the
// difference between GPUs. nullopt when the profile measured none of the three.
std::optional<KernelJitter> measured_kernel_jitter(const Profile& profile);

struct ClockVariation {
  ClockVariation() = default;
  ClockVariation(double cv_, std::uint64_t seed_, KernelJitter kernel_ = {}, std::string clock_origin_ = {})
      : cv(cv_), seed(seed_), kernel(std::move(kernel_)), clock_origin(std::move(clock_origin_)) {}

  double cv = 0.0;  // coefficient of variation of a GPU's speed, per step
  std::uint64_t seed = 1;
  KernelJitter kernel;  // on top: each kernel's own spread (none by default)
  std::string clock_origin;  // where cv comes from; empty: an assumption (--clock-cv)
};

// The spread across GPUs a calibration under mpirun measured (the profile's
// rank_spread: how differently its ranks ran the same kernels) as each GPU's
// clock variation, its origin named; nullopt when the profile has none, or a
// spread of 0. A persistent difference between GPUs, drawn afresh each step.
std::optional<ClockVariation> measured_clock_variation(const Profile& profile, std::uint64_t seed);

// Every rank's compute factor in sample `sample`.
std::vector<double> clock_factors(const ClockVariation& v, int sample, int ranks);

// Task `task`'s kernel factor on global rank `rank` in sample `sample`, for a
// kernel of coefficient of variation cv (1 when cv is 0).
double kernel_factor(const ClockVariation& v, int sample, TaskId task, int rank, double cv);

// The options that simulate sample `sample` of v: options' own, with every
// rank's clock factor and, when v has kernel jitter, each kernel's (the tasks'
// families read from `built`, which must outlive the options).
SimulationOptions sample_options(const SimulationOptions& options, const ClockVariation& v, int sample,
                                 int ranks, const Workload& built);

// A sample statistic and its 95% bootstrap confidence interval (percentile
// bootstrap, 2,000 resamples of the samples, seeded from the same seed).
struct Estimate {
  double value = 0.0;
  double ci_low = 0.0;
  double ci_high = 0.0;
};

struct StepDistribution {
  ClockVariation variation;
  std::vector<double> step_time_s;  // per sample, in sample order
  double noiseless_step_time_s = 0.0;
  Estimate mean, p50, p90, p99;
  // Per global rank, the share of samples in which its compute was on the
  // step's critical path (SimulationResult::critical_ranks).
  std::vector<double> critical_share;
};

// The p-quantile (0..1) of values, linearly interpolated between order
// statistics (Hyndman and Fan's type 7, R's and NumPy's default).
double quantile(std::vector<double> values, double p);

// Simulates `samples` steps of the plan (full fidelity, no timeline), each with
// its clock factors on top of options' (slow ranks stay slow), on `threads`
// threads (each sample is its own, so the result does not depend on them).
// progress(done, total) after each sample, from the calling thread; may be empty.
StepDistribution sample_steps(const Simulator& simulator, const ModelSpec& model, const PlanSpec& plan,
                              const SimulationOptions& options, const ClockVariation& variation, int samples,
                              double noiseless_step_time_s, int threads = 1,
                              const std::function<void(int, int)>& progress = {});

// What simulate_sampled samples: `samples` steps under `variation` on `threads`
// threads, and optionally one sample again with its timeline (for its trace:
// where ranks waited for slower peers).
inline constexpr int kNoSample = -1;
inline constexpr int kSlowestSample = -2;
struct Sampling {
  ClockVariation variation;
  int samples = 0;
  int threads = 1;
  int traced = kNoSample;  // a sample's index, kSlowestSample or kNoSample
};

// The step as options give it (its timeline if asked) and its samples, from one
// build: the noiseless run takes a thread beside the first samples.
struct SampledSimulation {
  SimulationResult noiseless;
  double noiseless_wall_s = 0.0;  // the noiseless run's own time (it ran beside samples)
  StepDistribution distribution;  // its noiseless_step_time_s: noiseless's step
  std::optional<SimulationResult> traced;  // Sampling::traced's sample, its timeline kept
  int traced_index = kNoSample;
};
SampledSimulation simulate_sampled(const Simulator& simulator, const ModelSpec& model, const PlanSpec& plan,
                                   const SimulationOptions& options, const Sampling& sampling,
                                   const std::function<void(int, int)>& progress = {});
// The same for a scenario (its slowed NICs in the topology of every run); a step
// too large to simulate is simulate()'s InputError.
SampledSimulation simulate_sampled(const Scenario& scenario, const SimulationOptions& options,
                                   const Sampling& sampling, const std::function<void(int, int)>& progress = {});

// The ranks most often on the critical path, by share of samples (then by rank),
// at most `limit` of them.
std::vector<std::pair<int, double>> most_critical_ranks(const StepDistribution& d, std::size_t limit);
nlohmann::ordered_json critical_path_json(const StepDistribution& d, std::size_t limit);

// result.json's "distribution" section (docs/formats.md).
nlohmann::ordered_json to_json(const StepDistribution& d);

}  // namespace strata::sim
