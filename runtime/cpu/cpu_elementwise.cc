// Elementwise, layout, reduction and optimizer kernels on the cpu backend.
#include <cmath>
#include <cstring>

#include <Eigen/Core>
#include <fmt/format.h>

#include "runtime/cpu/cpu_device_impl.h"
#include "runtime/device/kernel_checks.h"
#include "runtime/device/random.h"

namespace strata::rt {
namespace {

using Arr = Eigen::Map<Eigen::ArrayXf>;
using ConstArr = Eigen::Map<const Eigen::ArrayXf>;

// A rows x cols block with row stride ld must lie inside v.
void check_block(const char* kernel, const char* name, const TensorView& v, std::int64_t ld,
                 std::int64_t rows, std::int64_t cols) {
  if (rows == 0 || cols == 0) return;
  if (ld < cols) check::fail(kernel, fmt::format("{}_ld = {} is below cols = {}", name, ld, cols));
  const std::int64_t needed = (rows - 1) * ld + cols;
  if (needed > v.numel) {
    check::fail(kernel, fmt::format("{} needs {} elements ({} rows, ld {}) but has {}", name,
                                    needed, rows, ld, v.numel));
  }
}

}  // namespace

void CpuDevice::add(const TensorView& a, const TensorView& b, const TensorView& out) {
  const char* k = "add";
  const float* ap = f32(k, "a", a, a.numel);
  const float* bp = f32(k, "b", b, a.numel);
  float* op = f32(k, "out", out, a.numel);
  for_chunks(threads_, a.numel, [&](std::int64_t s, std::int64_t n) {
    Arr(op + s, n) = ConstArr(ap + s, n) + ConstArr(bp + s, n);
  });
}

void CpuDevice::add_bias(const TensorView& x, const TensorView& bias, std::int64_t rows,
                         std::int64_t cols) {
  const char* k = "add_bias";
  check::positive(k, "cols", cols);
  check::non_negative(k, "rows", rows);
  float* xp = f32(k, "x", x, rows * cols);
  const float* bp = f32(k, "bias", bias, cols);
  for_rows(threads_, rows, [&](std::int64_t r) { Arr(xp + r * cols, cols) += ConstArr(bp, cols); });
}

void CpuDevice::bias_backward(const TensorView& dy, std::int64_t rows, std::int64_t cols,
                              const TensorView& dbias) {
  const char* k = "bias_backward";
  check::positive(k, "cols", cols);
  check::non_negative(k, "rows", rows);
  const float* dyp = f32(k, "dy", dy, rows * cols);
  Arr db(f32(k, "dbias", dbias, cols), cols);
  for (std::int64_t r = 0; r < rows; ++r) db += ConstArr(dyp + r * cols, cols);
}

void CpuDevice::scale(const TensorView& x, float alpha) {
  float* xp = f32("scale", "x", x, x.numel);
  for_chunks(threads_, x.numel, [&](std::int64_t s, std::int64_t n) { Arr(xp + s, n) *= alpha; });
}

void CpuDevice::axpy(float alpha, const TensorView& x, const TensorView& y) {
  const float* xp = f32("axpy", "x", x, x.numel);
  float* yp = f32("axpy", "y", y, x.numel);
  for_chunks(threads_, x.numel, [&](std::int64_t s, std::int64_t n) {
    Arr(yp + s, n) += alpha * ConstArr(xp + s, n);
  });
}

void CpuDevice::fill(const TensorView& x, float value) {
  float* xp = f32("fill", "x", x, x.numel);
  for_chunks(threads_, x.numel, [&](std::int64_t s, std::int64_t n) { Arr(xp + s, n) = value; });
}

void CpuDevice::convert(const TensorView& src, const TensorView& dst) {
  // Every cpu tensor is fp32, so conversion is a copy.
  const float* sp = f32("convert", "src", src, src.numel);
  float* dp = f32("convert", "dst", dst, src.numel);
  if (src.numel > 0 && sp != dp) std::memmove(dp, sp, static_cast<std::size_t>(src.bytes()));
}

void CpuDevice::fill_random(const TensorView& x, std::uint64_t seed, std::uint64_t first_index,
                            float lo, float hi) {
  const char* k = "fill_random";
  if (!(lo < hi)) check::fail(k, fmt::format("lo = {} must be below hi = {}", lo, hi));
  float* xp = f32(k, "x", x, x.numel);
  for_chunks(threads_, x.numel, [&](std::int64_t s, std::int64_t n) {
    for (std::int64_t i = s; i < s + n; ++i) {
      xp[i] = random_uniform(seed, first_index + static_cast<std::uint64_t>(i), lo, hi);
    }
  });
}

void CpuDevice::copy_2d(const TensorView& src, std::int64_t src_ld, const TensorView& dst,
                        std::int64_t dst_ld, std::int64_t rows, std::int64_t cols) {
  const char* k = "copy_2d";
  check::non_negative(k, "rows", rows);
  check::non_negative(k, "cols", cols);
  const float* sp = f32(k, "src", src, src.numel);
  float* dp = f32(k, "dst", dst, dst.numel);
  check_block(k, "src", src, src_ld, rows, cols);
  check_block(k, "dst", dst, dst_ld, rows, cols);
  for_rows(threads_, rows, [&](std::int64_t r) {
    std::memcpy(dp + r * dst_ld, sp + r * src_ld, static_cast<std::size_t>(cols) * sizeof(float));
  });
}

void CpuDevice::permute_0213(const TensorView& x, std::int64_t d0, std::int64_t d1,
                             std::int64_t d2, std::int64_t d3, const TensorView& y) {
  const char* k = "permute_0213";
  for (auto [name, d] : {std::pair{"d0", d0}, {"d1", d1}, {"d2", d2}, {"d3", d3}}) {
    check::non_negative(k, name, d);
  }
  const std::int64_t total = d0 * d1 * d2 * d3;
  const float* xp = f32(k, "x", x, total);
  float* yp = f32(k, "y", y, total);
  if (xp == yp && total > 0) check::fail(k, "x and y must not alias");
  for_rows(threads_, d0 * d1, [&](std::int64_t r) {
    const std::int64_t i0 = r / d1;
    const std::int64_t i1 = r % d1;
    for (std::int64_t i2 = 0; i2 < d2; ++i2) {
      std::memcpy(yp + ((i0 * d2 + i2) * d1 + i1) * d3, xp + ((i0 * d1 + i1) * d2 + i2) * d3,
                  static_cast<std::size_t>(d3) * sizeof(float));
    }
  });
}

void CpuDevice::sum(const TensorView& x, const TensorView& out) {
  const float* xp = f32("sum", "x", x, x.numel);
  float* op = f32("sum", "out", out, 1);
  *op = static_cast<float>(ConstArr(xp, x.numel).cast<double>().sum());
}

void CpuDevice::sum_squares(const TensorView& x, const TensorView& out) {
  const float* xp = f32("sum_squares", "x", x, x.numel);
  float* op = f32("sum_squares", "out", out, 1);
  *op = static_cast<float>(ConstArr(xp, x.numel).cast<double>().square().sum());
}

void CpuDevice::adam_step(const TensorView& param, const TensorView& grad,
                          const TensorView& exp_avg, const TensorView& exp_avg_sq,
                          const AdamParams& p, std::int64_t step) {
  const char* k = "adam_step";
  check::positive(k, "step", step);
  float* pp = f32(k, "param", param, param.numel);
  const float* gp = f32(k, "grad", grad, param.numel);
  float* mp = f32(k, "exp_avg", exp_avg, param.numel);
  float* vp = f32(k, "exp_avg_sq", exp_avg_sq, param.numel);
  const float correction1 = 1.0f - std::pow(p.beta1, static_cast<float>(step));
  const float correction2 = 1.0f - std::pow(p.beta2, static_cast<float>(step));
  for_chunks(threads_, param.numel, [&](std::int64_t s, std::int64_t n) {
    Arr w(pp + s, n);
    ConstArr g(gp + s, n);
    Arr m(mp + s, n);
    Arr v(vp + s, n);
    // torch.optim.AdamW: decay first, then the bias-corrected Adam step.
    w *= 1.0f - p.lr * p.weight_decay;
    m = p.beta1 * m + (1.0f - p.beta1) * g;
    v = p.beta2 * v + (1.0f - p.beta2) * g.square();
    w -= p.lr * (m / correction1) / ((v / correction2).sqrt() + p.eps);
  });
}

}  // namespace strata::rt
