// GeLU, SwiGLU and the attention softmax, forward and backward, on the cpu backend.
#include <algorithm>
#include <cmath>

#include <Eigen/Core>
#include <fmt/format.h>

#include "runtime/cpu/cpu_device_impl.h"
#include "runtime/device/kernel_checks.h"

namespace strata::rt {
namespace {

using Arr = Eigen::Map<Eigen::ArrayXf>;
using ConstArr = Eigen::Map<const Eigen::ArrayXf>;

// sqrt(2 / pi) and the cubic coefficient of the tanh approximation of GeLU
// (Hendrycks & Gimpel 2016, sec. 2).
constexpr float kGeluC = 0.7978845608028654f;
constexpr float kGeluCubic = 0.044715f;

}  // namespace

void CpuDevice::gelu_forward(const TensorView& x, const TensorView& y) {
  const char* k = "gelu_forward";
  const float* xp = f32(k, "x", x, x.numel);
  float* yp = f32(k, "y", y, x.numel);
  for_chunks(threads_, x.numel, [&](std::int64_t b, std::int64_t n) {
    ConstArr xa(xp + b, n);
    const Eigen::ArrayXf u = kGeluC * (xa + kGeluCubic * xa.cube());
    Arr(yp + b, n) = 0.5f * xa * (1.0f + u.tanh());
  });
}

void CpuDevice::gelu_backward(const TensorView& dy, const TensorView& x, const TensorView& dx) {
  const char* k = "gelu_backward";
  const float* xp = f32(k, "x", x, x.numel);
  const float* dyp = f32(k, "dy", dy, x.numel);
  float* dxp = f32(k, "dx", dx, x.numel);
  for_chunks(threads_, x.numel, [&](std::int64_t b, std::int64_t n) {
    ConstArr xa(xp + b, n);
    const Eigen::ArrayXf t = (kGeluC * (xa + kGeluCubic * xa.cube())).tanh();
    const Eigen::ArrayXf grad =
        0.5f * (1.0f + t) + 0.5f * xa * (1.0f - t.square()) * kGeluC *
                                (1.0f + 3.0f * kGeluCubic * xa.square());
    Arr(dxp + b, n) = ConstArr(dyp + b, n) * grad;
  });
}

void CpuDevice::swiglu_forward(const TensorView& x, std::int64_t rows, std::int64_t f,
                               const TensorView& y) {
  const char* k = "swiglu_forward";
  check::positive(k, "f", f);
  check::non_negative(k, "rows", rows);
  const float* xp = f32(k, "x", x, rows * 2 * f);
  float* yp = f32(k, "y", y, rows * f);
  for_rows(threads_, rows, [&](std::int64_t r) {
    ConstArr a(xp + r * 2 * f, f);
    ConstArr b(xp + r * 2 * f + f, f);
    Arr(yp + r * f, f) = a / (1.0f + (-a).exp()) * b;
  });
}

void CpuDevice::swiglu_backward(const TensorView& dy, const TensorView& x, std::int64_t rows,
                                std::int64_t f, const TensorView& dx) {
  const char* k = "swiglu_backward";
  check::positive(k, "f", f);
  check::non_negative(k, "rows", rows);
  const float* dyp = f32(k, "dy", dy, rows * f);
  const float* xp = f32(k, "x", x, rows * 2 * f);
  float* dxp = f32(k, "dx", dx, rows * 2 * f);
  for_rows(threads_, rows, [&](std::int64_t r) {
    ConstArr a(xp + r * 2 * f, f);
    ConstArr b(xp + r * 2 * f + f, f);
    ConstArr d(dyp + r * f, f);
    const Eigen::ArrayXf sig = 1.0f / (1.0f + (-a).exp());
    const Eigen::ArrayXf silu = a * sig;
    // silu'(a) = sig(a) * (1 + a * (1 - sig(a))).
    Arr(dxp + r * 2 * f, f) = d * b * sig * (1.0f + a * (1.0f - sig));
    Arr(dxp + r * 2 * f + f, f) = d * silu;
  });
}

void CpuDevice::softmax_forward(const TensorView& x, std::int64_t rows, std::int64_t cols,
                                std::int64_t rows_per_matrix, float scale, bool causal,
                                const TensorView& y) {
  const char* k = "softmax_forward";
  check::positive(k, "cols", cols);
  check::positive(k, "rows_per_matrix", rows_per_matrix);
  check::non_negative(k, "rows", rows);
  if (rows % rows_per_matrix != 0) {
    check::fail(k, fmt::format("rows = {} is not a multiple of rows_per_matrix = {}", rows,
                               rows_per_matrix));
  }
  const float* xp = f32(k, "x", x, rows * cols);
  float* yp = f32(k, "y", y, rows * cols);
  for_rows(threads_, rows, [&](std::int64_t r) {
    // Keys visible to query i: j <= i + (cols - rows_per_matrix).
    std::int64_t visible = cols;
    if (causal) {
      const std::int64_t i = r % rows_per_matrix;
      visible = std::clamp<std::int64_t>(i + cols - rows_per_matrix + 1, 0, cols);
    }
    Arr yr(yp + r * cols, cols);
    if (visible > 0) {
      ConstArr xr(xp + r * cols, visible);
      const Eigen::ArrayXf scaled = scale * xr;
      const Eigen::ArrayXf e = (scaled - scaled.maxCoeff()).exp();
      const float total = e.sum();
      yr.head(visible) = e / total;
    }
    yr.tail(cols - visible).setZero();
  });
}

void CpuDevice::softmax_backward(const TensorView& y, const TensorView& dy, std::int64_t rows,
                                 std::int64_t cols, float scale, const TensorView& dx) {
  const char* k = "softmax_backward";
  check::positive(k, "cols", cols);
  check::non_negative(k, "rows", rows);
  const float* yp = f32(k, "y", y, rows * cols);
  const float* dyp = f32(k, "dy", dy, rows * cols);
  float* dxp = f32(k, "dx", dx, rows * cols);
  for_rows(threads_, rows, [&](std::int64_t r) {
    ConstArr yr(yp + r * cols, cols);
    ConstArr dyr(dyp + r * cols, cols);
    const float dot = (yr * dyr).sum();
    Arr(dxp + r * cols, cols) = scale * yr * (dyr - dot);
  });
}

}  // namespace strata::rt
