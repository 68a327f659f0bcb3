#include "runtime/device/kernel_checks.h"

#include <fmt/format.h>

#include "core/error.h"

namespace strata::rt::check {

void fail(const char* kernel, const std::string& message) {
  throw InternalError(fmt::format("{}: {}", kernel, message));
}

void numel(const char* kernel, const char* name, const TensorView& v, std::int64_t expected) {
  if (v.numel != expected) {
    fail(kernel, fmt::format("{} has {} elements, expected {}", name, v.numel, expected));
  }
  if (expected > 0 && v.data == nullptr) fail(kernel, fmt::format("{} has no data", name));
}

void count(const char* kernel, const char* name, const IndexView& v, std::int64_t expected) {
  if (v.count != expected) {
    fail(kernel, fmt::format("{} has {} indices, expected {}", name, v.count, expected));
  }
  if (expected > 0 && v.data == nullptr) fail(kernel, fmt::format("{} has no data", name));
}

std::int64_t routed_rows(const char* kernel, const IndexView& index, std::int64_t k, const char* source_name,
                         const TensorView& source, std::int64_t cols) {
  positive(kernel, "k", k);
  positive(kernel, "cols", cols);
  non_negative(kernel, "index count", index.count);
  if (index.count % k != 0) fail(kernel, fmt::format("index count {} is not a multiple of k = {}", index.count, k));
  if (index.count > 0 && index.data == nullptr) fail(kernel, "index has no data");
  if (source.numel % cols != 0) {
    fail(kernel, fmt::format("{} has {} elements, not rows of {}", source_name, source.numel, cols));
  }
  return index.count / k;
}

void disjoint(const char* kernel, const char* name_a, const TensorView& a, const char* name_b, const TensorView& b) {
  const char* ab = static_cast<const char*>(a.data);
  const char* bb = static_cast<const char*>(b.data);
  if (a.numel > 0 && b.numel > 0 && ab < bb + b.bytes() && bb < ab + a.bytes()) {
    fail(kernel, fmt::format("{} and {} must not overlap", name_a, name_b));
  }
}

void dtype(const char* kernel, const char* name, const TensorView& v, DType expected) {
  if (v.dtype != expected) {
    fail(kernel, fmt::format("{} is {}, expected {}", name, to_string(v.dtype), to_string(expected)));
  }
}

void dtype_in(const char* kernel, const char* name, const TensorView& v,
              std::initializer_list<DType> allowed) {
  std::string names;
  for (DType d : allowed) {
    if (v.dtype == d) return;
    names += (names.empty() ? "" : ", ") + std::string(to_string(d));
  }
  fail(kernel, fmt::format("{} is {}, expected one of {}", name, to_string(v.dtype), names));
}

void same_dtype(const char* kernel, const char* name_a, const TensorView& a, const char* name_b,
                const TensorView& b) {
  if (a.dtype != b.dtype) {
    fail(kernel, fmt::format("{} is {} but {} is {}", name_a, to_string(a.dtype), name_b,
                             to_string(b.dtype)));
  }
}

void positive(const char* kernel, const char* name, std::int64_t value) {
  if (value <= 0) fail(kernel, fmt::format("{} = {} must be positive", name, value));
}

void non_negative(const char* kernel, const char* name, std::int64_t value) {
  if (value < 0) fail(kernel, fmt::format("{} = {} must not be negative", name, value));
}

namespace {

// A batch of `batch` row-major [rows, cols] matrices with row stride ld and
// matrix stride `stride` must fit in v.
void matrix_extent(const char* name, const TensorView& v, std::int64_t rows, std::int64_t cols,
                   std::int64_t ld, std::int64_t stride, std::int64_t batch) {
  if (rows == 0 || cols == 0) return;
  if (ld < cols) fail("gemm", fmt::format("ld{} = {} is below its {} columns", name, ld, cols));
  if (batch > 1 && stride < 0) fail("gemm", fmt::format("stride_{} is negative", name));
  const std::int64_t needed = (batch - 1) * stride + (rows - 1) * ld + cols;
  if (needed > v.numel) {
    fail("gemm", fmt::format("{} needs {} elements ({} x {} ld {}, batch {} stride {}) but has {}",
                             name, needed, rows, cols, ld, batch, stride, v.numel));
  }
  if (v.data == nullptr) fail("gemm", fmt::format("{} has no data", name));
}

}  // namespace

void gemm(const GemmArgs& g) {
  non_negative("gemm", "m", g.m);
  non_negative("gemm", "n", g.n);
  non_negative("gemm", "k", g.k);
  positive("gemm", "batch", g.batch);
  same_dtype("gemm", "A", g.a, "B", g.b);
  if (g.c.dtype != g.a.dtype && g.c.dtype != DType::kFp32) {
    fail("gemm", fmt::format("C is {}; it must be {} (as A and B) or fp32", to_string(g.c.dtype),
                             to_string(g.a.dtype)));
  }
  const bool ta = g.trans_a == Transpose::kYes;
  const bool tb = g.trans_b == Transpose::kYes;
  matrix_extent("a", g.a, ta ? g.k : g.m, ta ? g.m : g.k, g.lda, g.stride_a, g.batch);
  matrix_extent("b", g.b, tb ? g.n : g.k, tb ? g.k : g.n, g.ldb, g.stride_b, g.batch);
  matrix_extent("c", g.c, g.m, g.n, g.ldc, g.stride_c, g.batch);
}

}  // namespace strata::rt::check
