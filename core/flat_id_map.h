// A map from 64-bit keys to non-negative ints, for the hot paths that make and
// drop an entry per event (the engine's flows in flight, FlowSharing's link
// groups): open addressing with linear probing in two flat arrays, so no node is
// allocated per entry as std::unordered_map does (Boost 1.74, the version the
// project builds with, has no flat map yet).
#pragma once

#include <cstdint>
#include <vector>

namespace strata {

class FlatIdMap {
 public:
  // The value stored for key, or nullptr.
  int* find(std::uint64_t key) {
    if (size_ == 0) return nullptr;
    for (std::size_t i = home(key);; i = (i + 1) & mask_) {
      if (value_[i] < 0) return nullptr;
      if (key_[i] == key) return &value_[i];
    }
  }
  // key must not be present; value >= 0.
  void insert(std::uint64_t key, int value) {
    if (2 * (size_ + 1) > value_.size()) grow();  // at most half full
    std::size_t i = home(key);
    while (value_[i] >= 0) i = (i + 1) & mask_;
    key_[i] = key;
    value_[i] = value;
    ++size_;
  }
  // key must be present.
  void erase(std::uint64_t key) {
    std::size_t i = home(key);
    while (value_[i] < 0 || key_[i] != key) i = (i + 1) & mask_;
    // Backward shift: each later entry of the run that may sit at i moves there,
    // so that lookups never meet a hole inside their run.
    for (std::size_t j = (i + 1) & mask_; value_[j] >= 0; j = (j + 1) & mask_) {
      if (((j - home(key_[j])) & mask_) >= ((j - i) & mask_)) {
        key_[i] = key_[j];
        value_[i] = value_[j];
        i = j;
      }
    }
    value_[i] = -1;
    --size_;
  }
  std::size_t size() const { return size_; }

 private:
  // splitmix64's finaliser: keys that differ in their high bits only (ids with a
  // generation above a slot) still spread.
  std::size_t home(std::uint64_t key) const {
    key = (key ^ (key >> 30)) * 0xbf58476d1ce4e5b9ULL;
    key = (key ^ (key >> 27)) * 0x94d049bb133111ebULL;
    return static_cast<std::size_t>(key ^ (key >> 31)) & mask_;
  }
  void grow() {
    std::vector<std::uint64_t> old_key = std::move(key_);
    std::vector<int> old_value = std::move(value_);
    const std::size_t n = old_value.empty() ? 64 : 2 * old_value.size();
    key_.assign(n, 0);
    value_.assign(n, -1);
    mask_ = n - 1;
    size_ = 0;
    for (std::size_t i = 0; i < old_value.size(); ++i) {
      if (old_value[i] >= 0) insert(old_key[i], old_value[i]);
    }
  }

  std::vector<std::uint64_t> key_;
  std::vector<int> value_;  // -1: empty
  std::size_t size_ = 0, mask_ = 0;
};

}  // namespace strata
