// Bad input: every case must exit with code 2, name the file and the JSON path
// at fault with what is allowed, and leave no output file behind.
#include <gtest/gtest.h>

#include "cli_test_util.h"

namespace strata::testing {
namespace {

// A valid scenario; each case replaces one of its files.
const char* kModel = R"({"name": "m", "num_layers": 4, "hidden_size": 256,
  "num_attention_heads": 8, "num_query_groups": 4, "ffn_hidden_size": 512, "swiglu": true,
  "normalization": "rmsnorm", "seq_length": 128, "vocab_size": 1024})";
const char* kPlan = R"({"tp": 2, "pp": 2, "micro_batch_size": 1, "global_batch_size": 8})";
const char* kCluster = R"({"name": "c", "nodes": 1, "gpus_per_node": 8, "node": "dgx-a100",
  "profile": "a100-sxm4-80gb"})";

struct BadCase {
  const char* name;
  const char* model;    // nullptr: the valid one
  const char* plan;
  const char* cluster;
  const char* profile;  // nullptr: the cluster's shipped profile
  const char* file_at_fault;  // "model.json", "plan.json", ...
  const char* json_path;      // expected in the message
  const char* says;           // an expected fragment of the explanation
};

// Names the case in test output instead of dumping its bytes.
void PrintTo(const BadCase& c, std::ostream* os) { *os << c.name; }

class BadInput : public ::testing::TestWithParam<BadCase> {};

TEST_P(BadInput, ExitsTwoNamesPathWritesNothing) {
  const BadCase c = GetParam();
  TempDir dir;
  std::vector<std::string> args = {"memory",
                                   "--model", dir.write("model.json", c.model ? c.model : kModel),
                                   "--plan", dir.write("plan.json", c.plan ? c.plan : kPlan),
                                   "--cluster", dir.write("cluster.json", c.cluster ? c.cluster : kCluster),
                                   "--json", dir.file("out/memory.json")};
  if (c.profile != nullptr) {
    args.push_back("--profile");
    args.push_back(dir.write("profile.json", c.profile));
  }
  CommandResult r = run_strata(args);
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_NE(r.err.find(c.file_at_fault), std::string::npos) << r.err;
  EXPECT_NE(r.err.find(c.json_path), std::string::npos) << r.err;
  EXPECT_NE(r.err.find(c.says), std::string::npos) << r.err;
  EXPECT_FALSE(file_exists(dir.file("out/memory.json")));
  EXPECT_TRUE(r.out.empty()) << r.out;
}

const char* kProfileBadKey = R"({"schema": "strata-profile/1", "name": "p", "kind": "datasheet",
  "device": {"name": "g", "backend": "cuda", "compute_units": 108, "memory_bytes": 8e10,
  "memory_bandwidth_gbytes_per_s": 2000, "peak_tflops": {"bf17": 312}}})";
const char* kProfileNegative = R"({"schema": "strata-profile/1", "name": "p", "kind": "datasheet",
  "device": {"name": "g", "backend": "cuda", "compute_units": 108, "memory_bytes": -1,
  "memory_bandwidth_gbytes_per_s": 2000, "peak_tflops": {"bf16": 312}}})";

