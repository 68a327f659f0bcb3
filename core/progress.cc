#include "core/progress.h"

#include <cstdio>

#include <fmt/format.h>
#include <unistd.h>

namespace strata {

ProgressLine::ProgressLine(std::string label, std::int64_t total)
    : label_(std::move(label)),
      total_(total),
      enabled_(::isatty(STDERR_FILENO) == 1),
      start_(std::chrono::steady_clock::now()),
      last_draw_(start_ - std::chrono::seconds(1)) {}

ProgressLine::~ProgressLine() { finish(); }

void ProgressLine::update(std::int64_t done, const std::string& detail) {
  if (!enabled_) return;
  auto now = std::chrono::steady_clock::now();
  bool last = total_ > 0 && done >= total_;
  if (!last && now - last_draw_ < std::chrono::milliseconds(100)) return;
  last_draw_ = now;
  double elapsed = std::chrono::duration<double>(now - start_).count();
  std::string line;
  if (total_ > 0) {
    double pct = 100.0 * static_cast<double>(done) / static_cast<double>(total_);
    line = fmt::format("{}: {}/{} ({:.0f}%) {:.1f}s", label_, done, total_, pct, elapsed);
    // Time left if the rest goes as fast as what is done, once there is a second
    // of history to go by.
    if (done > 0 && !last && elapsed >= 1.0) {
      line += fmt::format(", about {:.0f}s left", elapsed * static_cast<double>(total_ - done) / static_cast<double>(done));
    }
  } else {
    line = fmt::format("{}: {} {:.1f}s", label_, done, elapsed);
  }
  if (!detail.empty()) line += "  " + detail;
  if (line.size() > 100) line.resize(100);
  std::fprintf(stderr, "\r\033[K%s", line.c_str());
  std::fflush(stderr);
  drawn_ = true;
}

void ProgressLine::finish() {
  if (drawn_) {
    std::fprintf(stderr, "\r\033[K");
    std::fflush(stderr);
    drawn_ = false;
  }
}

}  // namespace strata
