// MoE models from the command line: `strata memory` shows the expert part of
// each stage, `strata export` writes the Megatron-LM flags (and strata-run.json
// for a plan strata run takes), `strata simulate` and `run` refuse what they do
// not model or run with exit 2 at the key, and bad MoE input exits 2 naming
// file, JSON path and what is allowed, writing nothing.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "cli_test_util.h"
#include "core/data_paths.h"

namespace strata::testing {
namespace {

const char* kMixtral[] = {"--model", "mixtral-8x7b", "--plan", "mixtral-8x7b-64", "--cluster", "dgx-h100-8node"};

std::vector<std::string> mixtral(std::vector<std::string> command) {
  command.insert(command.end(), std::begin(kMixtral), std::end(kMixtral));
  return command;
}

TEST(MoeCommand, MemoryShowsTheExpertPartPerStage) {
  TempDir dir;
  std::vector<std::string> args = mixtral({"memory", "--json", dir.file("m.json")});
  const CommandResult r = run_strata(args);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("46.70 B parameters, 12.88 B active"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("ep 8 etp 1 (alltoall dispatcher"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("expert st."), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("expert data-parallel group of 2"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("verdict  FITS"), std::string::npos) << r.out;
  const nlohmann::json j = nlohmann::json::parse(read_file(dir.file("m.json")));
  ASSERT_EQ(j["memory"]["stages"].size(), 4u);
  EXPECT_EQ(j["memory"]["stages"][1]["expert_params"], 1409286144);  // 8 layers x 1 expert of 176,160,768
  EXPECT_EQ(j["memory"]["expert_data_parallel"], 2);
  EXPECT_EQ(j["inputs"]["plan"]["ep"], 8);
  EXPECT_EQ(j["inputs"]["model"]["num_experts"], 8);
  // Same inputs, same bytes.
  args[2] = dir.file("again.json");
  EXPECT_EQ(run_strata(args).out, r.out);
  EXPECT_EQ(read_file(dir.file("m.json")), read_file(dir.file("again.json")));
}

// The simulator takes MoE models (tests/sim/moe_workload_test.cc and the
// simulate and sweep command tests); what it does not model is bad input at its
// key: ZeRO-3 and hybrid sharding of the experts.
TEST(MoeCommand, SimulateRefusesWhatItDoesNotModelForMoe) {
  TempDir dir;
  CommandResult r = run_strata(mixtral({"simulate", "--no-trace", "--out", dir.file("sim")}));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(file_exists(dir.file("sim/result.json")));
  const std::string plan = dir.write("hsdp.json", R"({"tp": 1, "pp": 4, "ep": 8, "micro_batch_size": 1,
      "global_batch_size": 256, "zero_stage": 1, "zero_shard_size": 8, "flash_attention": true})");
  r = run_strata({"simulate", "--model", "mixtral-8x7b", "--plan", plan, "--cluster", "dgx-h100-8node", "--out",
                  dir.file("hsdp")});
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_NE(r.err.find("$.zero_shard_size"), std::string::npos) << r.err;
  EXPECT_FALSE(file_exists(dir.file("hsdp/result.json")));
}

TEST(MoeCommand, ExportWritesTheMegatronFlagsAndThePrediction) {
  TempDir dir;
  const CommandResult r = run_strata(mixtral({"export", "--out", dir.file("launch")}));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::string script = read_file(dir.file("launch/megatron-args.sh"));
  for (const char* line : {"  --num-experts 8\n", "  --moe-router-topk 2\n", "  --moe-ffn-hidden-size 14336\n",
                           "  --moe-layer-freq 1\n", "  --expert-model-parallel-size 8\n",
                           "  --expert-tensor-parallel-size 1\n", "  --moe-token-dispatcher-type alltoall\n",
                           "  --moe-grouped-gemm\n", "  --moe-router-load-balancing-type aux_loss\n",
                           "  --moe-aux-loss-coeff 0.02\n"}) {
    EXPECT_NE(script.find(line), std::string::npos) << line << script;
  }
  EXPECT_EQ(script.find("--moe-expert-capacity-factor"), std::string::npos) << "dropless";
  // strata run takes the plan (tp 1, whole experts, the all-to-all dispatcher):
  // its run config carries the MoE keys in Megatron-Core's names.
  for (const char* present : {"strata-run.json", "launch.slurm", "launch-mpirun.sh"}) {
    EXPECT_TRUE(file_exists(dir.file(std::string("launch/") + present))) << present;
  }
  EXPECT_FALSE(file_exists(dir.file("launch/deepspeed.json")));
  const nlohmann::json run = nlohmann::json::parse(read_file(dir.file("launch/strata-run.json")));
  EXPECT_EQ(run["parallel"]["expert_model_parallel_size"], 8);
  EXPECT_EQ(run["parallel"]["expert_tensor_parallel_size"], 1);
  EXPECT_EQ(run["parallel"]["moe_token_dispatcher_type"], "alltoall");
  EXPECT_EQ(run["model"]["num_experts"], 8);
  // The simulator's prediction of the plan, as `strata simulate` writes it (the
  // default --fidelity full).
  const nlohmann::json prediction = nlohmann::json::parse(read_file(dir.file("launch/prediction.json")));
  EXPECT_EQ(prediction["fidelity"], "full");
  EXPECT_GT(prediction["exposed_comm_s"]["ep"].get<double>(), 0.0);
  EXPECT_NE(r.out.find("predicted step"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("no deepspeed.json: DeepSpeed builds MoE layers in the model's code"), std::string::npos)
      << r.out;
}

TEST(MoeCommand, DeepSeekLayerPatternIsQuotedForTheShell) {
  TempDir dir;
  const std::string plan = dir.write("plan.json", R"({"tp": 1, "pp": 8, "ep": 8, "micro_batch_size": 1,
      "global_batch_size": 64, "zero_stage": 1, "flash_attention": true, "moe_token_dispatcher_type": "alltoall",
      "decoder_first_pipeline_num_layers": 5, "decoder_last_pipeline_num_layers": 8, "recompute": "selective",
      "recompute_modules": ["core_attn", "mla_up_proj"]})");
  const CommandResult r = run_strata({"export", "--model", "deepseek-v3", "--plan", plan, "--cluster", "dgx-h100-8node",
                                      "--force", "--out", dir.file("launch")});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::string script = read_file(dir.file("launch/megatron-args.sh"));
  EXPECT_NE(script.find("  --moe-layer-freq '([0]*3+[1]*58)'\n"), std::string::npos) << script;
  // Multi-head latent attention by Megatron-LM's own flags (arguments.py _add_mla_args).
  EXPECT_NE(script.find("  --multi-latent-attention\n  --q-lora-rank 1536\n  --kv-lora-rank 512\n  --qk-head-dim 128\n"
                        "  --qk-pos-emb-head-dim 64\n  --v-head-dim 128\n  --qk-layernorm\n"),
            std::string::npos)
      << script;
  EXPECT_EQ(script.find("--kv-channels"), std::string::npos) << script;
  EXPECT_NE(script.find("  --mtp-num-layers 1\n"), std::string::npos) << script;  // its MTP module
  // Megatron's nargs='*' list: one shell word per module.
  EXPECT_NE(script.find("  --recompute-granularity selective\n  --recompute-modules core_attn mla_up_proj\n"),
            std::string::npos)
      << script;
  EXPECT_EQ(script.find("--num-query-groups"), std::string::npos) << script;
  EXPECT_NE(script.find("  --moe-shared-expert-intermediate-size 2048\n"), std::string::npos) << script;
  // Node-limited routing: 8 groups, at most 4 per token (DeepSeek-V3 section 2.1.2).
  EXPECT_NE(script.find("  --moe-router-num-groups 8\n  --moe-router-group-topk 4\n"), std::string::npos) << script;
}

// A dense model with its own head size (kv_channels, DeepSeek-V3's stand-in for
// MLA): the simulator refuses it at $.kv_channels; memory and export take it.
// A model with its own head size (kv_channels: DeepSeek-V3's stand-in for MLA) is
// sized, simulated and exported; strata run does not take it, so the export is
// Megatron-LM's flags and DeepSpeed's config without strata-run.json.
TEST(MoeCommand, OwnHeadSizeIsSizedSimulatedAndExported) {
  TempDir dir;
  const std::string model = dir.write("model.json", R"({"name": "wide-heads", "num_layers": 4, "hidden_size": 256,
      "num_attention_heads": 8, "num_query_groups": 4, "kv_channels": 48, "ffn_hidden_size": 512, "seq_length": 128,
      "vocab_size": 1024})");
  const std::string plan = dir.write("plan.json", R"({"tp": 1, "pp": 1, "micro_batch_size": 1, "global_batch_size": 8})");
  const std::vector<std::string> scenario = {"--model", model, "--plan", plan, "--cluster", "dgx-h100-1node"};
  auto with = [&](std::vector<std::string> command) {
    command.insert(command.end(), scenario.begin(), scenario.end());
    return command;
  };
  CommandResult r = run_strata(with({"simulate", "--no-trace", "--out", dir.file("sim")}));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  // Per sequence of 128 tokens, by hand: QKV 2 x 256 x (8 x 48 + 2 x 4 x 48), the projection
  // 2 x 384 x 256, fc1 and fc2 2 x 256 x 512 each, per token; attention 4 x 8 heads x 128^2 x 48;
  // 4 layers; the logits 2 x 256 x 1024 per token. Model FLOPs: 3 x forward x 8 sequences.
  const double layer = 128.0 * (2 * 256 * 768 + 2 * 384 * 256 + 2 * 2 * 256 * 512) + 4.0 * 8 * 128 * 128 * 48;
  const double forward = 4 * layer + 128.0 * 2 * 256 * 1024;
  const nlohmann::json result = nlohmann::json::parse(read_file(dir.file("sim/result.json")));
  EXPECT_DOUBLE_EQ(result["model_flops_per_step"].get<double>(), 3 * forward * 8);
  EXPECT_EQ(run_strata(with({"memory"})).exit_code, 0);
  r = run_strata(with({"export", "--out", dir.file("launch")}));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(read_file(dir.file("launch/megatron-args.sh")).find("  --kv-channels 48\n"), std::string::npos);
  EXPECT_TRUE(file_exists(dir.file("launch/deepspeed.json")));
  EXPECT_FALSE(file_exists(dir.file("launch/strata-run.json")));
}

struct BadMoe {
  const char* name;
  const char* model;  // a path under the test's directory or a shipped name
  const char* plan;
  const char* file_at_fault;
  const char* json_path;
  const char* says;
};

void PrintTo(const BadMoe& c, std::ostream* os) { *os << c.name; }

class BadMoeInput : public ::testing::TestWithParam<BadMoe> {};

const char* kSmallMoe = R"({"name": "m", "num_layers": 4, "hidden_size": 256, "num_attention_heads": 8,
  "num_query_groups": 4, "ffn_hidden_size": 512, "swiglu": true, "normalization": "rmsnorm", "seq_length": 128,
  "vocab_size": 1024, "add_bias_linear": false, "num_experts": 8, "moe_router_topk": 2})";
