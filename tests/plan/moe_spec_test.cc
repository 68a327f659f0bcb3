// The mixture-of-experts keys of model.json and plan.json: read strictly, echoed
// only for MoE models, and checked by Megatron-Core's rules (plan/moe_spec.h),
// each bad input naming its JSON path; the expert rank layout Megatron-Core's
// second RankGenerator builds.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "plan/model_spec.h"
#include "plan/moe_spec.h"
#include "plan/plan_spec.h"
#include "plan/rank_layout.h"

namespace strata {
namespace {

// A small Mixtral-shaped model: 4 layers, 8 experts, top-2.
nlohmann::json moe_model_json() {
  return nlohmann::json::parse(R"({"name": "moe-small", "num_layers": 4, "hidden_size": 256,
      "num_attention_heads": 8, "num_query_groups": 4, "ffn_hidden_size": 512, "swiglu": true,
      "normalization": "rmsnorm", "seq_length": 128, "vocab_size": 1024, "add_bias_linear": false,
      "hidden_dropout": 0.0, "attention_dropout": 0.0, "num_experts": 8, "moe_router_topk": 2})");
}

ModelSpec moe_model() { return read_model_spec(moe_model_json(), "model.json"); }

// The JSON path an InputError names, or "" when reading succeeds.
template <class F>
std::string error_path(F&& f) {
  try {
    f();
  } catch (const InputError& e) {
    return e.json_path();
  }
  return "";
}

std::string model_error(const nlohmann::json& doc) {
  return error_path([&] { read_model_spec(doc, "model.json"); });
}

PlanSpec plan_for(const ModelSpec& m, const std::string& plan_json, int gpus, int gpus_per_node = 8) {
  PlanSpec p = read_plan_spec(nlohmann::json::parse(plan_json), "plan.json");
  PlanContext c;
  c.num_gpus = gpus;
  c.gpus_per_node = gpus_per_node;
  resolve_and_check_plan(p, m, c, "plan.json");
  return p;
}

std::string plan_error(const ModelSpec& m, const std::string& plan_json, int gpus) {
  return error_path([&] { plan_for(m, plan_json, gpus); });
}

TEST(MoeModel, ReadsMegatronKeysWithItsDefaults) {
  const ModelSpec m = moe_model();
  EXPECT_TRUE(m.is_moe());
  EXPECT_EQ(m.moe.num_experts, 8);
  EXPECT_EQ(m.moe.moe_router_topk, 2);
  // arguments.py:1650: an expert as wide as the dense MLP unless given.
  EXPECT_EQ(m.moe.moe_ffn_hidden_size, 512);
  EXPECT_EQ(m.moe.moe_router_load_balancing_type, "aux_loss");
  EXPECT_EQ(m.num_moe_layers(), 4);
  // The echo has every MoE key, and reads back to the same model.
  const nlohmann::ordered_json j = to_json(m);
  EXPECT_EQ(j["moe_layer_freq"], 1);
  EXPECT_EQ(to_json(read_model_spec(nlohmann::json::parse(j.dump()), "echo.json")), j);
}

TEST(MoeModel, LayerFrequencyIsMegatronsIntegerOrList) {
  nlohmann::json doc = moe_model_json();
  doc["moe_layer_freq"] = 2;  // gpt_layer_specs.py: layer i is MoE when i % 2 == 0
  ModelSpec m = read_model_spec(doc, "model.json");
  EXPECT_TRUE(m.is_moe_layer(0));
  EXPECT_FALSE(m.is_moe_layer(1));
  EXPECT_TRUE(m.is_moe_layer(2));
  EXPECT_EQ(m.num_moe_layers(), 2);
  EXPECT_EQ(megatron_moe_layer_freq(m), "2");
  doc["moe_layer_freq"] = {0, 1, 1, 1};  // DeepSeek-V3's form: first layer dense
  m = read_model_spec(doc, "model.json");
  EXPECT_FALSE(m.is_moe_layer(0));
  EXPECT_EQ(m.num_moe_layers(), 3);
  EXPECT_EQ(megatron_moe_layer_freq(m), "([0]*1+[1]*3)");
  EXPECT_EQ(to_json(m)["moe_layer_freq"], nlohmann::ordered_json({0, 1, 1, 1}));
}

TEST(MoeModel, BadKeysNameTheirPath) {
  nlohmann::json doc = moe_model_json();
  doc["moe_router_topk"] = 9;  // more experts per token than there are
  EXPECT_EQ(model_error(doc), "$.moe_router_topk");
  doc = moe_model_json();
  doc["moe_layer_freq"] = {1, 1, 1};  // num_layers is 4
  EXPECT_EQ(model_error(doc), "$.moe_layer_freq");
  doc["moe_layer_freq"] = {1, 1, 2, 1};
  EXPECT_EQ(model_error(doc), "$.moe_layer_freq[2]");
  doc["moe_layer_freq"] = {0, 0, 0, 0};
  EXPECT_EQ(model_error(doc), "$.moe_layer_freq");
  doc["moe_layer_freq"] = 5;
  EXPECT_EQ(model_error(doc), "$.moe_layer_freq");
  doc = moe_model_json();
  doc["moe_router_load_balancing_type"] = "aux";
  EXPECT_EQ(model_error(doc), "$.moe_router_load_balancing_type");
  // An MoE key without num_experts.
  doc = moe_model_json();
  doc.erase("num_experts");
  EXPECT_EQ(model_error(doc), "$.moe_router_topk");
}

TEST(MoeModel, DenseModelEchoesAsBefore) {
  nlohmann::json doc = moe_model_json();
  doc.erase("num_experts");
  doc.erase("moe_router_topk");
  const ModelSpec m = read_model_spec(doc, "model.json");
  EXPECT_FALSE(m.is_moe());
  const nlohmann::ordered_json j = to_json(m);
  for (const char* key : {"num_experts", "moe_router_topk", "moe_layer_freq", "kv_channels"}) {
    EXPECT_FALSE(j.contains(key)) << key;
  }
  // kv_channels equal to hidden / heads is the default, written as before.
  doc["kv_channels"] = 32;
  EXPECT_FALSE(to_json(read_model_spec(doc, "model.json")).contains("kv_channels"));
  doc["kv_channels"] = 48;
  const ModelSpec wide = read_model_spec(doc, "model.json");
  EXPECT_EQ(wide.head_dim(), 48);
  EXPECT_EQ(wide.q_width(), 8 * 48);
  EXPECT_EQ(wide.kv_width(), 4 * 48);
}

TEST(MoePlan, ResolvesEtpToTpAndEchoesItsKeys) {
  const PlanSpec p = plan_for(moe_model(), R"({"tp": 2, "pp": 1, "ep": 4, "sequence_parallel": true,
      "micro_batch_size": 1, "global_batch_size": 8, "moe_token_dispatcher_type": "alltoall"})", 8);
  EXPECT_TRUE(p.moe.active);
  EXPECT_EQ(p.moe.etp, 2);  // arguments.py:587-588
  EXPECT_EQ(p.dp, 4);
  EXPECT_EQ(p.expert_data_parallel(), 1);  // tp*cp*dp / (ep*etp) = 8 / 8
  const nlohmann::ordered_json j = to_json(p);
  EXPECT_EQ(j["ep"], 4);
  EXPECT_EQ(j["etp"], 2);
  EXPECT_EQ(j["moe_token_dispatcher_type"], "alltoall");
  EXPECT_FALSE(j.contains("moe_expert_capacity_factor"));  // dropless
}

