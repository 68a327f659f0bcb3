// Context parallelism's load-balanced chunks (runtime/executor/context_parallel.h),
// against the hand-listed split Megatron-Core uses (get_batch_on_this_cp_rank:
// 2 * cp chunks, rank r takes chunk r and chunk 2cp-1-r).
#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>
#include <vector>

#include "core/error.h"
#include "runtime/executor/context_parallel.h"

namespace strata::rt {
namespace {

using Positions = std::vector<std::int32_t>;

TEST(ContextParallelPositions, EachRankTakesChunkRAndItsMirror) {
  // seq 16, cp 2: chunks of 4; rank 0 has chunks 0 and 3, rank 1 chunks 1 and 2.
  EXPECT_EQ(context_parallel_positions(16, 2, 0), (Positions{0, 1, 2, 3, 12, 13, 14, 15}));
  EXPECT_EQ(context_parallel_positions(16, 2, 1), (Positions{4, 5, 6, 7, 8, 9, 10, 11}));
  // seq 16, cp 4: chunks of 2; rank 1 has chunks 1 and 6.
  EXPECT_EQ(context_parallel_positions(16, 4, 1), (Positions{2, 3, 12, 13}));
  EXPECT_EQ(context_parallel_positions(16, 4, 3), (Positions{6, 7, 8, 9}));
  // cp 1: the whole sequence in order (odd lengths too).
  EXPECT_EQ(context_parallel_positions(5, 1, 0), (Positions{0, 1, 2, 3, 4}));
}

TEST(ContextParallelPositions, TheRanksTogetherHoldEveryPositionOnceWithEqualCausalWork) {
  for (int cp : {2, 4, 8}) {
    const std::int64_t seq = 64;
    Positions all;
    std::int64_t first_work = -1;
    for (int r = 0; r < cp; ++r) {
      const Positions mine = context_parallel_positions(seq, cp, r);
      all.insert(all.end(), mine.begin(), mine.end());
      // A query at position p attends to p + 1 keys: the balance is why the chunks mirror.
      const std::int64_t work = std::accumulate(mine.begin(), mine.end(), std::int64_t{0},
                                                [](std::int64_t acc, std::int32_t p) { return acc + p + 1; });
      if (first_work < 0) first_work = work;
      EXPECT_EQ(work, first_work) << "cp " << cp << " rank " << r;
    }
    std::sort(all.begin(), all.end());
    Positions every(static_cast<std::size_t>(seq));
    std::iota(every.begin(), every.end(), 0);
    EXPECT_EQ(all, every) << "cp " << cp;
  }
}

TEST(ContextParallelPositions, ASequenceThatDoesNotSplitIntoTwoCpChunksIsRefused) {
  EXPECT_THROW(context_parallel_positions(18, 4, 0), InternalError);
  EXPECT_THROW(context_parallel_positions(16, 2, 2), InternalError);
}

}  // namespace
}  // namespace strata::rt
