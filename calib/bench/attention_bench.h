// Attention microbenchmarks: the attention core of one layer (scores, softmax,
// values) forward and backward, as the device runs it.
//
// The runtime's Device has no fused attention kernel, so this times the
// unfused sequence every backend runs: S = Q K^T, P = softmax(S / sqrt(d)),
// O = P V (forward); dV = P^T dO, dP = dO V^T, dS = softmax'(dP), dQ = dS K,
// dK = dS^T Q (backward). The cost model relates its time to the FLOPs a fused
// kernel would do (costmodel/cost_queries.h), so the efficiency recorded is
// what this device achieves for the attention of a layer.
#pragma once

#include <functional>
#include <vector>

#include "calib/bench/measure.h"
#include "costmodel/cost_queries.h"
#include "costmodel/cost_sections.h"
#include "runtime/device/device.h"

namespace strata::calib {

// Times forward and backward for each shape (causal ignored: the unfused
// sequence does the full work; both passes are recorded as non-causal).
// progress(i) after shape i. Checks outputs for finite values and softmax rows
// summing to one. Throws InternalError on a wrong result.
std::vector<AttentionPoint> bench_attention(rt::Device& device,
                                            const std::vector<AttentionQuery>& shapes,
                                            const TimingOptions& timing,
                                            const std::function<void(std::size_t)>& progress);

}  // namespace strata::calib
