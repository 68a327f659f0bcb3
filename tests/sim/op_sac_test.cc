// torchtitan's op-level selective recompute (recompute "selective_op"): which
// matmul columns it recomputes, its FLOPs and its stored activations, by hand,
// and the layer's replay the simulator runs before each layer's backward.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "fake_costs.h"
#include "plan/flops.h"
#include "plan/layer_ops.h"
#include "plan/memory_model.h"
#include "sim/workload/segments.h"
#include "test_models.h"

namespace strata {
namespace {

// One sequence per micro-batch, fused attention, op-level selective recompute.
PlanSpec op_sac_plan(int global_batch_size) {
  PlanSpec p;
  p.micro_batch_size = 1;
  p.global_batch_size = global_batch_size;
  p.flash_attention = true;
  p.recompute = Recompute::kSelectiveOp;
  return p;
}

double share_of(const ModelSpec& m, OpRole role) {
  LayerOpContext c;
  c.flash_attention = true;
  for (const LayerOp& op : layer_forward_ops(m, c)) {
    if (op.role == role) return op_sac_recomputed_share(op, m);
  }
  return -1.0;
}

// torchtitan counts wq, wk, wv, wo, w1, w3, w2 and recomputes the even ones:
// wk (1024 of QKV's 6144 columns in Llama 3 8B), wo, w3 (half of the fused
// w1|w3). Ungated (GPT: wq, wk, wv, wo, w1, w2): wk (a third of QKV), wo, w2.
TEST(OpSac, RecomputesEveryOtherMatmul) {
  const ModelSpec llama = testing::llama3_8b();
  EXPECT_DOUBLE_EQ(share_of(llama, OpRole::kQkv), 1024.0 / 6144.0);
  EXPECT_DOUBLE_EQ(share_of(llama, OpRole::kProj), 1.0);
  EXPECT_DOUBLE_EQ(share_of(llama, OpRole::kFc1), 0.5);
  EXPECT_DOUBLE_EQ(share_of(llama, OpRole::kFc2), 0.0);
  const ModelSpec gpt = testing::gpt_7_5b();
  EXPECT_DOUBLE_EQ(share_of(gpt, OpRole::kQkv), 1.0 / 3.0);
  EXPECT_DOUBLE_EQ(share_of(gpt, OpRole::kProj), 1.0);
  EXPECT_DOUBLE_EQ(share_of(gpt, OpRole::kFc1), 0.0);
  EXPECT_DOUBLE_EQ(share_of(gpt, OpRole::kFc2), 1.0);
}

// Recomputed FLOPs per sequence and layer: 2 s h (kv + h + f) for wk, wo, w3.
TEST(OpSac, HardwareFlopsCountTheRecomputedMatmuls) {
  const ModelSpec m = testing::llama3_8b();
  const StepFlops f = step_flops(m, op_sac_plan(64));
  const double s = 8192, h = 4096, kv = 1024, ffn = 14336;
  const double per_layer = 2.0 * s * h * (kv + h + ffn);
  EXPECT_NEAR(f.hardware_flops - f.model_flops, 64 * 32 * per_layer, 1e-9 * f.model_flops);
}

// Kept per layer (bf16, tp 1, one sequence of 8192): the layer input, Q and V,
// the attention output and its fp32 log-sum-exp per head and row, w1's and w2's
// outputs: 2s(h + h + kv + h + f + h) + 4 a s bytes.
TEST(OpSac, KeepsTheOddMatmulsOutputsAndTheAttentionOutput) {
  const ModelSpec m = testing::llama3_8b();
  PlanSpec p = op_sac_plan(1);
  const double s = 8192, h = 4096, kv = 1024, f = 14336, a = 32;
  EXPECT_DOUBLE_EQ(layer_activation_bytes(m, p).total(), 2.0 * s * (4.0 * h + kv + f) + 4.0 * a * s);
  p.recompute = Recompute::kSelective;  // Megatron's keeps every GEMM input: more
  EXPECT_GT(layer_activation_bytes(m, p).total(), 2.0 * s * (4.0 * h + kv + f) + 4.0 * a * s);
}

TEST(OpSac, NeedsFusedAttention) {
  try {
    read_plan_spec(nlohmann::json::parse(R"({"tp": 1, "pp": 1, "micro_batch_size": 1, "global_batch_size": 8,
        "recompute": "selective_op"})"),
                   "plan.json");
    FAIL() << "selective_op without flash_attention";
  } catch (const InputError& e) {
    EXPECT_EQ(e.json_path(), "$.recompute");
  }
}

// The replay before each layer's backward: the memory-bound ops and the three
// recomputed GEMM slices, at 10 us a GEMM (GemmCountCosts) and nothing else.
TEST(OpSac, TheLayersBackwardStartsWithItsReplay) {
  const ModelSpec m = testing::llama3_8b();
  const sim::testing::GemmCountCosts costs(10'000, m.vocab_size);
  const sim::BlockSegments b = sim::layer_segments(m, op_sac_plan(1), costs);
  ASSERT_EQ(b.recompute.size(), 1u);
  std::vector<std::string> gemms;
  for (const sim::DetailOp& op : b.recompute[0].ops) {
    if (op.category == sim::Category::kGemm) gemms.push_back(op.name);
  }
  EXPECT_EQ(gemms, (std::vector<std::string>{"recompute qkv", "recompute proj", "recompute fc1"}));
  EXPECT_EQ(b.recompute[0].duration_ns, 3 * 10'000);
  EXPECT_NEAR(b.recompute[0].flops, 2.0 * 8192 * 4096 * (1024 + 4096 + 14336), 1.0);
}

}  // namespace
}  // namespace strata
