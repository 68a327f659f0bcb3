// Clock variation (sim/sampling.h): the factors' distribution, and the step of
// replicas that synchronise once per step against the order statistics of their
// speeds.
#include "sim/sampling.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "costmodel/profile.h"
#include "fake_costs.h"
#include "plan/model_spec.h"
#include "test_models.h"
#include "sim/engine/engine.h"
#include "sim/simulate.h"
#include "sim/workload/workload.h"
#include "topologies/cluster_spec.h"

namespace strata::sim {
namespace {

// The factors have mean 1 and the asked coefficient of variation, and repeat.
TEST(ClockVariation, FactorsAreLognormalWithMeanOneAndTheirCv) {
  const ClockVariation v{0.05, 7};
  double sum = 0.0, sum2 = 0.0;
  const int n = 200000;
  const std::vector<double> f = clock_factors(v, 0, n);
  for (double x : f) {
    sum += x;
    sum2 += x * x;
  }
  const double mean = sum / n;
  const double sd = std::sqrt(sum2 / n - mean * mean);
  EXPECT_NEAR(mean, 1.0, 0.0005);
  EXPECT_NEAR(sd / mean, 0.05, 0.0005);
  EXPECT_EQ(clock_factors(v, 3, 16), clock_factors(v, 3, 16));
  EXPECT_NE(clock_factors(v, 3, 16), clock_factors(v, 4, 16));
  EXPECT_NE(clock_factors(v, 3, 16), clock_factors({0.05, 8}, 3, 16));
  // Rank r's factor does not depend on how many ranks there are.
  EXPECT_EQ(clock_factors(v, 3, 16)[5], clock_factors(v, 3, 64)[5]);
}

TEST(ClockVariation, QuantileInterpolatesBetweenOrderStatistics) {
  EXPECT_DOUBLE_EQ(quantile({4, 1, 3, 2}, 0.5), 2.5);
  EXPECT_DOUBLE_EQ(quantile({4, 1, 3, 2}, 0.0), 1.0);
  EXPECT_DOUBLE_EQ(quantile({4, 1, 3, 2}, 1.0), 4.0);
  EXPECT_DOUBLE_EQ(quantile({10, 20}, 0.9), 19.0);
}

// Sampled steps build the step once and run it at each sample's speeds
// (Simulator::build, then run on the built step): each run gives what a fresh
// simulation at those speeds gives — step, critical ranks, every task's times and,
// kept for the trace, the durations as they ran — and leaves the built step as built.
TEST(ClockVariation, OneBuiltStepRunsAsFreshOnes) {
  const ModelSpec model = load_model_spec("gpt-tiny");
  const ClusterSpec cluster = load_cluster_spec("dgx-a100-1node");
  const Simulator simulator(cluster, load_profile(cluster.profile));
  const PlanSpec p = strata::testing::plan(2, 2, 2, 1, 8);
  SimulationOptions o;
  o.critical_path = true;
  const std::shared_ptr<const Workload> built = simulator.build(model, p, o);
  const std::vector<TimeNs> as_built = built->graph.scaled_durations(0, std::vector<double>(8, 1.0));
  std::vector<double> steps;
  for (int k = 0; k < 3; ++k) {
    o.rank_factors = clock_factors({0.05, 11}, k, p.num_gpus());
    const SimulationResult fresh = simulator.run(model, p, o);
    const SimulationResult reused = simulator.run(*built, model, p, o);
    EXPECT_EQ(reused.metrics.step_time_s, fresh.metrics.step_time_s) << "sample " << k;
    EXPECT_EQ(reused.critical_ranks, fresh.critical_ranks) << "sample " << k;
    EXPECT_EQ(reused.run.start_ns, fresh.run.start_ns) << "sample " << k;
    EXPECT_EQ(reused.run.end_ns, fresh.run.end_ns) << "sample " << k;
    ASSERT_EQ(reused.workload.graph.num_tasks(), fresh.workload.graph.num_tasks());
    for (TaskId t = 0; t < fresh.workload.graph.num_tasks(); ++t) {
      ASSERT_EQ(reused.workload.graph.duration_ns(t), fresh.workload.graph.duration_ns(t)) << "task " << t;
    }
    steps.push_back(fresh.metrics.step_time_s);
  }
  EXPECT_NE(steps[0], steps[1]);  // the speeds did change the step
  EXPECT_EQ(built->graph.scaled_durations(0, std::vector<double>(8, 1.0)), as_built);
  o.rank_factors.clear();
  EXPECT_EQ(simulator.run(*built, model, p, o).metrics.step_time_s, simulator.run(model, p, o).metrics.step_time_s);
}

// simulate_sampled runs the step as asked (its timeline kept) beside its samples,
// all from one build: the step is what a fresh simulation gives, each sample's
// step time (counted without the per-rank accounting) what a fresh simulation at
// its speeds gives, on any number of threads. A zb-h2 plan too, whose ranks start
// the next step alone (its step is a period, not the makespan).
TEST(ClockVariation, SampledSimulationIsItsFreshRuns) {
  const ModelSpec model = load_model_spec("gpt-tiny");
  const ClusterSpec cluster = load_cluster_spec("dgx-a100-1node");
  const Simulator simulator(cluster, load_profile(cluster.profile));
  PlanSpec zb = strata::testing::plan(1, 2, 4, 1, 16);
  zb.schedule = Schedule::kZbH2;
  for (const PlanSpec& p : {strata::testing::plan(2, 2, 2, 1, 8), zb}) {
    const ClockVariation v{0.05, 5};
    const SimulationOptions o;
    const SampledSimulation one = simulate_sampled(simulator, model, p, o, {v, 5, 1});
    const SampledSimulation three = simulate_sampled(simulator, model, p, o, {v, 5, 3, kSlowestSample});
    const SimulationResult fresh = simulator.run(model, p, o);
    EXPECT_EQ(one.noiseless.metrics.step_time_s, fresh.metrics.step_time_s);
    EXPECT_EQ(one.noiseless.metrics.bubble_ratio, fresh.metrics.bubble_ratio);
    EXPECT_EQ(one.noiseless.run.end_ns, fresh.run.end_ns);
    EXPECT_EQ(three.noiseless.run.end_ns, fresh.run.end_ns);
    EXPECT_EQ(one.distribution.noiseless_step_time_s, fresh.metrics.step_time_s);
    ASSERT_EQ(one.distribution.step_time_s.size(), 5u);
    for (int k = 0; k < 5; ++k) {
      SimulationOptions at = o;
      at.rank_factors = clock_factors(v, k, p.num_gpus());
      EXPECT_EQ(one.distribution.step_time_s[static_cast<std::size_t>(k)],
                simulator.run(model, p, at).metrics.step_time_s)
          << to_string(p.schedule) << " sample " << k;
    }
    EXPECT_EQ(three.distribution.step_time_s, one.distribution.step_time_s);
    EXPECT_EQ(three.distribution.critical_share, one.distribution.critical_share);
    EXPECT_EQ(three.distribution.p90.value, one.distribution.p90.value);
    // The slowest sample run again with its timeline is that sample.
    EXPECT_FALSE(one.traced);
    ASSERT_TRUE(three.traced);
    const std::vector<double>& steps = one.distribution.step_time_s;
    EXPECT_EQ(three.traced_index, std::max_element(steps.begin(), steps.end()) - steps.begin());
    EXPECT_EQ(three.traced->metrics.step_time_s, *std::max_element(steps.begin(), steps.end()));
    EXPECT_EQ(three.traced->workload.graph.num_tasks(), fresh.workload.graph.num_tasks());
  }
}

// E[max of N draws] of the lognormal the factors follow, as the order statistics
// give it for a positive variable: the integral of 1 - F(x)^N over x > 0, F the
// lognormal's CDF (midpoint rule; the tail beyond 2 is below 1e-30 at cv 0.05).
double expected_max_factor(double cv, int n) {
  const double s2 = std::log1p(cv * cv), s = std::sqrt(s2), mu = -s2 / 2;
  const double dx = 1e-5;
  double sum = 0.0;
  for (double x = dx / 2; x < 2.0; x += dx) {
    const double cdf = 0.5 * std::erfc(-(std::log(x) - mu) / (s * std::sqrt(2.0)));
    sum += (1.0 - std::pow(cdf, n)) * dx;
  }
  return sum;
}

// dp replicas with free communication meet only at the gradient reduction, so a
// sampled step is the slowest replica's: the step at speed times the largest of
// their factors (to a nanosecond per task: each duration is rounded). Over many
// samples the mean is the expected maximum of N draws (1, 1.0282 and 1.0729 for
// 1, 2 and 8 replicas at cv 0.05), within four standard errors: the straggler
// effect, growing with N.
TEST(ClockVariation, ReplicasWaitForTheirSlowestAsOrderStatisticsSay) {
  const double cv = 0.05;
  double previous = 0.0;
  for (const int dp : {1, 2, 8}) {
    ModelSpec model = strata::testing::small_gpt(2);
    PlanSpec p;
    p.dp = dp;
    p.micro_batch_size = 1;
    p.global_batch_size = 2 * dp;
    testing::GemmCountCosts costs(1000, model.vocab_size);
    testing::FreeComm comm;
    Workload base = build_workload(model, p, costs, comm, Fidelity::kFull);
    const double at_speed = static_cast<double>(run_task_graph(base.graph, nullptr).makespan_ns);
    const double tasks = static_cast<double>(base.graph.num_tasks());
    double sum = 0.0, sum2 = 0.0;
    const int samples = 2000;
    for (int k = 0; k < samples; ++k) {
      const std::vector<double> f = clock_factors({cv, 11}, k, dp);
      Workload w = build_workload(model, p, costs, comm, Fidelity::kFull);
      std::vector<double> by_sim_rank(w.global_rank.size());
      for (std::size_t i = 0; i < by_sim_rank.size(); ++i) by_sim_rank[i] = f[static_cast<std::size_t>(w.global_rank[i])];
      w.graph.scale_compute(stream_index(StreamKind::kCompute), by_sim_rank);
      const double step = static_cast<double>(run_task_graph(w.graph, nullptr).makespan_ns);
      ASSERT_NEAR(step, at_speed * *std::max_element(f.begin(), f.end()), tasks) << "dp " << dp << " sample " << k;
      sum += step / at_speed;
      sum2 += (step / at_speed) * (step / at_speed);
    }
    const double mean = sum / samples;
    const double standard_error = std::sqrt((sum2 / samples - mean * mean) / samples);
    EXPECT_NEAR(mean, expected_max_factor(cv, dp), 4 * standard_error) << "dp " << dp;
    EXPECT_GT(mean, previous) << "dp " << dp;
    previous = mean;
  }
  EXPECT_NEAR(expected_max_factor(cv, 1), 1.0, 1e-9);
}

// Kernel jitter (--kernel-cv): each compute kernel of a tensor-parallel group of
// 8 runs at its slowest member's draw — exactly, task by task, in the step the
// simulator runs and keeps — and only the families given a spread move. Over the
// step's GEMMs the mean factor is the expected maximum of 8 draws (1.0729 at cv
// 0.05), within four standard errors.
TEST(KernelJitter, ATensorParallelGroupWaitsForItsSlowestMembersKernel) {
  const ModelSpec model = load_model_spec("gpt-tiny");
  const ClusterSpec cluster = load_cluster_spec("dgx-a100-1node");
  const Simulator simulator(cluster, load_profile(cluster.profile));
  const PlanSpec p = strata::testing::plan(8, 1, 1, 1, 8);
  const std::shared_ptr<const Workload> built = simulator.build(model, p, SimulationOptions{});
  ClockVariation v;
  v.seed = 9;
  v.kernel.gemm = 0.05;
  const SimulationOptions o = sample_options(SimulationOptions{}, v, 4, p.num_gpus(), *built);
  EXPECT_TRUE(o.rank_factors.empty());  // no clock spread asked
  const SimulationResult r = simulator.run(*built, model, p, o);
  const TaskGraph& g = built->graph;
  ASSERT_EQ(r.workload.graph.num_tasks(), g.num_tasks());
  const int compute = stream_index(StreamKind::kCompute);
  double sum = 0.0, sum2 = 0.0;
  int gemms = 0, others = 0;
  for (TaskId t = 0; t < g.num_tasks(); ++t) {
    if (g.comm_of(t) >= 0) {
      EXPECT_EQ(r.workload.graph.duration_ns(t), g.duration_ns(t));
      continue;
    }
    double slowest = 0.0;
    int members = 0;
    for (const std::int32_t* slot = g.slots_begin(t); slot != g.slots_end(t); ++slot) {
      if (*slot % g.streams_per_rank() != compute) continue;
      ++members;
      slowest = std::max(slowest, kernel_factor(v, 4, t, built->global_rank[static_cast<std::size_t>(g.rank_of_slot(*slot))], 0.05));
    }
    if (built->notes.label_of_task(t).category != Category::kGemm || members == 0) {
      EXPECT_EQ(r.workload.graph.duration_ns(t), g.duration_ns(t)) << "task " << t;
      ++others;
      continue;
    }
    ASSERT_EQ(members, 8) << "task " << t;
    EXPECT_EQ(r.workload.graph.duration_ns(t), std::llround(static_cast<double>(g.duration_ns(t)) * slowest))
        << "task " << t;
    sum += slowest;
    sum2 += slowest * slowest;
    ++gemms;
  }
  ASSERT_GT(gemms, 100);
  ASSERT_GT(others, 0);
  const double mean = sum / gemms;
  const double standard_error = std::sqrt((sum2 / gemms - mean * mean) / gemms);
  EXPECT_NEAR(mean, expected_max_factor(0.05, 8), 4 * standard_error);
  EXPECT_GT(r.metrics.step_time_s, simulator.run(*built, model, p, SimulationOptions{}).metrics.step_time_s);
}

// A calibrated profile's repeat spreads give each family's jitter: the median
// relative IQR over 1.349 (a normal's IQR in standard deviations); a datasheet
// profile has none.
TEST(KernelJitter, MeasuredFromTheProfilesRepeatSpreads) {
  EXPECT_FALSE(measured_kernel_jitter(load_profile("a100-sxm4-80gb")).has_value());
  nlohmann::json text = to_json(load_profile("a100-sxm4-80gb"));
  text["gemm"] = {{"origin", "measured"}, {"tile_m", 128}, {"tile_n", 128}, {"overhead_us", 2},
                  {"max_efficiency", {{"bf16", 0.8}}},
                  {"sources", {{"max_efficiency", "s"}, {"tile", "s"}, {"overhead_us", "s"}}},
                  {"measured", {{"bf16", {{{"m", 64}, {"n", 64}, {"k", 64}, {"time_us", 50}, {"spread", 0.02}},
                                          {{"m", 128}, {"n", 64}, {"k", 64}, {"time_us", 90}, {"spread", 0.04}},
                                          {{"m", 128}, {"n", 128}, {"k", 64}, {"time_us", 160}, {"spread", 0.9}}}}}}};
  const std::optional<KernelJitter> j = measured_kernel_jitter(read_profile(text, "calibrated.json"));
  ASSERT_TRUE(j.has_value());
  EXPECT_DOUBLE_EQ(j->gemm, 0.04 / 1.349);  // the median of 0.02, 0.04, 0.9
  EXPECT_EQ(j->attention, 0.0);
  EXPECT_NE(j->origin.find("measured"), std::string::npos);
}

// Four replicas with free communication, replica 2's GPU half as fast again: the
// step ends with its work, so the critical path runs through rank 2 alone.
TEST(ClockVariation, CriticalPathRunsThroughTheSlowReplica) {
  ModelSpec model = strata::testing::small_gpt(2);
  PlanSpec p;
  p.dp = 4;
  p.micro_batch_size = 1;
  p.global_batch_size = 8;
  testing::GemmCountCosts costs(1000, model.vocab_size);
  testing::FreeComm comm;
  Workload w = build_workload(model, p, costs, comm, Fidelity::kFull);
  std::vector<double> factor(w.global_rank.size(), 1.0);
  for (std::size_t i = 0; i < factor.size(); ++i) {
    if (w.global_rank[i] == 2) factor[i] = 1.5;
  }
  w.graph.scale_compute(stream_index(StreamKind::kCompute), factor);
  const RunResult run = run_task_graph(w.graph, nullptr);
  EXPECT_EQ(critical_path_ranks(w, run), std::vector<int>{2});
}

}  // namespace
}  // namespace strata::sim
