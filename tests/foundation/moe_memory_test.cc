// The memory model's MoE terms (plan/moe_memory.h, docs/memory.md "Mixture of
// experts") against numbers computed by hand: expert states sharded over the
// expert data-parallel group, the routed tokens' activations at the routing
// imbalance or the capacity factor, the dispatchers' buffers.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "plan/memory_model.h"
#include "plan/moe_memory.h"
#include "plan/params.h"

namespace strata {
namespace {

DeviceMemory bare_device() {
  DeviceMemory d;
  d.capacity_bytes = 80e9;
  return d;  // no reserve, no fragmentation
}

// Mixtral 8x7B as scenarios/plans/mixtral-8x7b-64.json runs it on 64 GPUs: tp 1,
// pp 4, dp 16, ep 8, ZeRO 1, micro-batch 1, global batch 256, flash attention,
// bf16 with fp32 gradients, alltoall, dropless and balanced.
PlanSpec mixtral_plan(const ModelSpec& m, const std::string& extra = "") {
  PlanSpec p = read_plan_spec(nlohmann::json::parse(R"({"tp": 1, "pp": 4, "ep": 8, "micro_batch_size": 1,
      "global_batch_size": 256, "zero_stage": 1, "flash_attention": true,
      "moe_token_dispatcher_type": "alltoall")" + extra + "}"),
                              "plan.json");
  PlanContext c;
  c.num_gpus = 64;
  c.gpus_per_node = 8;
  resolve_and_check_plan(p, m, c, "plan.json");
  return p;
}

// Stage 1 (8 MoE layers, no embedding or head), by hand:
//   parameters per GPU: 8 x (attention 41,943,040 + norms 8,192 + router 32,768)
//   = 335,872,000 dense; 8 layers x 1 expert (8 / ep 8) x 176,160,768 =
//   1,409,286,144 expert; 1,745,158,144 in all.
//   weights 2 bytes, gradients 4 (fp32) on every parameter; optimizer 12 bytes
//   sharded over dp*cp = 16 (dense) and tp*cp*dp / (ep*etp) = 2 (experts).
//   activations: an MoE layer per micro-batch (s 4096, b 1, tp 1, no dropout):
//     attention: QKV input 2*4096*4096 + Q,K,V 2*4096*(4096 + 2048) +
//       projection input 2*4096*4096 + log-sum-exp 4*32*4096 = 117,964,800
//     norms: 2 * 2*4096*4096 = 67,108,864
//     MoE: input 2*4096*4096 = 33,554,432; router scores 4*4096*8 = 131,072;
//       routed tokens 4096 * topk 2 = 8192: 2*8192*(4096 + 2*14336 + 14336) =
//       771,751,936; expert outputs for the combine 2*4096*2*4096 = 67,108,864:
//       872,546,304
//     = 1,057,619,968 per layer; 1F1B holds min(p - 1, m) = 3 micro-batches of
//     the stage's 8 layers: 24 x that.
//   buffers: pipeline 4*2*4096*4096 = 134,217,728; alltoall dispatch and
//     combine 2 * 2*4096*4096*2 * (1 + 1) = 268,435,456.
TEST(MoeMemory, Mixtral8x7bStageByHand) {
  const ModelSpec m = load_model_spec("mixtral-8x7b");
  const PlanSpec p = mixtral_plan(m);
  EXPECT_EQ(p.expert_data_parallel(), 2);
  const MemoryReport r = memory_report(m, p, bare_device());
  ASSERT_EQ(r.stages.size(), 4u);
  const StageMemory& st = r.stages[1];
  EXPECT_EQ(st.params, 1745158144);
  EXPECT_EQ(st.expert_params, 1409286144);
  EXPECT_DOUBLE_EQ(st.params_bytes, 2.0 * 1745158144);
  EXPECT_DOUBLE_EQ(st.grads_bytes, 4.0 * 1745158144);
  EXPECT_DOUBLE_EQ(st.optimizer_bytes, 12.0 * 335872000 / 16 + 12.0 * 1409286144 / 2);
  EXPECT_DOUBLE_EQ(st.expert_state_bytes, (2.0 + 4.0) * 1409286144 + 12.0 * 1409286144 / 2);
  EXPECT_DOUBLE_EQ(moe_layer_activation_bytes(m, p).attention_bytes, 117964800.0);
  EXPECT_DOUBLE_EQ(moe_layer_activation_bytes(m, p).norm_bytes, 67108864.0);
  EXPECT_DOUBLE_EQ(moe_mlp_activation_bytes(m, p), 872546304.0);
  EXPECT_DOUBLE_EQ(st.layer_microbatches_in_flight, 24.0);
  EXPECT_DOUBLE_EQ(st.activations_bytes, 24.0 * 1057619968);
  EXPECT_DOUBLE_EQ(st.buffers_bytes, 134217728.0 + 268435456.0);
  EXPECT_DOUBLE_EQ(st.total_bytes, st.params_bytes + st.grads_bytes + st.optimizer_bytes + st.activations_bytes +
                                       st.buffers_bytes);
}

// The routed tokens scale with the busiest expert's load: dropless, the routing
// imbalance (2: 16,384 routed tokens); with a capacity factor, the factor
// (1.25: 10,240), whatever the imbalance (Megatron-Core's get_capacity).
TEST(MoeMemory, RoutedTokensFollowImbalanceOrCapacity) {
  const ModelSpec m = load_model_spec("mixtral-8x7b");
  const double per_routed_token = 2.0 * (4096 + 2 * 14336 + 14336);
  const double fixed = 33554432.0 + 131072.0 + 67108864.0;
  EXPECT_DOUBLE_EQ(moe_mlp_activation_bytes(m, mixtral_plan(m, R"(, "moe_router_imbalance": 2)")),
                   fixed + 16384 * per_routed_token);
  EXPECT_DOUBLE_EQ(moe_mlp_activation_bytes(m, mixtral_plan(m, R"(, "moe_router_imbalance": 2,
      "moe_expert_capacity_factor": 1.25)")),
                   fixed + 10240 * per_routed_token);
  // The alltoall buffers: 2 * e * h * own * k * (1 + load) = 2*2*4096*4096*2*(1 + 2).
  EXPECT_DOUBLE_EQ(moe_dispatch_buffer_bytes(m, mixtral_plan(m, R"(, "moe_router_imbalance": 2)")),
                   2.0 * 2 * 4096 * 4096 * 2 * 3);
}

// With tp 2 and sequence parallelism (and etp 2 by default) each rank's MoE
// input is its 2048-token shard; an etp group runs its experts' halves for the
// tokens of both ranks: 2048 * topk 2 * etp 2 = 8192 routed tokens, each with
// the full h-wide input and half the expert's width. The allgather dispatcher
// gathers the etp x ep group's tokens: 2 * e * h * 2048 * 2 * 4.
TEST(MoeMemory, ExpertTensorParallelAndAllGather) {
  const ModelSpec m = load_model_spec("mixtral-8x7b");
  PlanSpec p = read_plan_spec(nlohmann::json::parse(R"({"tp": 2, "pp": 1, "ep": 4, "sequence_parallel": true,
      "micro_batch_size": 1, "global_batch_size": 32, "flash_attention": true})"),
                              "plan.json");
  PlanContext c;
  c.num_gpus = 64;
  c.gpus_per_node = 8;
  resolve_and_check_plan(p, m, c, "plan.json");
  ASSERT_EQ(p.moe.etp, 2);
  ASSERT_EQ(p.moe.token_dispatcher, MoeDispatcher::kAllGather);  // Megatron-Core's default
  EXPECT_EQ(p.expert_data_parallel(), 8);  // 2*1*32 / (4*2)
  const double own = 2048;
  const double routed = own * 2 * 2;
  const double expected = 2.0 * own * 4096 + 4.0 * own * 8 + 2.0 * routed * (4096 + 2.0 * 14336 / 2 + 14336.0 / 2) +
                          2.0 * own * 2 * 4096;
  EXPECT_DOUBLE_EQ(moe_mlp_activation_bytes(m, p), expected);
  EXPECT_DOUBLE_EQ(moe_dispatch_buffer_bytes(m, p), 2.0 * 2 * 4096 * own * 2 * 4);
  // 2 of 8 experts per GPU, each split over etp 2.
  EXPECT_EQ(moe_layer_expert_params_per_gpu(m, p), 2 * 176160768 / 2);
}

// DeepSeek-V3's stage 0 holds the three dense layers: its parameters and
// activations mix both kinds of layer by count.
TEST(MoeMemory, DenseLayersOfAnMoeModelCountAsDense) {
  const ModelSpec m = load_model_spec("deepseek-v3");
  // 61 layers over 16 stages: the first stage 1 layer (dense), the other 60
  // evenly, 4 each; DeepSeek-V3's batch of 15,360 sequences (arXiv 2412.19437 section 4.2).
  PlanSpec p = read_plan_spec(nlohmann::json::parse(R"({"tp": 1, "pp": 16, "ep": 64, "micro_batch_size": 1,
      "global_batch_size": 15360, "zero_stage": 1, "flash_attention": true, "moe_token_dispatcher_type": "alltoall",
      "decoder_first_pipeline_num_layers": 1})"),
                              "plan.json");
  PlanContext c;
  c.num_gpus = 2048;
  c.gpus_per_node = 8;
  resolve_and_check_plan(p, m, c, "plan.json");
  const MemoryReport r = memory_report(m, p, bare_device());
  // Stage 0: one dense layer; stage 1: layers 1-4, two dense (1, 2) and two MoE (3, 4).
  EXPECT_EQ(r.stages[0].expert_params, 0);
  EXPECT_EQ(r.stages[1].expert_params, 2 * moe_layer_expert_params_per_gpu(m, p));
  EXPECT_EQ(moe_layer_expert_params_per_gpu(m, p), 4 * expert_params(m));  // 256 / 64 experts per GPU
  const double dense = layer_activation_bytes(m, p).total();
  const double moe = moe_layer_activation_bytes(m, p).total();
  // 1F1B: stage 1 holds min(16 - 1, m) = 15 micro-batches of its 4 layers.
  EXPECT_NEAR(r.stages[1].activations_bytes / (15.0 * (2 * dense + 2 * moe)), 1.0, 1e-12);
}

}  // namespace
}  // namespace strata
