// Goodput under failures (sim/goodput.h): Young's and Daly's intervals and
// Daly's expected wall time by hand, the sampled runs against Daly's formula,
// their parts adding up, and the same seed giving the same runs.
#include "sim/goodput.h"

#include <cmath>

#include <gtest/gtest.h>

namespace strata::sim {
namespace {

// A checkpoint of 60 s, a failure an hour on average, a 5-minute restart.
FailureModel hourly() {
  FailureModel f;
  f.job_mtbf_s = 3600.0;
  f.checkpoint_s = 60.0;
  f.restart_s = 300.0;
  return f;
}

TEST(Goodput, YoungAndDalyIntervalsByHand) {
  // Young: sqrt(2 x 60 x 3600) = 657.267 s. Daly: that x (1 + sqrt(1/120) / 3 +
  // (1/120) / 9) - 60 = 617.876 s.
  EXPECT_NEAR(young_interval_s(hourly()), 657.2670690, 1e-6);
  EXPECT_NEAR(daly_interval_s(hourly()), 617.8756496, 1e-6);
  // A checkpoint longer than two MTBFs: checkpoint every MTBF (Daly eq. 37).
  FailureModel slow = hourly();
  slow.checkpoint_s = 7200.0;
  EXPECT_DOUBLE_EQ(daly_interval_s(slow), 3600.0);
}

TEST(Goodput, DalyExpectedWallTimeByHand) {
  // 10 hours of work, checkpoints every 600 s: 3600 e^(300/3600) (e^(660/3600) - 1) x 36000 / 600.
  EXPECT_NEAR(expected_wall_s(hourly(), 36000.0, 600.0), 47239.44247, 1e-4);
  // Without failures only the checkpoints cost: work x (tau + delta) / tau.
  FailureModel never = hourly();
  never.job_mtbf_s = 1e15;
  EXPECT_NEAR(expected_wall_s(never, 36000.0, 600.0), 36000.0 * 660.0 / 600.0, 1e-3);
}

// 100 hours of work at Daly's interval: the mean of 4,000 sampled runs is
// Daly's expectation within 1% (its standard error here is about 0.3%), and each
// run's parts add up to its wall time.
TEST(Goodput, SampledRunsMatchDalysExpectation) {
  const FailureModel f = hourly();
  const double work = 360000.0;
  const double tau = daly_interval_s(f);
  double sum = 0.0;
  const int n = 4000;
  for (int k = 0; k < n; ++k) {
    const SampledRun r = sample_run(f, work, tau, 7, k);
    EXPECT_NEAR(r.wall_s, work + r.checkpoints_s + r.lost_s + r.restarts_s, 1e-6 * r.wall_s);
    sum += r.wall_s;
  }
  // Daly's model saves after the last piece too; the samples do not: one checkpoint less.
  const double daly = expected_wall_s(f, work, tau) - f.checkpoint_s;
  EXPECT_NEAR(sum / n / daly, 1.0, 0.01);
}

TEST(Goodput, SameSeedSameRunsOtherSeedOtherRuns) {
  const FailureModel f = hourly();
  const SampledRun a = sample_run(f, 36000.0, 600.0, 3, 5), b = sample_run(f, 36000.0, 600.0, 3, 5);
  EXPECT_EQ(a.wall_s, b.wall_s);
  EXPECT_EQ(a.failures, b.failures);
  EXPECT_NE(sample_run(f, 36000.0, 600.0, 4, 5).wall_s, a.wall_s);
}

// The estimate: the interval in whole steps (Daly's 617.9 s at 10 s a step: 62
// steps), goodput = work / mean wall, and the sampled optimum no worse than
// Daly's on the same draws, near it.
TEST(Goodput, EstimateUsesWholeStepsAndFindsTheSampledOptimum) {
  const GoodputEstimate e = estimate_goodput(hourly(), 360000.0, 10.0, 400, 11);
  EXPECT_EQ(e.interval_steps, 62);
  EXPECT_DOUBLE_EQ(e.interval_s, 620.0);
  EXPECT_DOUBLE_EQ(e.goodput(), 360000.0 / e.mean_wall_s);
  EXPECT_LT(e.p025_wall_s, e.mean_wall_s);
  EXPECT_GT(e.p975_wall_s, e.mean_wall_s);
  EXPECT_LE(e.best_mean_wall_s, e.mean_wall_s);
  EXPECT_GT(e.best_interval_steps, 62 / 2);
  EXPECT_LT(e.best_interval_steps, 62 * 2);
  // A fixed interval replaces Daly's.
  EXPECT_EQ(estimate_goodput(hourly(), 360000.0, 10.0, 10, 11, 30).interval_steps, 30);
}

// Llama 3's fleet: 419 unexpected interruptions in 54 days on 16,384 GPUs is
// one GPU failure every 50,676 GPU-hours, one job failure every 3.09 hours.
TEST(Goodput, Llama3FleetMtbf) {
  EXPECT_NEAR(kLlama3GpuMtbfHours, 54.0 * 24 * 16384 / 419, 1e-9);
  EXPECT_NEAR(kLlama3GpuMtbfHours / kLlama3Gpus, 3.093, 1e-3);
}

// Asynchronous saves without failures: 100 s of work in pieces of 10 s, a 1 s
// snapshot each, each write taking 60 s: a save waits for the write before it
// (60 - 10 = 50 s), so the first save costs 1 s and the next eight 51 s each.
TEST(Goodput, AsynchronousSaveWaitsForThePreviousWrite) {
  FailureModel f;
  f.job_mtbf_s = 1e18;
  f.checkpoint_s = 1.0;
  f.persist_s = 60.0;
  const SampledRun r = sample_run(f, 100.0, 10.0, 1, 0);
  EXPECT_EQ(r.failures, 0);
  EXPECT_DOUBLE_EQ(r.checkpoints_s, 1.0 + 8 * 51.0);
  EXPECT_DOUBLE_EQ(r.wall_s, 100.0 + 409.0);
}

// With failures: a 1 s snapshot written in 60 s behind the training beats a
// synchronous 60 s save, though a failure during a write loses the piece before
// too; every run's parts still add up to its wall time.
TEST(Goodput, AsynchronousSavesCostLessThanSynchronousOnes) {
  FailureModel sync = hourly();
  FailureModel async = hourly();
  async.checkpoint_s = 1.0;
  async.persist_s = 60.0;
  // The same 1 s stall, the write instant: what the 60 s write costs in lost work.
  FailureModel instant = async;
  instant.persist_s = 0.0;
  double sync_sum = 0.0, async_sum = 0.0, async_lost = 0.0, instant_lost = 0.0;
  for (int k = 0; k < 500; ++k) {
    const SampledRun a = sample_run(async, 360000.0, 600.0, 9, k);
    EXPECT_NEAR(a.wall_s, 360000.0 + a.checkpoints_s + a.lost_s + a.restarts_s, 1e-6 * a.wall_s);
    async_sum += a.wall_s;
    async_lost += a.lost_s;
    sync_sum += sample_run(sync, 360000.0, 600.0, 9, k).wall_s;
    instant_lost += sample_run(instant, 360000.0, 600.0, 9, k).lost_s;
  }
  EXPECT_LT(async_sum, sync_sum);
  EXPECT_GT(async_lost, instant_lost);
}

// Planned stops without failures, worked by hand: 100 s of work in pieces of
// 10 s, a 1 s save each, a stop every 30 s of wall time costing its own 1 s save
// and a 5 s restart. The stops come 8 s into the third piece of each run of
// three (wall 22 + 8 = 30, then every 30 s of wall time after each restart):
// at work 28, 56 and 84; the run ends at 100 + 7 saves + 3 x 6 = 125 s.
TEST(Goodput, PlannedStopsSaveWhereTheJobIsAndLoseNothing) {
  FailureModel f;
  f.job_mtbf_s = 1e18;
  f.checkpoint_s = 1.0;
  f.restart_s = 5.0;
  f.planned_interval_s = 30.0;
  const SampledRun r = sample_run(f, 100.0, 10.0, 1, 0);
  EXPECT_EQ(r.failures, 0);
  EXPECT_EQ(r.planned, 3);
  EXPECT_DOUBLE_EQ(r.checkpoints_s, 7.0);
  EXPECT_DOUBLE_EQ(r.planned_s, 18.0);
  EXPECT_DOUBLE_EQ(r.lost_s, 0.0);
  EXPECT_DOUBLE_EQ(r.wall_s, 125.0);
  // With failures too, every run's parts add up to its wall time; a stop comes P
  // of wall time after the last one's downtime D = 60 + 300 s ended (P the
  // interval), or at once after a failure's restart it fell in: n stops end by
  // the wall time, and the run ended before the next one was due, but for the
  // restarts' delays.
  FailureModel both = hourly();
  both.planned_interval_s = 7200.0;
  const double cycle = 7200.0 + 60.0 + 300.0;
  for (int k = 0; k < 200; ++k) {
    const SampledRun a = sample_run(both, 360000.0, 600.0, 5, k);
    EXPECT_NEAR(a.wall_s, 360000.0 + a.checkpoints_s + a.lost_s + a.restarts_s + a.planned_s, 1e-6 * a.wall_s);
    EXPECT_DOUBLE_EQ(a.planned_s, a.planned * 360.0);
    EXPECT_LE(a.planned * cycle, a.wall_s + 1e-6) << "run " << k;
    EXPECT_GT(a.planned * cycle + 7200.0 + a.restarts_s, a.wall_s - 1e-6) << "run " << k;
  }
}

}  // namespace
}  // namespace strata::sim
