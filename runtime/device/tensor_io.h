// Helpers built on the Device interface, the same for every backend: moving
// fp32 values between host vectors and tensors of any dtype, and the one-rank
// cross-entropy.
#pragma once

#include <cstdint>
#include <vector>

#include "runtime/device/device.h"

namespace strata::rt {

// Writes values (converted to dst.dtype, round to nearest even) into dst;
// values.size() must equal dst.numel. Synchronous.
void upload_fp32(Device& device, const std::vector<float>& values, const TensorView& dst);
// The tensor's values as fp32 (bf16/fp16 widened exactly). Synchronizes.
std::vector<float> download_fp32(Device& device, const TensorView& src);
// Index upload/download. Synchronous.
void upload_indices(Device& device, const std::vector<std::int32_t>& values, const IndexView& dst);
std::vector<std::int32_t> download_indices(Device& device, const IndexView& src);

// Host rounding of fp32 to dtype and back (what storing in dtype does to a value).
float round_to_dtype(float value, DType dtype);

// Cross-entropy of logits [tokens, vocab] against labels on one rank (no vocab
// parallelism): row_max, then partials, then loss, as the three device steps.
// row_max, sum_exp, target_logit and loss are fp32 [tokens].
void cross_entropy_forward(Device& device, const TensorView& logits, const IndexView& labels,
                           std::int64_t tokens, std::int64_t vocab, const TensorView& row_max,
                           const TensorView& sum_exp, const TensorView& target_logit,
                           const TensorView& loss);

}  // namespace strata::rt
