// An MoE layer's routing kernels (dispatch, combine, the gates' gradient) on
// every backend, against plain loops in double precision.
#include "core/error.h"
#include "kernel_test_util.h"

namespace strata::rt::testing {
namespace {

using RoutingTest = KernelTest;

// 6 source rows of 37 columns; 5 tokens with top-2 slots, one slot dropped (-1)
// and one source row taken twice.
constexpr std::int64_t kCols = 37;
constexpr std::int64_t kSrcRows = 6;
constexpr std::int64_t kTopK = 2;
const std::vector<std::int32_t> kSlots = {3, 0, 5, -1, 1, 2, 4, 3, 0, 5};

TEST_P(RoutingTest, GatherSumRowsWeighsAndSkipsDroppedSlots) {
  const auto src = random_values(kSrcRows * kCols, 60, -1.0f, 1.0f, stored());
  const auto w = random_values(static_cast<std::int64_t>(kSlots.size()), 61, 0.0f, 1.0f, DType::kFp32);
  const std::int64_t rows = static_cast<std::int64_t>(kSlots.size()) / kTopK;
  std::vector<double> want(rows * kCols, 0.0), permuted;
  for (std::int64_t r = 0; r < rows; ++r) {
    for (std::int64_t j = 0; j < kTopK; ++j) {
      const int s = kSlots[r * kTopK + j];
      if (s < 0) continue;
      for (std::int64_t c = 0; c < kCols; ++c) want[r * kCols + c] += double(w[r * kTopK + j]) * src[s * kCols + c];
    }
  }
  for (const int s : kSlots) {
    for (std::int64_t c = 0; c < kCols; ++c) permuted.push_back(s < 0 ? 0.0 : double(src[s * kCols + c]));
  }
  Tensor tsrc = tensor(src), tw = tensor_of(DType::kFp32, w);
  IndexTensor idx = indices(kSlots);
  Tensor combined = zeros(rows * kCols, GetParam().dtype);
  dev().gather_sum_rows(tsrc.view(), idx.view(), tw.view(), kTopK, kCols, combined.view());
  EXPECT_TRUE(all_close(get(combined), want, tol()));
  // k = 1 without weights: a permutation of rows (the dispatch), dropped rows zero.
  Tensor gathered = zeros(static_cast<std::int64_t>(kSlots.size()) * kCols, GetParam().dtype);
  dev().gather_sum_rows(tsrc.view(), idx.view(), {}, 1, kCols, gathered.view());
  EXPECT_TRUE(all_close(get(gathered), permuted, 0.0));
}

TEST_P(RoutingTest, GatherRowDotsIsTheGatesGradient) {
  const std::int64_t rows = static_cast<std::int64_t>(kSlots.size()) / kTopK;
  const auto a = random_values(rows * kCols, 62, -1.0f, 1.0f, stored());
  const auto b = random_values(kSrcRows * kCols, 63, -1.0f, 1.0f, stored());
  std::vector<double> want;
  for (std::size_t i = 0; i < kSlots.size(); ++i) {
    double dot = 0.0;
    if (kSlots[i] >= 0) {
      for (std::int64_t c = 0; c < kCols; ++c) dot += double(a[(i / kTopK) * kCols + c]) * b[kSlots[i] * kCols + c];
    }
    want.push_back(dot);
  }
  Tensor ta = tensor(a), tb = tensor(b), out = zeros(static_cast<std::int64_t>(kSlots.size()), DType::kFp32);
  IndexTensor idx = indices(kSlots);
  dev().gather_row_dots(ta.view(), tb.view(), idx.view(), kTopK, kCols, out.view());
  // fp32 sums of 37 products: a few fp32 roundings of the result's scale.
  EXPECT_TRUE(all_close(get(out), want, tolerance(DType::kFp32) * 8));
}

TEST_P(RoutingTest, InconsistentSizesThrow) {
  Tensor src = zeros(kSrcRows * kCols, GetParam().dtype), dst = zeros(5 * kCols, GetParam().dtype);
  IndexTensor odd = indices({0, 1, 2});
  EXPECT_THROW(dev().gather_sum_rows(src.view(), odd.view(), {}, 2, kCols, dst.view()), InternalError);
  IndexTensor idx = indices(kSlots);
  Tensor small = zeros(4 * kCols, GetParam().dtype);
  EXPECT_THROW(dev().gather_sum_rows(src.view(), idx.view(), {}, kTopK, kCols, small.view()), InternalError);
}

INSTANTIATE_TEST_SUITE_P(Backends, RoutingTest, ::testing::ValuesIn(all_cases()), case_name);

}  // namespace
}  // namespace strata::rt::testing
