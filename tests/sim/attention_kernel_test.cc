// Fused attention costed at the rates the kernel's published benchmarks measured
// (issue 23): the time of a pass is the benchmarks' FLOP count over the figure's
// rate, at the figure's sequence lengths; in between interpolated in log2(seq).
#include <cmath>

#include <gtest/gtest.h>

#include "core/error.h"
#include "costmodel/attention_kernel.h"
#include "costmodel/framework_profile.h"
#include "costmodel/profile.h"
#include "sim/costs/profile_op_costs.h"

namespace strata::sim {
namespace {

constexpr char kA100[] = "NVIDIA A100-SXM4-80GB";
constexpr char kH100[] = "NVIDIA H100 80GB HBM3";

// The FA2 paper's benchmark shape: 16k tokens, hidden 2048 = 16 heads of 128.
std::int64_t heads_at(std::int64_t seq) { return 16384 / seq * 16; }

// Forward FLOPs as the benchmarks count them: 4 s^2 d per head, halved (causal).
double forward_flops(std::int64_t batch_heads, std::int64_t seq, std::int64_t d) {
  return 0.5 * 4.0 * static_cast<double>(batch_heads) * static_cast<double>(seq * seq) * static_cast<double>(d);
}

// FlashAttention-2 on A100, causal, head dim 128: forward + backward at the FA2
// paper's Fig. 4(d) rates, 133, 173 and 189 TFLOP/s at 1k, 4k and 16k.
TEST(AttentionKernel, A100FlashAttention2CostsWhatTheFa2PaperMeasured) {
  const Profile profile = load_profile("a100-sxm4-80gb");
  const CostModel model(profile);
  const ProfileOpCosts costs(model, &attention_kernel("flash-attention-2"), kA100);
  for (auto [seq, tflops] : {std::pair<std::int64_t, double>{1024, 133}, {4096, 173}, {16384, 189}}) {
    const std::int64_t bh = heads_at(seq);
    const double both = costs.attention({bh, seq, seq, 128, true}, false, DType::kBf16).seconds() +
                        costs.attention({bh, seq, seq, 128, true}, true, DType::kBf16).seconds();
    EXPECT_NEAR(both, 3.5 * forward_flops(bh, seq, 128) / (tflops * 1e12), 2e-9) << "seq " << seq;
  }
}

// cuDNN on H100 (FA3 paper Fig. 5(d), causal forward, head dim 128): 484 TFLOP/s
// at 2k, 518 at 4k; 3k lies halfway in log2 between them.
TEST(AttentionKernel, RatesInterpolateInLogSequenceAndHoldFlatOutside) {
  const AttentionKernel& cudnn = attention_kernel("cudnn-fused-attention");
  auto forward = [&](std::int64_t seq) { return cudnn.rate(kH100, true, 128, seq, false)->flops_per_s / 1e12; };
  EXPECT_NEAR(forward(2048), 484, 1e-9);
  EXPECT_NEAR(forward(4096), 518, 1e-9);
  const double t = std::log2(3072.0) - 11.0;
  EXPECT_NEAR(forward(3072), 484 + t * (518 - 484), 1e-9);
  EXPECT_NEAR(forward(32768), 539, 1e-9);  // held at 16k's
  EXPECT_NEAR(forward(256), 315, 1e-9);    // held at 512's
  // No causal backward is published: the causal-free one stands for it (516 at 16k).
  EXPECT_NEAR(cudnn.rate(kH100, true, 128, 16384, true)->flops_per_s / 1e12, 516, 1e-9);
  EXPECT_FALSE(cudnn.rate(kH100, true, 128, 16384, true)->curve->causal);
}

TEST(AttentionKernel, NearestHeadDimensionAndPassFallbacks) {
  const AttentionKernel& fa2 = attention_kernel("flash-attention-2");
  // Head dim 96 is nearer 128 than 64 in log2; 80 nearer 64.
  EXPECT_EQ(fa2.rate(kA100, true, 96, 2048, false)->curve->head_dim, 128);
  EXPECT_EQ(fa2.rate(kA100, true, 80, 2048, false)->curve->head_dim, 64);
  // H100: the forward is published per pass (FA3 paper Fig. 5), the causal
  // backward only as the FA2 paper's forward + backward (Fig. 7(d): 328 at 16k).
  EXPECT_EQ(fa2.rate(kH100, true, 128, 16384, false)->curve->pass, AttentionPass::kForward);
  const auto backward = fa2.rate(kH100, true, 128, 16384, true);
  EXPECT_EQ(backward->curve->pass, AttentionPass::kForwardBackward);
  EXPECT_NEAR(backward->flops_per_s / 1e12, 328, 1e-9);
  // A GPU no figure measured: no rate; the device profile's model is used instead.
  EXPECT_FALSE(fa2.rate("NVIDIA H200", true, 128, 4096, false));
  const Profile h200 = load_profile("h200-sxm-141gb");
  const CostModel model(h200);
  const ProfileOpCosts with(model, &fa2, h200.device.name), without(model);
  EXPECT_EQ(with.attention({64, 4096, 4096, 128, true}, false, DType::kBf16).ns(),
            without.attention({64, 4096, 4096, 128, true}, false, DType::kBf16).ns());
}

// Transformer Engine picks by GPU: cuDNN on H100, FlashAttention-2 elsewhere.
TEST(AttentionKernel, FrameworksNameTheirKernelPerDevice) {
  const FrameworkProfile nemo = load_framework_profile("nemo-2024");
  ASSERT_TRUE(nemo.attention);
  EXPECT_EQ(nemo.attention->kernel_for(kH100), "cudnn-fused-attention");
  EXPECT_EQ(nemo.attention->kernel_for(kA100), "flash-attention-2");
  EXPECT_EQ(load_framework_profile("composer-fsdp1").attention->kernel, "flash-attention-1");
  EXPECT_FALSE(load_framework_profile("strata-runtime").attention);  // its own kernel: the device profile's
}

TEST(AttentionKernel, BadCurvesNameTheirPath) {
  const auto curve = [](const char* seq, const char* tflops) {
    return nlohmann::json::parse(std::string(R"({"name": "k", "description": "d", "source": "s", "curves": [
        {"devices": ["NVIDIA A100-SXM4-80GB"], "pass": "forward", "causal": true, "head_dim": 128,
         "seq": )") + seq + R"(, "tflops": )" + tflops + R"(, "source": "s"}]})");
  };
  try {
    read_attention_kernel(curve("[512, 1024]", "[100]"), "k.json");
    FAIL() << "a rate missing";
  } catch (const InputError& e) {
    EXPECT_EQ(e.json_path(), "$.curves[0].tflops");
  }
  try {
    read_attention_kernel(curve("[1024, 512]", "[100, 120]"), "k.json");
    FAIL() << "decreasing lengths";
  } catch (const InputError& e) {
    EXPECT_EQ(e.json_path(), "$.curves[0].seq[1]");
  }
  EXPECT_NO_THROW(read_attention_kernel(curve("[512, 1024]", "[100, 120]"), "k.json"));
}

}  // namespace
}  // namespace strata::sim
