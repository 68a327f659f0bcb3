// GEMM on every backend: all four transpose combinations, padded leading
// dimensions, strided batches, beta = 0 (C never read), beta = 1 accumulation
// into fp32, against a double-precision triple loop.
#include <cmath>
#include <limits>

#include "kernel_test_util.h"

namespace strata::rt::testing {
namespace {

struct Shape {
  Transpose ta, tb;
  std::int64_t m, n, k, batch;
  std::int64_t pad;  // extra columns in every leading dimension
};

// Element (i, j) of op(X), X row-major with leading dimension ld.
double op_at(const std::vector<float>& x, std::int64_t base, std::int64_t ld, bool trans,
             std::int64_t i, std::int64_t j) {
  return trans ? x[base + j * ld + i] : x[base + i * ld + j];
}

class GemmTest : public KernelTest {
 protected:
  void run(const Shape& s, float alpha, float beta, bool fp32_c) {
    const bool ta = s.ta == Transpose::kYes;
    const bool tb = s.tb == Transpose::kYes;
    const std::int64_t a_rows = ta ? s.k : s.m, a_cols = ta ? s.m : s.k;
    const std::int64_t b_rows = tb ? s.n : s.k, b_cols = tb ? s.k : s.n;
    const std::int64_t lda = a_cols + s.pad, ldb = b_cols + s.pad, ldc = s.n + s.pad;
    const std::int64_t stride_a = a_rows * lda + 3, stride_b = b_rows * ldb + 5;
    const std::int64_t stride_c = s.m * ldc + 7;
    const DType c_type = fp32_c ? DType::kFp32 : GetParam().dtype;
    const DType c_stored = dev().storage_dtype(c_type);
    auto a = random_values(stride_a * s.batch, 11, -1.0f, 1.0f, stored());
    auto b = random_values(stride_b * s.batch, 12, -1.0f, 1.0f, stored());
    auto c0 = random_values(stride_c * s.batch, 13, -1.0f, 1.0f, c_stored);
    if (beta == 0.0f) {
      // BLAS semantics: C is not read when beta == 0, so NaN must not leak out.
      std::fill(c0.begin(), c0.end(), std::numeric_limits<float>::quiet_NaN());
    }
    Tensor ta_t = tensor(a), tb_t = tensor(b), tc_t = tensor_of(c_type, c0);
    GemmArgs g;
    g.trans_a = s.ta;
    g.trans_b = s.tb;
    g.m = s.m; g.n = s.n; g.k = s.k;
    g.alpha = alpha; g.beta = beta;
    g.a = ta_t.view(); g.lda = lda; g.stride_a = stride_a;
    g.b = tb_t.view(); g.ldb = ldb; g.stride_b = stride_b;
    g.c = tc_t.view(); g.ldc = ldc; g.stride_c = stride_c;
    g.batch = s.batch;
    dev().gemm(g);
    const auto got = get(tc_t);
    std::vector<float> got_block;
    std::vector<double> want;
    for (std::int64_t p = 0; p < s.batch; ++p) {
      for (std::int64_t i = 0; i < s.m; ++i) {
        for (std::int64_t j = 0; j < s.n; ++j) {
          double acc = 0.0;
          for (std::int64_t q = 0; q < s.k; ++q) {
            acc += op_at(a, p * stride_a, lda, ta, i, q) * op_at(b, p * stride_b, ldb, tb, q, j);
          }
          const std::int64_t at = p * stride_c + i * ldc + j;
          want.push_back(alpha * acc + (beta == 0.0f ? 0.0 : beta * c0[at]));
          got_block.push_back(got[at]);
        }
        // Padding between rows is never written.
        for (std::int64_t j = s.n; j < ldc && i + 1 < s.m; ++j) {
          const std::int64_t at = p * stride_c + i * ldc + j;
          if (beta != 0.0f) {
            EXPECT_EQ(got[at], c0[at]) << "padding at " << at << " was written";
          } else {
            EXPECT_TRUE(std::isnan(got[at])) << "padding at " << at << " was written";
          }
        }
      }
    }
    EXPECT_TRUE(all_close(got_block, want, tolerance(c_stored)));
  }
};

TEST_P(GemmTest, AllTransposesWithPaddedLeadingDimensions) {
  for (Transpose ta : {Transpose::kNo, Transpose::kYes}) {
    for (Transpose tb : {Transpose::kNo, Transpose::kYes}) {
      SCOPED_TRACE(::testing::Message() << "ta " << (ta == Transpose::kYes) << " tb "
                                        << (tb == Transpose::kYes));
      run({ta, tb, 13, 17, 29, 1, 3}, 1.0f, 0.0f, false);
    }
  }
}

TEST_P(GemmTest, StridedBatchesWithAlphaAndBeta) {
  run({Transpose::kNo, Transpose::kYes, 9, 11, 16, 4, 0}, 0.5f, 0.25f, false);
  run({Transpose::kYes, Transpose::kNo, 8, 6, 33, 3, 2}, -1.5f, 1.0f, false);
}

TEST_P(GemmTest, AccumulatesIntoFp32Gradients) {
  // Weight gradients: bf16/fp16 activations accumulate into fp32 main_grad.
  run({Transpose::kYes, Transpose::kNo, 24, 20, 40, 1, 0}, 1.0f, 1.0f, true);
}

TEST_P(GemmTest, EmptyInnerDimensionScalesC) {
  run({Transpose::kNo, Transpose::kNo, 5, 4, 0, 2, 0}, 1.0f, 0.5f, false);
}

TEST_P(GemmTest, RejectsMismatchedShapes) {
  Tensor a = zeros(6, GetParam().dtype), b = zeros(6, GetParam().dtype), c = zeros(4, GetParam().dtype);
  GemmArgs g;
  g.m = 2; g.n = 2; g.k = 3;
  g.a = a.view(); g.lda = 3;
  g.b = b.view(); g.ldb = 2;   // B is 3 x 2: ldb 2 fits
  g.c = c.view(); g.ldc = 2;
  EXPECT_NO_THROW(dev().gemm(g));
  g.k = 4;                     // A would need 2 x 4 = 8 elements
  g.lda = 4;
  EXPECT_THROW(dev().gemm(g), InternalError);
  g.k = 3; g.lda = 2;          // lda below A's 3 columns
  EXPECT_THROW(dev().gemm(g), InternalError);
}

INSTANTIATE_TEST_SUITE_P(Backends, GemmTest, ::testing::ValuesIn(all_cases()), case_name);

}  // namespace
}  // namespace strata::rt::testing
