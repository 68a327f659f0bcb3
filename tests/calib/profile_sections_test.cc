// Strict reading of the cost sections: every mistake names the file, the JSON
// path and what is allowed; what is written reads back the same.
#include <gtest/gtest.h>

#include "costmodel/cost_model.h"
#include "core/error.h"
#include "core/json_reader.h"

namespace strata {
namespace {

const char* kDevice = R"("schema": "strata-profile/1", "name": "p", "kind": "datasheet",
  "device": {"name": "X", "backend": "cuda", "compute_units": 10, "memory_bytes": 1e10,
             "memory_bandwidth_gbytes_per_s": 1000, "peak_tflops": {"bf16": 100}})";

const char* kGemm = R"("gemm": {"origin": "datasheet", "tile_m": 128, "tile_n": 128, "overhead_us": 2,
  "max_efficiency": {"bf16": 0.8}, "sources": {"max_efficiency": "s", "tile": "s", "overhead_us": "s"}})";

struct BadSection {
  const char* name;
  std::string sections;     // appended after the device
  const char* path;         // expected JSON path
  const char* message;      // expected part of the message
};

class BadProfiles : public ::testing::TestWithParam<BadSection> {};

TEST_P(BadProfiles, NameFilePathAndWhatIsAllowed) {
  const BadSection& c = GetParam();
  const std::string text = std::string("{") + kDevice + ", " + c.sections + "}";
  try {
    Profile p = read_profile(json::parse_text(text, "bad.json"), "bad.json");
    CostModel model(p);
    FAIL() << "accepted: " << text;
  } catch (const InputError& e) {
    EXPECT_EQ(e.file(), "bad.json");
    EXPECT_EQ(e.json_path(), c.path) << e.what();
    EXPECT_NE(e.message().find(c.message), std::string::npos) << e.what();
  }
}

INSTANTIATE_TEST_SUITE_P(
    Calib, BadProfiles,
    ::testing::Values(
        BadSection{"unknown_key",
                   R"("gemm": {"origin": "datasheet", "tile_m": 128, "tile_n": 128, "overhead_us": 2,
                      "max_efficiency": {"bf16": 0.8}, "sources": {"max_efficiency": "s", "tile": "s",
                      "overhead_us": "s"}, "tile_k": 32})",
                   "$.gemm.tile_k", "did you mean \"tile_m\""},
        BadSection{"efficiency_above_one",
                   R"("gemm": {"origin": "datasheet", "tile_m": 128, "tile_n": 128, "overhead_us": 2,
                      "max_efficiency": {"bf16": 1.3}})",
                   "$.gemm.max_efficiency.bf16", "expected a number in [0.001, 1]"},
        BadSection{"missing_source",
                   R"("gemm": {"origin": "datasheet", "tile_m": 128, "tile_n": 128, "overhead_us": 2,
                      "max_efficiency": {"bf16": 0.8}, "sources": {"tile": "s", "overhead_us": "s"}})",
                   "$.gemm.sources", "needs a source for \"max_efficiency\""},
        BadSection{"measured_without_points",
                   R"("gemm": {"origin": "measured", "tile_m": 128, "tile_n": 128, "overhead_us": 2,
                      "max_efficiency": {"bf16": 0.8}, "sources": {"max_efficiency": "s", "tile": "s",
                      "overhead_us": "s"}})",
                   "$.gemm.origin", "no \"measured\" GEMMs"},
        BadSection{"measured_dtype_without_peak",
                   R"("gemm": {"origin": "measured", "tile_m": 128, "tile_n": 128, "overhead_us": 2,
                      "max_efficiency": {"bf16": 0.8}, "sources": {"max_efficiency": "s", "tile": "s",
                      "overhead_us": "s"}, "measured": {"fp32": [{"m": 64, "n": 64, "k": 64,
                      "time_us": 5}]}})",
                   "$.gemm.measured.fp32", "no fp32 peak"},
        BadSection{"negative_time",
                   std::string(kGemm) + R"(, "memory_bound": {"origin": "measured", "efficiency": 0.9,
                      "overhead_us": 2, "sources": {"efficiency": "s", "overhead_us": "s"},
                      "measured": {"copy": {"alpha_us": 1, "beta_gbytes_per_s": 10, "points": [
                      {"bytes": 1024, "time_us": 2}, {"bytes": 4096, "time_us": -3}]}}})",
                   "$.memory_bound.measured.copy.points[1].time_us", "expected a number"},
        BadSection{"negative_spread",
                   R"("collectives": {"origin": "measured", "measured": [{"op": "all_reduce",
                      "group_size": 2, "inter_node": false, "alpha_us": 5, "beta_gbytes_per_s": 3,
                      "points": [{"bytes": 1024, "time_us": 6, "spread": -0.1}, {"bytes": 4096, "time_us": 7}]}]})",
                   "$.collectives.measured[0].points[0].spread", "expected a number in [0, inf]"},
        BadSection{"rank_spread_of_one_rank", R"("rank_spread": {"ranks": 1, "kernels": 30, "median_cv": 0.01})",
                   "$.rank_spread.ranks", "expected an integer in [2,"},
        BadSection{"rank_spread_negative", R"("rank_spread": {"ranks": 2, "kernels": 30, "median_cv": -0.01})",
                   "$.rank_spread.median_cv", "expected a number in [0, 10]"},
        BadSection{"sizes_not_increasing",
                   R"("collectives": {"origin": "measured", "measured": [{"op": "all_reduce",
                      "group_size": 2, "inter_node": false, "alpha_us": 5, "beta_gbytes_per_s": 3,
                      "points": [{"bytes": 4096, "time_us": 7}, {"bytes": 1024, "time_us": 6}]}]})",
                   "$.collectives.measured[0].points[1].bytes", "strictly increasing"},
        BadSection{"unknown_collective",
                   R"("collectives": {"origin": "measured", "measured": [{"op": "allreduce",
                      "group_size": 2, "inter_node": false, "alpha_us": 5, "beta_gbytes_per_s": 3,
                      "points": [{"bytes": 1024, "time_us": 6}, {"bytes": 4096, "time_us": 7}]}]})",
                   "$.collectives.measured[0].op", "\"all_reduce\""},
        BadSection{"duplicate_collective",
                   R"("collectives": {"origin": "measured", "measured": [
                      {"op": "all_reduce", "group_size": 2, "inter_node": false, "alpha_us": 5,
                       "beta_gbytes_per_s": 3, "points": [{"bytes": 1024, "time_us": 6},
                       {"bytes": 4096, "time_us": 7}]},
                      {"op": "all_reduce", "group_size": 2, "inter_node": false, "alpha_us": 5,
                       "beta_gbytes_per_s": 3, "points": [{"bytes": 1024, "time_us": 6},
                       {"bytes": 4096, "time_us": 7}]}]})",
                   "$.collectives.measured[1]", "duplicate curve"},
        BadSection{"fit_quality_inconsistent",
                   R"("fit_quality": {"gemm": {"held_out": 3, "median_rel_error": 0.2,
                      "max_rel_error": 0.1}})",
                   "$.fit_quality.gemm.max_rel_error", "at least median_rel_error"},
        BadSection{"provenance_backend",
                   R"("provenance": {"host": "h", "backend": "tpu", "device": "d", "date": "2025",
                      "command_line": "c", "strata_version": "0.1.0", "ranks": 1, "threads_per_rank": 1})",
                   "$.provenance.backend", "\"cpu\""},
        BadSection{"section_not_object", R"("attention": [1, 2])", "$.attention",
                   "expected a JSON object"},
        BadSection{"host_copy_without_pcie",
                   R"("host_copy": {"origin": "datasheet", "efficiency": 0.8, "latency_us": 10,
                      "sources": {"efficiency": "s", "latency_us": "s"}})",
                   "$.device.pcie_gbytes_per_s", "host link bandwidth"}),
    [](const ::testing::TestParamInfo<BadSection>& param) { return std::string(param.param.name); });

