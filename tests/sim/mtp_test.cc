// Multi-token prediction (Megatron-Core's --mtp-num-layers; DeepSeek-V3's MTP
// module): the model key, its parameters against DeepSeek's published count,
// its FLOPs and its segments by hand, a step at both fidelities, and what the
// simulator and strata run refuse.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "costmodel/profile.h"
#include "fake_costs.h"
#include "plan/flops.h"
#include "plan/memory_model.h"
#include "plan/params.h"
#include "plan/run_spec.h"
#include "sim/scenario.h"
#include "sim/simulate.h"
#include "sim/workload/segments.h"
#include "topologies/cluster_spec.h"

namespace strata {
namespace {

using nlohmann::json;

// A small dense Llama-style model with one MTP layer.
json small_mtp() {
  return json::parse(R"({"name": "mtp", "num_layers": 8, "hidden_size": 1024, "num_attention_heads": 8,
      "ffn_hidden_size": 4096, "swiglu": true, "normalization": "rmsnorm", "seq_length": 2048, "vocab_size": 32000,
      "untie_embeddings_and_output_weights": true, "position_embedding_type": "rope", "add_bias_linear": false,
      "hidden_dropout": 0, "attention_dropout": 0, "mtp_num_layers": 1})");
}

ModelSpec without_mtp(ModelSpec m) {
  m.mtp_num_layers = 0;
  return m;
}

TEST(MtpModel, ReadsMegatronsKeyAndEchoesIt) {
  const ModelSpec m = read_model_spec(small_mtp(), "model.json");
  EXPECT_EQ(m.mtp_num_layers, 1);
  EXPECT_EQ(to_json(m)["mtp_num_layers"], 1);
  EXPECT_FALSE(to_json(without_mtp(m)).contains("mtp_num_layers"));
  json bad = small_mtp();
  bad["mtp_num_layers"] = -1;
  try {
    read_model_spec(bad, "model.json");
    FAIL() << "negative mtp_num_layers";
  } catch (const InputError& e) {
    EXPECT_EQ(e.json_path(), "$.mtp_num_layers");
  }
}

// DeepSeek-V3's model card: 685B parameters, "671B of the Main Model weights and
// 14B of the Multi-Token Prediction (MTP) Module weights"; the MTP module's
// checkpoint carries its own copies of the embedding and the output head, which
// training shares with the main model: Strata counts them once.
TEST(MtpParams, DeepSeekV3sModuleIsAnMoeLayerAnEhProjAndThreeNorms) {
  ModelSpec m = load_model_spec("deepseek-v3");
  m.mtp_num_layers = 1;
  EXPECT_EQ(mtp_layer_params(m), moe_layer_params(m) + 2LL * 7168 * 7168 + 3 * 7168);
  EXPECT_EQ(total_params(m) - total_params(without_mtp(m)), mtp_layer_params(m));
  const double checkpoint = static_cast<double>(total_params(m) + 2 * word_embedding_params(m));
  EXPECT_NEAR(checkpoint / 685e9, 1.0, 0.005);
  // A token passes 8 of the MTP layer's 256 routed experts too.
  EXPECT_EQ(active_params(m) - active_params(without_mtp(m)),
            mtp_layer_params(m) - (256 - 8) * expert_params(m));
}

// Per sequence of s tokens: the MTP layer's transformer layer, eh_proj
// 2 s (2h) h and the logits 2 s h V again.
TEST(MtpFlops, ALayerAnEhProjAndTheLogitsAgain) {
  const ModelSpec m = read_model_spec(small_mtp(), "model.json");
  const ModelSpec base = without_mtp(m);
  const double s = 2048, h = 1024, V = 32000;
  const double layer = (forward_flops_per_sequence(base) - 2.0 * s * h * V) / 8;
  EXPECT_NEAR(forward_flops_per_sequence(m) - forward_flops_per_sequence(base),
              layer + 2.0 * s * 2 * h * h + 2.0 * s * h * V, 1e-9 * forward_flops_per_sequence(m));
  PlanSpec p;
  p.global_batch_size = 4;
  p.flash_attention = true;
  p.recompute = Recompute::kFull;
  const StepFlops f = step_flops(m, p);
  EXPECT_NEAR(f.hardware_flops - f.model_flops, 4 * 9 * layer, 1e-9 * f.model_flops);  // every layer replayed
}

// On a tp 2 rank with sequence parallelism: the embedding lookup reduced over tp,
// the two norms, eh_proj after its 2h-wide input's gather and before its output's
// gather, the transformer layer, the final norm, logits and loss again.
TEST(MtpSegments, FollowTheHeadWithTheirOwnOps) {
  const ModelSpec m = read_model_spec(small_mtp(), "model.json");
  PlanSpec p;
  p.tp = 2;
  p.sequence_parallel = true;
  p.flash_attention = true;
  p.micro_batch_size = 1;
  p.global_batch_size = 8;
  const sim::testing::UniformCosts costs(1'000);
  const sim::BlockSegments layer = sim::layer_segments(m, p, costs);
  const sim::BlockSegments mtp = sim::mtp_segments(m, p, costs, layer);
  // The forward in order: ops by name, collectives by kind and size in streams.
  const double stream = 2.0 * 2048 * 1024;
  std::vector<std::string> order;
  for (const sim::Segment& seg : mtp.forward) {
    if (seg.is_comm) {
      order.push_back(std::string(to_string(seg.op)) + " x" + std::to_string(static_cast<int>(seg.comm_bytes / stream)));
      continue;
    }
    for (const sim::DetailOp& op : seg.ops) order.push_back(op.name.str());
  }
  const std::vector<std::string> first = {"mtp_embedding", "reduce_scatter x1", "mtp_enorm", "mtp_hnorm",
                                          "all_gather x2", "mtp_eh_proj", "all_gather x1", "input_norm",
                                          "all_gather x1", "qkv"};
  ASSERT_GE(order.size(), first.size());
  EXPECT_EQ(std::vector<std::string>(order.begin(), order.begin() + static_cast<long>(first.size())), first);
  // ... and the loss's all-reduce of 3 fp32 values per token over tp.
  EXPECT_EQ(std::vector<std::string>(order.end() - 5, order.end()),
            (std::vector<std::string>{"final_norm", "all_gather x1", "logits", "cross_entropy", "all_reduce x0"}));
  // Its backward starts with the loss's and ends with eh_proj's and the embedding's.
  std::vector<std::string> backward;
  for (const sim::Segment& seg : mtp.backward) {
    for (const sim::DetailOp& op : seg.ops) backward.push_back(op.name.str());
  }
  ASSERT_FALSE(backward.empty());
  EXPECT_EQ(backward.front(), "cross_entropy bwd");
  EXPECT_EQ(backward.back(), "mtp_embedding bwd");
}

// tp 2 pp 2 on one H100 node: both fidelities take the same step within 1%,
// longer than without the MTP layer (the last stage has more to do).
TEST(MtpSimulate, FullAndFoldedAgreeAndTheStepGrows) {
  const ModelSpec m = read_model_spec(small_mtp(), "model.json");
  PlanSpec p = read_plan_spec(json::parse(R"({"tp": 2, "pp": 2, "micro_batch_size": 1, "global_batch_size": 32,
      "sequence_parallel": true, "flash_attention": true, "zero_stage": 1})"),
                              "plan.json");
  const ClusterSpec c = load_cluster_spec("dgx-h100-1node");
  resolve_and_check_plan(p, m, {c.num_gpus(), c.gpus_per_node, false}, "plan.json");
  sim::Simulator simulator(c, load_profile(c.profile));
  sim::SimulationOptions o;
  o.keep_timeline = false;
  o.fidelity = sim::Fidelity::kFolded;
  const double folded = simulator.run(m, p, o).metrics.step_time_s;
  const double base = simulator.run(without_mtp(m), p, o).metrics.step_time_s;
  o.fidelity = sim::Fidelity::kFull;
  const double full = simulator.run(m, p, o).metrics.step_time_s;
  EXPECT_NEAR(full, folded, 0.01 * folded);
  EXPECT_GT(folded, 1.02 * base);
}

// The last stage keeps, per micro-batch in flight (1 on 1F1B's last stage), the
// MTP layer's transformer layer, its two norms' and eh_proj's inputs (4 x the
// stream), its final norm's and output layer's inputs (2 x), and the logits of
// the micro-batch in its loss (16-bit and fp32 softmax); the first stage nothing more.
TEST(MtpMemory, TheLastStageKeepsTheLayerItsInputsAndTheLogits) {
  const ModelSpec m = read_model_spec(small_mtp(), "model.json");
  PlanSpec p;
  p.pp = 2;
  p.dp = 1;
  p.flash_attention = true;
  p.micro_batch_size = 1;
  p.global_batch_size = 8;
  const DeviceMemory device{80.0 * (1LL << 30), 0.0, 0.0};
  const MemoryReport with = memory_report(m, p, device);
  const MemoryReport base = memory_report(without_mtp(m), p, device);
  const double stream = 2.0 * 2048 * 1024;
  const double logits = (2.0 + 4.0) * 2048 * 32000;
  EXPECT_DOUBLE_EQ(with.stages[1].activations_bytes - base.stages[1].activations_bytes,
                   base.layer_activations.total() + 6 * stream + logits);
  EXPECT_DOUBLE_EQ(with.stages[0].activations_bytes, base.stages[0].activations_bytes);
}

TEST(MtpRefusals, NameTheirKeys) {
  const ModelSpec m = read_model_spec(small_mtp(), "model.json");
  PlanSpec p;
  p.cp = 2;
  const std::optional<InputError> cp = simulation_refusal(m, p, "plan.json");
  ASSERT_TRUE(cp.has_value());
  EXPECT_EQ(cp->json_path(), "$.cp");
  p.cp = 1;
  p.zero_stage = 3;
  const std::optional<InputError> zero3 = simulation_refusal(m, p, "plan.json");
  ASSERT_TRUE(zero3.has_value());
  EXPECT_EQ(zero3->json_path(), "$.zero_stage");
  p.zero_stage = 1;
  EXPECT_FALSE(simulation_refusal(m, p, "plan.json").has_value());
  const std::optional<RunRefusal> run = run_refusal(m, p);
  ASSERT_TRUE(run.has_value());
  EXPECT_EQ(run->json_path, "$.model.mtp_num_layers");
}

}  // namespace
}  // namespace strata
