#include "runtime/executor/synthetic_data.h"

#include "runtime/device/random.h"

namespace strata::rt {

std::int64_t global_sequence_index(std::int64_t step, int global_batch_size, int dp, int dp_rank, int micro_batch_size,
                                   int microbatch, int sample) {
  const std::int64_t per_rank = global_batch_size / dp;
  return step * global_batch_size + dp_rank * per_rank + static_cast<std::int64_t>(microbatch) * micro_batch_size + sample;
}

TokenBatch synthetic_tokens(std::uint64_t seed, std::int64_t first, int count, int seq_length, int vocab_size) {
  TokenBatch out;
  const std::size_t n = static_cast<std::size_t>(count) * seq_length;
  out.ids.resize(n);
  out.labels.resize(n);
  const auto vocab = static_cast<std::uint64_t>(vocab_size);
  // The data's own stream, apart from the parameters' (which hash parameter names).
  const std::uint64_t stream = splitmix64(seed ^ 0x64617461ull);  // "data"
  for (int q = 0; q < count; ++q) {
    const auto g = static_cast<std::uint64_t>(first + q);
    std::uint64_t token = splitmix64(stream ^ splitmix64(g)) % vocab;
    for (int i = 0; i <= seq_length; ++i) {
      const std::size_t at = static_cast<std::size_t>(q) * seq_length + static_cast<std::size_t>(i);
      if (i < seq_length) out.ids[at] = static_cast<std::int32_t>(token);
      if (i > 0) out.labels[at - 1] = static_cast<std::int32_t>(token);
      // Three times in four the next token is a fixed affine function of this
      // one (learnable); otherwise random.
      const std::uint64_t r = splitmix64(stream ^ splitmix64(g * 1000003ull + static_cast<std::uint64_t>(i) + 1));
      token = (r & 3) != 0 ? (token * 5 + 3) % vocab : (r >> 2) % vocab;
    }
  }
  return out;
}

}  // namespace strata::rt
