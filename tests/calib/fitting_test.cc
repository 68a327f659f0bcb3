// Fitting recovers known synthetic curves: alpha-beta lines, bent size curves,
// and a shape-dependent GEMM efficiency with wave quantization on top.
#include <cmath>

#include <gtest/gtest.h>

#include "costmodel/cost_model.h"
#include "costmodel/fitting.h"
#include "costmodel/log_interpolator.h"
#include "costmodel/size_curve.h"

namespace strata {
namespace {

// A synthetic device: 100 SMs, 100 TFLOP/s bf16, 1 TB/s; 128x128 tiles.
Profile synthetic_device() {
  const char* text = R"({"schema": "strata-profile/1", "name": "synthetic", "kind": "calibrated",
    "device": {"name": "synthetic", "backend": "cuda", "compute_units": 100, "memory_bytes": 1e10,
               "memory_bandwidth_gbytes_per_s": 1000, "peak_tflops": {"bf16": 100},
               "pcie_gbytes_per_s": 25}})";
  return read_profile(nlohmann::json::parse(text), "synthetic.json");
}

GemmSection synthetic_gemm_base() {
  GemmSection s;
  s.tile_m = 128;
  s.tile_n = 128;
  s.overhead_s = 0.0;
  s.max_efficiency[DType::kBf16] = 0.8;
  s.sources = {{"max_efficiency", "synthetic"}, {"tile", "synthetic"}, {"overhead_us", "synthetic"}};
  return s;
}

TEST(AlphaBetaFit, RecoversAnExactLine) {
  // t = 20 us + bytes / 12.5 GB/s over 1 KiB .. 64 MiB.
  const double alpha = 20e-6, beta = 12.5e9;
  std::vector<SizePoint> pts;
  for (double b = 1024; b <= 64 * 1024 * 1024; b *= 2) pts.push_back({b, alpha + b / beta, 0.0});
  AlphaBeta fit = fit_alpha_beta(pts);
  EXPECT_NEAR(fit.alpha_s, alpha, alpha * 1e-9);
  EXPECT_NEAR(fit.beta_bytes_per_s, beta, beta * 1e-9);
}

TEST(AlphaBetaFit, RecoversANoisyLineWithinOnePercent) {
  // +-2% alternating measurement noise; least squares on relative error averages it out.
  const double alpha = 5e-6, beta = 80e9;
  std::vector<SizePoint> pts;
  int i = 0;
  for (double b = 1024; b <= 256 * 1024 * 1024; b *= 2, ++i) {
    pts.push_back({b, (alpha + b / beta) * (i % 2 == 0 ? 1.02 : 0.98), 0.0});
  }
  AlphaBeta fit = fit_alpha_beta(pts);
  EXPECT_NEAR(fit.alpha_s / alpha, 1.0, 0.01);
  EXPECT_NEAR(fit.beta_bytes_per_s / beta, 1.0, 0.01);
}

TEST(AlphaBetaFit, KeepsAlphaNonNegativeAndBetaPositive) {
  // Pure bandwidth (alpha 0) with noise that would pull alpha below zero.
  std::vector<SizePoint> pts = {{1e3, 0.9e-6, 0}, {1e6, 1e-3, 0}, {1e9, 1.0, 0}};
  AlphaBeta fit = fit_alpha_beta(pts);
  EXPECT_GE(fit.alpha_s, 0.0);
  EXPECT_GT(fit.beta_bytes_per_s, 0.0);
  // Flat times (no size dependence) give a flat line at their level.
  std::vector<SizePoint> flat = {{1e3, 1e-5, 0}, {1e4, 1e-5, 0}, {1e5, 1e-5, 0}};
  AlphaBeta f = fit_alpha_beta(flat);
  EXPECT_NEAR(f.seconds(1e4), 1e-5, 1e-12);
}

TEST(SizeCurve, InterpolatesLogLogInsideAndExtrapolatesAlongTheLine) {
  // A curve that bends at 64 KiB (protocol switch): 10 us flat below, then
  // 10 us + (bytes - 64 KiB) / 10 GB/s above.
  auto truth = [](double b) { return b <= 65536 ? 10e-6 : 10e-6 + (b - 65536) / 10e9; };
  std::vector<SizePoint> pts;
  for (double b = 1024; b <= 16 * 1024 * 1024; b *= 2) pts.push_back({b, truth(b), 0.0});
  SizeCurveData c = make_size_curve(pts);
  // Exact at the measured points.
  for (const SizePoint& p : pts) EXPECT_NEAR(curve_seconds(c, p.bytes), p.seconds, p.seconds * 1e-12);
  // Between points: log-log interpolation, within 1% of the true bent curve.
  for (double b = 1500; b <= 12e6; b *= 1.9) {
    EXPECT_NEAR(curve_seconds(c, b) / truth(b), 1.0, 0.01) << b;
  }
  // Beyond: continuous at the last point and growing at the fitted bandwidth.
  const double last = pts.back().bytes;
  EXPECT_NEAR(curve_seconds(c, last * (1 + 1e-12)), pts.back().seconds, 1e-9);
  EXPECT_NEAR(curve_seconds(c, 4 * last) / truth(4 * last), 1.0, 0.02);
}