INSTANTIATE_TEST_SUITE_P(
    Cases, BadInput,
    ::testing::Values(
        BadCase{"malformed_json", R"({"name": "m", "num_layers": 4,,})", nullptr, nullptr, nullptr,
                "model.json:1:", "", "malformed JSON"},
        BadCase{"unknown_model_key", R"({"name": "m", "num_layer": 4, "num_layers": 4,
            "hidden_size": 256, "num_attention_heads": 8, "seq_length": 128, "vocab_size": 1024})",
                nullptr, nullptr, nullptr, "model.json", "$.num_layer", "did you mean"},
        BadCase{"missing_model_key", R"({"name": "m", "num_layers": 4, "num_attention_heads": 8,
            "seq_length": 128, "vocab_size": 1024})", nullptr, nullptr, nullptr, "model.json",
                "$.hidden_size", "required"},
        BadCase{"heads_not_dividing_hidden", R"({"name": "m", "num_layers": 4, "hidden_size": 250,
            "num_attention_heads": 8, "seq_length": 128, "vocab_size": 1024})", nullptr, nullptr,
                nullptr, "model.json", "$.num_attention_heads", "divisible"},
        BadCase{"wrong_type", nullptr, R"({"tp": "2", "pp": 2, "micro_batch_size": 1,
            "global_batch_size": 8})", nullptr, nullptr, "plan.json", "$.tp", "expected an integer"},
        BadCase{"zero_stage_out_of_range", nullptr, R"({"tp": 2, "pp": 2, "micro_batch_size": 1,
            "global_batch_size": 8, "zero_stage": 4})", nullptr, nullptr, "plan.json",
                "$.zero_stage", "[0, 3]"},
        BadCase{"unknown_schedule", nullptr, R"({"tp": 2, "pp": 2, "micro_batch_size": 1,
            "global_batch_size": 8, "schedule": "zero-bubble"})", nullptr, nullptr, "plan.json",
                "$.schedule", "\"interleaved-1f1b\""},
        BadCase{"tp_pp_dp_not_gpus", nullptr, R"({"tp": 2, "pp": 2, "dp": 4, "micro_batch_size": 1,
            "global_batch_size": 8})", nullptr, nullptr, "plan.json", "$.dp", "must equal the cluster's 8 GPUs"},
        BadCase{"tp_pp_not_dividing_gpus", R"({"name": "m", "num_layers": 6, "hidden_size": 256,
            "num_attention_heads": 8, "seq_length": 128, "vocab_size": 1024})",
                R"({"tp": 1, "pp": 3, "micro_batch_size": 1, "global_batch_size": 8})", nullptr,
                nullptr, "plan.json", "$.pp", "must divide the cluster's 8 GPUs"},
        BadCase{"heads_not_divisible_by_tp", R"({"name": "m", "num_layers": 4, "hidden_size": 240,
            "num_attention_heads": 12, "seq_length": 128, "vocab_size": 1024})",
                R"({"tp": 8, "pp": 1, "micro_batch_size": 1, "global_batch_size": 8})", nullptr,
                nullptr, "plan.json", "$.tp", "num_attention_heads 12"},
        BadCase{"query_groups_not_divisible_by_tp", nullptr,
                R"({"tp": 8, "pp": 1, "micro_batch_size": 1, "global_batch_size": 8})", nullptr,
                nullptr, "plan.json", "$.tp", "num_query_groups 4"},
        BadCase{"layers_not_divisible_by_pp", nullptr,
                R"({"tp": 1, "pp": 8, "micro_batch_size": 1, "global_batch_size": 8})", nullptr,
                nullptr, "plan.json", "$.pp", "num_layers 4"},
        BadCase{"layers_not_divisible_by_pp_vpp", nullptr,
                R"({"tp": 2, "pp": 2, "vpp": 4, "schedule": "interleaved-1f1b",
                   "micro_batch_size": 1, "global_batch_size": 8})", nullptr, nullptr, "plan.json",
                "$.vpp", "pp*vpp"},
        BadCase{"uneven_split_that_cannot_be_made", nullptr,
                R"({"tp": 1, "pp": 4, "micro_batch_size": 1, "global_batch_size": 8,
                   "decoder_first_pipeline_num_layers": 2})", nullptr, nullptr, "plan.json",
                "$.decoder_first_pipeline_num_layers", "must divide evenly"},
        BadCase{"uneven_split_and_counted_embedding", nullptr,
                R"({"tp": 1, "pp": 2, "micro_batch_size": 1, "global_batch_size": 8,
                   "decoder_last_pipeline_num_layers": 1, "account_for_embedding_in_pipeline_split": true})",
                nullptr, nullptr, "plan.json", "$.account_for_embedding_in_pipeline_split", "one or the other"},
        BadCase{"global_batch_not_divisible", nullptr,
                R"({"tp": 2, "pp": 2, "micro_batch_size": 3, "global_batch_size": 8})", nullptr,
                nullptr, "plan.json", "$.global_batch_size", "micro_batch_size*dp"},
        BadCase{"interleaved_without_vpp", nullptr,
                R"({"tp": 2, "pp": 2, "schedule": "interleaved-1f1b", "micro_batch_size": 1,
                   "global_batch_size": 8})", nullptr, nullptr, "plan.json", "$.vpp", "vpp > 1"},
        BadCase{"interleaved_microbatches_not_multiple_of_pp", nullptr,
                R"({"tp": 1, "pp": 2, "vpp": 2, "schedule": "interleaved-1f1b",
                   "micro_batch_size": 1, "global_batch_size": 12})", nullptr, nullptr, "plan.json",
                "$.global_batch_size", "divisible by pp 2"},
        BadCase{"vpp_without_interleaving", nullptr,
                R"({"tp": 2, "pp": 2, "vpp": 2, "micro_batch_size": 1, "global_batch_size": 8})",
                nullptr, nullptr, "plan.json", "$.schedule", "interleaved-1f1b"},
        BadCase{"zbv_with_other_than_two_chunks", nullptr,
                R"({"tp": 2, "pp": 2, "vpp": 4, "schedule": "zb-v", "micro_batch_size": 1,
                   "global_batch_size": 8})", nullptr, nullptr, "plan.json", "$.vpp", "exactly 2"},
        BadCase{"zbv_with_uneven_stages", nullptr,
                R"({"tp": 2, "pp": 2, "schedule": "zb-v", "micro_batch_size": 1, "global_batch_size": 8,
                   "decoder_first_pipeline_num_layers": 1})", nullptr, nullptr, "plan.json",
                "$.decoder_first_pipeline_num_layers", "evenly over its 2*pp virtual stages"},
        BadCase{"zbv_layers_not_divisible_by_2pp", nullptr,
                R"({"tp": 2, "pp": 4, "schedule": "zb-v", "micro_batch_size": 1, "global_batch_size": 8})",
                nullptr, nullptr, "plan.json", "$.vpp", "pp*vpp = 4*2"},
        BadCase{"sequence_parallel_without_tp", nullptr,
                R"({"tp": 1, "pp": 2, "micro_batch_size": 1, "global_batch_size": 8,
                   "sequence_parallel": true})", nullptr, nullptr, "plan.json",
                "$.sequence_parallel", "tp > 1"},
        BadCase{"offload_without_zero", nullptr,
                R"({"tp": 2, "pp": 2, "micro_batch_size": 1, "global_batch_size": 8,
                   "offload_optimizer": true})", nullptr, nullptr, "plan.json",
                "$.offload_optimizer", "zero_stage >= 1"},
        BadCase{"unknown_framework", nullptr,
                R"({"tp": 2, "pp": 2, "micro_batch_size": 1, "global_batch_size": 8,
                   "framework": "pytorch-fsdp3"})", nullptr, nullptr, "plan.json", "$.framework",
                "pytorch-fsdp2"},
        BadCase{"zero3_per_module_with_pipeline_parallelism", nullptr,
                R"({"tp": 2, "pp": 2, "micro_batch_size": 1, "global_batch_size": 8, "zero_stage": 3,
                   "framework": "deepspeed-zero3-2021"})", nullptr, nullptr, "plan.json", "$.pp",
                "does not run with pipeline parallelism"},
        BadCase{"zero3_with_a_framework_without_it", nullptr,
                R"({"tp": 1, "pp": 1, "micro_batch_size": 1, "global_batch_size": 8, "zero_stage": 3,
                   "framework": "megatron-lm-2021"})", nullptr, nullptr, "plan.json", "$.zero_stage",
                "does not shard parameters"},
        BadCase{"tp_larger_than_node", nullptr,
                R"({"tp": 16, "pp": 1, "micro_batch_size": 1, "global_batch_size": 8})",
                R"({"name": "c", "nodes": 2, "gpus_per_node": 8, "node": "dgx-a100",
                   "fabric": {"kind": "infiniband"}, "profile": "a100-sxm4-80gb"})", nullptr,
                "plan.json", "$.tp", "--allow-cross-node-tp"},
        BadCase{"unknown_node_preset", nullptr, nullptr,
                R"({"name": "c", "nodes": 1, "gpus_per_node": 8, "node": "dgx-b300",
                   "profile": "a100-sxm4-80gb"})", nullptr, "cluster.json", "$.node", "dgx-a100"},
        BadCase{"bad_fabric_kind", nullptr, nullptr,
                R"({"name": "c", "nodes": 2, "gpus_per_node": 8, "node": "dgx-a100",
                   "fabric": {"kind": "ethernet"}, "profile": "a100-sxm4-80gb"})", nullptr,
                "cluster.json", "$.fabric.kind", "\"roce\""},
        BadCase{"zero_nodes", nullptr, nullptr,
                R"({"name": "c", "nodes": 0, "gpus_per_node": 8, "node": "dgx-a100",
                   "profile": "a100-sxm4-80gb"})", nullptr, "cluster.json", "$.nodes", "[1, "},
        BadCase{"gpus_per_node_mismatch", nullptr, nullptr,
                R"({"name": "c", "nodes": 1, "gpus_per_node": 4, "node": "dgx-a100",
                   "profile": "a100-sxm4-80gb"})", nullptr, "cluster.json", "$.gpus_per_node",
                "has 8 GPUs"},
        BadCase{"unknown_profile", nullptr, nullptr,
                R"({"name": "c", "nodes": 1, "gpus_per_node": 8, "node": "dgx-a100",
                   "profile": "tpu-v5"})", nullptr, "cluster.json", "$.profile", "a100-sxm4-80gb"},
        BadCase{"negative_inline_bandwidth", nullptr, nullptr,
                R"({"name": "c", "nodes": 1, "gpus_per_node": 8, "profile": "a100-sxm4-80gb",
                   "node": {"gpus": 8, "nvlink_kind": "nvswitch",
                            "nvlink": {"bandwidth_gbytes_per_s": -300},
                            "pcie": {"bandwidth_gbytes_per_s": 32}}})", nullptr, "cluster.json",
                "$.node.nvlink.bandwidth_gbytes_per_s", "expected a number"},
        BadCase{"profile_unknown_dtype", nullptr, nullptr, nullptr, kProfileBadKey,
                "profile.json", "$.device.peak_tflops.bf17", "did you mean \"bf16\""},
        BadCase{"profile_negative_memory", nullptr, nullptr, nullptr, kProfileNegative,
                "profile.json", "$.device.memory_bytes", "expected a number"}),
    [](const ::testing::TestParamInfo<BadCase>& case_info) { return std::string(case_info.param.name); });

