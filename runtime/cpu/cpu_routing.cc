// An MoE layer's token routing on the cpu backend: the weighted row gathers of
// its dispatch and combine, and the dot products of its gates' gradient.
#include <fmt/format.h>

#include <Eigen/Core>

#include "runtime/cpu/cpu_device_impl.h"
#include "runtime/device/kernel_checks.h"

namespace strata::rt {
namespace {

using Arr = Eigen::Map<Eigen::ArrayXf>;
using ConstArr = Eigen::Map<const Eigen::ArrayXf>;

// Every index below the source's rows (the cpu reads them where they are).
void check_index_range(const char* kernel, const IndexView& index, std::int64_t src_rows) {
  for (std::int64_t i = 0; i < index.count; ++i) {
    if (index.data[i] >= src_rows) {
      check::fail(kernel, fmt::format("index[{}] = {} is past the source's {} rows", i, index.data[i], src_rows));
    }
  }
}

}  // namespace

void CpuDevice::gather_sum_rows(const TensorView& src, const IndexView& index, const TensorView& weight,
                                std::int64_t k, std::int64_t cols, const TensorView& dst) {
  const char* kn = "gather_sum_rows";
  const std::int64_t rows = check::routed_rows(kn, index, k, "src", src, cols);
  check_index_range(kn, index, src.numel / cols);
  const float* sp = f32(kn, "src", src, src.numel);
  float* dp = f32(kn, "dst", dst, rows * cols);
  const float* wp = weight.numel == 0 ? nullptr : f32(kn, "weight", weight, index.count);
  check::disjoint(kn, "src", src, "dst", dst);
  for_rows(threads_, rows, [&](std::int64_t r) {
    Arr out(dp + r * cols, cols);
    out.setZero();
    for (std::int64_t j = 0; j < k; ++j) {
      const std::int32_t row = index.data[r * k + j];
      if (row < 0) continue;
      const float w = wp != nullptr ? wp[r * k + j] : 1.0f;
      out += w * ConstArr(sp + static_cast<std::int64_t>(row) * cols, cols);
    }
  });
}

void CpuDevice::gather_row_dots(const TensorView& a, const TensorView& b, const IndexView& index, std::int64_t k,
                                std::int64_t cols, const TensorView& out) {
  const char* kn = "gather_row_dots";
  const std::int64_t rows = check::routed_rows(kn, index, k, "b", b, cols);
  check_index_range(kn, index, b.numel / cols);
  const float* ap = f32(kn, "a", a, rows * cols);
  const float* bp = f32(kn, "b", b, b.numel);
  float* op = f32(kn, "out", out, index.count);
  for_rows(threads_, index.count, [&](std::int64_t i) {
    const std::int32_t row = index.data[i];
    op[i] = row < 0 ? 0.0f
                    : (ConstArr(ap + (i / k) * cols, cols) * ConstArr(bp + static_cast<std::int64_t>(row) * cols, cols))
                          .sum();
  });
}

}  // namespace strata::rt
