// The microbenchmark machinery on the cpu backend: timing statistics, and each
// benchmark producing checked, positive measurements in the units the cost
// model reads.
#include <chrono>
#include <cmath>

#include <gtest/gtest.h>

#include "calib/bench/attention_bench.h"
#include "calib/bench/collective_bench.h"
#include "calib/bench/gemm_bench.h"
#include "calib/bench/kernel_bench.h"
#include "calib/bench/measure.h"
#include "core/error.h"
#include "runtime/device/device.h"

namespace strata::calib {
namespace {

TEST(Measure, MedianAndInterquartileSpread) {
  // Sorted: 1 2 3 4 100. Median 3; quartiles (type 7) at positions 1 and 3: 2 and 4.
  Timing t = summarize_samples({4.0, 1.0, 100.0, 3.0, 2.0}, 8);
  EXPECT_DOUBLE_EQ(t.median_s, 3.0);
  EXPECT_DOUBLE_EQ(t.spread, (4.0 - 2.0) / 3.0);
  EXPECT_EQ(t.calls_per_sample, 8);
  // Even count: median between the middle two.
  EXPECT_DOUBLE_EQ(summarize_samples({1.0, 2.0, 3.0, 10.0}, 1).median_s, 2.5);
  EXPECT_THROW(summarize_samples({}, 1), InternalError);
}

TEST(Measure, CallsPerSampleReachTheMinimumSampleTime) {
  TimingOptions o;
  o.min_sample_s = 1e-3;
  o.max_calls_per_sample = 100;
  EXPECT_EQ(calls_for(2e-3, o), 1);     // one call is already long enough
  EXPECT_EQ(calls_for(1e-4, o), 10);    // 10 x 0.1 ms = 1 ms
  EXPECT_EQ(calls_for(3e-4, o), 4);     // ceil(3.33)
  EXPECT_EQ(calls_for(1e-9, o), 100);   // capped
  EXPECT_EQ(calls_for(0.0, o), 100);
}

TEST(GemmGrid, EveryCombinationOfPowersOfTwo) {
  std::vector<GemmQuery> g = gemm_grid(64, 256, DType::kFp32);
  ASSERT_EQ(g.size(), 27u);  // {64, 128, 256}^3
  EXPECT_EQ(g.front().m, 64);
  EXPECT_EQ(g.back().k, 256);
  std::vector<GemmQuery> dup = {{8, 8, 8, 1, DType::kFp32}, {8, 8, 8, 1, DType::kFp32}, {8, 8, 8, 2, DType::kFp32}};
  EXPECT_EQ(unique_shapes(dup).size(), 2u);
}

TEST(Bench, BytesPerElementMatchTheSimulatorsCounting) {
  // sim/layer_ops.cc: norms 2x the stream, residual 3x, activation in + out.
  EXPECT_EQ(bytes_per_element(KernelKind::kNorm, DType::kBf16), 4.0);
  EXPECT_EQ(bytes_per_element(KernelKind::kResidual, DType::kBf16), 6.0);
  EXPECT_EQ(bytes_per_element(KernelKind::kActivation, DType::kFp32), 8.0);
  EXPECT_EQ(bytes_per_element(KernelKind::kAdam, DType::kBf16), 28.0);
}

class CpuBench : public ::testing::Test {
 protected:
  void SetUp() override {
    rt::DeviceOptions o;
    o.cpu_threads = 1;
    device_ = rt::make_device(rt::Backend::kCpu, 0, o);
  }
  std::unique_ptr<rt::Device> device_;
};

TEST_F(CpuBench, GemmsAreTimedAndChecked) {
  std::vector<GemmQuery> shapes = {{64, 96, 32, 1, DType::kFp32}, {33, 17, 65, 3, DType::kFp32}};
  std::size_t calls = 0;
  std::vector<GemmPoint> pts = bench_gemms(*device_, shapes, quick_timing(), 0, [&](std::size_t) { ++calls; });
  ASSERT_EQ(pts.size(), 2u);
  EXPECT_EQ(calls, 2u);
  EXPECT_EQ(pts[1].m, 33);
  EXPECT_EQ(pts[1].batch, 3);
  for (const GemmPoint& p : pts) {
    EXPECT_GT(p.seconds, 0.0);
    // No GEMM this small takes a second on any CPU.
    EXPECT_LT(p.seconds, 1.0);
  }
}

// Rotating operands: every call takes the next A, B and C from pools of the
// working set, wrapping around; a wrong offset or a wrap that cuts an operand
// short shows as a wrong checked element or an out-of-range slice.
TEST_F(CpuBench, GemmsWithRotatingOperandsAreCorrectAcrossWraps) {
  // 96x80x72 fp32 takes 75 KiB of inputs and 30 KiB of output: a 1 MiB working
  // set wraps the pools every few calls; the batched odd shape is not a multiple
  // of the 256-element alignment; the large one is bigger than the working set.
  std::vector<GemmQuery> shapes = {{96, 80, 72, 1, DType::kFp32},
                                   {33, 17, 65, 3, DType::kFp32},
                                   {512, 512, 512, 1, DType::kFp32}};
  std::vector<GemmPoint> pts = bench_gemms(*device_, shapes, quick_timing(), 1 << 20, nullptr);
  ASSERT_EQ(pts.size(), 3u);
  for (const GemmPoint& p : pts) EXPECT_GT(p.seconds, 0.0);
}

// The soak runs the largest shape for soak_s before the first shape and for
// keep_hot_s before each; the results stay checked and per call.
TEST_F(CpuBench, GemmSoakRunsForItsTimeBeforeAndBetweenShapes) {
  std::vector<GemmQuery> shapes = {{64, 96, 32, 1, DType::kFp32}, {128, 128, 128, 1, DType::kFp32},
                                   {33, 17, 65, 3, DType::kFp32}};
  TimingOptions plain = quick_timing();
  TimingOptions soaked = plain;
  soaked.soak_s = 0.3;
  soaked.keep_hot_s = 0.1;
  auto wall = [&](const TimingOptions& t, std::vector<GemmPoint>& out) {
    const auto start = std::chrono::steady_clock::now();
    out = bench_gemms(*device_, shapes, t, 1 << 20, nullptr);
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  };
  std::vector<GemmPoint> a, b;
  const double plain_s = wall(plain, a);
  const double soaked_s = wall(soaked, b);
  // 0.3 s + 3 x 0.1 s of soak at least, on top of the measurements themselves.
  EXPECT_GE(soaked_s, 0.6);
  EXPECT_GE(soaked_s, plain_s + 0.5);
  ASSERT_EQ(b.size(), 3u);
  for (const GemmPoint& p : b) {
    EXPECT_GT(p.seconds, 0.0);
    EXPECT_LT(p.seconds, 0.1);  // per call, not the soak's time
  }
}

TEST(GemmWorkingSet, TwiceTheLastLevelCacheCappedOnCpus) {
  rt::DeviceInfo gpu;
  gpu.backend = rt::Backend::kCuda;
  gpu.cache_bytes = 50 << 20;  // H100 SXM L2 (NVIDIA H100 datasheet)
  EXPECT_EQ(gemm_working_set_bytes(gpu), std::int64_t{100} << 20);
  rt::DeviceInfo cpu;
  cpu.backend = rt::Backend::kCpu;
  cpu.cache_bytes = 16 << 20;
  EXPECT_EQ(gemm_working_set_bytes(cpu), std::int64_t{32} << 20);
  cpu.cache_bytes = std::int64_t{508} << 20;  // a VM reporting the socket's L3
  EXPECT_EQ(gemm_working_set_bytes(cpu), std::int64_t{64} << 20);
  cpu.cache_bytes = 0;  // unknown: 32 MiB assumed
  EXPECT_EQ(gemm_working_set_bytes(cpu), std::int64_t{64} << 20);
}

TEST_F(CpuBench, MemoryBoundKindsOverSizes) {
  auto curves = bench_memory_bound(*device_, {64 * 1024.0, 1024 * 1024.0}, quick_timing(), nullptr);
  ASSERT_EQ(curves.size(), all_kernel_kinds().size());
  for (const auto& [kind, pts] : curves) {
    ASSERT_EQ(pts.size(), 2u) << to_string(kind);
    EXPECT_LT(pts[0].bytes, pts[1].bytes) << to_string(kind);
    // Whole rows of 1024 elements, each moving bytes_per_element bytes.
    const double per_row = 1024.0 * bytes_per_element(kind, device_->storage_dtype(kind == KernelKind::kAdam ? DType::kFp32 : DType::kBf16));
    EXPECT_DOUBLE_EQ(std::fmod(pts[1].bytes, per_row), 0.0) << to_string(kind);
    EXPECT_GT(pts[1].seconds, 0.0);
  }
}

TEST_F(CpuBench, SizesRoundingToTheSameRowsAreMeasuredOnce) {
  // Adam moves 28 bytes per element: 4, 8 and 16 KiB all round to one row of
  // 1024 elements (28672 bytes), 64 KiB to two rows. A curve never holds two
  // measurements of one size (the fit rejects them).
  const std::vector<double> sizes = {4096.0, 8192.0, 16384.0, 65536.0};
  EXPECT_EQ(kernel_rows(KernelKind::kAdam, DType::kFp32, 4096.0), 1);
  EXPECT_EQ(kernel_rows(KernelKind::kAdam, DType::kFp32, 16384.0), 1);
  EXPECT_EQ(kernel_rows(KernelKind::kAdam, DType::kFp32, 65536.0), 2);
  std::size_t calls = 0;
  auto curves = bench_memory_bound(*device_, sizes, quick_timing(), [&](std::size_t) { ++calls; });
  // Progress still counts every (kind, size) the caller planned.
  EXPECT_EQ(calls, sizes.size() * all_kernel_kinds().size());
  const std::vector<SizePoint>& adam = curves.at(KernelKind::kAdam);
  ASSERT_EQ(adam.size(), 2u);
  EXPECT_EQ(adam[0].bytes, 28.0 * 1024);
  EXPECT_EQ(adam[1].bytes, 2 * 28.0 * 1024);
  for (const auto& [kind, pts] : curves) {
    for (std::size_t i = 1; i < pts.size(); ++i) EXPECT_LT(pts[i - 1].bytes, pts[i].bytes) << to_string(kind);
  }
}

TEST_F(CpuBench, AttentionForwardAndBackward) {
  std::vector<AttentionPoint> pts =
      bench_attention(*device_, {{2, 64, 32, false, false, DType::kFp32}}, quick_timing(), nullptr);
  ASSERT_EQ(pts.size(), 2u);
  EXPECT_FALSE(pts[0].backward);
  EXPECT_TRUE(pts[1].backward);
  EXPECT_GT(pts[1].seconds, 0.0);
}

TEST_F(CpuBench, HostCopiesRoundTrip) {
  auto [up, down] = bench_host_copies(*device_, {4096.0, 65536.0}, quick_timing(), nullptr);
  ASSERT_EQ(up.size(), 2u);
  ASSERT_EQ(down.size(), 2u);
  EXPECT_EQ(up[1].bytes, 65536.0);
}

TEST(Collectives, GroupSizesArePowersOfTwoAndTheWorld) {
  EXPECT_EQ(collective_group_sizes(1), std::vector<int>{});
  EXPECT_EQ(collective_group_sizes(2), std::vector<int>({2}));
  EXPECT_EQ(collective_group_sizes(6), std::vector<int>({2, 4, 6}));
  EXPECT_EQ(collective_group_sizes(8), std::vector<int>({2, 4, 8}));
  EXPECT_EQ(collective_curve_count(8), 18u);
}

}  // namespace
}  // namespace strata::calib