TEST(BadInput, MissingFileNamesIt) {
  TempDir dir;
  CommandResult r = run_strata({"memory", "--model", dir.file("nope.json"), "--plan", "tiny-2",
                                "--cluster", "dgx-a100-1node"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("nope.json"), std::string::npos) << r.err;
}

TEST(BadInput, MissingRequiredFlagExitsTwo) {
  CommandResult r = run_strata({"memory", "--plan", "tiny-2", "--cluster", "dgx-a100-1node"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("--model"), std::string::npos) << r.err;
}

TEST(BadInput, UnknownShippedNameListsShippedOnes) {
  CommandResult r = run_strata({"memory", "--model", "gpt5", "--plan", "tiny-2", "--cluster",
                                "dgx-a100-1node"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("gpt3-175b"), std::string::npos) << r.err;
}

// Every front-end loads a scenario the same way (sim/scenario.h): a cluster whose
// profile does not resolve is an error at the cluster's $.profile, for a sweep as
// for a single plan.
TEST(BadInput, EveryCommandNamesTheClustersProfile) {
  TempDir dir;
  const std::string cluster = dir.write("cluster.json", R"({"name": "c", "nodes": 1, "gpus_per_node": 8,
    "node": "dgx-a100", "profile": "tpu-v5"})");
  const std::vector<std::vector<std::string>> commands = {
      {"memory", "--model", "tiny", "--plan", "tiny-2", "--cluster", cluster},
      {"simulate", "--model", "tiny", "--plan", "tiny-2", "--cluster", cluster, "--out", dir.file("sim")},
      {"sweep", "--model", "tiny", "--cluster", cluster, "--out", dir.file("sweep")}};
  for (const auto& args : commands) {
    CommandResult r = run_strata(args);
    EXPECT_EQ(r.exit_code, 2) << args[0];
    EXPECT_NE(r.err.find("cluster.json"), std::string::npos) << args[0] << ": " << r.err;
    EXPECT_NE(r.err.find("$.profile"), std::string::npos) << args[0] << ": " << r.err;
  }
}

}  // namespace
}  // namespace strata::testing
