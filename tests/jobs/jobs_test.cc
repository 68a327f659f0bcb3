// jobs/: the sharded sweep's message and merge against one process's sweep, and
// the validate loop's comparison of a prediction with a measurement.
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>

#include <gtest/gtest.h>

#include "core/error.h"
#include "costmodel/profile.h"
#include "jobs/host_speed.h"
#include "jobs/run_validation.h"
#include "jobs/sharded_sweep.h"
#include "runtime/comm/communicator.h"
#include "topologies/cluster_spec.h"

namespace strata::jobs {
namespace {

bool same_bits(double a, double b) { return std::memcmp(&a, &b, sizeof a) == 0; }

TEST(SimulatedPlanMessage, DecodesToTheSameBits) {
  SimulatedPlan a;
  a.index = (1ull << 40) + 3;
  a.metrics.step_time_s = 19.540876;
  a.metrics.tokens_per_s = std::numeric_limits<double>::infinity();
  a.metrics.mfu = -0.0;
  a.metrics.hfu = std::numeric_limits<double>::denorm_min();
  a.metrics.bubble_ratio = 1.0 / 3.0;
  std::uint64_t payload_nan = 0x7ff8'0000'dead'beefull;  // a quiet NaN with a payload
  std::memcpy(&a.metrics.compute_s, &payload_nan, sizeof payload_nan);
  for (int k = 0; k < sim::kNumCommKinds; ++k) a.metrics.exposed_s[k] = 0.1 * (k + 1);
  SimulatedPlan b;
  b.index = 7;
  b.metrics.folded_step_time_s = 2.5;
  const std::vector<SimulatedPlan> back = decode(encode({a, b}));
  ASSERT_EQ(back.size(), 2u);
  EXPECT_EQ(back[0].index, a.index);
  EXPECT_TRUE(same_bits(back[0].metrics.step_time_s, a.metrics.step_time_s));
  EXPECT_TRUE(same_bits(back[0].metrics.tokens_per_s, a.metrics.tokens_per_s));
  EXPECT_TRUE(same_bits(back[0].metrics.mfu, a.metrics.mfu));
  EXPECT_TRUE(same_bits(back[0].metrics.hfu, a.metrics.hfu));
  EXPECT_TRUE(same_bits(back[0].metrics.bubble_ratio, a.metrics.bubble_ratio));
  EXPECT_TRUE(same_bits(back[0].metrics.compute_s, a.metrics.compute_s));
  for (int k = 0; k < sim::kNumCommKinds; ++k) EXPECT_TRUE(same_bits(back[0].metrics.exposed_s[k], a.metrics.exposed_s[k]));
  EXPECT_EQ(back[1].index, 7u);
  EXPECT_EQ(back[1].metrics.folded_step_time_s, 2.5);
  EXPECT_TRUE(decode(encode({})).empty());
  EXPECT_THROW(decode(std::string(sizeof(SimulatedPlan) + 1, '\0')), InternalError);
}

// The tiny model on one 8-GPU node, as tests/sweep's small space.
struct SmallSweep {
  ModelSpec model = load_model_spec("gpt-tiny");
  ClusterSpec cluster = load_cluster_spec("dgx-a100-1node");
  Profile profile = load_profile(cluster.profile);
  sim::Simulator simulator{cluster, profile};
  sim::PlanSpaceRequest request;
  sim::SweepOptions options;
  SmallSweep() {
    request.global_batch_size = 16;
    request.max_micro_batch_size = 2;
    options.threads = 2;
  }
  sim::SweepResult shard(int index, int count) {
    sim::SweepOptions o = options;
    o.shard_index = index;
    o.shard_count = count;
    return sim::run_sweep(model, simulator, request, o);
  }
};

void expect_same_outcomes(const sim::SweepResult& got, const sim::SweepResult& want) {
  ASSERT_EQ(got.plans.size(), want.plans.size());
  EXPECT_EQ(got.counts.simulated, want.counts.simulated);
  for (std::size_t i = 0; i < want.plans.size(); ++i) {
    const sim::PlanOutcome& g = got.plans[i];
    const sim::PlanOutcome& w = want.plans[i];
    ASSERT_EQ(g.label, w.label) << i;
    ASSERT_EQ(g.simulated, w.simulated) << w.label;
    EXPECT_EQ(g.fidelity, w.fidelity) << w.label;
    EXPECT_TRUE(same_bits(g.step_time_s, w.step_time_s)) << w.label;
    EXPECT_TRUE(same_bits(g.tokens_per_s, w.tokens_per_s)) << w.label;
    EXPECT_TRUE(same_bits(g.mfu, w.mfu)) << w.label;
    EXPECT_TRUE(same_bits(g.bubble_ratio, w.bubble_ratio)) << w.label;
    for (int k = 0; k < sim::kNumCommKinds; ++k) EXPECT_TRUE(same_bits(g.exposed_s[k], w.exposed_s[k])) << w.label;
  }
}

// Three shards' messages merged into the first shard's sweep give one process's
// sweep bit for bit: every plan simulated once, by exactly one shard.
TEST(ShardedSweep, ThreeShardsMergedEqualOneProcess) {
  SmallSweep s;
  const sim::SweepResult whole = s.shard(0, 1);
  ASSERT_GT(whole.counts.simulated, 10);
  sim::SweepResult merged = s.shard(0, 3);
  std::int64_t records = 0;
  for (int r = 0; r < 3; ++r) {
    const sim::SweepResult part = r == 0 ? merged : s.shard(r, 3);
    for (const SimulatedPlan& p : decode(encode(simulated_plans(part)))) {
      EXPECT_EQ(static_cast<int>(p.index % 3), r) << "shard " << r << " simulated another shard's plan";
      apply(p, merged);
      ++records;
    }
  }
  merged.counts.simulated = records;
  expect_same_outcomes(merged, whole);
  // A record of a plan the sweep does not have is the ranks' disagreement, not a crash.
  SimulatedPlan stray;
  stray.index = whole.plans.size();
  EXPECT_THROW(apply(stray, merged), InternalError);
}

// Over a one-rank world the sharded sweep is the plain sweep.
TEST(ShardedSweep, OneRankWorldIsThePlainSweep) {
  SmallSweep s;
  rt::DeviceOptions device_options;
  device_options.cpu_threads = 1;
  auto device = rt::make_device(rt::Backend::kCpu, 0, device_options);
  auto world = rt::make_world_communicator(*device);
  ASSERT_EQ(world->size(), 1);
  expect_same_outcomes(run_sharded_sweep(s.model, s.simulator, s.request, s.options, *world), s.shard(0, 1));
}

class CompareRunTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() /
           ("strata-jobs-test-" + std::string(::testing::UnitTest::GetInstance()->current_test_info()->name()));
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  void write(const std::string& name, const std::string& text) { std::ofstream(dir_ / name) << text; }
  std::string dir() const { return dir_.string(); }