TEST(LogInterpolator, ReproducesLinearFunctionsExactly) {
  // v = 0.3 + 0.1 x0 - 0.2 x1 + 0.05 x2 on a scattered set of points.
  Eigen::MatrixXd coords(12, 3);
  Eigen::VectorXd values(12);
  for (int i = 0; i < 12; ++i) {
    coords.row(i) << (i * 7) % 5, (i * 3) % 4 + 0.5 * (i % 2), (i * 5) % 6;
    values(i) = 0.3 + 0.1 * coords(i, 0) - 0.2 * coords(i, 1) + 0.05 * coords(i, 2);
  }
  LogInterpolator interp(coords, values);
  Eigen::VectorXd x(3);
  x << 2.3, 1.7, 3.1;
  EXPECT_NEAR(interp.evaluate(x), 0.3 + 0.23 - 0.34 + 0.155, 1e-12);
}

TEST(LogInterpolator, DirectionsWithoutSpreadGetNoSlope) {
  // All points have batch = 1 (last coordinate 0); a query at batch 4 takes the
  // value of its (m, n, k) neighbourhood instead of leaking into the intercept.
  Eigen::MatrixXd coords(4, 2);
  coords << 0, 0, 1, 0, 2, 0, 3, 0;
  Eigen::VectorXd values(4);
  values << 1.0, 1.5, 2.0, 2.5;
  LogInterpolator interp(coords, values);
  Eigen::VectorXd x(2);
  x << 1.5, 2.0;
  EXPECT_NEAR(interp.evaluate(x), 1.75, 1e-12);
}

// A smooth, shape-dependent efficiency like cuBLAS's: low for small k and small
// outputs, rising to 0.8.
double synthetic_efficiency(double m, double n, double k) {
  return 0.8 * (1.0 - 0.5 / (1.0 + k / 256.0)) * (1.0 - 0.3 / (1.0 + std::sqrt(m * n) / 512.0));
}

double synthetic_gemm_seconds(const CostModel& device, const GemmQuery& q) {
  return device.ideal_gemm_seconds(q) / synthetic_efficiency(q.m, q.n, q.k);
}

TEST(GemmFit, RecoversAShapeDependentEfficiencyWithinOnePercent) {
  Profile base = synthetic_device();
  base.cost_sections["gemm"] = nlohmann::json::parse(to_json(synthetic_gemm_base()).dump());
  const CostModel device(base);
  // Measure a grid of m, n, k at half-octave steps from 256 to 16384.
  std::map<DType, std::vector<GemmPoint>> pts;
  std::vector<double> sizes;
  for (double s = 256; s <= 16384 * 1.001; s *= std::sqrt(2.0)) sizes.push_back(std::round(s));
  for (double m : sizes) {
    for (double n : sizes) {
      for (double k : sizes) {
        GemmQuery q{static_cast<std::int64_t>(m), static_cast<std::int64_t>(n),
                    static_cast<std::int64_t>(k), 1, DType::kBf16};
        pts[DType::kBf16].push_back({q.m, q.n, q.k, 1, synthetic_gemm_seconds(device, q), 0.0});
      }
    }
  }
  Profile p = base;
  p.cost_sections["gemm"] =
      nlohmann::json::parse(to_json(measured_gemm_section(synthetic_gemm_base(), pts)).dump());
  const CostModel fitted(p);
  ASSERT_TRUE(fitted.calibrated("gemm"));
  // Unmeasured shapes, including ones just past a wave boundary (100 SMs,
  // 128x128 tiles: m = 1280, n = 1280 is exactly one wave; n = 1408 is 1.1 waves).
  std::vector<GemmQuery> queries = {
      {1280, 1280, 3000, 1, DType::kBf16}, {1280, 1408, 3000, 1, DType::kBf16},
      {5000, 7000, 900, 1, DType::kBf16},  {300, 12000, 5000, 1, DType::kBf16},
      {3333, 4444, 555, 1, DType::kBf16},  {12288, 4608, 12288, 1, DType::kBf16},
      {8192, 1536, 6144, 1, DType::kBf16}, {700, 700, 700, 1, DType::kBf16}};
  for (const GemmQuery& q : queries) {
    const double truth = synthetic_gemm_seconds(device, q);
    EXPECT_NEAR(fitted.gemm_seconds(q) / truth, 1.0, 0.01) << q.m << "x" << q.n << "x" << q.k;
  }
  // The wave step is there: 1.1 waves cost about twice 1.0 waves.
  const double one = fitted.gemm_seconds(queries[0]);
  const double step = fitted.gemm_seconds(queries[1]);
  EXPECT_NEAR(step / one, 2.0, 0.02);
}

