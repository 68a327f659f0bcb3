// GEMM microbenchmarks: the shapes a training step runs plus a grid for
// interpolation, timed through the runtime's Device and checked for correctness.
#pragma once

#include <functional>
#include <vector>

#include "calib/bench/measure.h"
#include "costmodel/cost_queries.h"
#include "costmodel/cost_sections.h"
#include "runtime/device/device.h"

namespace strata::calib {

// The grid of m, n, k (every combination, batch 1) calibration measures
// besides the model shapes: powers of two from lo to hi.
std::vector<GemmQuery> gemm_grid(std::int64_t lo, std::int64_t hi, DType dtype);

// Shapes, deduplicated (same m, n, k, batch and dtype) in first-seen order.
std::vector<GemmQuery> unique_shapes(const std::vector<GemmQuery>& shapes);

// Bytes of operands a GEMM benchmark streams through so that every call finds
// its operands out of cache, as a training step does: twice the device's
// last-level cache (cuda: L2), on a cpu at most 64 MiB because hosts and VMs
// report the socket's whole L3 while one core reaches only its complex's share
// (this project's VM reports 508 MiB; streaming 32-128 MiB gives the same figure).
std::int64_t gemm_working_set_bytes(const rt::DeviceInfo& info);

// Times C[m,n] = A[m,k] * B[n,k]^T (Megatron's forward layout: the weight is
// stored [n, k]) for each shape, inputs uniform in [-1, 1), and checks a few
// output elements against a double-precision dot product of the stored inputs.
//
// With working_set_bytes > 0 successive calls take their A, B and C from the
// next place in pools of that size (rotating operands, like hipBLASLt-bench's
// --rotating): a training step reads each weight once per micro-batch, long
// after it was last in cache, and a back-to-back loop on one set of operands
// keeps them cached. On this project's 2-core EPYC host a 128x688x256 fp32
// GEMM (the tiny model's fc1 at tp 2) takes 313 us back to back, 418-425 us
// rotating through 64 MiB, and 400-476 us inside `strata run` (docs/calibration.md).
// working_set_bytes == 0 times one set of operands back to back.
// progress(i) is called after shape i. Throws InternalError when a result is wrong.
std::vector<GemmPoint> bench_gemms(rt::Device& device, const std::vector<GemmQuery>& shapes,
                                   const TimingOptions& timing, std::int64_t working_set_bytes,
                                   const std::function<void(std::size_t)>& progress);

}  // namespace strata::calib
