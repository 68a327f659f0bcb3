// importers/calculon.h against hand-written Calculon inputs: the files are in
// Calculon's format (the keys its llm.py and system.py read), their figures the
// published ones (GPT-3 175B: Brown et al. 2020 Table 2.1; the plan Korthikanti
// et al. 2022 ran it with; A100 and H100 datasheets). Each mapped key is checked
// against docs/importers.md's table, each Calculon assert at the key it names.
#include "importers/calculon.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <string>

#include "core/error.h"
#include "plan/model_spec.h"
#include "plan/plan_spec.h"
#include "topologies/cluster_spec.h"

namespace strata::importers {
namespace {

using nlohmann::json;

json gpt3_175b() {
  return {{"hidden", 12288}, {"feedforward", 49152}, {"seq_size", 2048},
          {"attn_heads", 96}, {"attn_size", 128},    {"num_blocks", 96}};
}

// Korthikanti et al. 2022's GPT-3 175B run: tp 8, pp 8, interleaved by 3,
// sequence parallelism with selective recompute, on 64 A100.
json korthikanti_175b() {
  return {{"num_procs", 64},
          {"tensor_par", 8},
          {"pipeline_par", 8},
          {"data_par", 1},
          {"tensor_par_net", 0},
          {"pipeline_par_net", 1},
          {"data_par_net", 1},
          {"batch_size", 64},
          {"microbatch_size", 1},
          {"datatype", "float16"},
          {"fused_activation", false},
          {"attention_type", "multihead"},
          {"activation_recompute", "attn_only"},
          {"pipeline_interleaving", 3},
          {"optimizer_sharding", false},
          {"tensor_par_comm_type", "rs_ag"},
          {"tensor_par_overlap", "none"},
          {"seq_par_ag_redo", true},
          {"data_par_overlap", false},
          {"weight_offload", false},
          {"activations_offload", false},
          {"optimizer_offload", false},
          {"training", true}};
}

json network(double gbytes_per_s, int size) {
  return {{"bandwidth", gbytes_per_s},
          {"efficiency", 0.9},
          {"size", size},
          {"latency", 1e-5},
          {"ops", {{"all_reduce", {1.0, 0}}}},
          {"must_be_filled", false},
          {"processor_usage", 0.1}};
}

// One processor of `tflops` fp16 and `gib` of memory, an NVLink domain of 8 at
// `nvlink` GB/s and a network of 25 GB/s per processor over everything.
json system(double tflops, double gib, double nvlink) {
  const json efficiency = json::array({json::array({128, 0.95}), json::array({0, 0.1})});
  return {{"matrix", {{"float16", {{"tflops", tflops}, {"gflops_efficiency", efficiency}}}}},
          {"vector", {{"float16", {{"tflops", tflops / 4}, {"gflops_efficiency", efficiency}}}}},
          {"mem1", {{"GiB", gib}, {"GBps", 2039}, {"MB_efficiency", efficiency}}},
          {"mem2", {{"GiB", 512}, {"GBps", 32}, {"MB_efficiency", efficiency}}},
          {"processing_mode", "no_overlap"},
          {"networks", json::array({network(nvlink, 8), network(25, 65536)})}};
}

struct Inputs {
  json application = gpt3_175b();
  json execution = korthikanti_175b();
  json system = importers::system(312, 80, 300);
  CalculonChoices choices;
};

ImportedScenario run(const Inputs& in) {
  return import_calculon(read_calculon_application(in.application, "app.json", "gpt3-175B"),
                         read_calculon_execution(in.execution, "exec.json", "run"),
                         read_calculon_system(in.system, "sys.json", "a100"), {"app.json", "exec.json", "sys.json"},
                         in.choices);
}

// The error an import throws: "file path" to compare.
std::string error_of(const Inputs& in) {
  try {
    run(in);
  } catch (const InputError& e) {
    return e.file() + " " + e.json_path();
  }
  return "accepted";
}

bool has_note(const ImportedScenario& s, const std::string& part) {
  return std::any_of(s.notes.begin(), s.notes.end(),
                     [&](const std::string& n) { return n.find(part) != std::string::npos; });
}

TEST(CalculonImport, Gpt3OnA100sReadsAsStrataWritesIt) {
  const ImportedScenario s = run({});
  const ModelSpec m = read_model_spec(s.model, "model.json");
  EXPECT_EQ(m.name, "gpt3-175B");
  EXPECT_EQ(m.num_layers, 96);
  EXPECT_EQ(m.hidden_size, 12288);
  EXPECT_EQ(m.num_attention_heads, 96);
  EXPECT_EQ(m.num_query_groups, 96);
  EXPECT_EQ(m.ffn_hidden_size, 49152);
  EXPECT_EQ(m.seq_length, 2048);
  EXPECT_EQ(m.vocab_size, 51200);  // llm.py: (51200 + seq_size) * hidden embedding parameters
  EXPECT_EQ(m.head_dim(), 128);
  EXPECT_FALSE(s.model.contains("kv_channels"));
  EXPECT_EQ(m.position_embedding_type, PositionEmbedding::kLearnedAbsolute);
  EXPECT_FALSE(m.swiglu);

  const PlanSpec p = read_plan_spec(s.plan, "plan.json");
  EXPECT_EQ(p.tp, 8);
  EXPECT_EQ(p.pp, 8);
  EXPECT_EQ(p.dp, 1);
  EXPECT_EQ(p.vpp, 3);
  EXPECT_EQ(p.schedule, Schedule::kInterleaved);
  EXPECT_EQ(p.micro_batch_size, 1);
  EXPECT_EQ(p.global_batch_size, 64);
  EXPECT_EQ(p.dtype, DType::kFp16);
  EXPECT_EQ(p.recompute, Recompute::kSelective);  // attn_only
  EXPECT_TRUE(p.sequence_parallel);               // rs_ag
  EXPECT_EQ(p.zero_stage, 0);
  EXPECT_FALSE(p.overlap_grad_reduce);
  EXPECT_EQ(s.plan["rank_order"], "tp-cp-ep-pp-dp");  // Calculon's get_peers_json: tp, then pp, then dp

  const ClusterSpec c = read_cluster_spec(s.cluster, "cluster.json");
  EXPECT_EQ(c.nodes, 8);
  EXPECT_EQ(c.gpus_per_node, 8);
  EXPECT_EQ(c.node.name, "dgx-a100");
  EXPECT_EQ(c.profile, "a100-sxm4-80gb");
  EXPECT_EQ(c.fabric.kind, "infiniband");
  EXPECT_EQ(c.fabric.nics_per_node, 8);
  EXPECT_DOUBLE_EQ(c.fabric.nic_gbps, 200.0);  // 25 GB/s per processor
  EXPECT_EQ(s.profile, "a100-sxm4-80gb");
  EXPECT_EQ(s.node, "dgx-a100");

  // Redoing the gather is what Strata does: no note; the networks' own
  // efficiencies are not carried: a note.
  EXPECT_FALSE(has_note(s, "seq_par_ag_redo"));
  EXPECT_TRUE(has_note(s, "$.networks[1] efficiency 0.9"));
}

TEST(CalculonImport, SettingsStrataTakesOtherwiseAreNamed) {
  Inputs in;
  in.execution["seq_par_ag_redo"] = false;
  in.execution["fused_activation"] = true;
  in.execution["tensor_par_overlap"] = "ring";
  in.execution["weight_offload"] = true;
  in.execution["attention_type"] = "multiquery";
  const ImportedScenario s = run(in);
  EXPECT_TRUE(has_note(s, "$.seq_par_ag_redo false"));
  EXPECT_TRUE(has_note(s, "$.fused_activation true"));
  EXPECT_TRUE(has_note(s, "$.tensor_par_overlap \"ring\""));
  EXPECT_TRUE(has_note(s, "$.weight_offload"));
  EXPECT_EQ(read_model_spec(s.model, "model.json").num_query_groups, 1);

  in = Inputs{};
  in.execution["tensor_par_comm_type"] = "p2p_rs_ag";
  in.execution["seq_par_ag_redo"] = false;
  const ImportedScenario ar = run(in);
  EXPECT_FALSE(read_plan_spec(ar.plan, "plan.json").sequence_parallel);
  EXPECT_TRUE(has_note(ar, "\"p2p_rs_ag\""));
}

TEST(CalculonImport, DataParallelKeysBecomeZeroOneAndOverlap) {
  Inputs in;
  in.execution["num_procs"] = 256;
  in.execution["data_par"] = 4;
  in.execution["batch_size"] = 256;
  in.execution["optimizer_sharding"] = true;
  in.execution["data_par_overlap"] = true;
  in.execution["optimizer_offload"] = true;
  in.execution["activation_recompute"] = "full";
  in.execution["seq_par_ag_redo"] = false;
  const ImportedScenario s = run(in);
  const PlanSpec p = read_plan_spec(s.plan, "plan.json");
  EXPECT_EQ(p.dp, 4);
  EXPECT_EQ(p.zero_stage, 1);
  EXPECT_TRUE(p.overlap_grad_reduce);
  EXPECT_TRUE(p.overlap_param_gather);
  EXPECT_TRUE(p.offload_optimizer);
  EXPECT_EQ(p.recompute, Recompute::kFull);
  EXPECT_EQ(read_cluster_spec(s.cluster, "cluster.json").nodes, 32);
}

TEST(CalculonImport, AHeadSizeOtherThanHiddenOverHeadsIsKvChannels) {
  Inputs in;
  in.application["attn_size"] = 256;  // 96 x 256 != 12288
  const ImportedScenario s = run(in);
  EXPECT_EQ(read_model_spec(s.model, "model.json").head_dim(), 256);
}

TEST(CalculonImport, TheProcessorMatchesTheProfileOfItsPeakAndMemory) {
  Inputs in;
  in.system = system(312, 40, 300);
  EXPECT_EQ(run(in).profile, "a100-sxm4-40gb");
  // H100 and H200 have the same peak; memory tells them apart. Calculon's H100
  // system rounds 989 TFLOP/s to 1000.
  in.system = system(1000, 80, 450);
  EXPECT_EQ(run(in).profile, "h100-sxm5-80gb");
  EXPECT_EQ(run(in).node, "dgx-h100");
  in.system = system(1000, 141, 450);
  EXPECT_EQ(run(in).profile, "h200-sxm-141gb");
  EXPECT_EQ(run(in).node, "hgx-h200");  // the node preset of the profile's GPU
  // Calculon's "infinite memory" A100 (a100_80e.json): the profile's memory, said.
  in.system = system(312, 8e10, 300);
  const ImportedScenario unbounded = run(in);
  EXPECT_EQ(unbounded.profile, "a100-sxm4-80gb");
  EXPECT_TRUE(has_note(unbounded, "$.mem1.GiB 8e+10"));
  // The caller's choice wins.
  in.choices.profile = "a100-sxm4-40gb";
  EXPECT_EQ(run(in).profile, "a100-sxm4-40gb");
}

TEST(CalculonImport, CalculonsAssertsAreRefusedAtTheirKeys) {
  auto with = [](const char* key, json value) {
    Inputs in;
    in.execution[key] = std::move(value);
    return error_of(in);
  };
  EXPECT_EQ(with("num_procs", 32), "exec.json $.num_procs");       // != 8 * 8 * 1
  EXPECT_EQ(with("microbatch_size", 5), "exec.json $.microbatch_size");  // 64 / 5
  EXPECT_EQ(with("datatype", "float8"), "exec.json $.datatype");
  EXPECT_EQ(with("training", false), "exec.json $.training");
  EXPECT_EQ(with("optimizer_sharding", true), "exec.json $.optimizer_sharding");  // dp 1
  EXPECT_EQ(with("activation_recompute", "full"), "exec.json $.seq_par_ag_redo");
  EXPECT_EQ(with("attention_type", "grouped"), "exec.json $.attention_type");
  EXPECT_EQ(with("unknown_key", 1), "exec.json $.unknown_key");
  Inputs missing;
  missing.execution.erase("training");
  EXPECT_EQ(error_of(missing), "exec.json $.training");
  Inputs app;
  app.application["num_blocks"] = 0;
  EXPECT_EQ(error_of(app), "app.json $.num_blocks");
}

TEST(CalculonImport, ASystemNoShippedPartMatchesIsRefused) {
  Inputs in;
  in.system = system(500, 80, 300);  // no 500 TFLOP/s profile
  EXPECT_EQ(error_of(in), "sys.json $.matrix.float16.tflops");
  in.system = system(312, 80, 100);  // no 8-GPU node at 100 GB/s
  EXPECT_EQ(error_of(in), "sys.json $.networks[0]");
  in.system = system(312, 80, 300);
  in.system["matrix"].erase("float16");
  in.system["matrix"]["bfloat16"] = {{"tflops", 312}, {"gflops_efficiency", json::array()}};
  EXPECT_EQ(error_of(in), "sys.json $.matrix");  // the execution's float16 has no rate
  in = Inputs{};
  in.system["networks"].erase(1);  // nothing joins 8 nodes
  EXPECT_EQ(error_of(in), "sys.json $.networks");
  in = Inputs{};
  in.execution["num_procs"] = 4;  // half a node
  in.execution["tensor_par"] = 4;
  in.execution["pipeline_par"] = 1;
  in.execution["pipeline_interleaving"] = 1;
  EXPECT_EQ(error_of(in), "exec.json $.num_procs");
  in = Inputs{};
  in.choices.node = "pcie-8gpu";
  EXPECT_EQ(error_of(in), "accepted");
  in.choices.node = "no-such-node";
  EXPECT_EQ(error_of(in), " --node");
}

}  // namespace
}  // namespace strata::importers
