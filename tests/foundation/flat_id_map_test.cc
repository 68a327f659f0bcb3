// FlatIdMap against std::map over random inserts, finds and erases, with keys
// that differ only in their high bits (ids with a generation above a slot) and
// enough of them to grow the table several times.
#include <map>
#include <random>

#include <gtest/gtest.h>

#include "core/flat_id_map.h"

namespace strata {
namespace {

TEST(FlatIdMap, MatchesStdMapOverRandomOperations) {
  std::mt19937_64 rng(20261207);
  FlatIdMap map;
  std::map<std::uint64_t, int> expect;
  auto random_key = [&] {
    const std::uint64_t slot = rng() % 300;
    const std::uint64_t generation = rng() % 4;
    return generation << 32 | slot;
  };
  for (int op = 0; op < 20000; ++op) {
    const std::uint64_t key = random_key();
    const bool present = expect.count(key) > 0;
    if (rng() % 3 != 0) {
      if (!present) {
        const int value = static_cast<int>(rng() % 1000);
        map.insert(key, value);
        expect[key] = value;
      }
    } else if (present) {
      map.erase(key);
      expect.erase(key);
    }
    if (op % 97 == 0) {
      ASSERT_EQ(map.size(), expect.size()) << "after op " << op;
      for (std::uint64_t slot = 0; slot < 300; ++slot) {
        for (std::uint64_t generation = 0; generation < 4; ++generation) {
          const std::uint64_t k = generation << 32 | slot;
          const int* found = map.find(k);
          const auto it = expect.find(k);
          ASSERT_EQ(found != nullptr, it != expect.end()) << "key " << k << " after op " << op;
          if (found != nullptr) {
            ASSERT_EQ(*found, it->second) << "key " << k;
          }
        }
      }
    }
  }
  EXPECT_GT(expect.size(), 100u);  // the table grew past its first 64 entries
}

TEST(FlatIdMap, FoundValuesCanBeChangedInPlace) {
  FlatIdMap map;
  EXPECT_EQ(map.find(7), nullptr);
  map.insert(7, 1);
  *map.find(7) = 5;
  EXPECT_EQ(*map.find(7), 5);
  map.erase(7);
  EXPECT_EQ(map.find(7), nullptr);
  EXPECT_EQ(map.size(), 0u);
}

}  // namespace
}  // namespace strata
