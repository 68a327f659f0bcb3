#include "plan/flops.h"

#include <gtest/gtest.h>

#include "plan/layer_ops.h"
#include "test_models.h"

namespace strata {
namespace {

using testing::gpt3_175b;
using testing::llama3_8b;
using testing::plan;

struct FlopsCase {
  int tp, pp, dp, mbs, gbs;
};

void PrintTo(const FlopsCase& c, std::ostream* os) {
  *os << "tp" << c.tp << " pp" << c.pp << " dp" << c.dp << " mbs" << c.mbs << " gbs" << c.gbs;
}

class Gpt3Flops : public ::testing::TestWithParam<FlopsCase> {};

// Megatron's 72*B*s*L*h^2*(1 + s/(6h) + V/(12hL)) (Narayanan et al. 2021, appendix).
TEST_P(Gpt3Flops, ModelFlopsEqualMegatronFormula) {
  const FlopsCase c = GetParam();
  ModelSpec m = gpt3_175b();
  PlanSpec p = plan(c.tp, c.pp, c.dp, c.mbs, c.gbs);
  StepFlops f = step_flops(m, p);
  const double expected = 72.0 * c.gbs * 2048.0 * 96 * 12288.0 * 12288.0 *
                          (1.0 + 2048.0 / (6 * 12288.0) + 51200.0 / (12 * 12288.0 * 96));
  EXPECT_NEAR(f.model_flops / expected, 1.0, 1e-12);
  EXPECT_NEAR(megatron_flops(m, c.gbs) / expected, 1.0, 1e-12);
  EXPECT_DOUBLE_EQ(f.hardware_flops, f.model_flops);  // no recompute
}

// With full recompute: 96*B*s*L*h^2*(1 + s/(6h) + V/(16hL)).
TEST_P(Gpt3Flops, FullRecomputeEqualsMegatronFormula) {
  const FlopsCase c = GetParam();
  ModelSpec m = gpt3_175b();
  PlanSpec p = plan(c.tp, c.pp, c.dp, c.mbs, c.gbs);
  p.recompute = Recompute::kFull;
  StepFlops f = step_flops(m, p);
  const double expected = 96.0 * c.gbs * 2048.0 * 96 * 12288.0 * 12288.0 *
                          (1.0 + 2048.0 / (6 * 12288.0) + 51200.0 / (16 * 12288.0 * 96));
  EXPECT_NEAR(f.hardware_flops / expected, 1.0, 1e-12);
  EXPECT_NEAR(megatron_flops_full_recompute(m, c.gbs) / expected, 1.0, 1e-12);
}

INSTANTIATE_TEST_SUITE_P(Plans, Gpt3Flops,
                         ::testing::Values(FlopsCase{8, 8, 16, 1, 1536},  // 1,024 GPUs
                                           FlopsCase{8, 16, 8, 1, 1536},  // 1,024 GPUs
                                           FlopsCase{4, 8, 32, 2, 2048},  // 1,024 GPUs
                                           FlopsCase{8, 8, 1, 1, 64}));   // Korthikanti et al.

// GPT-3 175B forward FLOPs per token: 24h^2 + 4sh per layer, 2hV for the logits;
// at s=2048 that is about 2 * 174.6e9 (the 2N rule) plus attention.
TEST(Flops, Gpt3ForwardPerTokenHandCount) {
  ModelSpec m = gpt3_175b();
  const double h = 12288, s = 2048, L = 96, V = 51200;
  const double per_token = L * (24 * h * h + 4 * s * h) + 2 * h * V;
  EXPECT_NEAR(forward_flops_per_sequence(m) / (s * per_token), 1.0, 1e-12);
}

// Llama 3 8B: GQA (8 KV heads of 128) and SwiGLU (three h x f matrices), counted by hand.
TEST(Flops, GqaSwigluHandCount) {
  ModelSpec m = llama3_8b();
  const double h = 4096, s = 8192, L = 32, V = 128256, f = 14336, kv = 8 * 128;
  const double qkv = 2 * h * (h + 2 * kv);
  const double proj = 2 * h * h;
  const double mlp = 3 * 2 * h * f;
  const double attention = 2 * s * h + 2 * s * h;  // scores and values, per token
  const double per_token = L * (qkv + proj + mlp + attention) + 2 * h * V;
  EXPECT_NEAR(forward_flops_per_sequence(m) / (s * per_token), 1.0, 1e-12);
  PlanSpec p = plan(2, 1, 4, 1, 64);
  EXPECT_NEAR(step_flops(m, p).model_flops / (3 * 64 * s * per_token), 1.0, 1e-12);
}

// Selective recompute repeats only the attention core: 4*s^2*h per layer and sequence.
TEST(Flops, SelectiveRecomputeAddsAttentionCore) {
  ModelSpec m = gpt3_175b();
  PlanSpec p = plan(8, 8, 1, 1, 64);
  p.recompute = Recompute::kSelective;
  StepFlops f = step_flops(m, p);
  const double extra = 64.0 * 96 * 4 * 2048.0 * 2048.0 * 12288.0;
  EXPECT_NEAR((f.hardware_flops - f.model_flops) / extra, 1.0, 1e-12);
}

// One GPU's share of a layer under tp is exactly 1/tp of the layer's GEMM FLOPs.
TEST(Flops, TensorParallelSplitsLayerFlopsExactly) {
  ModelSpec m = llama3_8b();
  LayerOpContext one;
  LayerOpContext eight;
  eight.tp = 8;
  double total1 = 0, total8 = 0;
  for (const LayerOp& op : layer_forward_ops(m, one)) total1 += op.flops;
  for (const LayerOp& op : layer_forward_ops(m, eight)) total8 += op.flops;
  EXPECT_NEAR(total8 * 8 / total1, 1.0, 1e-12);
}

}  // namespace
}  // namespace strata

