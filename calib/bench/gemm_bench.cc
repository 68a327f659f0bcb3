#include "calib/bench/gemm_bench.h"

#include <cmath>
#include <set>
#include <tuple>

#include <fmt/format.h>

#include "core/error.h"
#include "runtime/tensor_io.h"

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

std::vector<GemmPoint> bench_gemms(rt::Device& device, const std::vector<GemmQuery>& shapes,
                                   const TimingOptions& timing,
                                   const std::function<void(std::size_t)>& progress) {
  std::vector<GemmPoint> out;
  std::uint64_t seed = 1;
  for (std::size_t i = 0; i < shapes.size(); ++i) {
    const GemmQuery& q = shapes[i];
    rt::Tensor a = device.allocate_tensor(q.m * q.k * q.batch, q.dtype);
    rt::Tensor b = device.allocate_tensor(q.n * q.k * q.batch, q.dtype);
    rt::Tensor c = device.allocate_tensor(q.m * q.n * q.batch, q.dtype);
    // Never all zeros: hardware and libraries may shortcut zeros.
    device.fill_random(a.view(), seed++, 0, -1.0f, 1.0f);
    device.fill_random(b.view(), seed++, 0, -1.0f, 1.0f);
    rt::GemmArgs g;
    g.trans_b = rt::Transpose::kYes;
    g.m = q.m;
    g.n = q.n;
    g.k = q.k;
    g.a = a.view();
    g.lda = q.k;
    g.stride_a = q.m * q.k;
    g.b = b.view();
    g.ldb = q.k;
    g.stride_b = q.n * q.k;
    g.c = c.view();
    g.ldc = q.n;
    g.stride_c = q.m * q.n;
    g.batch = q.batch;
    g.tf32 = q.dtype == DType::kTf32;
    const Timing t = time_on_device(device, [&] { device.gemm(g); }, timing);
    device.synchronize();
    check_result(device, q, a.view(), b.view(), c.view());
    out.push_back({q.m, q.n, q.k, q.batch, t.median_s, t.spread});
    if (progress) progress(i);
  }
  return out;
}

}  // namespace strata::calib
