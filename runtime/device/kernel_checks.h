// Argument checks shared by every backend's kernels, so that a caller's size or
// dtype mistake is reported the same way everywhere (InternalError naming the
// kernel and the argument) before anything is written.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <string>

#include "runtime/device/device.h"

namespace strata::rt::check {

[[noreturn]] void fail(const char* kernel, const std::string& message);

// v.numel == expected and v.data != nullptr when expected > 0.
void numel(const char* kernel, const char* name, const TensorView& v, std::int64_t expected);
void count(const char* kernel, const char* name, const IndexView& v, std::int64_t expected);
void dtype(const char* kernel, const char* name, const TensorView& v, DType expected);
void dtype_in(const char* kernel, const char* name, const TensorView& v,
              std::initializer_list<DType> allowed);
void same_dtype(const char* kernel, const char* name_a, const TensorView& a, const char* name_b,
                const TensorView& b);
void positive(const char* kernel, const char* name, std::int64_t value);
void non_negative(const char* kernel, const char* name, std::int64_t value);

// An MoE routing kernel's index list (device.h gather_sum_rows, gather_row_dots):
// k > 0, cols > 0, index.count a multiple of k (with data when not empty), the
// rows' source (`source`, named `source_name`) whole rows of cols. Returns the
// rows of output, index.count / k. (The indices themselves are in device memory:
// a backend that can read them checks their range.)
std::int64_t routed_rows(const char* kernel, const IndexView& index, std::int64_t k, const char* source_name,
                         const TensorView& source, std::int64_t cols);

// a and b share no byte (either may be empty).
void disjoint(const char* kernel, const char* name_a, const TensorView& a, const char* name_b, const TensorView& b);

// Sizes, leading dimensions, strides and extents of a GEMM against its views;
// A and B share a dtype, C has it or fp32.
void gemm(const GemmArgs& args);

}  // namespace strata::rt::check
