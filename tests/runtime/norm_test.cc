// LayerNorm and RMSNorm, forward and backward, on every backend: against
// double-precision loops (Ba et al. 2016; Zhang & Sennrich 2019), gradients also
// against finite differences, parameter gradients accumulated (+=).
#include <cmath>

#include "kernel_test_util.h"

namespace strata::rt::testing {
namespace {

constexpr std::int64_t kRows = 7;
constexpr std::int64_t kCols = 300;  // not a multiple of any block or vector width
constexpr float kEps = 1e-5f;        // Megatron's --layernorm-epsilon default

using NormTest = KernelTest;

struct LayerNormRef {
  std::vector<double> y, mean, rstd, dx, dgamma, dbeta;
};

LayerNormRef layernorm_ref(const std::vector<float>& x, const std::vector<float>& gamma,
                           const std::vector<float>& beta, const std::vector<float>& dy,
                           double dgamma0) {
  LayerNormRef r;
  r.dgamma.assign(kCols, dgamma0);
  r.dbeta.assign(kCols, dgamma0);
  for (std::int64_t i = 0; i < kRows; ++i) {
    double mu = 0.0, var = 0.0;
    for (std::int64_t j = 0; j < kCols; ++j) mu += x[i * kCols + j];
    mu /= kCols;
    for (std::int64_t j = 0; j < kCols; ++j) var += std::pow(x[i * kCols + j] - mu, 2);
    var /= kCols;
    const double inv = 1.0 / std::sqrt(var + kEps);
    r.mean.push_back(mu);
    r.rstd.push_back(inv);
    double mean_g = 0.0, mean_gx = 0.0;
    for (std::int64_t j = 0; j < kCols; ++j) {
      const double xhat = (x[i * kCols + j] - mu) * inv;
      r.y.push_back(xhat * gamma[j] + beta[j]);
      const double g = dy[i * kCols + j] * gamma[j];
      mean_g += g / kCols;
      mean_gx += g * xhat / kCols;
      r.dgamma[j] += dy[i * kCols + j] * xhat;
      r.dbeta[j] += dy[i * kCols + j];
    }
    for (std::int64_t j = 0; j < kCols; ++j) {
      const double xhat = (x[i * kCols + j] - mu) * inv;
      r.dx.push_back(inv * (dy[i * kCols + j] * gamma[j] - mean_g - xhat * mean_gx));
    }
  }
  return r;
}

TEST_P(NormTest, LayerNormForwardAndBackwardMatchReference) {
  const DType dt = GetParam().dtype;
  auto x = random_values(kRows * kCols, 1, -2.0f, 3.0f, stored());
  auto gamma = random_values(kCols, 2, 0.5f, 1.5f, stored());
  auto beta = random_values(kCols, 3, -0.5f, 0.5f, stored());
  auto dy = random_values(kRows * kCols, 4, -1.0f, 1.0f, stored());
  const auto ref = layernorm_ref(x, gamma, beta, dy, 0.25);

  Tensor tx = tensor(x), tg = tensor(gamma), tb = tensor(beta), tdy = tensor(dy);
  Tensor ty = zeros(kRows * kCols, dt), tdx = zeros(kRows * kCols, dt);
  Tensor mean = zeros(kRows, DType::kFp32), rstd = zeros(kRows, DType::kFp32);
  Tensor dgamma = tensor_of(DType::kFp32, std::vector<float>(kCols, 0.25f));
  Tensor dbeta = tensor_of(DType::kFp32, std::vector<float>(kCols, 0.25f));
  dev().layernorm_forward(tx.view(), tg.view(), tb.view(), kRows, kCols, kEps, ty.view(),
                          mean.view(), rstd.view());
  dev().layernorm_backward(tdy.view(), tx.view(), tg.view(), mean.view(), rstd.view(), kRows,
                           kCols, tdx.view(), dgamma.view(), dbeta.view());
  EXPECT_TRUE(all_close(get(ty), ref.y, tol()));
  EXPECT_TRUE(all_close(get(mean), ref.mean, tolerance(DType::kFp32)));
  EXPECT_TRUE(all_close(get(rstd), ref.rstd, tolerance(DType::kFp32)));
  EXPECT_TRUE(all_close(get(tdx), ref.dx, tol()));
  EXPECT_TRUE(all_close(get(dgamma), ref.dgamma, tolerance(DType::kFp32)));
  EXPECT_TRUE(all_close(get(dbeta), ref.dbeta, tolerance(DType::kFp32)));
}

TEST_P(NormTest, LayerNormWithoutBiasAndInPlaceGradient) {
  const DType dt = GetParam().dtype;
  auto x = random_values(kRows * kCols, 5, -1.0f, 1.0f, stored());
  auto gamma = random_values(kCols, 6, 0.5f, 1.5f, stored());
  auto dy = random_values(kRows * kCols, 7, -1.0f, 1.0f, stored());
  const auto ref = layernorm_ref(x, gamma, std::vector<float>(kCols, 0.0f), dy, 0.0);
  Tensor tx = tensor(x), tg = tensor(gamma), tdy = tensor(dy), ty = zeros(kRows * kCols, dt);
  Tensor mean = zeros(kRows, DType::kFp32), rstd = zeros(kRows, DType::kFp32);
  Tensor dgamma = zeros(kCols, DType::kFp32);
  dev().layernorm_forward(tx.view(), tg.view(), TensorView{}, kRows, kCols, kEps, ty.view(),
                          mean.view(), rstd.view());
  // dx written over dy (the contract allows it).
  dev().layernorm_backward(tdy.view(), tx.view(), tg.view(), mean.view(), rstd.view(), kRows,
                           kCols, tdy.view(), dgamma.view(), TensorView{});
  EXPECT_TRUE(all_close(get(ty), ref.y, tol()));
  EXPECT_TRUE(all_close(get(tdy), ref.dx, tol()));
  EXPECT_TRUE(all_close(get(dgamma), ref.dgamma, tolerance(DType::kFp32)));
}

TEST_P(NormTest, RmsNormForwardAndBackwardMatchReference) {
  const DType dt = GetParam().dtype;
  auto x = random_values(kRows * kCols, 8, -2.0f, 3.0f, stored());
  auto gamma = random_values(kCols, 9, 0.5f, 1.5f, stored());
  auto dy = random_values(kRows * kCols, 10, -1.0f, 1.0f, stored());
  std::vector<double> y, rstd_ref, dx, dgamma_ref(kCols, 0.5);
  for (std::int64_t i = 0; i < kRows; ++i) {
    double ms = 0.0;
    for (std::int64_t j = 0; j < kCols; ++j) ms += std::pow(x[i * kCols + j], 2) / kCols;
    const double inv = 1.0 / std::sqrt(ms + kEps);
    rstd_ref.push_back(inv);
    double mean_gx = 0.0;
    for (std::int64_t j = 0; j < kCols; ++j) {
      y.push_back(x[i * kCols + j] * inv * gamma[j]);
      mean_gx += dy[i * kCols + j] * gamma[j] * x[i * kCols + j] / kCols;
      dgamma_ref[j] += dy[i * kCols + j] * x[i * kCols + j] * inv;
    }
    for (std::int64_t j = 0; j < kCols; ++j) {
      dx.push_back(inv * (dy[i * kCols + j] * gamma[j] - x[i * kCols + j] * inv * inv * mean_gx));
    }
  }
  Tensor tx = tensor(x), tg = tensor(gamma), tdy = tensor(dy);
  Tensor ty = zeros(kRows * kCols, dt), tdx = zeros(kRows * kCols, dt);
  Tensor rstd = zeros(kRows, DType::kFp32);
  Tensor dgamma = tensor_of(DType::kFp32, std::vector<float>(kCols, 0.5f));
  dev().rmsnorm_forward(tx.view(), tg.view(), kRows, kCols, kEps, ty.view(), rstd.view());
  dev().rmsnorm_backward(tdy.view(), tx.view(), tg.view(), rstd.view(), kRows, kCols, tdx.view(),
                         dgamma.view());
  EXPECT_TRUE(all_close(get(ty), y, tol()));
  EXPECT_TRUE(all_close(get(rstd), rstd_ref, tolerance(DType::kFp32)));
  EXPECT_TRUE(all_close(get(tdx), dx, tol()));
  EXPECT_TRUE(all_close(get(dgamma), dgamma_ref, tolerance(DType::kFp32)));
}

TEST_P(NormTest, GradientsMatchFiniteDifferences) {
  if (stored() != DType::kFp32) GTEST_SKIP() << "finite differences need fp32 forward values";
  const std::int64_t rows = 3, cols = 40;
  auto x = random_values(rows * cols, 20, -2.0f, 2.0f, stored());
  auto gamma = random_values(cols, 21, 0.5f, 1.5f, stored());
  auto beta = random_values(cols, 22, -0.5f, 0.5f, stored());
  auto w = random_values(rows * cols, 23, -1.0f, 1.0f, stored());  // L = sum(w * y)
  Tensor tg = tensor(gamma), tb = tensor(beta), tw = tensor(w);
  Tensor y = zeros(rows * cols, DType::kFp32), dx = zeros(rows * cols, DType::kFp32);
  Tensor mean = zeros(rows, DType::kFp32), rstd = zeros(rows, DType::kFp32);
  Tensor dgamma = zeros(cols, DType::kFp32), dbeta = zeros(cols, DType::kFp32);
  auto loss = [&](bool rms) {
    return [&, rms](const std::vector<float>& xs) {
      Tensor t = tensor(xs);
      if (rms) {
        dev().rmsnorm_forward(t.view(), tg.view(), rows, cols, kEps, y.view(), rstd.view());
      } else {
        dev().layernorm_forward(t.view(), tg.view(), tb.view(), rows, cols, kEps, y.view(),
                                mean.view(), rstd.view());
      }
      const auto ys = get(y);
      double l = 0.0;
      for (std::size_t i = 0; i < ys.size(); ++i) l += static_cast<double>(w[i]) * ys[i];
      return l;
    };
  };
  Tensor tx = tensor(x);
  dev().layernorm_forward(tx.view(), tg.view(), tb.view(), rows, cols, kEps, y.view(), mean.view(),
                          rstd.view());
  dev().layernorm_backward(tw.view(), tx.view(), tg.view(), mean.view(), rstd.view(), rows, cols,
                           dx.view(), dgamma.view(), dbeta.view());
  EXPECT_LT(finite_difference_error(loss(false), x, get(dx), 1e-2, 99), 2e-3);
  dev().rmsnorm_forward(tx.view(), tg.view(), rows, cols, kEps, y.view(), rstd.view());
  dev().rmsnorm_backward(tw.view(), tx.view(), tg.view(), rstd.view(), rows, cols, dx.view(),
                         dgamma.view());
  EXPECT_LT(finite_difference_error(loss(true), x, get(dx), 1e-2, 98), 2e-3);
}

TEST_P(NormTest, RejectsWrongSizes) {
  Tensor x = zeros(10, GetParam().dtype), g = zeros(4, GetParam().dtype);
  Tensor y = zeros(10, GetParam().dtype), s = zeros(2, DType::kFp32);
  EXPECT_THROW(dev().layernorm_forward(x.view(), g.view(), TensorView{}, 2, 5, kEps, y.view(),
                                       s.view(), s.view()),
               InternalError);  // gamma has 4 elements, cols is 5
  EXPECT_THROW(dev().rmsnorm_forward(x.view(), g.view(), 2, 4, kEps, y.view(), s.view()),
               InternalError);  // x has 10 elements, rows x cols is 8
}

INSTANTIATE_TEST_SUITE_P(Backends, NormTest, ::testing::ValuesIn(all_cases()), case_name);

}  // namespace
}  // namespace strata::rt::testing
