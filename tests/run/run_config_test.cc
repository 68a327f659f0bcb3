// strata-run.json: what `strata export` writes, `strata run` reads back as the
// same model and plan; bad files are errors at the JSON path at fault.
#include <gtest/gtest.h>

#include "core/error.h"
#include "runtime/executor/run_config.h"
#include "export/export.h"
#include "sim/simulate.h"

namespace strata::rt {
namespace {

// tiny (shipped) with tp 2, pp 2, dp 2 on one 8-GPU node: every section filled.
// bf16: the shipped H100 profile is a datasheet profile with GEMM efficiencies
// for bf16 and fp16 only, so an fp32 plan on it is (rightly) an error of the
// simulator that names the profile; fp32 plans are predicted with a calibrated
// profile (strata calibrate), as `strata validate --quick` does.
nlohmann::json exported(const std::string& plan_json) {
  // One file per test: ctest runs this executable's tests as parallel processes.
  const std::string plan_file = ::testing::TempDir() + "/run-config-plan-" +
                                ::testing::UnitTest::GetInstance()->current_test_info()->name() + ".json";
  {
    std::FILE* f = std::fopen(plan_file.c_str(), "w");
    std::fputs(plan_json.c_str(), f);
    std::fclose(f);
  }
  ScenarioArgs args;
  args.model = "tiny";
  args.plan = plan_file;
  args.cluster = "dgx-h100-1node";
  const Scenario s = load_scenario(args);
  sim::SimulationOptions o;
  o.fidelity = sim::Fidelity::kFolded;
  const sim::SimulationResult r = sim::simulate(s, o);
  sim::ExportOptions e;
  e.backend = "cpu";
  e.training.steps = 7;
  e.training.seed = 99;
  return nlohmann::json::parse(sim::run_config_json(s, r, e).dump());
}

const char* kPlan = R"({"tp": 2, "pp": 2, "dp": 2, "vpp": 2, "schedule": "interleaved-1f1b",
  "micro_batch_size": 2, "global_batch_size": 8, "zero_stage": 1, "recompute": "full",
  "sequence_parallel": true, "overlap_grad_reduce": false, "dtype": "bf16"})";

TEST(RunConfig, ExportRoundTripsModelAndPlan) {
  const nlohmann::json doc = exported(kPlan);
  const RunConfig c = read_run_config(doc, "strata-run.json");
  EXPECT_EQ(c.model.name, "tiny");
  EXPECT_EQ(c.model.num_query_groups, 4);
  EXPECT_TRUE(c.model.swiglu);
  EXPECT_EQ(c.plan.tp, 2);
  EXPECT_EQ(c.plan.pp, 2);
  EXPECT_EQ(c.plan.dp, 2);
  EXPECT_EQ(c.plan.vpp, 2);
  EXPECT_EQ(c.plan.schedule, Schedule::kInterleaved);
  EXPECT_EQ(c.plan.micro_batch_size, 2);
  EXPECT_EQ(c.plan.global_batch_size, 8);
  EXPECT_EQ(c.plan.num_microbatches(), 2);
  EXPECT_EQ(c.plan.zero_stage, 1);
  EXPECT_EQ(c.plan.recompute, Recompute::kFull);
  EXPECT_TRUE(c.plan.sequence_parallel);
  EXPECT_FALSE(c.plan.overlap_grad_reduce);
  EXPECT_TRUE(c.plan.overlap_param_gather);
  EXPECT_EQ(c.plan.dtype, DType::kBf16);
  EXPECT_TRUE(c.plan.accumulate_allreduce_grads_in_fp32);  // Megatron's default with bf16
  EXPECT_EQ(c.training.steps, 7);
  EXPECT_EQ(c.training.seed, 99u);
  EXPECT_EQ(c.backend, Backend::kCpu);
  EXPECT_EQ(c.plan.ddp_bucket_size, 40000000);
  EXPECT_EQ(c.plan.rank_order, RankOrder{});
  ASSERT_EQ(c.rank_map.size(), 8u);
  // Megatron's order: rank 5 = tp 1 + 2 * (dp 0 + 2 * pp 1).
  EXPECT_EQ(c.rank_map[5].tp_rank, 1);
  EXPECT_EQ(c.rank_map[5].dp_rank, 0);
  EXPECT_EQ(c.rank_map[5].pp_rank, 1);
  EXPECT_GT(c.prediction["step_time_s"].get<double>(), 0.0);
  // Megatron's names for the parallel and batch keys.
  EXPECT_EQ(doc["parallel"]["tensor_model_parallel_size"], 2);
  EXPECT_EQ(doc["parallel"]["virtual_pipeline_model_parallel_size"], 2);
  EXPECT_EQ(doc["batch"]["micro_batch_size"], 2);
  EXPECT_EQ(doc["training"]["recompute_granularity"], "full");
  EXPECT_EQ(doc["training"]["recompute_method"], "uniform");
  EXPECT_EQ(doc["training"]["use_distributed_optimizer"], true);
  EXPECT_EQ(doc["training"]["params_dtype"], "bf16");
}