  std::filesystem::path dir_;
};

constexpr const char* kPrediction = R"({"step_time_s": 0.020, "memory": {"peak_bytes": 1048576},
  "inputs": {"plan": {"tp": 2, "pp": 1, "dp": 1, "micro_batch_size": 1, "global_batch_size": 4,
                      "zero_stage": 1, "source": "predicted here"}}})";

TEST_F(CompareRunTest, ErrorsAreMeasuredOverPredictedMinusOne) {
  write("prediction.json", kPrediction);
  write("measured.json", R"({"step_time_s": 0.025, "ranks": 2, "memory": {"peak_bytes": 1101004.8},
    "plan": {"tp": 2, "pp": 1, "dp": 1, "micro_batch_size": 1, "global_batch_size": 4, "zero_stage": 1,
             "source": "measured there"}})");
  const RunComparison r = compare_run(dir());
  EXPECT_EQ(r.ranks, 2);
  EXPECT_NEAR(r.step_error(), 0.25, 1e-12);
  EXPECT_NEAR(r.memory_error(), 0.05, 1e-12);
  EXPECT_EQ(r.label, "tp 2, m 4, ZeRO 1");  // 4 sequences / (1 per micro-batch x dp 1)
}

TEST_F(CompareRunTest, ADifferentPlanIsAnInputErrorNamingTheKey) {
  write("prediction.json", kPrediction);
  write("measured.json", R"({"step_time_s": 0.025, "ranks": 2, "memory": {"peak_bytes": 1},
    "plan": {"tp": 1, "pp": 2, "dp": 1, "micro_batch_size": 1, "global_batch_size": 4, "zero_stage": 1}})");
  try {
    compare_run(dir());
    FAIL() << "no error";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("$.plan.pp"), std::string::npos) << e.what();
  }
}

// A measured step of -1 s or 0 s, or -5 bytes, is no measurement: refused at its path.
TEST_F(CompareRunTest, NonPositiveMeasurementsAreInputErrorsNamingThePath) {
  write("prediction.json", kPrediction);
  const std::string plan =
      R"("plan": {"tp": 2, "pp": 1, "dp": 1, "micro_batch_size": 1, "global_batch_size": 4, "zero_stage": 1})";
  const std::vector<std::pair<std::string, std::string>> cases = {
      {R"("step_time_s": -1, "ranks": 2, "memory": {"peak_bytes": 1})", "$.step_time_s"},
      {R"("step_time_s": 0, "ranks": 2, "memory": {"peak_bytes": 1})", "$.step_time_s"},
      {R"("step_time_s": 0.02, "ranks": 2, "memory": {"peak_bytes": -5})", "$.memory.peak_bytes"},
      {R"("step_time_s": 0.02, "ranks": 0, "memory": {"peak_bytes": 1})", "$.ranks"},
  };
  for (const auto& [fields, path] : cases) {
    write("measured.json", "{" + fields + ", " + plan + "}");
    try {
      compare_run(dir());
      ADD_FAILURE() << "accepted " << fields;
    } catch (const InputError& e) {
      EXPECT_EQ(e.json_path(), path) << e.what();
      EXPECT_NE(std::string(e.what()).find("above 0"), std::string::npos) << e.what();
    }
  }
}