const char* kTopkTooLarge = R"({"name": "m", "num_layers": 4, "hidden_size": 256, "num_attention_heads": 8,
  "num_query_groups": 4, "ffn_hidden_size": 512, "seq_length": 128, "vocab_size": 1024, "num_experts": 8,
  "moe_router_topk": 9})";
const char* kDense = R"({"name": "m", "num_layers": 4, "hidden_size": 256, "num_attention_heads": 8,
  "num_query_groups": 4, "ffn_hidden_size": 512, "seq_length": 128, "vocab_size": 1024})";
// Multi-head latent attention with grouped keys and values, which MLA does not have.
const char* kGroupedMla = R"({"name": "m", "num_layers": 4, "hidden_size": 256, "num_attention_heads": 8,
  "num_query_groups": 4, "ffn_hidden_size": 512, "seq_length": 128, "vocab_size": 1024,
  "multi_latent_attention": true, "kv_lora_rank": 64, "qk_head_dim": 32, "qk_pos_emb_head_dim": 16, "v_head_dim": 32})";

TEST_P(BadMoeInput, ExitsTwoNamesPathWritesNothing) {
  const BadMoe c = GetParam();
  TempDir dir;
  const std::string model = std::string(c.model).front() == '{' ? dir.write("model.json", c.model) : c.model;
  const CommandResult r = run_strata({"memory", "--model", model, "--plan", dir.write("plan.json", c.plan),
                                      "--cluster", "dgx-h100-1node", "--json", dir.file("out/memory.json")});
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_NE(r.err.find(c.file_at_fault), std::string::npos) << r.err;
  EXPECT_NE(r.err.find(c.json_path), std::string::npos) << r.err;
  EXPECT_NE(r.err.find(c.says), std::string::npos) << r.err;
  EXPECT_FALSE(file_exists(dir.file("out/memory.json")));
  EXPECT_TRUE(r.out.empty()) << r.out;
}

