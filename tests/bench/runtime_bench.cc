// Runtime cpu backend kernel speed (Google Benchmark). Run by hand:
//   build/<dir>/tests/bench/strata_runtime_bench
// and record the numbers in docs/performance.md with the command and machine.
// Counters: FLOP/s for GEMMs (2·m·n·k per product), bytes/s for memory-bound
// kernels (bytes read + written once).
#include <benchmark/benchmark.h>

#include "runtime/device/device.h"

namespace strata::rt {
namespace {

// threads: the cpu device's compute threads (the last benchmark argument).
std::unique_ptr<Device> cpu_device(std::int64_t threads) {
  DeviceOptions options;
  options.cpu_threads = static_cast<int>(threads);
  return make_device(Backend::kCpu, 0, options);
}

void BM_CpuGemm(benchmark::State& state) {
  const std::int64_t m = state.range(0), n = state.range(1), k = state.range(2);
  auto dev = cpu_device(state.range(3));
  Tensor a = dev->allocate_tensor(m * k, DType::kFp32), b = dev->allocate_tensor(k * n, DType::kFp32);
  Tensor c = dev->allocate_tensor(m * n, DType::kFp32);
  dev->fill_random(a.view(), 1, 0, -1.0f, 1.0f);
  dev->fill_random(b.view(), 2, 0, -1.0f, 1.0f);
  GemmArgs g;
  g.m = m; g.n = n; g.k = k;
  g.a = a.view(); g.lda = k;
  g.b = b.view(); g.ldb = n;
  g.c = c.view(); g.ldc = n;
  for (auto _ : state) {
    dev->gemm(g);
    benchmark::DoNotOptimize(c.view().data);
  }
  state.counters["FLOP/s"] = benchmark::Counter(2.0 * m * n * k, benchmark::Counter::kIsIterationInvariantRate);
  state.counters["threads"] = dev->info().compute_units;
}
// A square GEMM, and the forward QKV GEMM of a small GPT (b·s = 2048 tokens, h = 1024).
BENCHMARK(BM_CpuGemm)
    ->Args({1024, 1024, 1024, 1})->Args({1024, 1024, 1024, 2})->Args({2048, 3072, 1024, 2})->UseRealTime()->Unit(benchmark::kMillisecond);

void BM_CpuLayerNorm(benchmark::State& state) {
  const std::int64_t rows = state.range(0), cols = state.range(1);
  auto dev = cpu_device(state.range(2));
  Tensor x = dev->allocate_tensor(rows * cols, DType::kFp32), y = dev->allocate_tensor(rows * cols, DType::kFp32);
  Tensor g = dev->allocate_tensor(cols, DType::kFp32), b = dev->allocate_tensor(cols, DType::kFp32);
  Tensor mean = dev->allocate_tensor(rows, DType::kFp32), rstd = dev->allocate_tensor(rows, DType::kFp32);
  dev->fill_random(x.view(), 3, 0, -1.0f, 1.0f);
  dev->fill(g.view(), 1.0f);
  dev->fill(b.view(), 0.0f);
  for (auto _ : state) {
    dev->layernorm_forward(x.view(), g.view(), b.view(), rows, cols, 1e-5f, y.view(), mean.view(), rstd.view());
  }
  state.counters["bytes/s"] = benchmark::Counter(2.0 * rows * cols * 4, benchmark::Counter::kIsIterationInvariantRate);
}
BENCHMARK(BM_CpuLayerNorm)->Args({2048, 1024, 1})->Args({2048, 1024, 2})->UseRealTime()->Unit(benchmark::kMicrosecond);

void BM_CpuCausalSoftmax(benchmark::State& state) {
  const std::int64_t matrices = state.range(0), s = state.range(1);
  auto dev = cpu_device(state.range(2));
  Tensor x = dev->allocate_tensor(matrices * s * s, DType::kFp32);
  dev->fill_random(x.view(), 4, 0, -4.0f, 4.0f);
  Tensor y = dev->allocate_tensor(matrices * s * s, DType::kFp32);
  for (auto _ : state) {
    dev->softmax_forward(x.view(), matrices * s, s, s, 0.125f, true, y.view());
  }
  state.counters["bytes/s"] = benchmark::Counter(2.0 * matrices * s * s * 4, benchmark::Counter::kIsIterationInvariantRate);
}
// 16 heads x batch 1 at sequence 1024.
BENCHMARK(BM_CpuCausalSoftmax)->Args({16, 1024, 1})->Args({16, 1024, 2})->UseRealTime()->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace strata::rt

BENCHMARK_MAIN();