// A plan with Megatron's --use-tp-pp-dp-mapping order and its own bucket size: the
// run reads back the same order (so its process groups are the simulator's), the
// rank map follows it and the Megatron flags name it.
TEST(RunConfig, RankOrderAndBucketSizeRoundTrip) {
  const nlohmann::json doc = exported(R"({"tp": 2, "pp": 2, "dp": 2, "micro_batch_size": 1,
    "global_batch_size": 8, "rank_order": "tp-cp-ep-pp-dp", "ddp_bucket_size": 1000})");
  const RunConfig c = read_run_config(doc, "strata-run.json");
  EXPECT_EQ(to_string(c.plan.rank_order), "tp-cp-ep-pp-dp");
  EXPECT_EQ(c.plan.ddp_bucket_size, 1000);
  // tp fastest, then pp: rank 5 = tp 1 + 2 * (pp 0 + 2 * dp 1).
  EXPECT_EQ(c.rank_map[5].tp_rank, 1);
  EXPECT_EQ(c.rank_map[5].pp_rank, 0);
  EXPECT_EQ(c.rank_map[5].dp_rank, 1);
  PlanSpec p = c.plan;
  std::vector<std::string> notes;
  bool mapping = false;
  for (const sim::MegatronFlag& f : sim::megatron_flags(c.model, p, &notes)) {
    mapping = mapping || f.flag == "--use-tp-pp-dp-mapping";
    if (f.flag == "--ddp-bucket-size") {
      EXPECT_EQ(f.value, "1000");
    }
  }
  EXPECT_TRUE(mapping);
}

// Each bad value is an InputError at its path.
void expect_error(nlohmann::json doc, const std::string& path, const std::string& fragment) {
  try {
    read_run_config(doc, "strata-run.json");
    ADD_FAILURE() << "no error for " << path;
  } catch (const InputError& e) {
    EXPECT_EQ(e.file(), "strata-run.json");
    EXPECT_EQ(e.json_path(), path) << e.what();
    EXPECT_NE(std::string(e.what()).find(fragment), std::string::npos) << e.what();
  }
}

TEST(RunConfig, BadValuesNameTheirPath) {
  const nlohmann::json good = exported(kPlan);
  nlohmann::json d = good;
  d["training"]["bogus"] = 1;
  expect_error(d, "$.training.bogus", "unknown key");
  d = good;
  d["schema"] = "strata-run/0";
  expect_error(d, "$.schema", "strata-run/1");
  d = good;
  d["parallel"]["world_size"] = 4;
  expect_error(d, "$.parallel.world_size", "2*1*2*2");
  d = good;
  d["training"]["use_distributed_optimizer"] = false;
  expect_error(d, "$.training.use_distributed_optimizer", "zero_stage 1");
  d = good;
  d["training"]["recompute_method"] = nullptr;
  expect_error(d, "$.training.recompute_method", "uniform");
  d = good;
  d["training"]["offload_optimizer"] = true;
  expect_error(d, "$.training.offload_optimizer", "offload");
  d = good;
  d["batch"]["num_micro_batches"] = 3;
  expect_error(d, "$.batch.num_micro_batches", "global_batch_size");
  // The plan check, at the Megatron key: tp 3 does not divide tiny's 8 heads.
  d = good;
  d["parallel"]["tensor_model_parallel_size"] = 3;
  d["parallel"]["data_parallel_size"] = 1;
  d["parallel"]["world_size"] = 6;
  d["batch"]["num_micro_batches"] = 4;
  d["rank_map"] = nlohmann::json::array();
  for (int r = 0; r < 6; ++r) {
    d["rank_map"].push_back({{"rank", r}, {"node", 0}, {"local_rank", r}, {"tp_rank", r % 3}, {"dp_rank", 0},
                             {"pp_rank", r / 3}});
  }
  expect_error(d, "$.parallel.tensor_model_parallel_size", "tp 3");
  // The vocabulary must split evenly over tp.
  d = good;
  d["model"]["vocab_size"] = 1021;
  expect_error(d, "$.model.vocab_size", "divisible by tensor_model_parallel_size 2");
  // A rank map out of Megatron's order.
  d = good;
  std::swap(d["rank_map"][1], d["rank_map"][2]);
  expect_error(d, "$.rank_map[1]", "rank order");
}

}  // namespace
}  // namespace strata::rt
