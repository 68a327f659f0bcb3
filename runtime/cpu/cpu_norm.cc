// LayerNorm and RMSNorm, forward and backward, on the cpu backend. Rows run in
// parallel; parameter gradients are summed over rows in row order (one thread),
// so they do not depend on the thread count.
#include <cmath>

#include <Eigen/Core>

#include "runtime/cpu/cpu_device_impl.h"
#include "runtime/device/kernel_checks.h"

namespace strata::rt {
namespace {

using Row = Eigen::Map<Eigen::ArrayXf>;
using ConstRow = Eigen::Map<const Eigen::ArrayXf>;

}  // namespace

void CpuDevice::layernorm_forward(const TensorView& x, const TensorView& gamma,
                                  const TensorView& beta, std::int64_t rows, std::int64_t cols,
                                  float eps, const TensorView& y, const TensorView& mean,
                                  const TensorView& rstd) {
  const char* k = "layernorm_forward";
  check::positive(k, "cols", cols);
  check::non_negative(k, "rows", rows);
  const float* xp = f32(k, "x", x, rows * cols);
  const float* gp = f32(k, "gamma", gamma, cols);
  const float* bp = beta.numel == 0 ? nullptr : f32(k, "beta", beta, cols);
  float* yp = f32(k, "y", y, rows * cols);
  float* mp = f32(k, "mean", mean, rows);
  float* rp = f32(k, "rstd", rstd, rows);
  ConstRow g(gp, cols);
  for_rows(threads_, rows, [&](std::int64_t r) {
    ConstRow xr(xp + r * cols, cols);
    const float mu = xr.mean();
    const float var = (xr - mu).square().mean();
    const float inv = 1.0f / std::sqrt(var + eps);
    Row yr(yp + r * cols, cols);
    if (bp != nullptr) {
      yr = (xr - mu) * inv * g + ConstRow(bp, cols);
    } else {
      yr = (xr - mu) * inv * g;
    }
    mp[r] = mu;
    rp[r] = inv;
  });
}

void CpuDevice::layernorm_backward(const TensorView& dy, const TensorView& x,
                                   const TensorView& gamma, const TensorView& mean,
                                   const TensorView& rstd, std::int64_t rows, std::int64_t cols,
                                   const TensorView& dx, const TensorView& dgamma,
                                   const TensorView& dbeta) {
  const char* k = "layernorm_backward";
  check::positive(k, "cols", cols);
  check::non_negative(k, "rows", rows);
  const float* dyp = f32(k, "dy", dy, rows * cols);
  const float* xp = f32(k, "x", x, rows * cols);
  const float* gp = f32(k, "gamma", gamma, cols);
  const float* mp = f32(k, "mean", mean, rows);
  const float* rp = f32(k, "rstd", rstd, rows);
  float* dxp = f32(k, "dx", dx, rows * cols);
  float* dgp = f32(k, "dgamma", dgamma, cols);
  float* dbp = dbeta.numel == 0 ? nullptr : f32(k, "dbeta", dbeta, cols);
  ConstRow g(gp, cols);
  // Parameter gradients first (dx may alias dy): in row order, one thread.
  Row dg(dgp, cols);
  for (std::int64_t r = 0; r < rows; ++r) {
    ConstRow dyr(dyp + r * cols, cols);
    dg += dyr * (ConstRow(xp + r * cols, cols) - mp[r]) * rp[r];
    if (dbp != nullptr) Row(dbp, cols) += dyr;
  }
  // dx = rstd * (g - mean(g) - xhat * mean(g * xhat)), g = dy * gamma.
  for_rows(threads_, rows, [&](std::int64_t r) {
    const Eigen::ArrayXf xhat = (ConstRow(xp + r * cols, cols) - mp[r]) * rp[r];
    const Eigen::ArrayXf gr = ConstRow(dyp + r * cols, cols) * g;
    const float mean_g = gr.mean();
    const float mean_gx = (gr * xhat).mean();
    Row(dxp + r * cols, cols) = rp[r] * (gr - mean_g - xhat * mean_gx);
  });
}

void CpuDevice::rmsnorm_forward(const TensorView& x, const TensorView& gamma, std::int64_t rows,
                                std::int64_t cols, float eps, const TensorView& y,
                                const TensorView& rstd) {
  const char* k = "rmsnorm_forward";
  check::positive(k, "cols", cols);
  check::non_negative(k, "rows", rows);
  const float* xp = f32(k, "x", x, rows * cols);
  const float* gp = f32(k, "gamma", gamma, cols);
  float* yp = f32(k, "y", y, rows * cols);
  float* rp = f32(k, "rstd", rstd, rows);
  ConstRow g(gp, cols);
  for_rows(threads_, rows, [&](std::int64_t r) {
    ConstRow xr(xp + r * cols, cols);
    const float inv = 1.0f / std::sqrt(xr.square().mean() + eps);
    Row(yp + r * cols, cols) = xr * inv * g;
    rp[r] = inv;
  });
}

void CpuDevice::rmsnorm_backward(const TensorView& dy, const TensorView& x,
                                 const TensorView& gamma, const TensorView& rstd,
                                 std::int64_t rows, std::int64_t cols, const TensorView& dx,
                                 const TensorView& dgamma) {
  const char* k = "rmsnorm_backward";
  check::positive(k, "cols", cols);
  check::non_negative(k, "rows", rows);
  const float* dyp = f32(k, "dy", dy, rows * cols);
  const float* xp = f32(k, "x", x, rows * cols);
  const float* gp = f32(k, "gamma", gamma, cols);
  const float* rp = f32(k, "rstd", rstd, rows);
  float* dxp = f32(k, "dx", dx, rows * cols);
  float* dgp = f32(k, "dgamma", dgamma, cols);
  ConstRow g(gp, cols);
  Row dg(dgp, cols);
  for (std::int64_t r = 0; r < rows; ++r) {
    dg += ConstRow(dyp + r * cols, cols) * ConstRow(xp + r * cols, cols) * rp[r];
  }
  // dx = rstd * (g - x * rstd^2 * mean(g * x)), g = dy * gamma.
  for_rows(threads_, rows, [&](std::int64_t r) {
    ConstRow xr(xp + r * cols, cols);
    const Eigen::ArrayXf gr = ConstRow(dyp + r * cols, cols) * g;
    const float mean_gx = (gr * xr).mean();
    const float inv = rp[r];
    Row(dxp + r * cols, cols) = inv * (gr - xr * (inv * inv * mean_gx));
  });
}

}  // namespace strata::rt
