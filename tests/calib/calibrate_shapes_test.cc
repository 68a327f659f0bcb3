// The shapes `strata calibrate --model M` measures: forward, data-gradient and
// weight-gradient GEMMs of every layer GEMM and the logits, and the attention
// core, for every TP size that divides the model, by hand from the papers'
// dimensions.
#include <algorithm>

#include <gtest/gtest.h>

#include "cli/calibrate_shapes.h"

namespace strata::cli {
namespace {

bool has(const std::vector<GemmQuery>& v, GemmQuery q) {
  return std::any_of(v.begin(), v.end(), [&](const GemmQuery& g) {
    return g.m == q.m && g.n == q.n && g.k == q.k && g.batch == q.batch && g.dtype == q.dtype;
  });
}

TEST(CalibrateShapes, Gpt3At8WayTensorParallelByHand) {
  // GPT-3 175B: h 12288, 96 heads of 128, FFN 4h, seq 2048, vocab 51200.
  const CalibrationShapes s = model_shapes(load_model_spec("gpt3-175b"), {1}, DType::kBf16);
  // TP 1, 2, 4, 8 all divide 96 heads and 49152; 5 GEMMs (qkv, proj, fc1, fc2,
  // logits) x 3 passes each, and one attention core per TP.
  EXPECT_EQ(s.gemms.size(), 4u * 5u * 3u);
  EXPECT_EQ(s.attention.size(), 4u);
  const DType b = DType::kBf16;
  // TP 8, micro-batch 1: 2048 tokens.
  EXPECT_TRUE(has(s.gemms, {2048, 3 * 12288 / 8, 12288, 1, b}));  // qkv forward
  EXPECT_TRUE(has(s.gemms, {2048, 12288, 3 * 12288 / 8, 1, b}));  // qkv data gradient
  EXPECT_TRUE(has(s.gemms, {3 * 12288 / 8, 12288, 2048, 1, b}));  // qkv weight gradient
  EXPECT_TRUE(has(s.gemms, {2048, 12288, 12288 / 8, 1, b}));      // proj forward
  EXPECT_TRUE(has(s.gemms, {2048, 49152 / 8, 12288, 1, b}));      // fc1 forward
  EXPECT_TRUE(has(s.gemms, {49152 / 8, 12288, 2048, 1, b}));      // fc1 weight gradient
  EXPECT_TRUE(has(s.gemms, {2048, 12288, 49152 / 8, 1, b}));      // fc2 forward
  EXPECT_TRUE(has(s.gemms, {2048, 51200 / 8, 12288, 1, b}));      // logits forward
  EXPECT_TRUE(has(s.gemms, {2048, 12288, 51200, 1, b}));          // logits data gradient at TP 1
  const auto tp8 = std::find_if(s.attention.begin(), s.attention.end(),
                                [](const AttentionQuery& a) { return a.batch_heads == 96 / 8; });
  ASSERT_NE(tp8, s.attention.end());
  EXPECT_EQ(tp8->seq, 2048);
  EXPECT_EQ(tp8->head_dim, 128);
}

TEST(CalibrateShapes, GroupedQueriesSwigluAndMicroBatches) {
  // Llama 3 70B: h 8192, 64 heads of 128, 8 KV groups, SwiGLU FFN 28672, seq 8192.
  const CalibrationShapes s = model_shapes(load_model_spec("llama3-70b"), {1, 2}, DType::kFp32);
  EXPECT_EQ(s.gemms.size(), 4u * 2u * 5u * 3u);
  const DType f = DType::kFp32;
  // TP 8, micro-batch 2: 16384 tokens; QKV is 8192/8 queries + 2 x 1 group of 128.
  EXPECT_TRUE(has(s.gemms, {16384, 1024 + 2 * 128, 8192, 1, f}));
  // SwiGLU's first linear is twice the (sharded) FFN width.
  EXPECT_TRUE(has(s.gemms, {16384, 2 * 28672 / 8, 8192, 1, f}));
  EXPECT_TRUE(has(s.gemms, {8192, 8192, 28672 / 8, 1, f}));  // fc2 forward, micro-batch 1
}

TEST(CalibrateShapes, OnlyTensorParallelSizesThatDivideTheModel) {
  ModelSpec m = load_model_spec("gpt3-175b");
  m.num_attention_heads = 6;  // head dim 2048: TP 4 and 8 do not divide 6 heads
  m.num_query_groups = 6;
  const CalibrationShapes s = model_shapes(m, {1}, DType::kBf16);
  EXPECT_EQ(s.gemms.size(), 2u * 5u * 3u);
  ASSERT_EQ(s.attention.size(), 2u);
  EXPECT_EQ(s.attention[0].batch_heads, 6);
  EXPECT_EQ(s.attention[1].batch_heads, 3);
}

// Mixtral 8x7B (8 experts of SwiGLU width 14336, top 2, h 4096, seq 4096): besides
// its attention and head, the router and each expert-parallel size's grouped GEMM
// of the routed experts: at ep 2, 4 local experts of 4096 x 2 / 4 = 2048 tokens.
TEST(CalibrateShapes, MoeModelsAddTheRouterAndGroupedExpertGemms) {
  const CalibrationShapes s = model_shapes(load_model_spec("mixtral-8x7b"), {1}, DType::kBf16);
  const DType b = DType::kBf16;
  EXPECT_TRUE(has(s.gemms, {4096, 8, 4096, 1, b}));                 // router forward
  EXPECT_TRUE(has(s.gemms, {2048, 2 * 14336, 4096, 4, b}));         // expert fc1 forward at ep 2
  EXPECT_TRUE(has(s.gemms, {2 * 14336, 4096, 2048, 4, b}));         // its weight gradient
  EXPECT_TRUE(has(s.gemms, {1024, 4096, 14336, 8, b}));             // expert fc2 forward at ep 1
  EXPECT_TRUE(has(s.gemms, {8192, 4096, 14336, 1, b}));             // ep 8: one expert, 8192 rows
}

}  // namespace
}  // namespace strata::cli