// MoE Parallel Folding (arXiv 2504.14960): the experts fold over tp x cp x dp,
// so ep need not divide dp*cp. Megatron-Core only needs world % (etp*ep*pp) == 0.
TEST(MoePlan, ExpertsFoldOverTensorParallelRanks) {
  const PlanSpec p = plan_for(moe_model(), R"({"tp": 4, "pp": 1, "ep": 8, "etp": 1, "sequence_parallel": true,
      "micro_batch_size": 1, "global_batch_size": 8})", 8);
  EXPECT_EQ(p.dp, 2);  // ep 8 does not divide dp*cp = 2: it folds over tp too
  EXPECT_EQ(p.expert_data_parallel(), 1);
  // etp 1, ep 8 over the 8 ranks attention splits as tp 4 x dp 2: one expert-parallel group of all.
  const RankLayout experts = expert_rank_layout(p);
  EXPECT_EQ(experts.group(GroupKind::kExpert, 5), (std::vector<int>{0, 1, 2, 3, 4, 5, 6, 7}));
  EXPECT_EQ(experts.group(GroupKind::kTensor, 5), (std::vector<int>{5}));
}

TEST(MoePlan, MegatronRulesNameTheKey) {
  const ModelSpec m = moe_model();
  const std::string base = R"("pp": 1, "micro_batch_size": 1, "global_batch_size": 8)";
  // arguments.py:1657: ep divides num_experts.
  const std::string six = R"("pp": 1, "micro_batch_size": 1, "global_batch_size": 6)";  // dp 6
  EXPECT_EQ(plan_error(m, R"({"tp": 1, "ep": 3, )" + six + "}", 6), "$.ep");
  // parallel_state.py:873-884: etp*ep divides tp*cp*dp (8 ranks, 16 = 2 x 8 does not fit).
  EXPECT_EQ(plan_error(m, R"({"tp": 2, "ep": 8, "sequence_parallel": true, )" + base + "}", 8), "$.ep");
  // moe_layer.py:636: tensor parallelism with MoE layers needs sequence parallelism.
  EXPECT_EQ(plan_error(m, R"({"tp": 2, "ep": 2, )" + base + "}", 8), "$.sequence_parallel");
  // transformer_config.py:1836-1860: a capacity factor with sinkhorn balancing.
  nlohmann::json sinkhorn = moe_model_json();
  sinkhorn["moe_router_load_balancing_type"] = "sinkhorn";
  EXPECT_EQ(plan_error(read_model_spec(sinkhorn, "model.json"),
                       R"({"tp": 1, "ep": 8, "moe_expert_capacity_factor": 1.25, )" + base + "}", 8),
            "$.moe_expert_capacity_factor");
  // transformer_config.py:2614: biases on experts only with etp 1.
  nlohmann::json biased = moe_model_json();
  biased["add_bias_linear"] = true;
  EXPECT_EQ(plan_error(read_model_spec(biased, "model.json"),
                       R"({"tp": 2, "ep": 4, "sequence_parallel": true, )" + base + "}", 8),
            "$.etp");
  EXPECT_EQ(plan_error(read_model_spec(biased, "model.json"),
                       R"({"tp": 2, "ep": 4, "etp": 1, "sequence_parallel": true, )" + base + "}", 8),
            "");
  // etp splits an expert's width (512 / 3 is not whole; etp 3 needs 3 | tp*cp*dp too).
  EXPECT_EQ(plan_error(m, R"({"tp": 1, "ep": 1, "etp": 3, )" + six + "}", 6), "$.etp");
  // The busiest expert takes at most every token: imbalance <= E / k = 4.
  EXPECT_EQ(plan_error(m, R"({"tp": 1, "ep": 8, "moe_router_imbalance": 4.5, )" + base + "}", 8),
            "$.moe_router_imbalance");
  EXPECT_EQ(plan_error(m, R"({"tp": 1, "ep": 8, "moe_router_imbalance": 4, )" + base + "}", 8), "");
  // parallel_state.py:898-907: with pp not last the two layouts' pipeline groups
  // agree only when the data-parallel sizes do (dp 8 vs edp 2 here).
  EXPECT_EQ(plan_error(m, R"({"tp": 1, "pp": 2, "ep": 4, "rank_order": "tp-cp-ep-pp-dp",
      "micro_batch_size": 1, "global_batch_size": 8})", 16), "$.rank_order");
  EXPECT_EQ(plan_error(m, R"({"tp": 1, "pp": 2, "ep": 4, "micro_batch_size": 1, "global_batch_size": 8})", 16), "");
  // Not modelled for MoE layers.
  EXPECT_EQ(plan_error(m, R"({"tp": 1, "pp": 2, "schedule": "zb-h1", "micro_batch_size": 1,
      "global_batch_size": 8})", 8), "$.schedule");
  // Out-of-range values are read errors at their key.
  EXPECT_EQ(error_path([&] { read_plan_spec(nlohmann::json::parse(R"({"tp": 1, "pp": 1, "micro_batch_size": 1,
      "global_batch_size": 8, "moe_router_imbalance": 0.5})"), "plan.json"); }), "$.moe_router_imbalance");
  EXPECT_EQ(error_path([&] { read_plan_spec(nlohmann::json::parse(R"({"tp": 1, "pp": 1, "micro_batch_size": 1,
      "global_batch_size": 8, "moe_token_dispatcher_type": "deepep"})"), "plan.json"); }), "$.moe_token_dispatcher_type");
  // The flex (DeepEP) dispatcher: "DeepEP dispatcher requires TPxEP > 1", and
  // Strata models it for whole experts (etp 1).
  EXPECT_EQ(plan_error(m, R"({"tp": 1, "ep": 1, "moe_token_dispatcher_type": "flex", )" + base + "}", 8),
            "$.moe_token_dispatcher_type");
  EXPECT_EQ(plan_error(m, R"({"tp": 2, "ep": 2, "sequence_parallel": true, "moe_token_dispatcher_type": "flex", )" +
                              base + "}", 8),
            "$.etp");
  EXPECT_EQ(plan_error(m, R"({"tp": 1, "ep": 8, "moe_token_dispatcher_type": "flex", )" + base + "}", 8), "");
  // transformer_config.py: padding to capacity needs the factor, and not the flex dispatcher.
  EXPECT_EQ(plan_error(m, R"({"tp": 1, "ep": 8, "moe_pad_expert_input_to_capacity": true, )" + base + "}", 8),
            "$.moe_pad_expert_input_to_capacity");
  EXPECT_EQ(plan_error(m, R"({"tp": 1, "ep": 8, "moe_token_dispatcher_type": "flex", "moe_expert_capacity_factor": 1,
      "moe_pad_expert_input_to_capacity": true, )" + base + "}", 8), "$.moe_pad_expert_input_to_capacity");
  const PlanSpec padded = plan_for(m, R"({"tp": 1, "ep": 8, "moe_token_dispatcher_type": "alltoall",
      "moe_expert_capacity_factor": 1, "moe_pad_expert_input_to_capacity": true, )" + base + "}", 8);
  EXPECT_TRUE(padded.moe.pad_to_capacity);
  EXPECT_EQ(to_json(padded)["moe_pad_expert_input_to_capacity"], true);
  // allgather has no token exchange for the shared experts to run beside.
  EXPECT_EQ(plan_error(m, R"({"tp": 1, "ep": 8, "moe_token_dispatcher_type": "allgather",
      "moe_shared_expert_overlap": true, )" + base + "}", 8), "$.moe_shared_expert_overlap");
}

// Group-limited routing (transformer_config.py:2671-2686): both keys or neither,
// groups dividing the experts, at most all groups, enough experts to route to.
TEST(MoeModel, GroupLimitedRoutingKeys) {
  nlohmann::json doc = moe_model_json();
  doc["moe_router_num_groups"] = 4;
  EXPECT_EQ(model_error(doc), "$.moe_router_num_groups");  // without moe_router_group_topk
  doc["moe_router_group_topk"] = 2;
  EXPECT_EQ(model_error(doc), "");
  const ModelSpec m = read_model_spec(doc, "model.json");
  EXPECT_EQ(m.moe.moe_router_num_groups, 4);
  EXPECT_EQ(m.moe.moe_router_group_topk, 2);
  nlohmann::ordered_json echoed = to_json(m);
  EXPECT_EQ(echoed["moe_router_num_groups"], 4);
  EXPECT_EQ(echoed["moe_router_group_topk"], 2);
  doc["moe_router_num_groups"] = 3;  // 8 experts
  EXPECT_EQ(model_error(doc), "$.moe_router_num_groups");
  doc["moe_router_num_groups"] = 4;
  doc["moe_router_group_topk"] = 5;
  EXPECT_EQ(model_error(doc), "$.moe_router_group_topk");
  doc["moe_router_num_groups"] = 8;  // groups of one expert, one group: fewer than top-2
  doc["moe_router_group_topk"] = 1;
  EXPECT_EQ(model_error(doc), "$.moe_router_group_topk");
  doc.erase("moe_router_num_groups");
  EXPECT_EQ(model_error(doc), "$.moe_router_group_topk");
  // A dense model has none of them.
  nlohmann::json dense = moe_model_json();
  dense.erase("num_experts");
  for (const char* k : {"moe_router_topk", "moe_ffn_hidden_size", "moe_layer_freq", "moe_router_load_balancing_type",
                        "moe_aux_loss_coeff"}) {
    dense.erase(k);
  }
  dense["moe_router_group_topk"] = 1;
  EXPECT_EQ(model_error(dense), "$.moe_router_group_topk");
}

TEST(MoePlan, MoeKeysOnADenseModelAreRefused) {
  nlohmann::json doc = moe_model_json();
  doc.erase("num_experts");
  doc.erase("moe_router_topk");
  const ModelSpec dense = read_model_spec(doc, "model.json");
  EXPECT_EQ(plan_error(dense, R"({"tp": 1, "pp": 1, "micro_batch_size": 1, "global_batch_size": 8,
      "moe_grouped_gemm": true})", 8), "$.moe_grouped_gemm");
  EXPECT_EQ(plan_error(dense, R"({"tp": 1, "pp": 1, "ep": 1, "micro_batch_size": 1, "global_batch_size": 8})", 8),
            "$.ep");
  // And a dense plan echoes no MoE key.
  const PlanSpec p = plan_for(dense, R"({"tp": 1, "pp": 1, "micro_batch_size": 1, "global_batch_size": 8})", 8);
  EXPECT_FALSE(p.moe.active);
  EXPECT_FALSE(to_json(p).contains("ep"));
}

// Megatron-Core's two RankGenerators (parallel_state.py initialize_model_parallel)
// for tp 2, dp 4, pp 2 (16 ranks) with ep 4, etp 1: the dense layout numbers
// rank = tp + 2 (dp + 4 pp); the expert layout rank = ep + 4 (edp + 2 pp), edp =
// tp*dp / (ep*etp) = 2. Both put the pipeline groups at stride 8.
TEST(ExpertRankLayout, IsMegatronsSecondRankGenerator) {
  const PlanSpec p = plan_for(moe_model(), R"({"tp": 2, "pp": 2, "ep": 4, "etp": 1, "sequence_parallel": true,
      "micro_batch_size": 1, "global_batch_size": 8})", 16);
  const RankLayout dense(p);
  const RankLayout experts = expert_rank_layout(p);
  EXPECT_EQ(experts.world(), dense.world());
  EXPECT_EQ(experts.size(ParallelDim::kEp), 4);
  EXPECT_EQ(experts.size(ParallelDim::kDp), 2);
  EXPECT_EQ(experts.size(ParallelDim::kTp), 1);
  EXPECT_EQ(experts.group(GroupKind::kExpert, 6), (std::vector<int>{4, 5, 6, 7}));
  EXPECT_EQ(experts.group(GroupKind::kData, 6), (std::vector<int>{2, 6}));
  EXPECT_EQ(dense.group(GroupKind::kData, 6), (std::vector<int>{0, 2, 4, 6}));
  EXPECT_EQ(experts.all_groups(GroupKind::kPipeline), dense.all_groups(GroupKind::kPipeline));
  const RankCoord c = experts.coord(13);
  EXPECT_EQ(c.ep, 1);
  EXPECT_EQ(c.dp, 1);
  EXPECT_EQ(c.pp, 1);
  EXPECT_EQ(experts.rank(c), 13);
}

}  // namespace
}  // namespace strata
