// CostModel on the shipped datasheet profiles, against hand-computed numbers.
#include <cmath>
#include <fstream>
#include <string>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

#include "costmodel/cost_model.h"
#include "core/data_paths.h"
#include "core/error.h"

namespace strata {
namespace {

constexpr double kRel = 1e-9;

CostModel a100() { return CostModel(load_profile("a100-sxm4-80gb")); }

TEST(DatasheetGemm, LargeSquareGemmOnA100ByHand) {
  // A100 80GB: 312 TFLOP/s bf16, 108 SMs, 2039 GB/s; profile: 256x128 tiles,
  // max efficiency 0.859 (MAMF 267.9 / 312), memory efficiency 0.88, 3 us per call.
  // 8192^3: tiles = (8192/256) * (8192/128) = 32 * 64 = 2048; waves = ceil(2048/108) = 19.
  // compute = 19 waves * 108 SMs * (2*256*128*8192 FLOPs per tile) / 312e12 / 0.859
  //         = 19 * 108 * 536870912 / 312e12 / 0.859 = 4.1105456e-3 s
  // memory  = 3 * 8192^2 * 2 bytes / (2039e9 * 0.88) = 2.24407e-4 s (not binding)
  const double expected = 19.0 * 108.0 * 536870912.0 / 312e12 / 0.859 + 3e-6;
  EXPECT_NEAR(a100().gemm_seconds({8192, 8192, 8192, 1, DType::kBf16}), expected, expected * kRel);
  EXPECT_NEAR(expected, 4.1135456e-3, 1e-10);
}

TEST(DatasheetGemm, OnePercentPastAWaveCostsASecondWave) {
  CostModel model = a100();
  // n = 108 * 128: one row of 108 tiles fills the 108 SMs exactly (1.00 wave);
  // n = 110 * 128 gives 110 tiles, 1.02 waves, which runs as 2 waves.
  const double one_wave = model.gemm_seconds({256, 108 * 128, 8192, 1, DType::kBf16}) - 3e-6;
  const double two_waves = model.gemm_seconds({256, 110 * 128, 8192, 1, DType::kBf16}) - 3e-6;
  EXPECT_NEAR(two_waves / one_wave, 2.0, 1e-12);
  // One wave by hand: 108 tiles of 2*256*128*8192 FLOPs at 312e12 * 0.859.
  EXPECT_NEAR(one_wave, 108.0 * 536870912.0 / (312e12 * 0.859), 1e-15);
  // A ragged edge pads to a whole tile: m = 257 needs two tile rows.
  const double padded = model.gemm_seconds({257, 108 * 128, 8192, 1, DType::kBf16}) - 3e-6;
  EXPECT_NEAR(padded / one_wave, 2.0, 1e-12);
}

TEST(DatasheetGemm, ShallowGemmIsMemoryBound) {
  // 32768 x 32768 x 16: bytes = 2 * (32768*16 + 16*32768 + 32768^2) = 2,149,580,800;
  // memory = 2149580800 / (2039e9 * 0.88) = 1.19797e-3 s. Compute: 128 * 256 = 32768
  // tiles, ceil(32768/108) = 304 waves of 2*256*128*16 FLOPs: 304 * 108 * 1048576 /
  // (312e12 * 0.859) = 1.28455e-4 s, so memory binds.
  const double memory = 2.0 * (32768.0 * 16 + 16.0 * 32768 + 32768.0 * 32768) / (2039e9 * 0.88);
  const double compute = 304.0 * 108 * 1048576 / (312e12 * 0.859);
  ASSERT_GT(memory, compute);
  EXPECT_NEAR(a100().gemm_seconds({32768, 32768, 16, 1, DType::kBf16}), memory + 3e-6,
              (memory + 3e-6) * kRel);
}

TEST(DatasheetGemm, BatchedScoreGemmIsBoundByWritingTheScores) {
  CostModel model = a100();
  // Unfused attention scores of 96 heads: 2048x2048x128, batch 96. Compute: 8*16 =
  // 128 tiles per head, 12288 tiles, ceil(12288/108) = 114 waves of 2*256*128*128
  // FLOPs: 114 * 108 * 8388608 / (312e12 * 0.859) = 3.8536e-4 s. Memory: 96 * 2 *
  // (2048*128 + 128*2048 + 2048^2) = 905,969,664 bytes / (2039e9 * 0.88) = 5.0491e-4 s.
  const double compute = 114.0 * 108.0 * (2.0 * 256 * 128 * 128) / (312e12 * 0.859);
  const double memory = 96.0 * 2 * (2048.0 * 128 * 2 + 2048.0 * 2048) / (2039e9 * 0.88);
  ASSERT_GT(memory, compute);
  const double expected = memory + 3e-6;
  EXPECT_NEAR(model.gemm_seconds({2048, 2048, 128, 96, DType::kBf16}), expected, expected * kRel);
  // With 8x fewer heads the waves shrink (15 instead of 114) but so do the scores.
  const double compute12 = 15.0 * 108.0 * (2.0 * 256 * 128 * 128) / (312e12 * 0.859);
  const double memory12 = 12.0 * 2 * (2048.0 * 128 * 2 + 2048.0 * 2048) / (2039e9 * 0.88);
  EXPECT_NEAR(model.gemm_seconds({2048, 2048, 128, 12, DType::kBf16}),
              std::max(compute12, memory12) + 3e-6, 1e-15);
}

TEST(DatasheetGemm, ZeroSizedGemmIsFree) {
  EXPECT_EQ(a100().gemm_seconds({0, 8192, 8192, 1, DType::kBf16}), 0.0);
}

TEST(DatasheetGemm, DtypeWithoutEfficiencyIsAnInputError) {
  // The shipped profiles cite bf16/fp16 microbenchmarks only.
  CostModel model = a100();
  try {
    model.gemm_seconds({1024, 1024, 1024, 1, DType::kFp32});
    FAIL() << "expected InputError";
  } catch (const InputError& e) {
    EXPECT_EQ(e.json_path(), "$.gemm.max_efficiency");
    EXPECT_NE(e.message().find("fp32"), std::string::npos);
  }
}

TEST(DatasheetKernels, MemoryBoundIsBandwidthTimesEfficiencyPlusOverhead) {
  // 1 GB at 2039 GB/s * 0.88 = 5.5731e-4 s, + 3 us.
  const double expected = 1e9 / (2039e9 * 0.88) + 3e-6;
  EXPECT_NEAR(a100().kernel_seconds(KernelKind::kNorm, 1e9, DType::kBf16), expected, expected * kRel);
  EXPECT_EQ(a100().kernel_seconds(KernelKind::kAdam, 0.0, DType::kFp32), 0.0);
}

TEST(DatasheetAttention, FlopsOverPeakAndEfficiency) {
  CostModel model = a100();
  // GPT-3 175B at tp 8: 12 heads per GPU, b = 1, s = 2048, d = 128.
  // forward FLOPs = 4 * 12 * 2048^2 * 128 = 2.5770e10; at 312e12 * 0.73 = 1.13147e-4 s (+3 us).
  const double fwd = 4.0 * 12 * 2048.0 * 2048.0 * 128 / (312e12 * 0.73) + 3e-6;
  EXPECT_NEAR(model.attention_seconds({12, 2048, 128, false, false, DType::kBf16}), fwd, fwd * kRel);
  // Causal halves the work; backward is 2.5x the FLOPs at 0.50 efficiency.
  const double causal_bwd = 0.5 * 2.5 * 4.0 * 12 * 2048.0 * 2048.0 * 128 / (312e12 * 0.5) + 3e-6;
  EXPECT_NEAR(model.attention_seconds({12, 2048, 128, true, true, DType::kBf16}), causal_bwd,
              causal_bwd * kRel);
}

TEST(DatasheetHostCopy, LatencyPlusPcieAtEfficiency) {
  // A100: 32 GB/s per direction (PCIe 4.0 x16), 80% efficiency, 10 us.
  const double expected = 10e-6 + 1e9 / (32e9 * 0.8);
  EXPECT_NEAR(a100().host_copy_seconds(1e9), expected, expected * kRel);
}

TEST(DatasheetProfile, NoMeasurementsAndOriginsSaySo) {
  CostModel model = a100();
  EXPECT_FALSE(model.collective_seconds(CollectiveOp::kAllReduce, 8, false, 1e6).has_value());
  EXPECT_FALSE(model.collective_efficiency(CollectiveOp::kAllReduce, false).has_value());
  for (const char* s : {"gemm", "memory_bound", "attention", "host_copy", "collectives"}) {
    EXPECT_FALSE(model.calibrated(s)) << s;
  }
  std::vector<SectionOrigin> origins = model.origins();
  ASSERT_EQ(origins.size(), 5u);
  EXPECT_EQ(origins[0].section, "gemm");
  EXPECT_EQ(origins[0].origin, "datasheet");
  EXPECT_EQ(origins[4].origin, "absent");
  EXPECT_TRUE(model.fit_quality().empty());
}

// The GEMM ceiling says what it measured: the MAMF burst on A100 and H100, the
// sustained (soaked) rate on H200 (docs/validation.md, "GEMM ceiling").
TEST(DatasheetProfile, GemmCostOriginSaysBurstOrSustained) {
  for (const auto& [name, kind] : std::vector<std::pair<std::string, std::string>>{
           {"a100-sxm4-80gb", "a burst rate"}, {"h100-sxm5-80gb", "a burst rate"}, {"h200-sxm-141gb", "a sustained rate"}}) {
    const std::vector<SectionOrigin> origins = CostModel(load_profile(name)).origins();
    ASSERT_EQ(origins[0].section, "gemm");
    EXPECT_NE(origins[0].summary.find(kind), std::string::npos) << name << ": " << origins[0].summary;
  }
  nlohmann::json doc = nlohmann::json::parse(std::ifstream(resolve_data_file("a100-sxm4-80gb", "calib/profiles", "profile")));
  doc["gemm"]["ceiling"] = "peak";
  try {
    read_profile(doc, "p.json");
    FAIL() << "an unknown ceiling";
  } catch (const InputError& e) {
    EXPECT_EQ(e.json_path(), "$.gemm.ceiling");
  }
}

TEST(DatasheetProfile, EveryShippedProfileAnswers) {
  for (const char* name : {"a100-sxm4-40gb", "a100-sxm4-80gb", "h100-sxm5-80gb", "h200-sxm-141gb"}) {
    CostModel model(load_profile(name));
    const double t = model.gemm_seconds({4096, 4096, 4096, 1, DType::kBf16});
    // Never faster than peak, never slower than a third of it for a large aligned GEMM.
    const double at_peak = 2.0 * 4096.0 * 4096.0 * 4096.0 / model.profile().device.peak_flops(DType::kBf16);
    EXPECT_GT(t, at_peak) << name;
    EXPECT_LT(t, 3.0 * at_peak) << name;
    EXPECT_GT(model.host_copy_seconds(1e6), 0.0) << name;
  }
}

TEST(DatasheetProfile, H100IsFasterThanA100ByItsPeakRatioOnLargeGemms) {
  CostModel a(load_profile("a100-sxm4-80gb"));
  CostModel h(load_profile("h100-sxm5-80gb"));
  // 16384^3: A100 2048*... tiles = 64*128 = 8192: ceil(8192/108) = 76 waves, on H100
  // ceil(8192/132) = 63 waves. Ratio = (76*108/(312*0.859)) / (63*132/(989.5*0.801)).
  const GemmQuery q{16384, 16384, 16384, 1, DType::kBf16};
  const double expected = (76.0 * 108 / (312 * 0.859)) / (63.0 * 132 / (989.5 * 0.801));
  EXPECT_NEAR((a.gemm_seconds(q) - 3e-6) / (h.gemm_seconds(q) - 3e-6), expected, 1e-9);
}

Profile bare(const std::string& extra_sections) {
  const std::string text = R"({"schema": "strata-profile/1", "name": "bare", "kind": "datasheet",
    "device": {"name": "X", "backend": "cuda", "compute_units": 10, "memory_bytes": 1e10,
               "memory_bandwidth_gbytes_per_s": 1000, "peak_tflops": {"bf16": 100}}
    )" + extra_sections + "}";
  return read_profile(nlohmann::json::parse(text), "bare.json");
}