TEST(HeldOutQuality, SmallOnSmoothDataAndNamesEverySection) {
  Profile p = synthetic_device();
  GemmSection g = synthetic_gemm_base();
  p.cost_sections["gemm"] = nlohmann::json::parse(to_json(g).dump());
  const CostModel device(p);
  std::map<DType, std::vector<GemmPoint>> pts;
  for (std::int64_t m : {512, 1024, 2048, 4096}) {
    for (std::int64_t n : {512, 1024, 2048, 4096}) {
      for (std::int64_t k : {512, 1024, 2048, 4096}) {
        GemmQuery q{m, n, k, 1, DType::kBf16};
        pts[DType::kBf16].push_back({m, n, k, 1, synthetic_gemm_seconds(device, q), 0.0});
      }
    }
  }
  std::vector<CollectiveMeasurement> coll(1);
  coll[0].op = CollectiveOp::kAllReduce;
  coll[0].group_size = 2;
  for (double b = 1024; b <= 64 * 1024 * 1024; b *= 2) coll[0].points.push_back({b, 8e-6 + b / 5e9, 0});
  std::vector<SizePoint> copy;
  for (double b = 4096; b <= 256e6; b *= 4) copy.push_back({b, 2e-6 + b / 20e9, 0});
  MemoryBoundSection mb;
  mb.sources = {{"efficiency", "synthetic"}, {"overhead_us", "synthetic"}};
  p.cost_sections["gemm"] = nlohmann::json::parse(to_json(measured_gemm_section(g, pts)).dump());
  p.cost_sections["collectives"] =
      nlohmann::json::parse(to_json(measured_collectives_section(coll, 0, 0, {})).dump());
  p.cost_sections["memory_bound"] = nlohmann::json::parse(
      to_json(measured_memory_bound_section(mb, {{KernelKind::kCopy, copy}})).dump());
  std::map<std::string, FitError> q = held_out_quality(p);
  ASSERT_EQ(q.size(), 3u);
  // 64 GEMMs, every fifth from index 2 held out: 13 of them.
  EXPECT_EQ(q["gemm"].held_out, 13);
  EXPECT_LT(q["gemm"].median_rel_error, 0.05);
  // 17 collective sizes: indices 1, 4, 7, 10, 13 held out.
  EXPECT_EQ(q["collectives"].held_out, 5);
  EXPECT_LT(q["collectives"].max_rel_error, 0.05);
  EXPECT_LE(q["collectives"].median_rel_error, q["collectives"].max_rel_error);
  EXPECT_LT(q["memory_bound"].max_rel_error, 0.05);
}

TEST(MeasuredModel, CollectivesAnswerOnlyForWhatWasMeasured) {
  Profile p = synthetic_device();
  std::vector<CollectiveMeasurement> coll(1);
  coll[0].op = CollectiveOp::kAllGather;
  coll[0].group_size = 4;
  for (double b = 1024; b <= 1024 * 1024; b *= 4) coll[0].points.push_back({b, 5e-6 + b / 10e9, 0});
  p.cost_sections["collectives"] = nlohmann::json::parse(
      to_json(measured_collectives_section(coll, 20e9, 0, {{"reference_busbw_gbytes_per_s", "synthetic"}}))
          .dump());
  CostModel m(p);
  ASSERT_TRUE(m.collective_seconds(CollectiveOp::kAllGather, 4, false, 4096).has_value());
  EXPECT_NEAR(*m.collective_seconds(CollectiveOp::kAllGather, 4, false, 4096), 5e-6 + 4096 / 10e9, 1e-15);
  EXPECT_FALSE(m.collective_seconds(CollectiveOp::kAllGather, 8, false, 4096).has_value());
  EXPECT_FALSE(m.collective_seconds(CollectiveOp::kAllGather, 4, true, 4096).has_value());
  EXPECT_FALSE(m.collective_seconds(CollectiveOp::kAllReduce, 4, false, 4096).has_value());
  // busbw at 1 MiB: algbw = 1048576 / (5e-6 + 1048576/10e9) = 9.545e9 B/s, times
  // (n-1)/n = 0.75 -> 7.159e9; over the 20 GB/s reference: 0.3579.
  const double t = 5e-6 + 1048576 / 10e9;
  ASSERT_TRUE(m.collective_efficiency(CollectiveOp::kAllGather, false).has_value());
  EXPECT_NEAR(*m.collective_efficiency(CollectiveOp::kAllGather, false), 1048576 / t * 0.75 / 20e9, 1e-12);
  EXPECT_FALSE(m.collective_efficiency(CollectiveOp::kAllGather, true).has_value());
}

}  // namespace
}  // namespace strata