TEST(ProfileSections, ASpreadHasNoUpperBound) {
  // Three samples on a busy host, one descheduled for 100 ms on a 50 us GEMM:
  // the spread is what was measured, however large (strata calibrate warns).
  const std::string text = std::string("{") + kDevice + R"(, "gemm": {"origin": "measured", "tile_m": 128,
    "tile_n": 128, "overhead_us": 2, "max_efficiency": {"bf16": 0.8}, "sources": {"max_efficiency": "s",
    "tile": "s", "overhead_us": "s"}, "measured": {"bf16": [{"m": 64, "n": 64, "k": 64, "time_us": 50,
    "spread": 177.4}, {"m": 128, "n": 64, "k": 64, "time_us": 90, "spread": 0.02}]}}})";
  CostModel model(read_profile(json::parse_text(text, "busy.json"), "busy.json"));
  ASSERT_TRUE(model.calibrated("gemm"));
  EXPECT_DOUBLE_EQ(model.gemm_section()->measured.at(DType::kBf16)[0].spread, 177.4);
  EXPECT_NEAR(model.gemm_seconds({64, 64, 64, 1, DType::kBf16}), 50e-6, 1e-12);
}

TEST(ProfileSections, ShippedProfilesReadBackByteForByte) {
  for (const char* name : {"a100-sxm4-40gb", "a100-sxm4-80gb", "h100-sxm5-80gb", "h200-sxm-141gb"}) {
    Profile p = load_profile(name);
    CostModel model(p);
    ASSERT_TRUE(model.gemm_section().has_value()) << name;
    const std::string once = to_json(*model.gemm_section()).dump();
    GemmSection again = read_gemm_section(nlohmann::json::parse(once), "x", "$.gemm");
    EXPECT_EQ(to_json(again).dump(), once) << name;
    // Every datasheet figure carries its source.
    for (const char* f : {"max_efficiency", "tile", "overhead_us"}) {
      EXPECT_FALSE(model.gemm_section()->sources.at(f).empty()) << name << " " << f;
    }
  }
}

}  // namespace
}  // namespace strata
