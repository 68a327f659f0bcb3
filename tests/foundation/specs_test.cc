#include <gtest/gtest.h>

#include "costmodel/profile.h"
#include "core/data_paths.h"
#include "core/error.h"
#include "sim/scenario.h"
#include "plan/model_spec.h"
#include "plan/plan_spec.h"
#include "topologies/cluster_spec.h"

namespace strata {
namespace {

TEST(Specs, ModelDefaultsFollowMegatron) {
  ModelSpec m = read_model_spec(nlohmann::json::parse(R"({"name": "x", "num_layers": 2,
      "hidden_size": 64, "num_attention_heads": 4, "seq_length": 32, "vocab_size": 100})"),
                                "m.json");
  EXPECT_EQ(m.num_query_groups, 4);
  EXPECT_EQ(m.ffn_hidden_size, 256);
  EXPECT_FALSE(m.swiglu);
  EXPECT_EQ(m.normalization, Normalization::kLayerNorm);
  EXPECT_FALSE(m.untie_embeddings_and_output_weights);
}

// Megatron-LM's --normalization takes "LayerNorm" and "RMSNorm"; a model.json
// copied from a Megatron script reads with either spelling.
TEST(Specs, ModelAcceptsMegatronNormalizationNames) {
  auto norm_of = [](const std::string& name) {
    return read_model_spec(nlohmann::json::parse(R"({"name": "x", "num_layers": 2, "hidden_size": 64,
        "num_attention_heads": 4, "seq_length": 32, "vocab_size": 100, "normalization": ")" + name + "\"}"),
                           "m.json")
        .normalization;
  };
  EXPECT_EQ(norm_of("RMSNorm"), Normalization::kRmsNorm);
  EXPECT_EQ(norm_of("rmsnorm"), Normalization::kRmsNorm);
  EXPECT_EQ(norm_of("LayerNorm"), Normalization::kLayerNorm);
  EXPECT_EQ(norm_of("layernorm"), Normalization::kLayerNorm);
  EXPECT_THROW(norm_of("rms_norm"), InputError);
}

TEST(Specs, PlanDefaultsAndDerivedDp) {
  PlanSpec p = read_plan_spec(
      nlohmann::json::parse(R"({"tp": 2, "pp": 2, "micro_batch_size": 1, "global_batch_size": 8})"),
      "p.json");
  EXPECT_EQ(p.dp, 0);
  EXPECT_EQ(p.schedule, Schedule::kOneFOneB);
  EXPECT_TRUE(p.overlap_grad_reduce);
  EXPECT_TRUE(p.overlap_param_gather);
  ModelSpec m = load_model_spec("tiny");
  PlanContext c{8, 8, false};
  resolve_and_check_plan(p, m, c, "p.json");
  EXPECT_EQ(p.dp, 2);
  EXPECT_EQ(p.num_microbatches(), 4);
}

// rank_order: Megatron-Core's order string; a bad one names $.rank_order and the
// allowed names; an order that splits a tensor-parallel group over nodes is refused.
TEST(Specs, PlanRankOrderAndBucketSize) {
  auto read = [](const std::string& extra) {
    return read_plan_spec(nlohmann::json::parse(R"({"tp": 2, "pp": 2, "micro_batch_size": 1,
        "global_batch_size": 8)" + extra + "}"),
                          "p.json");
  };
  PlanSpec p = read("");
  EXPECT_EQ(to_string(p.rank_order), "tp-cp-ep-dp-pp");
  EXPECT_EQ(p.ddp_bucket_size, 40000000);
  p = read(R"(, "rank_order": "tp-cp-ep-pp-dp", "ddp_bucket_size": 1000)");
  EXPECT_EQ(to_string(p.rank_order), "tp-cp-ep-pp-dp");
  EXPECT_EQ(p.ddp_bucket_size, 1000);
  try {
    read(R"(, "rank_order": "tp-dp-pp")");
    FAIL() << "no error";
  } catch (const InputError& e) {
    EXPECT_EQ(e.json_path(), "$.rank_order");
    EXPECT_NE(e.message().find("each of tp, cp, ep, dp, pp once"), std::string::npos) << e.message();
  }
  const ModelSpec m = load_model_spec("tiny");
  const PlanContext two_nodes{8, 4, false};
  PlanSpec ok = read(R"(, "rank_order": "tp-cp-ep-pp-dp")");
  EXPECT_NO_THROW(resolve_and_check_plan(ok, m, two_nodes, "p.json"));
  // dp (2) and pp (2) before tp: the tensor-parallel pair of rank 0 is ranks 0 and
  // 4, one on each 4-GPU node.
  PlanSpec split = read(R"(, "rank_order": "dp-pp-tp-cp-ep")");
  try {
    resolve_and_check_plan(split, m, two_nodes, "p.json");
    FAIL() << "no error";
  } catch (const InputError& e) {
    EXPECT_EQ(e.json_path(), "$.rank_order");
    EXPECT_NE(e.message().find("ranks 0 and 4"), std::string::npos) << e.message();
  }
}

