// Elementwise, layout, random-fill and reduction kernels on every backend.
#include <algorithm>
#include <cmath>
#include <set>

#include "core/error.h"
#include "kernel_test_util.h"
#include "runtime/cpu/cpu_device.h"

namespace strata::rt::testing {
namespace {

using ElementwiseTest = KernelTest;

std::vector<double> as_double(const std::vector<float>& v) { return {v.begin(), v.end()}; }

TEST_P(ElementwiseTest, AddScaleAxpyFill) {
  const std::int64_t n = 40000;
  auto a = random_values(n, 50, -2.0f, 2.0f, stored());
  auto b = random_values(n, 51, -2.0f, 2.0f, stored());
  std::vector<double> sum, scaled;
  for (std::int64_t i = 0; i < n; ++i) {
    sum.push_back(double(a[i]) + b[i]);
    scaled.push_back(-0.75 * a[i]);
  }
  Tensor ta = tensor(a), tb = tensor(b), out = zeros(n, GetParam().dtype);
  dev().add(ta.view(), tb.view(), out.view());
  EXPECT_TRUE(all_close(get(out), sum, tol()));
  dev().add(ta.view(), tb.view(), ta.view());  // out aliases a: the residual add
  EXPECT_TRUE(all_close(get(ta), sum, tol()));
  Tensor tc = tensor(a);
  dev().scale(tc.view(), -0.75f);
  EXPECT_TRUE(all_close(get(tc), scaled, tol()));
  // axpy accumulating the case's dtype into fp32 (gradient accumulation).
  auto y0 = random_values(n, 52, -1.0f, 1.0f, DType::kFp32);
  std::vector<double> axpy;
  for (std::int64_t i = 0; i < n; ++i) axpy.push_back(y0[i] + 0.5 * b[i]);
  Tensor ty = tensor_of(DType::kFp32, y0);
  dev().axpy(0.5f, tb.view(), ty.view());
  EXPECT_TRUE(all_close(get(ty), axpy, tolerance(DType::kFp32)));
  dev().fill(out.view(), 3.25f);  // exactly representable in every dtype
  EXPECT_TRUE(all_close(get(out), std::vector<double>(n, 3.25), 0.0));
}

TEST_P(ElementwiseTest, BiasForwardAndBackward) {
  const std::int64_t rows = 9, cols = 130;
  auto x = random_values(rows * cols, 53, -1.0f, 1.0f, stored());
  auto bias = random_values(cols, 54, -1.0f, 1.0f, stored());
  std::vector<double> y, dbias(cols, 1.0);
  for (std::int64_t r = 0; r < rows; ++r) {
    for (std::int64_t c = 0; c < cols; ++c) {
      y.push_back(double(x[r * cols + c]) + bias[c]);
      dbias[c] += x[r * cols + c];
    }
  }
  Tensor tx = tensor(x), tbias = tensor(bias);
  Tensor tdb = tensor_of(DType::kFp32, std::vector<float>(cols, 1.0f));
  dev().bias_backward(tx.view(), rows, cols, tdb.view());
  dev().add_bias(tx.view(), tbias.view(), rows, cols);
  EXPECT_TRUE(all_close(get(tx), y, tol()));
  EXPECT_TRUE(all_close(get(tdb), dbias, tolerance(DType::kFp32)));
}

TEST_P(ElementwiseTest, ConvertRoundsToTheTargetDtype) {
  auto x = random_values(1000, 55, -100.0f, 100.0f, DType::kFp32);
  Tensor src = tensor_of(DType::kFp32, x);
  Tensor dst = zeros(1000, GetParam().dtype);
  dev().convert(src.view(), dst.view());
  std::vector<double> want;
  for (float v : x) want.push_back(round_to_dtype(v, stored()));
  // Round to nearest even, as the host does: exactly equal.
  EXPECT_TRUE(all_close(get(dst), want, 0.0));
  Tensor back = zeros(1000, DType::kFp32);
  dev().convert(dst.view(), back.view());
  EXPECT_TRUE(all_close(get(back), want, 0.0));
}

TEST_P(ElementwiseTest, RandomFillIsDeterministicShardableAndInRange) {
  const std::int64_t n = 50000;
  Tensor whole = zeros(n, GetParam().dtype), shard = zeros(n / 2, GetParam().dtype);
  dev().fill_random(whole.view(), 1234, 0, -0.5f, 0.5f);
  dev().fill_random(shard.view(), 1234, n / 2, -0.5f, 0.5f);
  const auto w = get(whole), s = get(shard);
  // The host generator gives the same values (same counter-based formula).
  EXPECT_TRUE(all_close(w, as_double(random_values(n, 1234, -0.5f, 0.5f, stored())), 0.0));
  // The second half, filled on its own from index n/2, equals the whole's second half.
  EXPECT_TRUE(std::equal(s.begin(), s.end(), w.begin() + n / 2));
  double mean = 0.0;
  std::set<float> distinct;
  for (float v : w) {
    ASSERT_GE(v, -0.5f);
    ASSERT_LE(v, 0.5f);
    mean += v / n;
    distinct.insert(v);
  }
  EXPECT_NEAR(mean, 0.0, 0.01);  // uniform on [-0.5, 0.5): sd of the mean 0.29/sqrt(n) = 0.0013
  EXPECT_GT(distinct.size(), 200u);  // never a constant (or all-zero) fill
  Tensor other = zeros(n, GetParam().dtype);
  dev().fill_random(other.view(), 1235, 0, -0.5f, 0.5f);
  EXPECT_NE(get(other), w);  // another seed, other values
}

TEST_P(ElementwiseTest, Copy2dSplitsAndJoinsColumnBlocks) {
  // Split QKV [rows, 3h] into K [rows, h] and join it back into a zeroed [rows, 3h].
  const std::int64_t rows = 5, h = 7;
  auto qkv = random_values(rows * 3 * h, 56, -1.0f, 1.0f, stored());
  Tensor tqkv = tensor(qkv), k = zeros(rows * h, GetParam().dtype);
  dev().copy_2d(tqkv.view().slice(h, rows * 3 * h - h), 3 * h, k.view(), h, rows, h);
  std::vector<double> want_k;
  for (std::int64_t r = 0; r < rows; ++r) {
    for (std::int64_t c = 0; c < h; ++c) want_k.push_back(qkv[r * 3 * h + h + c]);
  }
  EXPECT_TRUE(all_close(get(k), want_k, 0.0));
  Tensor joined = zeros(rows * 3 * h, GetParam().dtype);
  dev().copy_2d(k.view(), h, joined.view().slice(h, rows * 3 * h - h), 3 * h, rows, h);
  const auto j = get(joined);
  for (std::int64_t r = 0; r < rows; ++r) {
    for (std::int64_t c = 0; c < 3 * h; ++c) {
      const double want = (c >= h && c < 2 * h) ? qkv[r * 3 * h + c] : 0.0;
      ASSERT_EQ(j[r * 3 * h + c], want) << r << "," << c;
    }
  }
}

TEST_P(ElementwiseTest, Permute0213SwapsTheMiddleDimensions) {
  const std::int64_t b = 2, s = 3, heads = 4, d = 5;
  std::vector<float> x(b * s * heads * d);
  for (std::size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(i);  // exact in every dtype up to 256
  Tensor tx = tensor(x), ty = zeros(x.size(), GetParam().dtype), back = zeros(x.size(), GetParam().dtype);
  dev().permute_0213(tx.view(), b, s, heads, d, ty.view());
  const auto y = get(ty);
  for (std::int64_t i0 = 0; i0 < b; ++i0)
    for (std::int64_t i1 = 0; i1 < s; ++i1)
      for (std::int64_t i2 = 0; i2 < heads; ++i2)
        for (std::int64_t i3 = 0; i3 < d; ++i3)
          ASSERT_EQ(y[((i0 * heads + i2) * s + i1) * d + i3], x[((i0 * s + i1) * heads + i2) * d + i3]);
  dev().permute_0213(ty.view(), b, heads, s, d, back.view());  // its own inverse
  EXPECT_EQ(get(back), x);
}

TEST_P(ElementwiseTest, SumAndSumSquares) {
  const std::int64_t n = 300001;
  auto x = random_values(n, 57, -1.0f, 2.0f, stored());
  double s = 0.0, sq = 0.0;
  for (float v : x) {
    s += v;
    sq += double(v) * v;
  }
  Tensor tx = tensor(x), out = zeros(1, DType::kFp32);
  dev().sum(tx.view(), out.view());
  EXPECT_TRUE(all_close(get(out), {s}, 1e-6));  // summed in double: one fp32 rounding
  dev().sum_squares(tx.view(), out.view());
  EXPECT_TRUE(all_close(get(out), {sq}, 1e-6));
}

TEST_P(ElementwiseTest, AdamStepMatchesAdamW) {
  // Reference: torch.optim.AdamW's update rule (decay, moments, bias correction).
  const std::int64_t n = 1000;
  AdamParams p;
  p.lr = 1e-3f;
  p.weight_decay = 0.1f;
  auto w = random_values(n, 60, -1.0f, 1.0f, DType::kFp32);
  auto m = random_values(n, 61, -0.1f, 0.1f, DType::kFp32);
  auto v = random_values(n, 62, 0.0f, 0.01f, DType::kFp32);
  auto g = random_values(n, 63, -1.0f, 1.0f, DType::kFp32);
  const std::int64_t step = 7;
  std::vector<double> w2, m2, v2;
  for (std::int64_t i = 0; i < n; ++i) {
    const double mi = 0.9 * m[i] + 0.1 * g[i];
    const double vi = 0.999 * v[i] + 0.001 * double(g[i]) * g[i];
    const double mhat = mi / (1.0 - std::pow(0.9, step));
    const double vhat = vi / (1.0 - std::pow(0.999, step));
    w2.push_back(w[i] * (1.0 - 1e-3 * 0.1) - 1e-3 * mhat / (std::sqrt(vhat) + 1e-8));
    m2.push_back(mi);
    v2.push_back(vi);
  }
  Tensor tw = tensor_of(DType::kFp32, w), tm = tensor_of(DType::kFp32, m);
  Tensor tv = tensor_of(DType::kFp32, v), tg = tensor_of(DType::kFp32, g);
  dev().adam_step(tw.view(), tg.view(), tm.view(), tv.view(), p, step);
  EXPECT_TRUE(all_close(get(tw), w2, tolerance(DType::kFp32)));
  EXPECT_TRUE(all_close(get(tm), m2, tolerance(DType::kFp32)));
  EXPECT_TRUE(all_close(get(tv), v2, 1e-4));
}

TEST_P(ElementwiseTest, FirstAdamStepMovesEachWeightByTheLearningRate) {
  // Kingma & Ba 2015, sec. 2.1: with bias correction the first step is
  // lr * g / (|g| + eps), i.e. lr * sign(g) when |g| >> eps.
  AdamParams p;
  p.lr = 0.01f;
  Tensor w = tensor_of(DType::kFp32, {1.0f, 1.0f, 1.0f}), g = tensor_of(DType::kFp32, {3.0f, -0.002f, 50.0f});
  Tensor m = zeros(3, DType::kFp32), v = zeros(3, DType::kFp32);
  dev().adam_step(w.view(), g.view(), m.view(), v.view(), p, 1);
  EXPECT_TRUE(all_close(get(w), {0.99, 1.01, 0.99}, 1e-5));
}

TEST_P(ElementwiseTest, MemoryAccountingAndEvents) {
  const std::int64_t before = dev().memory_in_use_bytes();
  dev().reset_peak_memory();
  {
    Tensor a = dev().allocate_tensor(1000, GetParam().dtype);
    Tensor b = dev().allocate_tensor(500, GetParam().dtype);
    const std::int64_t bytes = 1500 * dtype_bytes(stored());
    EXPECT_EQ(dev().memory_in_use_bytes(), before + bytes);
    Buffer pinned = dev().allocate(4096, MemoryKind::kPinnedHost);
    EXPECT_EQ(dev().memory_in_use_bytes(), before + bytes);  // pinned host memory not counted
    EXPECT_EQ(a.numel(), 1000);
    EXPECT_EQ(b.dtype(), stored());
  }
  EXPECT_EQ(dev().memory_in_use_bytes(), before);
  EXPECT_EQ(dev().peak_memory_bytes(), before + 1500 * dtype_bytes(stored()));
  auto start = dev().create_event(), end = dev().create_event();
  dev().record(*start);
  Tensor big = dev().allocate_tensor(1 << 20, GetParam().dtype);
  for (int i = 0; i < 20; ++i) dev().fill_random(big.view(), i, 0, 0.0f, 1.0f);
  dev().record(*end);
  const TimeNs ns = dev().elapsed(*start, *end).ns();
  EXPECT_GT(ns, 0);             // 20 fills of 1 Mi elements take measurable time
  EXPECT_LT(ns, 60'000'000'000);
}

// Issue 22: a strata-run.json with a 2^30 vocabulary asked the allocator for
// more than the host has (AddressSanitizer aborts on that); it is bad input.
TEST(CpuDeviceMemory, ABlockLargerThanTheHostIsABadInputNotACrash) {
  const std::unique_ptr<Device> cpu = make_cpu_device({});
  EXPECT_THROW(cpu->allocate(std::size_t{1} << 62), InputError);
  EXPECT_EQ(cpu->memory_in_use_bytes(), 0);
}

INSTANTIATE_TEST_SUITE_P(Backends, ElementwiseTest, ::testing::ValuesIn(all_cases()), case_name);

}  // namespace
}  // namespace strata::rt::testing