INSTANTIATE_TEST_SUITE_P(
    Cases, BadMoeInput,
    ::testing::Values(
        BadMoe{"EpNotDividingExperts", kSmallMoe, R"({"tp": 1, "pp": 1, "ep": 3, "micro_batch_size": 1,
            "global_batch_size": 8})", "plan.json", "$.ep", "must divide num_experts 8"},
        BadMoe{"EpTimesEtpNotDividingTheStage", kSmallMoe, R"({"tp": 2, "pp": 2, "ep": 4, "sequence_parallel": true,
            "micro_batch_size": 1, "global_batch_size": 8})", "plan.json", "$.ep",
               "must divide the ranks of a pipeline stage, tp*cp*dp = 2*1*2 = 4"},
        BadMoe{"TopkAboveExperts", kTopkTooLarge, R"({"tp": 1, "pp": 1, "micro_batch_size": 1,
            "global_batch_size": 8})", "model.json", "$.moe_router_topk", "allowed 1 to 8"},
        BadMoe{"MoeKeyOnDenseModel", kDense, R"({"tp": 1, "pp": 1, "ep": 2, "micro_batch_size": 1,
            "global_batch_size": 8})", "plan.json", "$.ep", "model m has no experts"},
        BadMoe{"TensorParallelWithoutSequenceParallel", kSmallMoe, R"({"tp": 2, "pp": 1, "micro_batch_size": 1,
            "global_batch_size": 8})", "plan.json", "$.sequence_parallel", "moe_layer.py:636"},
        BadMoe{"MlaWithGroupedKeys", kGroupedMla, R"({"tp": 1, "pp": 1, "micro_batch_size": 1,
            "global_batch_size": 8})", "model.json", "$.num_query_groups", "every head its own keys and values"},
        BadMoe{"MlaUpProjRecomputeWithoutMla", kDense, R"({"tp": 1, "pp": 1, "micro_batch_size": 1,
            "global_batch_size": 8, "recompute": "selective", "recompute_modules": ["mla_up_proj"]})", "plan.json",
               "$.recompute_modules", "model m has none"},
        BadMoe{"RecomputeModuleNotModelled", kDense, R"({"tp": 1, "pp": 1, "micro_batch_size": 1,
            "global_batch_size": 8, "recompute": "selective", "recompute_modules": ["core_attn", "moe_act"]})",
               "plan.json", "$.recompute_modules[1]", "\"core_attn\" or \"mla_up_proj\""},
        BadMoe{"UnknownDispatcher", kSmallMoe, R"({"tp": 1, "pp": 1, "moe_token_dispatcher_type": "deepep",
            "micro_batch_size": 1, "global_batch_size": 8})", "plan.json", "$.moe_token_dispatcher_type",
               "alltoall"}),
    [](const ::testing::TestParamInfo<BadMoe>& param) { return std::string(param.param.name); });

