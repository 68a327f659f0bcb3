// Synthetic training data: token sequences with structure a model can learn
// (most tokens follow from the previous one by a fixed rule, the rest are
// random), so the loss visibly falls within a few steps. Sequence g of the run
// depends only on (seed, g): every plan sees the same global batch, split over
// data-parallel ranks and micro-batches as Megatron splits it.
#pragma once

#include <cstdint>
#include <vector>

namespace strata::rt {

struct TokenBatch {
  std::vector<std::int32_t> ids;     // [sequences * seq_length], row-major by sequence
  std::vector<std::int32_t> labels;  // the next token of each id
};

// The global index of sequence `sample` of micro-batch `microbatch` on data-parallel
// rank `dp_rank` at step `step`: data-parallel ranks take consecutive slices of
// the global batch, micro-batches consecutive slices of those.
std::int64_t global_sequence_index(std::int64_t step, int global_batch_size, int dp, int dp_rank, int micro_batch_size,
                                   int microbatch, int sample);

// Sequences [first, first + count) of the run's data.
TokenBatch synthetic_tokens(std::uint64_t seed, std::int64_t first, int count, int seq_length, int vocab_size);

}  // namespace strata::rt