TEST(DatasheetProfile, WithoutSectionsItIsThePlainPeakRoofline) {
  CostModel model(bare(""));
  // No tiles: 1024^3 at 100 TFLOP/s = 2.147e-5 s; memory 6 MiB at 1 TB/s = 6.3e-6 s.
  EXPECT_NEAR(model.gemm_seconds({1024, 1024, 1024, 1, DType::kBf16}), 2.0 * 1024 * 1024 * 1024 / 100e12,
              1e-18);
  EXPECT_NEAR(model.kernel_seconds(KernelKind::kCopy, 1e9, DType::kBf16), 1e-3, 1e-15);
  // No PCIe bandwidth and no measured copy: offload cannot be costed.
  try {
    model.host_copy_seconds(1e6);
    FAIL() << "expected InputError";
  } catch (const InputError& e) {
    EXPECT_EQ(e.file(), "bare.json");
    EXPECT_EQ(e.json_path(), "$.device.pcie_gbytes_per_s");
  }
  // A dtype without a peak is the profile's fault, named as such.
  try {
    model.gemm_seconds({16, 16, 16, 1, DType::kFp32});
    FAIL() << "expected InputError";
  } catch (const InputError& e) {
    EXPECT_EQ(e.json_path(), "$.device.peak_tflops");
  }
}

}  // namespace
}  // namespace strata