// strata run reads strata-run.json's model like any model.json; one with
// experts is refused up front, naming the key.
// The flex (DeepEP) dispatcher on 16 experts over two nodes (ep 16, top-4): a
// token crosses the network once per other node with its experts instead of once
// per copy, so less of the all-to-all is exposed than with alltoall; node-limited
// routing (2 groups = 2 nodes, 1 per token) keeps every token on one node and
// exposes less still. The alltoall dispatcher sends every copy either way.
TEST(MoeCommand, FlexDispatcherAndNodeLimitedRoutingExposeLessAllToAll) {
  TempDir dir;
  nlohmann::json model =
      nlohmann::json::parse(read_file(resolve_data_file("mixtral-8x7b", "scenarios/models", "model")));
  model["name"] = "mixtral-16e";
  model["num_experts"] = 16;
  model["moe_router_topk"] = 4;
  const std::string open = dir.write("open.json", model.dump());
  model["moe_router_num_groups"] = 2;
  model["moe_router_group_topk"] = 1;
  const std::string limited = dir.write("limited.json", model.dump());
  auto exposed_ep = [&](const std::string& model_file, const char* dispatcher) {
    const std::string plan = dir.write(std::string("plan-") + dispatcher + ".json",
                                       std::string(R"({"tp": 1, "pp": 4, "ep": 16, "micro_batch_size": 1,
        "global_batch_size": 256, "zero_stage": 1, "flash_attention": true, "moe_token_dispatcher_type": ")") +
                                           dispatcher + "\"}");
    const std::string out = dir.file(std::string("sim-") + dispatcher);
    const CommandResult r = run_strata({"simulate", "--model", model_file, "--plan", plan, "--cluster",
                                        "dgx-h100-8node", "--fidelity", "folded", "--no-trace", "--out", out});
    EXPECT_EQ(r.exit_code, 0) << r.err;
    return nlohmann::json::parse(read_file(out + "/result.json"))["exposed_comm_s"]["ep"].get<double>();
  };
  const double a2a = exposed_ep(open, "alltoall");
  const double flex = exposed_ep(open, "flex");
  const double flex_limited = exposed_ep(limited, "flex");
  EXPECT_LT(flex, 0.9 * a2a);
  EXPECT_LT(flex_limited, 0.9 * flex);
  EXPECT_DOUBLE_EQ(exposed_ep(limited, "alltoall"), a2a);
}

