// GEMM microbenchmarks: the shapes a training step runs plus a grid for
// interpolation, timed through the runtime's Device and checked for correctness.
#pragma once

#include <functional>
#include <vector>

#include "calib/bench/measure.h"
#include "calib/model/cost_queries.h"
#include "calib/model/cost_sections.h"
#include "runtime/device.h"

namespace strata::calib {

// The grid of m, n, k (every combination, batch 1) calibration measures
// besides the model shapes: powers of two from lo to hi.
std::vector<GemmQuery> gemm_grid(std::int64_t lo, std::int64_t hi, DType dtype);

// Shapes, deduplicated (same m, n, k, batch and dtype) in first-seen order.
std::vector<GemmQuery> unique_shapes(const std::vector<GemmQuery>& shapes);

// Times C[m,n] = A[m,k] * B[n,k]^T (Megatron's forward layout: the weight is
// stored [n, k]) for each shape, inputs uniform in [-1, 1), and checks a few
// output elements against a double-precision dot product of the stored inputs.
// progress(i) is called after shape i. Throws InternalError when a result is wrong.
std::vector<GemmPoint> bench_gemms(rt::Device& device, const std::vector<GemmQuery>& shapes,
                                   const TimingOptions& timing,
                                   const std::function<void(std::size_t)>& progress);

}  // namespace strata::calib