namespace strata {
namespace {

// Each op says what it is: the roles the cost side and the tensor-parallel
// collectives dispatch on, in Megatron's order (GPT-3: dropout on, no flash).
TEST(LayerOps, RolesSayWhatEachOpIs) {
  LayerOpContext c;
  c.tp = 8;
  std::vector<OpRole> roles;
  for (const LayerOp& op : layer_forward_ops(testing::gpt3_175b(), c)) roles.push_back(op.role);
  EXPECT_EQ(roles, (std::vector<OpRole>{OpRole::kNorm, OpRole::kQkv, OpRole::kAttnScores, OpRole::kSoftmax,
                                        OpRole::kDropout, OpRole::kAttnValues, OpRole::kProj, OpRole::kResidual,
                                        OpRole::kNorm, OpRole::kFc1, OpRole::kActivation, OpRole::kFc2,
                                        OpRole::kResidual}));
  c.flash_attention = true;
  EXPECT_EQ(layer_forward_ops(testing::gpt3_175b(), c)[2].role, OpRole::kFlashAttention);
  std::vector<OpRole> head;
  for (const LayerOp& op : head_forward_ops(testing::gpt3_175b(), c)) head.push_back(op.role);
  EXPECT_EQ(head, (std::vector<OpRole>{OpRole::kNorm, OpRole::kLogits, OpRole::kCrossEntropy}));
  // Megatron's column-parallel layers split their output, the row-parallel ones their input.
  EXPECT_TRUE(is_column_parallel(OpRole::kQkv) && is_column_parallel(OpRole::kFc1) &&
              is_column_parallel(OpRole::kLogits));
  EXPECT_TRUE(is_row_parallel(OpRole::kProj) && is_row_parallel(OpRole::kFc2));
  EXPECT_FALSE(is_column_parallel(OpRole::kProj) || is_row_parallel(OpRole::kQkv) ||
               is_column_parallel(OpRole::kAttnScores));
}

}  // namespace
}  // namespace strata