// strata run takes MoE plans its MoE layer runs (tests/run: executor correctness
// and the mpirun command test); the rest it refuses up front, exit 2 at the key.
TEST(MoeCommand, RunRefusesWhatItsMoeLayerDoesNotRun) {
  TempDir dir;
  const std::string plan = dir.write("plan.json", R"({"tp": 1, "pp": 1, "ep": 2, "micro_batch_size": 1,
      "global_batch_size": 8, "moe_token_dispatcher_type": "alltoall"})");
  const CommandResult exported = run_strata({"export", "--model", "tiny-moe", "--plan", plan, "--cluster",
                                             "dgx-h100-1node", "--fidelity", "folded", "--out", dir.file("launch")});
  ASSERT_EQ(exported.exit_code, 0) << exported.err;
  const nlohmann::json config = nlohmann::json::parse(read_file(dir.file("launch/strata-run.json")));
  struct Change {
    const char* section;
    const char* key;
    nlohmann::json value;
    const char* path;
    const char* what;
  };
  const Change changes[] = {
      {"parallel", "moe_token_dispatcher_type", "flex", "$.parallel.moe_token_dispatcher_type",
       "MoE layers do not run the \"flex\" (DeepEP) token dispatcher"},
      {"model", "moe_router_load_balancing_type", "sinkhorn", "$.model.moe_router_load_balancing_type",
       "MoE layers do not run \"sinkhorn\" balancing"},
  };
  for (const Change& c : changes) {
    nlohmann::json changed = config;
    changed[c.section][c.key] = c.value;
    const std::string file = dir.write("moe-run.json", changed.dump(2));
    const CommandResult r = run_strata({"run", file, "--out", dir.file("measured")});
    EXPECT_EQ(r.exit_code, 2) << c.key << ": " << r.err;
    EXPECT_NE(r.err.find(c.path), std::string::npos) << r.err;
    EXPECT_NE(r.err.find(c.what), std::string::npos) << r.err;
    EXPECT_FALSE(file_exists(dir.file("measured/measured.json")));
  }
}

}  // namespace
}  // namespace strata::testing