namespace strata::calib {

// A synthetic curve with a cliff at 15.5 MiB (2.5 ms below, 70 ms above, as
// Open MPI's shared-memory reduce_scatter on this project's host): refinement
// brackets the cliff to within 2^(1/16) of its size and leaves smooth stretches
// alone.
TEST(Collectives, CliffsAreBisectedToWithinFourPercent) {
  constexpr double kMiB = 1 << 20;
  const double cliff = 15.5 * kMiB;
  auto cost = [&](double bytes) {
    const double s = bytes < cliff ? 5e-6 + bytes / 6e9 : 70e-3 * bytes / (16 * kMiB);
    return SizePoint{bytes, s, 0.0};
  };
  std::vector<SizePoint> points;
  for (double b = kMiB; b <= 16 * kMiB; b *= 2) points.push_back(cost(b));
  int measured = 0;
  refine_cliffs([&](double bytes) { ++measured; return cost(bytes); }, points);
  EXPECT_EQ(measured, kCliffBisections);  // one cliff, nothing else measured
  ASSERT_EQ(points.size(), 5u + kCliffBisections);
  for (std::size_t i = 0; i + 1 < points.size(); ++i) EXPECT_LT(points[i].bytes, points[i + 1].bytes);
  // The last point below the cliff and the first above it.
  std::size_t above = 0;
  while (points[above].bytes < cliff) ++above;
  EXPECT_LE(points[above].bytes / points[above - 1].bytes, std::pow(2.0, 1.0 / 16) * 1.0001);
  EXPECT_TRUE(is_cliff(points[above - 1], points[above]));
  // Interpolating 13.7 MB (a ZeRO-1 gradient reduce-scatter) now uses fast points.
  EXPECT_GT(points[above - 1].bytes, 13.7e6);
}

}  // namespace strata::calib
