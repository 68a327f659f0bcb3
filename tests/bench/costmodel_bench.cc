// CostModel evaluation speed: what one simulated GEMM, kernel or collective
// costs to price, datasheet and measured (a profile the size `strata calibrate`
// writes on a GPU: 343 grid GEMMs, 7 kernel curves, 6 collective curves).
#include <cmath>

#include <benchmark/benchmark.h>

#include "costmodel/cost_model.h"
#include "costmodel/fitting.h"

namespace strata {
namespace {

Profile measured_profile() {
  Profile base = load_profile("h100-sxm5-80gb");
  const CostModel datasheet(base);
  std::map<DType, std::vector<GemmPoint>> pts;
  for (std::int64_t m = 256; m <= 16384; m *= 2) {
    for (std::int64_t n = 256; n <= 16384; n *= 2) {
      for (std::int64_t k = 256; k <= 16384; k *= 2) {
        const GemmQuery q{m, n, k, 1, DType::kBf16};
        pts[DType::kBf16].push_back({m, n, k, 1, datasheet.datasheet_gemm_seconds(q) * 1.05, 0.0});
      }
    }
  }
  Profile p = base;
  p.cost_sections["gemm"] =
      nlohmann::json::parse(to_json(measured_gemm_section(*datasheet.gemm_section(), pts)).dump());
  std::map<KernelKind, std::vector<SizePoint>> curves;
  std::vector<CollectiveMeasurement> coll;
  for (KernelKind k : all_kernel_kinds()) {
    for (double b = 4096; b <= 1 << 30; b *= 2) curves[k].push_back({b, 3e-6 + b / 3e12, 0.0});
  }
  for (CollectiveOp op : {CollectiveOp::kAllReduce, CollectiveOp::kAllGather, CollectiveOp::kReduceScatter,
                          CollectiveOp::kBroadcast, CollectiveOp::kAllToAll, CollectiveOp::kSendRecv}) {
    CollectiveMeasurement m;
    m.op = op;
    m.group_size = 8;
    for (double b = 1024; b <= 1 << 30; b *= 2) m.points.push_back({b, 10e-6 + b / 300e9, 0.0});
    coll.push_back(m);
  }
  p.cost_sections["memory_bound"] = nlohmann::json::parse(
      to_json(measured_memory_bound_section(*datasheet.memory_bound_section(), curves)).dump());
  p.cost_sections["collectives"] = nlohmann::json::parse(to_json(measured_collectives_section(coll, 0, 0, {})).dump());
  return p;
}

// GEMM shapes of a transformer step (GPT-3 175B at tp 8: qkv, proj, fc1, fc2 and their gradients).
const GemmQuery kShapes[] = {{2048, 4608, 12288, 1, DType::kBf16}, {2048, 12288, 1536, 1, DType::kBf16},
                             {2048, 6144, 12288, 1, DType::kBf16}, {2048, 12288, 6144, 1, DType::kBf16},
                             {2048, 12288, 4608, 1, DType::kBf16}, {4608, 12288, 2048, 1, DType::kBf16}};

void BM_DatasheetGemm(benchmark::State& state) {
  const CostModel model(load_profile("h100-sxm5-80gb"));
  std::size_t i = 0;
  for (auto _ : state) benchmark::DoNotOptimize(model.gemm_seconds(kShapes[i++ % std::size(kShapes)]));
}
BENCHMARK(BM_DatasheetGemm);

void BM_MeasuredGemm(benchmark::State& state) {
  const CostModel model(measured_profile());
  std::size_t i = 0;
  for (auto _ : state) benchmark::DoNotOptimize(model.gemm_seconds(kShapes[i++ % std::size(kShapes)]));
}
BENCHMARK(BM_MeasuredGemm);

void BM_MeasuredKernel(benchmark::State& state) {
  const CostModel model(measured_profile());
  double bytes = 1e6;
  for (auto _ : state) {
    benchmark::DoNotOptimize(model.kernel_seconds(KernelKind::kNorm, bytes, DType::kBf16));
    bytes = bytes > 1e9 ? 1e6 : bytes * 1.7;
  }
}
BENCHMARK(BM_MeasuredKernel);

void BM_MeasuredCollective(benchmark::State& state) {
  const CostModel model(measured_profile());
  double bytes = 1e4;
  for (auto _ : state) {
    benchmark::DoNotOptimize(model.collective_seconds(CollectiveOp::kAllReduce, 8, false, bytes));
    bytes = bytes > 1e9 ? 1e4 : bytes * 1.7;
  }
}
BENCHMARK(BM_MeasuredCollective);

void BM_LoadMeasuredProfile(benchmark::State& state) {
  const Profile p = measured_profile();
  for (auto _ : state) benchmark::DoNotOptimize(CostModel(p).calibrated("gemm"));
}
BENCHMARK(BM_LoadMeasuredProfile)->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace strata

BENCHMARK_MAIN();
