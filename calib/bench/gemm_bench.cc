#include "calib/bench/gemm_bench.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <map>
#include <set>
#include <tuple>

#include <fmt/format.h>

#include "core/error.h"
#include "runtime/device/tensor_io.h"

namespace strata::calib {
namespace {

// Relative tolerance of one output element against sum |a_i b_i|: fp32
// accumulation of the stored inputs, then rounding of C to its storage dtype
// (bf16 keeps 8 significant bits, fp16 11, fp32 24), with a factor 4 of slack.
double tolerance(DType storage) {
  switch (storage) {
    case DType::kBf16: return 4.0 * std::ldexp(1.0, -8);
    case DType::kFp16: return 4.0 * std::ldexp(1.0, -11);
    case DType::kTf32: return 4.0 * std::ldexp(1.0, -11);
    case DType::kFp32: return 1e-5;
  }
  return 1e-2;
}

void check_result(rt::Device& device, const GemmQuery& q, const rt::TensorView& a,
                  const rt::TensorView& b, const rt::TensorView& c) {
  const std::int64_t rows[] = {0, q.m / 2, q.m - 1};
  const std::int64_t cols[] = {q.n - 1, 0, q.n / 2};
  for (int s = 0; s < 3; ++s) {
    const std::int64_t r = rows[s], col = cols[s];
    const std::vector<float> arow = rt::download_fp32(device, a.slice(r * q.k, q.k));
    const std::vector<float> brow = rt::download_fp32(device, b.slice(col * q.k, q.k));
    const float got = rt::download_fp32(device, c.slice(r * q.n + col, 1))[0];
    double ref = 0.0, mag = 0.0;
    for (std::int64_t i = 0; i < q.k; ++i) {
      ref += static_cast<double>(arow[static_cast<std::size_t>(i)]) * brow[static_cast<std::size_t>(i)];
      mag += std::abs(static_cast<double>(arow[static_cast<std::size_t>(i)]) * brow[static_cast<std::size_t>(i)]);
    }
    if (!(std::abs(got - ref) <= tolerance(c.dtype) * mag + 1e-30)) {
      throw InternalError(fmt::format(
          "GEMM {}x{}x{} ({}) gave C[{}, {}] = {} but the inputs give {} (tolerance {:.1e} of {})",
          q.m, q.n, q.k, to_string(q.dtype), r, col, got, ref, tolerance(c.dtype), mag));
    }
  }
}

// The inputs and outputs every GEMM benchmark of one dtype takes its operands
// from: an input pool filled once with values uniform in [-1, 1) (never all
// zeros: hardware and libraries may shortcut zeros) and an output pool, each at
// least the working set and the largest shape. A cursor moves through them, so
// each call, and each benchmark after the last, reads operands the previous
// calls have not touched for a working set's worth of traffic.
class OperandPools {
 public:
  struct Set {
    rt::TensorView a, b, c;
  };

  OperandPools() = default;
  OperandPools(rt::Device& device, const std::vector<GemmQuery>& shapes, DType dtype,
               std::int64_t working_set_bytes, std::uint64_t seed) {
    const std::int64_t elt = static_cast<std::int64_t>(dtype_bytes(dtype));
    std::int64_t largest_in = 0, largest_out = 0;
    for (const GemmQuery& q : shapes) {
      if (q.dtype != dtype) continue;
      largest_in = std::max(largest_in, aligned(q.m * q.k * q.batch) + aligned(q.n * q.k * q.batch));
      largest_out = std::max(largest_out, aligned(q.m * q.n * q.batch));
    }
    // The working set splits between inputs and outputs as they do in a GEMM.
    const std::int64_t wanted = working_set_bytes / elt;
    in_ = device.allocate_tensor(std::max(largest_in, wanted * 2 / 3), dtype);
    out_ = device.allocate_tensor(std::max(largest_out, wanted / 3), dtype);
    device.fill_random(in_.view(), seed, 0, -1.0f, 1.0f);
    // Written once now, so no timed call pays for the first touch of a page.
    device.fill(out_.view(), 0.0f);
  }

  Set next(std::int64_t a_elems, std::int64_t b_elems, std::int64_t c_elems) {
    const std::int64_t in_need = aligned(a_elems) + aligned(b_elems);
    if (in_cursor_ + in_need > in_.numel()) in_cursor_ = 0;
    if (out_cursor_ + aligned(c_elems) > out_.numel()) out_cursor_ = 0;
    Set s{in_.view().slice(in_cursor_, a_elems), in_.view().slice(in_cursor_ + aligned(a_elems), b_elems),
          out_.view().slice(out_cursor_, c_elems)};
    in_cursor_ += in_need;
    out_cursor_ += aligned(c_elems);
    return s;
  }