// Every shipped scenario, node preset and profile reads cleanly.
TEST(Specs, ShippedFilesAreValid) {
  for (const std::string& n : shipped_names("scenarios/models")) EXPECT_NO_THROW(load_model_spec(n)) << n;
  for (const std::string& n : shipped_names("scenarios/plans")) EXPECT_NO_THROW(load_plan_spec(n)) << n;
  for (const std::string& n : shipped_names("scenarios/clusters")) {
    EXPECT_NO_THROW({
      ClusterSpec c = load_cluster_spec(n);
      load_profile(c.profile);
    }) << n;
  }
  for (const std::string& n : shipped_names("topologies/presets/nodes")) EXPECT_NO_THROW(load_node_preset(n)) << n;
  for (const std::string& n : shipped_names("calib/profiles")) EXPECT_NO_THROW(load_profile(n)) << n;
  EXPECT_GE(shipped_names("scenarios/models").size(), 9u);
  EXPECT_EQ(shipped_names("calib/profiles").size() >= 4, true);
}

TEST(Specs, ShippedModelsCarryTheirSource) {
  for (const std::string& n : shipped_names("scenarios/models")) {
    EXPECT_FALSE(load_model_spec(n).source.empty()) << n;
  }
}

TEST(Specs, ProfilePeaksFromDatasheets) {
  Profile a100 = load_profile("a100-sxm4-80gb");
  EXPECT_DOUBLE_EQ(a100.device.peak_flops(DType::kBf16), 312e12);  // A100 datasheet
  EXPECT_DOUBLE_EQ(a100.device.memory_bytes, 80.0 * (1ull << 30));
  Profile h100 = load_profile("h100-sxm5-80gb");
  EXPECT_DOUBLE_EQ(h100.device.peak_flops(DType::kBf16), 989.5e12);  // H100 SXM datasheet, dense
  EXPECT_FALSE(h100.device.sources.at("peak_tflops").empty());
}

TEST(Specs, ClusterUsesNodePreset) {
  ClusterSpec c = load_cluster_spec("dgx-a100-16node");
  EXPECT_EQ(c.num_gpus(), 128);
  EXPECT_EQ(c.node.nvlink_kind, "nvswitch");
  EXPECT_DOUBLE_EQ(c.node.nvlink.bandwidth_bytes_per_s, 300e9);
  EXPECT_EQ(c.fabric.nics_per_node, 8);
}

TEST(Specs, ScenarioEchoesResolvedPlan) {
  ScenarioArgs args;
  args.model = "gpt3-175b";
  args.plan = "gpt3-175b-1024";
  args.cluster = "dgx-a100-128node";
  Scenario s = load_scenario(args);
  EXPECT_EQ(s.plan.dp, 16);
  nlohmann::ordered_json j = inputs_json(s);
  EXPECT_EQ(j["plan"]["dp"], 16);
  EXPECT_EQ(j["profile"]["name"], "a100-sxm4-80gb");
}

}  // namespace
}  // namespace strata
