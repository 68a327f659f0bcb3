// The shipped MoE models against their published sizes, total and active
// parameters (each within one unit of the last digit the source states), the
// counts by hand for Mixtral 8x7B, and their FLOPs: 2 per active parameter per
// token plus attention, the count MoE papers take for MFU.
#include <cmath>

#include <gtest/gtest.h>

#include "plan/flops.h"
#include "plan/model_spec.h"
#include "plan/params.h"

namespace strata {
namespace {

struct Published {
  const char* model;
  double total_b;   // billions, as the source states it
  double active_b;
  double digit_b;   // one unit of the last digit the source gives
  const char* source;
};

// Mixtral: Mistral AI, "Mixtral of experts" (2023-12-11) and "Cheaper, Better,
// Faster, Stronger" (2024-04-17); DeepSeek-V3 Technical Report (arXiv
// 2412.19437) abstract; Qwen2 Technical Report (arXiv 2407.10671) Table 1.
const Published kPublished[] = {
    {"mixtral-8x7b", 46.7, 12.9, 0.1, "Mistral AI 2023: 46.7B total, 12.9B per token"},
    {"mixtral-8x22b", 141, 39, 1, "Mistral AI 2024: 39B active out of 141B"},
    {"deepseek-v3", 671, 37, 1, "DeepSeek-V3: 671B total, 37B activated per token"},
    {"qwen2-57b-a14b", 57, 14, 1, "Qwen2: 57B total, 14B activated"},
};

TEST(MoeParams, ShippedModelsHaveTheirPublishedSizes) {
  for (const Published& p : kPublished) {
    // The published sizes are the main model's: without a multi-token prediction
    // module (DeepSeek-V3's 14B beside its 671B; tests/sim/mtp_test.cc checks the 685B).
    ModelSpec m = load_model_spec(p.model);
    m.mtp_num_layers = 0;
    const double total = static_cast<double>(total_params(m)) / 1e9;
    const double active = static_cast<double>(active_params(m)) / 1e9;
    EXPECT_LT(std::abs(total - p.total_b), p.digit_b) << p.model << " total " << total << " B; " << p.source;
    EXPECT_LT(std::abs(active - p.active_b), p.digit_b) << p.model << " active " << active << " B; " << p.source;
  }
}

// Mixtral 8x7B by hand (h 4096, 32 layers, 32 heads of 128, 8 KV heads, f 14336,
// vocabulary 32000, RMSNorm, no biases, untied):
//   attention  4096 * (4096 + 2 * 1024) + 4096 * 4096 = 41,943,040
//   norms      2 * 4096 = 8,192;  router 8 * 4096 = 32,768
//   expert     3 * 4096 * 14336 = 176,160,768
//   layer      41,984,000 + 8 * 176,160,768 = 1,451,270,144
//   embedding and output layer 2 * 32000 * 4096 = 262,144,000, final norm 4,096
//   total      32 * 1,451,270,144 + 262,148,096 = 46,702,792,704
//   active     32 * (41,984,000 + 2 * 176,160,768) + 262,148,096 = 12,879,925,248
TEST(MoeParams, Mixtral8x7bByHand) {
  const ModelSpec m = load_model_spec("mixtral-8x7b");
  EXPECT_EQ(expert_params(m), 176160768);
  EXPECT_EQ(moe_layer_params(m), 1451270144);
  EXPECT_EQ(total_params(m), 46702792704);
  EXPECT_EQ(active_params(m), 12879925248);
}

// DeepSeek-V3's first three layers are dense (moe_layer_freq [0]*3 + [1]*58):
// their MLP is the 18432-wide dense one; the MoE layers carry 1 shared + 256
// routed experts of 2048 and a 256 x 7168 router.
TEST(MoeParams, DeepSeekV3DenseAndMoeLayers) {
  ModelSpec m = load_model_spec("deepseek-v3");
  m.mtp_num_layers = 0;  // the main model (tests/sim/mtp_test.cc counts its MTP module)
  EXPECT_EQ(m.num_moe_layers(), 58);
  EXPECT_FALSE(m.is_moe_layer(2));
  EXPECT_TRUE(m.is_moe_layer(3));
  // Multi-head latent attention (DeepSeek-V3 report section 4.2: 128 heads,
  // query latent 1536, key/value latent 512, heads of 128 + a 64-wide rotary
  // part, values of 128): wq_a, q_norm, wq_b, wkv_a, kv_norm, wkv_b, wo.
  const std::int64_t attention = 7168LL * 1536 + 1536 + 1536LL * 128 * 192 + 7168LL * 576 + 512 +
                                 512LL * 128 * 256 + 128LL * 128 * 7168;
  EXPECT_EQ(attention, 187'107'328);  // the figure the shipped model's notes derive
  const std::int64_t norms = 2 * 7168;
  EXPECT_EQ(layer_params(m), attention + norms + 3LL * 7168 * 18432);
  EXPECT_EQ(expert_params(m), 3LL * 7168 * 2048);
  EXPECT_EQ(moe_layer_params(m), attention + norms + 256LL * 7168 + 257 * expert_params(m));
  const std::int64_t head = 2LL * 129280 * 7168 + 7168;
  EXPECT_EQ(total_params(m), 3 * layer_params(m) + 58 * moe_layer_params(m) + head);
  EXPECT_EQ(active_params(m), total_params(m) - 58LL * (256 - 8) * expert_params(m));
}

TEST(MoeParams, DenseModelsAreAllActive) {
  const ModelSpec m = load_model_spec("llama3-8b");
  EXPECT_EQ(active_params(m), total_params(m));
}

// The forward FLOPs of one sequence are 2 per active parameter per token (every
// weight GEMM; norms and the input embedding do no GEMM) plus the attention
// core's 4 * s^2 * (heads * head_dim) per layer: model FLOPs = 3x that per
// sequence, as the MoE papers count MFU (6 * N_active * tokens + attention).
TEST(MoeFlops, ForwardIsTwoFlopsPerActiveParameterPlusAttention) {
  for (const char* name : {"mixtral-8x7b", "mixtral-8x22b", "qwen2-57b-a14b", "deepseek-v3"}) {
    ModelSpec m = load_model_spec(name);
    m.mtp_num_layers = 0;  // DeepSeek-V3's MTP module: tests/sim/mtp_test.cc
    const double s = m.seq_length;
    // MLA's latent norms (DeepSeek-V3: 1536 + 512 per layer) do no GEMM either.
    const double latent_norms = m.mla.enabled ? m.mla.q_lora_rank + m.mla.kv_lora_rank : 0.0;
    const double norms =
        static_cast<double>(m.num_layers) * (2 * m.hidden_size + latent_norms) + m.hidden_size;  // RMSNorm
    const double gemm_params =
        static_cast<double>(active_params(m)) - static_cast<double>(word_embedding_params(m)) - norms;
    // Scores over the key's head size, values over the value's: 2 s^2 each per head.
    const double head_sizes = m.mla.enabled ? m.mla.q_head_dim() + m.mla.v_head_dim : 2.0 * m.head_dim();
    const double attention = m.num_layers * 2.0 * s * s * m.num_attention_heads * head_sizes;
    EXPECT_NEAR(forward_flops_per_sequence(m) / (2.0 * s * gemm_params + attention), 1.0, 1e-12) << name;
    PlanSpec p;
    p.global_batch_size = 16;
    p.flash_attention = true;
    const StepFlops f = step_flops(m, p);
    EXPECT_NEAR(f.model_flops / (3.0 * 16 * (2.0 * s * gemm_params + attention)), 1.0, 1e-12) << name;
    EXPECT_EQ(f.hardware_flops, f.model_flops);  // no recompute
  }
}

// Full recompute repeats the forward of every layer, dense and MoE alike.
TEST(MoeFlops, FullRecomputeRepeatsEveryLayer) {
  ModelSpec m = load_model_spec("deepseek-v3");
  m.mtp_num_layers = 0;
  PlanSpec p;
  p.global_batch_size = 4;
  p.flash_attention = true;
  const StepFlops none = step_flops(m, p);
  p.recompute = Recompute::kFull;
  const StepFlops full = step_flops(m, p);
  const double head = 2.0 * m.seq_length * static_cast<double>(word_embedding_params(m));  // logits
  EXPECT_NEAR((full.hardware_flops - none.model_flops) / (4.0 * (none.forward_flops_per_sequence - head)), 1.0, 1e-12);
}

}  // namespace
}  // namespace strata