 private:
  // Operands start on 256-element boundaries (512 bytes in bf16): the alignment
  // cuBLAS and vector loads want, whatever the shape.
  static std::int64_t aligned(std::int64_t elems) { return (elems + 255) / 256 * 256; }

  rt::Tensor in_, out_;
  std::int64_t in_cursor_ = 0, out_cursor_ = 0;
};

// Points the GEMM at the pools' next operands.
void take_next_operands(OperandPools& pool, rt::GemmArgs& g) {
  const OperandPools::Set set = pool.next(g.stride_a * g.batch, g.stride_b * g.batch, g.stride_c * g.batch);
  g.a = set.a;
  g.b = set.b;
  g.c = set.c;
}

}  // namespace

std::vector<GemmQuery> gemm_grid(std::int64_t lo, std::int64_t hi, DType dtype) {
  std::vector<GemmQuery> out;
  for (std::int64_t m = lo; m <= hi; m *= 2) {
    for (std::int64_t n = lo; n <= hi; n *= 2) {
      for (std::int64_t k = lo; k <= hi; k *= 2) out.push_back({m, n, k, 1, dtype});
    }
  }
  return out;
}

std::vector<GemmQuery> unique_shapes(const std::vector<GemmQuery>& shapes) {
  std::set<std::tuple<std::int64_t, std::int64_t, std::int64_t, std::int64_t, int>> seen;
  std::vector<GemmQuery> out;
  for (const GemmQuery& q : shapes) {
    if (seen.insert({q.m, q.n, q.k, q.batch, static_cast<int>(q.dtype)}).second) out.push_back(q);
  }
  return out;
}

std::int64_t gemm_working_set_bytes(const rt::DeviceInfo& info) {
  constexpr std::int64_t kMiB = 1 << 20;
  const std::int64_t cache = info.cache_bytes > 0 ? info.cache_bytes : 32 * kMiB;
  return info.backend == rt::Backend::kCpu ? std::min(2 * cache, 64 * kMiB) : 2 * cache;
}

std::vector<GemmPoint> bench_gemms(rt::Device& device, const std::vector<GemmQuery>& shapes,
                                   const TimingOptions& timing, std::int64_t working_set_bytes,
                                   const std::function<void(std::size_t)>& progress) {
  std::vector<GemmPoint> out;
  std::map<DType, OperandPools> pools;
  auto pool_for = [&](DType dtype) -> OperandPools& {
    auto [it, fresh] = pools.try_emplace(dtype);
    if (fresh) it->second = OperandPools(device, shapes, dtype, working_set_bytes, 1 + static_cast<std::uint64_t>(dtype));
    return it->second;
  };
  auto args_for = [](const GemmQuery& q) {
    rt::GemmArgs g;
    g.trans_b = rt::Transpose::kYes;
    g.m = q.m;
    g.n = q.n;
    g.k = q.k;
    g.lda = q.k;
    g.stride_a = q.m * q.k;
    g.ldb = q.k;
    g.stride_b = q.n * q.k;
    g.ldc = q.n;
    g.stride_c = q.m * q.n;
    g.batch = q.batch;
    g.tf32 = q.dtype == DType::kTf32;
    return g;
  };
  // Keeps the device at its sustained, power-limited clock (TimingOptions::soak_s):
  // the largest shape, back to back, for `seconds` of wall time.
  const auto largest = std::max_element(shapes.begin(), shapes.end(), [](const GemmQuery& x, const GemmQuery& y) {
    return gemm_flops(x) < gemm_flops(y);
  });
  auto heat = [&](double seconds) {
    if (!(seconds > 0.0) || largest == shapes.end()) return;
    OperandPools& pool = pool_for(largest->dtype);
    rt::GemmArgs g = args_for(*largest);
    const auto until = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
    do {
      for (int i = 0; i < 4; ++i) {
        take_next_operands(pool, g);
        device.gemm(g);
      }
      device.synchronize();
    } while (std::chrono::steady_clock::now() < until);
  };
  heat(timing.soak_s);
  for (std::size_t i = 0; i < shapes.size(); ++i) {
    const GemmQuery& q = shapes[i];
    OperandPools& pool = pool_for(q.dtype);
    rt::GemmArgs g = args_for(q);
    heat(timing.keep_hot_s);
    const Timing t = time_on_device(device, [&] { take_next_operands(pool, g); device.gemm(g); }, timing);
    take_next_operands(pool, g);
    device.gemm(g);
    device.synchronize();
    check_result(device, q, g.a, g.b, g.c);
    out.push_back({q.m, q.n, q.k, q.batch, t.median_s, t.spread});
    if (progress) progress(i);
  }
  return out;
}

}  // namespace strata::calib
