// The cancellable input of the trace parser: a JSON text made of a few pieces of
// memory, walked by a forward iterator that reports progress every few MiB and
// ends early once the read is cancelled (the parser then sees the end of input).
// Used by gui/model/trace_parser and trace_reader; not a public interface.
#pragma once

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <iterator>
#include <vector>

#include "gui/model/load_progress.h"

namespace strata::gui::trace_input {

// Progress is reported, and cancellation checked, every this many bytes parsed.
constexpr std::ptrdiff_t kCheckpointBytes = std::ptrdiff_t{4} << 20;

// How far the parse of a file has come, shared by the threads parsing its parts.
struct ParseProgress {
  std::atomic<std::int64_t> parsed_bytes{0};
  std::atomic<bool> cancelled{false};
  std::int64_t total_bytes = 1;
  const ProgressFn* report = nullptr;  // called from the thread parsing part 0 only
};

// A JSON text made of a few pieces of memory (a part of the file with a prefix
// and suffix that make it a complete trace), walked without copying. Every
// kCheckpointBytes it reports progress; after cancellation it ends early, which
// the parser sees as the end of the input.
struct Piece {
  const char* begin;
  const char* end;
};

class PieceIterator {
 public:
  using iterator_category = std::forward_iterator_tag;
  using value_type = char;
  using difference_type = std::ptrdiff_t;
  using pointer = const char*;
  using reference = const char&;

  PieceIterator() = default;  // the end
  PieceIterator(const std::vector<Piece>* pieces, ParseProgress* progress, bool reports)
      : pieces_(pieces), progress_(progress), reports_(reports) {
    enter(0);
    last_checkpoint_ = p_;
  }

  char operator*() const { return *p_; }
  PieceIterator& operator++() {
    if (++p_ == stop_) on_stop();
    return *this;
  }
  PieceIterator operator++(int) {
    PieceIterator before = *this;
    ++*this;
    return before;
  }
  bool operator==(const PieceIterator& o) const { return p_ == o.p_; }
  bool operator!=(const PieceIterator& o) const { return p_ != o.p_; }

 private:
  // Positions at the start of piece i (skipping empty ones), or at the end.
  void enter(std::size_t i) {
    while (i < pieces_->size() && (*pieces_)[i].begin == (*pieces_)[i].end) ++i;
    piece_ = i;
    if (i == pieces_->size()) {
      p_ = nullptr;
      return;
    }
    p_ = (*pieces_)[i].begin;
    set_stop();
  }
  void set_stop() {
    const char* end = (*pieces_)[piece_].end;
    stop_ = end - p_ > kCheckpointBytes ? p_ + kCheckpointBytes : end;
  }
  void on_stop() {
    if (progress_ != nullptr) {
      const std::int64_t done =
          progress_->parsed_bytes.fetch_add(p_ - last_checkpoint_) + (p_ - last_checkpoint_);
      last_checkpoint_ = p_;
      if (reports_ && progress_->report != nullptr && *progress_->report &&
          !(*progress_->report)(std::min(done, progress_->total_bytes), progress_->total_bytes, "bytes read")) {
        progress_->cancelled = true;
      }
      if (progress_->cancelled) {
        p_ = nullptr;
        return;
      }
    }
    if (p_ == (*pieces_)[piece_].end) {
      enter(piece_ + 1);
      last_checkpoint_ = p_;
    } else {
      set_stop();
    }
  }

  const std::vector<Piece>* pieces_ = nullptr;
  ParseProgress* progress_ = nullptr;
  bool reports_ = false;
  std::size_t piece_ = 0;
  const char* p_ = nullptr;
  const char* stop_ = nullptr;
  const char* last_checkpoint_ = nullptr;
};

}  // namespace strata::gui::trace_input