// A rank count is a whole number an int holds: 1e10 passed the "above 0" check and
// was converted to int, which is undefined (UBSan in the sanitizer suite's loader test).
TEST_F(CompareRunTest, RanksMustBeAWholeNumberAnIntHolds) {
  write("prediction.json", kPrediction);
  const std::string plan =
      R"("plan": {"tp": 2, "pp": 1, "dp": 1, "micro_batch_size": 1, "global_batch_size": 4, "zero_stage": 1})";
  for (const char* ranks : {"1e10", "2.5", "2147483648"}) {
    write("measured.json", std::string(R"({"step_time_s": 0.02, "memory": {"peak_bytes": 1}, "ranks": )") + ranks +
                               ", " + plan + "}");
    try {
      compare_run(dir());
      ADD_FAILURE() << "accepted ranks " << ranks;
    } catch (const InputError& e) {
      EXPECT_EQ(e.json_path(), "$.ranks") << e.what();
      EXPECT_NE(e.message().find("whole number of ranks from 1 to 2147483647"), std::string::npos) << e.what();
    }
  }
}

TEST_F(CompareRunTest, MissingFilesSayWhichCommandWritesThem) {
  try {
    compare_run(dir());
    FAIL() << "no error";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("strata export"), std::string::npos) << e.what();
  }
  write("prediction.json", kPrediction);
  try {
    compare_run(dir());
    FAIL() << "no error";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("strata run"), std::string::npos) << e.what();
  }
}

TEST(RunValidationSummary, MedianAndWorstOfAbsoluteErrors) {
  EXPECT_DOUBLE_EQ(median_abs({-0.3, 0.1, 0.2}), 0.2);
  EXPECT_DOUBLE_EQ(median_abs({-0.4, 0.1, 0.2, 0.3}), 0.25);
  EXPECT_DOUBLE_EQ(max_abs({-0.4, 0.1, 0.3}), 0.4);
  EXPECT_DOUBLE_EQ(median_abs({}), 0.0);
}

TEST(HostSpeed, ARunTakesTheProbeFurtherFromTheReference) {
  // reference 2.0 ms; before 2.1 ms (speed 0.952), after 2.5 ms (0.8): the slower one
  EXPECT_DOUBLE_EQ(host_speed_during(2.0e-3, 2.1e-3, 2.5e-3), 0.8);
  // a host that sped up counts too: 1.6 ms is speed 1.25, further from 1 than 0.952
  EXPECT_DOUBLE_EQ(host_speed_during(2.0e-3, 2.1e-3, 1.6e-3), 1.25);
  EXPECT_TRUE(host_speed_steady(0.91));
  EXPECT_TRUE(host_speed_steady(1.09));
  EXPECT_FALSE(host_speed_steady(0.89));
  EXPECT_FALSE(host_speed_steady(1.11));
}

TEST(HostSpeed, TheSummaryLeavesOutRunsOnAChangedHostButKeepsUnprobedOnes) {
  RunComparison probed_steady, probed_slow, unprobed;
  probed_steady.label = "steady";
  probed_steady.host_speed = 0.97;
  probed_slow.label = "slow";
  probed_slow.host_speed = 0.7;
  unprobed.label = "--run DIR";
  for (RunComparison* r : {&probed_steady, &probed_slow, &unprobed}) {
    r->predicted_step_s = 1.0;
    r->predicted_peak_bytes = r->measured_peak_bytes = 100.0;
  }
  probed_steady.measured_step_s = 1.05;
  probed_slow.measured_step_s = 1.6;
  unprobed.measured_step_s = 0.9;
  const std::vector<RunComparison> steady = steady_host_runs({probed_steady, probed_slow, unprobed});
  ASSERT_EQ(steady.size(), 2u);
  EXPECT_EQ(steady[0].label, "steady");
  EXPECT_EQ(steady[1].label, "--run DIR");
  const nlohmann::ordered_json j = run_validation_json({probed_steady, probed_slow, unprobed}, HostLoad{});
  EXPECT_EQ(j["steady_host_runs"], 2);
  EXPECT_NEAR(j["steady_host_step_time_median_abs_error"].get<double>(), 0.075, 1e-12);  // 0.05 and 0.1
  EXPECT_NEAR(j["step_time_median_abs_error"].get<double>(), 0.1, 1e-12);
  EXPECT_DOUBLE_EQ(j["runs"][1]["host_speed"].get<double>(), 0.7);
  EXPECT_FALSE(j["runs"][2].contains("host_speed"));
}

}  // namespace
}  // namespace strata::jobs
