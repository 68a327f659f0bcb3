// `strata import calculon` as a user runs it: Calculon's three files in, Strata's
// three out, which `strata simulate` then reads; the imported GPT-3 175B is the
// same model as Strata's own transcription of the paper (scenarios/models/
// gpt3-175b.json): both simulate to the same step. Bad input writes nothing, and
// an output never replaces an input.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "cli_test_util.h"

namespace strata::testing {
namespace {

using nlohmann::json;

// Calculon's format (its models/, validation/ and systems/ files have these
// keys); the figures: GPT-3 175B (Brown et al. 2020 Table 2.1), Korthikanti et
// al. 2022's plan, the A100 datasheet (312 TFLOP/s fp16, 80 GB, NVLink 300 GB/s
// per direction) and HDR InfiniBand (25 GB/s per GPU).
constexpr const char* kApplication = R"({"hidden": 12288, "feedforward": 49152, "seq_size": 2048,
  "attn_heads": 96, "attn_size": 128, "num_blocks": 96})";

std::string execution(int num_procs) {
  json e = json::parse(R"({"num_procs": 64, "tensor_par": 8, "pipeline_par": 8, "data_par": 1,
  "tensor_par_net": 0, "pipeline_par_net": 1, "data_par_net": 1, "batch_size": 64, "microbatch_size": 1,
  "datatype": "float16", "fused_activation": false, "attention_type": "multihead",
  "activation_recompute": "attn_only", "pipeline_interleaving": 3, "optimizer_sharding": false,
  "tensor_par_comm_type": "rs_ag", "tensor_par_overlap": "none", "seq_par_ag_redo": true,
  "data_par_overlap": false, "weight_offload": false, "activations_offload": false,
  "optimizer_offload": false, "training": true})");
  e["num_procs"] = num_procs;
  return e.dump();
}

constexpr const char* kSystem = R"({
  "matrix": {"float16": {"tflops": 312, "gflops_efficiency": [[128, 0.99], [0, 0.1]]}},
  "vector": {"float16": {"tflops": 78, "gflops_efficiency": [[16, 0.95], [0, 0.1]]}},
  "mem1": {"GiB": 80, "GBps": 2048, "MB_efficiency": [[100, 0.95], [0, 0.3]]},
  "mem2": {"GiB": 512, "GBps": 32, "MB_efficiency": [[100, 0.95], [0, 0.3]]},
  "processing_mode": "no_overlap",
  "networks": [
    {"bandwidth": 300, "efficiency": 0.65, "size": 8, "latency": 1e-5,
     "ops": {"p2p": [1.0, null], "all_reduce": [1.0, 1]}, "must_be_filled": true, "processor_usage": 0.15},
    {"bandwidth": 25, "efficiency": 0.9, "size": 65536, "latency": 2e-5,
     "ops": {"p2p": [1.0, null], "all_reduce": [1.0, 0]}, "must_be_filled": false, "processor_usage": 0.02}]})";

std::vector<std::string> import_args(const TempDir& dir, const std::string& out) {
  return {"import", "calculon", "--application", dir.file("gpt3-175B.json"), "--execution", dir.file("run.json"),
          "--system", dir.file("a100_80g.json"), "--out", out};
}

double step_time(const std::string& result_json) {
  return json::parse(read_file(result_json))["step_time_s"].get<double>();
}

TEST(ImportCommand, CalculonsGpt3IsStratasGpt3AndSimulates) {
  TempDir dir;
  dir.write("gpt3-175B.json", kApplication);
  dir.write("run.json", execution(64));
  dir.write("a100_80g.json", kSystem);
  const std::string out = dir.file("imported");
  CommandResult r = run_strata(import_args(dir, out));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("8 nodes of dgx-a100 (8 GPUs), profile a100-sxm4-80gb"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("tp 8 pp 8 dp 1 vpp 3 (interleaved-1f1b)"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("next: strata simulate"), std::string::npos) << r.out;

  const std::string model = out + "/model.json", plan = out + "/plan.json", cluster = out + "/cluster.json";
  CommandResult sim = run_strata({"simulate", "--model", model, "--plan", plan, "--cluster", cluster, "--out",
                                  dir.file("sim-imported")});
  ASSERT_EQ(sim.exit_code, 0) << sim.err;
  CommandResult shipped = run_strata({"simulate", "--model", "gpt3-175b", "--plan", plan, "--cluster", cluster,
                                      "--out", dir.file("sim-shipped")});
  ASSERT_EQ(shipped.exit_code, 0) << shipped.err;
  const double imported_step = step_time(dir.file("sim-imported/result.json"));
  EXPECT_GT(imported_step, 0.0);
  EXPECT_EQ(imported_step, step_time(dir.file("sim-shipped/result.json")));
}

TEST(ImportCommand, BadInputWritesNothing) {
  TempDir dir;
  dir.write("gpt3-175B.json", kApplication);
  dir.write("run.json", execution(32));  // 8 * 8 * 1 is 64
  dir.write("a100_80g.json", kSystem);
  const std::string out = dir.file("imported");
  CommandResult r = run_strata(import_args(dir, out));
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("run.json: $.num_procs"), std::string::npos) << r.err;
  EXPECT_FALSE(file_exists(out));

  // A system file given as the application: Calculon's key is missing, named.
  dir.write("run.json", execution(64));
  std::vector<std::string> args = import_args(dir, out);
  args[3] = dir.file("a100_80g.json");
  r = run_strata(args);
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("$.hidden"), std::string::npos) << r.err;
  EXPECT_FALSE(file_exists(out));
}

TEST(ImportCommand, AnOutputNeverReplacesAnInput) {
  TempDir dir;
  const std::string application = dir.write("model.json", kApplication);
  dir.write("run.json", execution(64));
  dir.write("a100_80g.json", kSystem);
  CommandResult r = run_strata({"import", "calculon", "--application", application, "--execution",
                                dir.file("run.json"), "--system", dir.file("a100_80g.json"), "--out", dir.path()});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(read_file(application), kApplication);
  EXPECT_FALSE(file_exists(dir.file("plan.json")));
}

}  // namespace
}  // namespace strata::testing
