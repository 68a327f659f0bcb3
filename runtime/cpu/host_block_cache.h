// Freed host blocks kept for the next allocation of the same size, so a training
// loop's second and later steps reuse the first step's memory instead of asking
// the OS again. glibc hands large blocks back with munmap and every later touch
// of a fresh page faults; under paravirtualized hosts (this project's CI VM) a
// fault costs tens of microseconds, and a GPipe stage with eight micro-batches in
// flight spent most of its step in them (fc1 at 4.8 ms instead of 0.8 ms,
// docs/validation.md). The same reason PyTorch caches device memory.
// Accounting (Device::in_use/peak) is unchanged: it counts live tensors only.
#pragma once

#include <cstddef>
#include <cstdlib>
#include <map>
#include <mutex>
#include <vector>

namespace strata::rt {

class HostBlockCache {
 public:
  explicit HostBlockCache(std::size_t alignment) : alignment_(alignment) {}
  HostBlockCache(const HostBlockCache&) = delete;
  HostBlockCache& operator=(const HostBlockCache&) = delete;
  ~HostBlockCache() {
    for (auto& [bytes, blocks] : free_) {
      for (void* b : blocks) std::free(b);
    }
  }

  // A block of at least `bytes` (rounded up to the alignment), or nullptr when
  // the host has no memory left.
  void* take(std::size_t bytes) {
    const std::size_t rounded = round_up(bytes);
    {
      std::lock_guard<std::mutex> lock(mutex_);
      auto it = free_.find(rounded);
      if (it != free_.end() && !it->second.empty()) {
        void* block = it->second.back();
        it->second.pop_back();
        cached_bytes_ -= rounded;
        return block;
      }
    }
    return std::aligned_alloc(alignment_, rounded);
  }

  // Keeps a block taken with `bytes` for a later take() of the same size.
  void give_back(void* block, std::size_t bytes) noexcept {
    if (block == nullptr) return;
    const std::size_t rounded = round_up(bytes);
    try {
      std::lock_guard<std::mutex> lock(mutex_);
      free_[rounded].push_back(block);
      cached_bytes_ += rounded;
    } catch (...) {
      std::free(block);  // no memory for the bookkeeping: hand it back to the OS
    }
  }

  std::size_t cached_bytes() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return cached_bytes_;
  }

 private:
  std::size_t round_up(std::size_t bytes) const { return (bytes + alignment_ - 1) / alignment_ * alignment_; }

  std::size_t alignment_;
  mutable std::mutex mutex_;
  std::map<std::size_t, std::vector<void*>> free_;
  std::size_t cached_bytes_ = 0;
};

}  // namespace strata::rt
