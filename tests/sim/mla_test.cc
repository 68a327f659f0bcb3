// Multi-head latent attention (DeepSeek-V3's; Megatron-Core's
// --multi-latent-attention): the model keys, the layer's ops and parameters,
// its tensor-parallel gathers, its stored activations and the recompute module
// mla_up_proj, each against a count by hand from the DeepSeek-V3 report's sizes.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "fake_costs.h"
#include "plan/flops.h"
#include "plan/layer_ops.h"
#include "plan/memory_model.h"
#include "plan/params.h"
#include "plan/run_spec.h"
#include "costmodel/profile.h"
#include "sim/simulate.h"
#include "sim/workload/segments.h"
#include "topologies/cluster_spec.h"

namespace strata {
namespace {

using nlohmann::json;

// DeepSeek-V3's attention (arXiv 2412.19437 section 4.2: 128 heads, query latent
// 1536, key/value latent 512, heads of 128 with a 64-wide rotary part, values of
// 128) on a dense 18432-wide MLP, seq 4096.
json deepseek_like() {
  return json::parse(R"({"name": "mla", "num_layers": 4, "hidden_size": 7168, "num_attention_heads": 128,
      "ffn_hidden_size": 18432, "swiglu": true, "normalization": "rmsnorm", "seq_length": 4096,
      "vocab_size": 129280, "position_embedding_type": "rope", "add_bias_linear": false, "hidden_dropout": 0.0,
      "attention_dropout": 0.0, "multi_latent_attention": true, "q_lora_rank": 1536, "kv_lora_rank": 512,
      "qk_head_dim": 128, "qk_pos_emb_head_dim": 64, "v_head_dim": 128})");
}

ModelSpec mla_model() { return read_model_spec(deepseek_like(), "model.json"); }

// tp 2 with sequence parallelism, fused attention, one sequence per micro-batch.
PlanSpec tp2(Recompute recompute = Recompute::kNone, RecomputeModules modules = {}) {
  PlanSpec p;
  p.tp = 2;
  p.dp = 1;
  p.sequence_parallel = true;
  p.flash_attention = true;
  p.micro_batch_size = 1;
  p.global_batch_size = 8;
  p.recompute = recompute;
  p.recompute_modules = modules;
  return p;
}

std::string error_path(const json& model) {
  try {
    read_model_spec(model, "model.json");
  } catch (const InputError& e) {
    return e.json_path();
  }
  return "";
}

TEST(MlaModel, ReadsMegatronsNamesAndEchoesThem) {
  const ModelSpec m = mla_model();
  ASSERT_TRUE(m.mla.enabled);
  EXPECT_EQ(m.mla.q_head_dim(), 192);
  EXPECT_EQ(m.num_query_groups, 128);  // every head its own keys and values
  EXPECT_EQ(m.q_width(), 128 * 192);
  EXPECT_EQ(m.proj_width(), 128 * 128);
  EXPECT_EQ(m.head_dim(), 160);  // (192 + 128) / 2: the kernel's scores and values
  const ModelSpec again = read_model_spec(json(to_json(m)), "echo.json");
  EXPECT_EQ(to_json(again), to_json(m));
  EXPECT_EQ(to_json(m)["kv_lora_rank"], 512);
}

TEST(MlaModel, BadInputNamesTheKey) {
  json sizes_alone = deepseek_like();
  sizes_alone.erase("multi_latent_attention");
  EXPECT_EQ(error_path(sizes_alone), "$.q_lora_rank");
  json with_kv_channels = deepseek_like();
  with_kv_channels["kv_channels"] = 96;
  EXPECT_EQ(error_path(with_kv_channels), "$.kv_channels");
  json grouped = deepseek_like();
  grouped["num_query_groups"] = 8;
  EXPECT_EQ(error_path(grouped), "$.num_query_groups");
  json missing = deepseek_like();
  missing.erase("v_head_dim");
  EXPECT_EQ(error_path(missing), "$.v_head_dim");
  json zero = deepseek_like();
  zero["kv_lora_rank"] = 0;
  EXPECT_EQ(error_path(zero), "$.kv_lora_rank");
}

// On one rank of tp 2 with sequence parallelism (4096 tokens, 2048 its own):
// the down-projections whole over its own tokens, the up-projections over all
// tokens and half the heads, the projection from half the heads' values.
TEST(MlaLayer, OpsHaveDeepSeekV3sShapesOnATensorParallelRank) {
  const ModelSpec m = mla_model();
  const std::vector<LayerOp> ops = layer_forward_ops(m, layer_op_context(tp2()));
  std::vector<std::string> names;
  for (const LayerOp& op : ops) names.push_back(op.name);
  EXPECT_EQ(names, (std::vector<std::string>{"input_norm", "q_down", "kv_down", "q_norm", "kv_norm", "q_up", "kv_up",
                                             "mla_rope", "flash_attention", "proj", "residual_attn",
                                             "post_attn_norm", "fc1", "swiglu", "fc2", "residual_mlp"}));
  auto shape = [&](const std::string& name) {
    const auto it = std::find_if(ops.begin(), ops.end(), [&](const LayerOp& o) { return o.name == name; });
    return std::vector<std::int64_t>{it->gemm.m, it->gemm.n, it->gemm.k};
  };
  EXPECT_EQ(shape("q_down"), (std::vector<std::int64_t>{2048, 1536, 7168}));
  EXPECT_EQ(shape("kv_down"), (std::vector<std::int64_t>{2048, 576, 7168}));
  EXPECT_EQ(shape("q_up"), (std::vector<std::int64_t>{4096, 64 * 192, 1536}));
  EXPECT_EQ(shape("kv_up"), (std::vector<std::int64_t>{4096, 64 * 256, 512}));
  EXPECT_EQ(shape("proj"), (std::vector<std::int64_t>{4096, 7168, 64 * 128}));
  const LayerOp& attention = ops[8];
  // Scores over 192 and values over 128, 2 s^2 each per head: 64 heads here.
  EXPECT_DOUBLE_EQ(attention.flops, 2.0 * 64 * 4096.0 * 4096.0 * (192 + 128));
  EXPECT_DOUBLE_EQ(attention.bytes, 2.0 * 4096 * 64 * (192 + 192 + 128 + 128));  // Q, K, V in, O out
  EXPECT_EQ(attention.attn_batch_kv_heads, 64);
}

// The layer's parameters on a rank: the down-projections and latent norms
// whole, the rest halved; the modules the ZeRO-3 and bucket code see add up to
// the same count.
TEST(MlaLayer, ParametersPerRankAreTheModulesParameters) {
  const ModelSpec m = mla_model();
  const std::int64_t whole = 7168LL * 1536 + 1536 + 7168LL * 576 + 512 + 2 * 7168;  // + the layer's two norms
  const std::int64_t split = 1536LL * 128 * 192 + 512LL * 128 * 256 + 128LL * 128 * 7168 + 3LL * 7168 * 18432;
  EXPECT_EQ(layer_params(m), whole + split);
  EXPECT_EQ(layer_params_per_gpu(m, 2), whole + split / 2);
  std::int64_t modules = 0;
  for (const sim::ParameterModule& mod : sim::layer_parameter_modules(m, tp2())) modules += mod.elements();
  EXPECT_EQ(modules, layer_params_per_gpu(m, 2));
}

// Every tensor-parallel rank holds the down-projections, the latents' norms and the
// layer's two norms whole (`whole` above): under sequence parallelism their
// gradients are partial and summed over tp at the step's end (4 layers and the
// final norm on one stage).
TEST(MlaLayer, TheDuplicatedDownProjectionsGradientsAreSummedOverTp) {
  const std::int64_t whole = 7168LL * 1536 + 1536 + 7168LL * 576 + 512 + 2 * 7168;
  EXPECT_EQ(sequence_parallel_replicated_params(mla_model(), tp2(), 0), 4 * whole + 7168);
}

// With sequence parallelism the up-projections gather their latents over tp
// (the query's 1536, the key/value's 512 with the 64-wide rotary key), not the
// 7168-wide stream that QKV would.
TEST(MlaLayer, SequenceParallelismGathersTheLatents) {
  const ModelSpec m = mla_model();
  const sim::testing::UniformCosts costs(1'000);
  const sim::BlockSegments b = sim::layer_segments(m, tp2(), costs);
  std::vector<double> gathers;
  for (const sim::Segment& s : b.forward) {
    if (s.is_comm && s.op == CollectiveOp::kAllGather) gathers.push_back(s.comm_bytes);
  }
  const double e = 2.0, s = 4096;
  EXPECT_EQ(gathers, (std::vector<double>{e * s * 1536, e * s * 576, e * s * 7168}));  // q_up, kv_up, fc1
}

// Megatron-Core's recompute module mla_up_proj frees Q, K and V after the
// attention and rebuilds them before its backward: the up-projections and the
// rotary assembly again, with their gathers; the attention core is not
// replayed (that is core_attn, Megatron's default module).
TEST(MlaRecompute, UpProjectionsReplayBeforeTheAttentionsBackward) {
  const ModelSpec m = mla_model();
  const sim::testing::UniformCosts costs(1'000);
  auto replayed = [&](const PlanSpec& p, std::vector<double>* gathers) {
    std::vector<std::string> names;
    bool attention_backward_seen = false;
    for (const sim::Segment& s : sim::layer_segments(m, p, costs).backward) {
      if (s.is_comm) {
        if (!attention_backward_seen && s.op == CollectiveOp::kAllGather && gathers) gathers->push_back(s.comm_bytes);
        continue;
      }
      for (const sim::DetailOp& op : s.ops) {
        const std::string& name = op.name.str();
        if (name == "flash_attention bwd") attention_backward_seen = true;
        if (name.rfind("recompute ", 0) == 0) names.push_back(name);
      }
    }
    return names;
  };
  std::vector<double> gathers;
  EXPECT_EQ(replayed(tp2(Recompute::kSelective, {false, true}), &gathers),
            (std::vector<std::string>{"recompute q_up", "recompute kv_up", "recompute mla_rope"}));
  // Before the attention's backward: the stream gathered for fc2's dgrad, again
  // for fc1's wgrad and for the projection's dgrad; then the replay's two latents.
  const double stream = 2.0 * 4096 * 7168;
  EXPECT_EQ(gathers, (std::vector<double>{stream, stream, stream, 2.0 * 4096 * 1536, 2.0 * 4096 * 576}));
  EXPECT_EQ(replayed(tp2(Recompute::kSelective), nullptr), (std::vector<std::string>{"recompute flash_attention"}));
  EXPECT_EQ(replayed(tp2(Recompute::kSelective, {true, true}), nullptr),
            (std::vector<std::string>{"recompute q_up", "recompute kv_up", "recompute mla_rope",
                                      "recompute flash_attention"}));
}

// Hardware FLOPs: the up-projections' once more per layer and sequence,
// 2 s (1536 x 128 x 192 + 512 x 128 x 256).
TEST(MlaRecompute, HardwareFlopsCountTheUpProjectionsAgain) {
  const ModelSpec m = mla_model();
  const StepFlops none = step_flops(m, tp2());
  const StepFlops up = step_flops(m, tp2(Recompute::kSelective, {false, true}));
  EXPECT_EQ(up.model_flops, none.model_flops);
  const double per_layer = 2.0 * 4096 * (1536.0 * 128 * 192 + 512.0 * 128 * 256);
  EXPECT_NEAR(up.hardware_flops - none.hardware_flops, 8 * 4 * per_layer, 1e-9 * none.model_flops);
}

// Stored per layer and micro-batch on a rank (bf16, tp 2, sequence parallel,
// 4096 tokens): the stream's own half (down-projections' input), each latent
// twice (its norm's and its up-projection's input, the rank's own tokens), Q, K
// and V of 64 heads (192, 192, 128), the projection's input (64 x 128), the
// attention's fp32 log-sum-exp; mla_up_proj frees Q, K and V.
TEST(MlaMemory, UpProjectionRecomputeFreesQKV) {
  const ModelSpec m = mla_model();
  const double s = 4096, e = 2.0;
  const double qkv = e * s * 64 * (192 + 192 + 128);
  const double attention = e * s / 2 * (7168 + 2 * (1536 + 512)) + qkv + e * s * 64 * 128 + 4.0 * 128 * s / 2;
  EXPECT_DOUBLE_EQ(layer_activation_bytes(m, tp2()).attention_bytes, attention);
  EXPECT_DOUBLE_EQ(layer_activation_bytes(m, tp2(Recompute::kSelective, {false, true})).attention_bytes,
                   attention - qkv);
}

// A small MLA model (DeepSeek-V2-Lite's attention sizes: no query compression,
// key/value latent 512) at tp 2 pp 2 with sequence parallelism on one H100 node,
// up-projections recomputed: both fidelities take the same step within 1%, and
// the step's hardware FLOPs exceed its model FLOPs by the up-projections' replay.
TEST(MlaSimulate, FullAndFoldedAgree) {
  const ModelSpec m = read_model_spec(json::parse(R"({"name": "mla-lite", "num_layers": 8, "hidden_size": 2048,
      "num_attention_heads": 16, "ffn_hidden_size": 8192, "swiglu": true, "normalization": "rmsnorm",
      "seq_length": 4096, "vocab_size": 32000, "position_embedding_type": "rope", "add_bias_linear": false,
      "hidden_dropout": 0, "attention_dropout": 0, "multi_latent_attention": true, "kv_lora_rank": 512,
      "qk_head_dim": 128, "qk_pos_emb_head_dim": 64, "v_head_dim": 128})"),
                                      "model.json");
  PlanSpec p = read_plan_spec(json::parse(R"({"tp": 2, "pp": 2, "micro_batch_size": 1, "global_batch_size": 32,
      "sequence_parallel": true, "flash_attention": true, "recompute": "selective",
      "recompute_modules": ["mla_up_proj"], "zero_stage": 1})"),
                              "plan.json");
  const ClusterSpec c = load_cluster_spec("dgx-h100-1node");
  resolve_and_check_plan(p, m, {c.num_gpus(), c.gpus_per_node, false}, "plan.json");
  sim::Simulator simulator(c, load_profile(c.profile));
  sim::SimulationOptions o;
  o.keep_timeline = false;
  o.fidelity = sim::Fidelity::kFolded;
  const sim::SimulationResult folded = simulator.run(m, p, o);
  o.fidelity = sim::Fidelity::kFull;
  const sim::SimulationResult full = simulator.run(m, p, o);
  EXPECT_NEAR(full.metrics.step_time_s, folded.metrics.step_time_s, 0.01 * folded.metrics.step_time_s);
  const double replay = 32.0 * 8 * 2 * 4096 * (2048.0 * 16 * 192 + 512.0 * 16 * 256);  // q_proj, kv_up
  EXPECT_NEAR(step_flops(m, p).hardware_flops - step_flops(m, p).model_flops, replay, 1e-9 * replay);
}

TEST(MlaPlan, RecomputeModulesBadInputNamesTheKey) {
  auto path_of = [](const char* plan) {
    try {
      read_plan_spec(json::parse(plan), "plan.json");
    } catch (const InputError& e) {
      return e.json_path();
    }
    return std::string();
  };
  EXPECT_EQ(path_of(R"({"tp": 1, "pp": 1, "micro_batch_size": 1, "global_batch_size": 8,
      "recompute_modules": ["mla_up_proj"]})"),
            "$.recompute_modules");
  EXPECT_EQ(path_of(R"({"tp": 1, "pp": 1, "micro_batch_size": 1, "global_batch_size": 8, "recompute": "selective",
      "recompute_modules": ["mlp"]})"),
            "$.recompute_modules[0]");
  EXPECT_EQ(path_of(R"({"tp": 1, "pp": 1, "micro_batch_size": 1, "global_batch_size": 8, "recompute": "selective",
      "recompute_modules": []})"),
            "$.recompute_modules");
  const PlanSpec p = read_plan_spec(json::parse(R"({"tp": 1, "pp": 1, "micro_batch_size": 1,
      "global_batch_size": 8, "recompute": "selective", "recompute_modules": ["mla_up_proj"]})"),
                                    "plan.json");
  EXPECT_FALSE(p.recompute_modules.core_attn);
  EXPECT_TRUE(p.recompute_modules.mla_up_proj);
  EXPECT_EQ(to_json(p)["recompute_modules"].dump(), R"(["mla_up_proj"])");
}

TEST(MlaPlan, StrataRunRefusesItAtItsKey) {
  const std::optional<RunRefusal> refusal = run_refusal(mla_model(), tp2());
  ASSERT_TRUE(refusal.has_value());
  EXPECT_EQ(refusal->json_path, "$.model.multi_latent_attention");
}

}  // namespace
}  // namespace strata
