// GeLU (tanh approximation, Hendrycks & Gimpel 2016), SwiGLU (Shazeer 2020) and
// the scaled, causally masked attention softmax, forward and backward, on every
// backend, against double-precision loops and finite differences.
#include <algorithm>
#include <cmath>

#include "kernel_test_util.h"

namespace strata::rt::testing {
namespace {

using ActivationTest = KernelTest;

double gelu(double x) {
  const double c = std::sqrt(2.0 / M_PI);
  return 0.5 * x * (1.0 + std::tanh(c * (x + 0.044715 * x * x * x)));
}

double gelu_grad(double x) {
  const double c = std::sqrt(2.0 / M_PI);
  const double t = std::tanh(c * (x + 0.044715 * x * x * x));
  return 0.5 * (1.0 + t) + 0.5 * x * (1.0 - t * t) * c * (1.0 + 3.0 * 0.044715 * x * x);
}

double sigmoid(double a) { return 1.0 / (1.0 + std::exp(-a)); }

TEST_P(ActivationTest, GeluKnownValues) {
  // GeLU(0) = 0, GeLU(1) = 0.8411920 and GeLU(-1) = -0.1588080 with the tanh
  // approximation (0.5 (1 + tanh(sqrt(2/pi) * 1.044715))); the exact erf form
  // gives 0.8413447 at 1, so these also tell the two forms apart.
  Tensor x = tensor({0.0f, 1.0f, -1.0f, 3.0f});
  Tensor y = zeros(4, GetParam().dtype);
  dev().gelu_forward(x.view(), y.view());
  EXPECT_TRUE(all_close(get(y), {0.0, 0.8411920, -0.1588080, 2.9963627}, tol()));
}

TEST_P(ActivationTest, GeluForwardAndBackwardMatchReference) {
  const std::int64_t n = 70001;  // several parallel chunks and a ragged tail
  auto x = random_values(n, 30, -5.0f, 5.0f, stored());
  auto dy = random_values(n, 31, -1.0f, 1.0f, stored());
  std::vector<double> y, dx;
  for (std::int64_t i = 0; i < n; ++i) {
    y.push_back(gelu(x[i]));
    dx.push_back(dy[i] * gelu_grad(x[i]));
  }
  Tensor tx = tensor(x), tdy = tensor(dy), ty = zeros(n, GetParam().dtype);
  dev().gelu_forward(tx.view(), ty.view());
  dev().gelu_backward(tdy.view(), tx.view(), tdy.view());  // dx in place of dy
  EXPECT_TRUE(all_close(get(ty), y, tol()));
  EXPECT_TRUE(all_close(get(tdy), dx, tol()));
}

TEST_P(ActivationTest, SwigluForwardAndBackwardMatchReference) {
  const std::int64_t rows = 6, f = 129;
  auto x = random_values(rows * 2 * f, 32, -4.0f, 4.0f, stored());
  auto dy = random_values(rows * f, 33, -1.0f, 1.0f, stored());
  std::vector<double> y, dx(rows * 2 * f);
  for (std::int64_t r = 0; r < rows; ++r) {
    for (std::int64_t j = 0; j < f; ++j) {
      const double a = x[r * 2 * f + j], b = x[r * 2 * f + f + j], d = dy[r * f + j];
      const double s = sigmoid(a);
      y.push_back(a * s * b);
      dx[r * 2 * f + j] = d * b * (s + a * s * (1.0 - s));
      dx[r * 2 * f + f + j] = d * a * s;
    }
  }
  Tensor tx = tensor(x), tdy = tensor(dy);
  Tensor ty = zeros(rows * f, GetParam().dtype), tdx = zeros(rows * 2 * f, GetParam().dtype);
  dev().swiglu_forward(tx.view(), rows, f, ty.view());
  dev().swiglu_backward(tdy.view(), tx.view(), rows, f, tdx.view());
  EXPECT_TRUE(all_close(get(ty), y, tol()));
  EXPECT_TRUE(all_close(get(tdx), dx, tol()));
}

// Softmax reference over [batch * sq, sk] with the causal offset sk - sq.
std::vector<double> softmax_ref(const std::vector<float>& x, std::int64_t rows, std::int64_t sk,
                                std::int64_t sq, double scale, bool causal) {
  std::vector<double> y(x.size(), 0.0);
  for (std::int64_t r = 0; r < rows; ++r) {
    const std::int64_t visible =
        causal ? std::clamp<std::int64_t>(r % sq + sk - sq + 1, 0, sk) : sk;
    double mx = -1e300, total = 0.0;
    for (std::int64_t j = 0; j < visible; ++j) mx = std::max(mx, scale * x[r * sk + j]);
    for (std::int64_t j = 0; j < visible; ++j) total += std::exp(scale * x[r * sk + j] - mx);
    for (std::int64_t j = 0; j < visible; ++j) {
      y[r * sk + j] = std::exp(scale * x[r * sk + j] - mx) / total;
    }
  }
  return y;
}

TEST_P(ActivationTest, SoftmaxCausalAndFullMatchReference) {
  const double scale = 1.0 / std::sqrt(64.0);  // 1/sqrt(head_dim), head_dim 64
  struct Case { std::int64_t batch, sq, sk; bool causal; };
  for (Case c : {Case{3, 5, 7, true}, Case{2, 9, 9, true}, Case{2, 4, 300, false},
                 Case{2, 4, 2, true}}) {  // sq > sk: the first rows see no key at all
    SCOPED_TRACE(::testing::Message() << "batch " << c.batch << " sq " << c.sq << " sk " << c.sk
                                      << " causal " << c.causal);
    const std::int64_t rows = c.batch * c.sq;
    auto x = random_values(rows * c.sk, 34, -30.0f, 30.0f, stored());
    auto dy = random_values(rows * c.sk, 35, -1.0f, 1.0f, stored());
    const auto y = softmax_ref(x, rows, c.sk, c.sq, scale, c.causal);
    // The reference backward from the rounded forward output the kernel sees.
    Tensor tx = tensor(x), tdy = tensor(dy), ty = zeros(rows * c.sk, GetParam().dtype);
    dev().softmax_forward(tx.view(), rows, c.sk, c.sq, static_cast<float>(scale), c.causal,
                          ty.view());
    const auto got_y = get(ty);
    EXPECT_TRUE(all_close(got_y, y, tol()));
    for (std::int64_t r = 0; r < rows; ++r) {
      const std::int64_t visible =
          c.causal ? std::clamp<std::int64_t>(r % c.sq + c.sk - c.sq + 1, 0, c.sk) : c.sk;
      for (std::int64_t j = visible; j < c.sk; ++j) {
        ASSERT_EQ(got_y[r * c.sk + j], 0.0f) << "masked score (" << r << ", " << j << ")";
      }
    }
    std::vector<double> dx(y.size());
    for (std::int64_t r = 0; r < rows; ++r) {
      double dot = 0.0;
      for (std::int64_t j = 0; j < c.sk; ++j) dot += double(got_y[r * c.sk + j]) * dy[r * c.sk + j];
      for (std::int64_t j = 0; j < c.sk; ++j) {
        dx[r * c.sk + j] = scale * got_y[r * c.sk + j] * (dy[r * c.sk + j] - dot);
      }
    }
    dev().softmax_backward(ty.view(), tdy.view(), rows, c.sk, static_cast<float>(scale),
                           tdy.view());
    EXPECT_TRUE(all_close(get(tdy), dx, tol()));
  }
}

TEST_P(ActivationTest, SoftmaxInPlace) {
  auto x = random_values(4 * 8, 36, -3.0f, 3.0f, stored());
  const auto y = softmax_ref(x, 4, 8, 4, 1.0, false);
  Tensor t = tensor(x);
  dev().softmax_forward(t.view(), 4, 8, 4, 1.0f, false, t.view());
  EXPECT_TRUE(all_close(get(t), y, tol()));
}

TEST_P(ActivationTest, GradientsMatchFiniteDifferences) {
  if (stored() != DType::kFp32) GTEST_SKIP() << "finite differences need fp32 forward values";
  const std::int64_t rows = 4, cols = 12, f = 12;
  auto w = random_values(rows * cols, 40, -1.0f, 1.0f, stored());
  Tensor tw = tensor(w);
  auto weighted = [&](const Tensor& y) {
    const auto ys = get(y);
    double l = 0.0;
    for (std::size_t i = 0; i < ys.size(); ++i) l += static_cast<double>(w[i]) * ys[i];
    return l;
  };
  {  // GeLU
    auto x = random_values(rows * cols, 41, -3.0f, 3.0f, stored());
    Tensor y = zeros(rows * cols, DType::kFp32), dx = zeros(rows * cols, DType::kFp32);
    Tensor tx = tensor(x);
    dev().gelu_backward(tw.view(), tx.view(), dx.view());
    auto f_gelu = [&](const std::vector<float>& xs) {
      Tensor t = tensor(xs);
      dev().gelu_forward(t.view(), y.view());
      return weighted(y);
    };
    EXPECT_LT(finite_difference_error(f_gelu, x, get(dx), 1e-2, 7), 2e-3);
  }
  {  // SwiGLU: [rows, 2f] -> [rows, f]
    auto x = random_values(rows * 2 * f, 42, -3.0f, 3.0f, stored());
    Tensor y = zeros(rows * f, DType::kFp32), dx = zeros(rows * 2 * f, DType::kFp32);
    Tensor tx = tensor(x);
    dev().swiglu_backward(tw.view(), tx.view(), rows, f, dx.view());
    auto f_swiglu = [&](const std::vector<float>& xs) {
      Tensor t = tensor(xs);
      dev().swiglu_forward(t.view(), rows, f, y.view());
      return weighted(y);
    };
    EXPECT_LT(finite_difference_error(f_swiglu, x, get(dx), 1e-2, 8), 2e-3);
  }
  {  // causal softmax, scale 0.5
    auto x = random_values(rows * cols, 43, -3.0f, 3.0f, stored());
    Tensor y = zeros(rows * cols, DType::kFp32), dx = zeros(rows * cols, DType::kFp32);
    Tensor tx = tensor(x);
    dev().softmax_forward(tx.view(), rows, cols, 2, 0.5f, true, y.view());
    dev().softmax_backward(y.view(), tw.view(), rows, cols, 0.5f, dx.view());
    auto f_softmax = [&](const std::vector<float>& xs) {
      Tensor t = tensor(xs);
      dev().softmax_forward(t.view(), rows, cols, 2, 0.5f, true, y.view());
      return weighted(y);
    };
    EXPECT_LT(finite_difference_error(f_softmax, x, get(dx), 1e-2, 9), 2e-3);
  }
}

INSTANTIATE_TEST_SUITE_P(Backends, ActivationTest, ::testing::ValuesIn(all_cases()), case_name);

}  // namespace
}  // namespace strata::rt::testing
