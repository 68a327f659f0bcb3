// A one-line progress display for long work (calibration, sweeps, runs).
// It redraws a single line on stderr when stderr is a terminal and stays
// silent otherwise, so logs and CI output are not flooded.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <stdexcept>
#include <string>
#include <string_view>

namespace strata {

// The one progress contract of long work (calibration, simulation, sweeps, runs,
// topology reports, the GUI's background jobs): the work calls it with how many of
// how many units are done and what it is doing; returning false asks the work to
// stop, which it then does by throwing Cancelled (writing nothing). Work that
// cannot stop alone says so (`strata run`: ranks stop together or not at all).
using ProgressFn = std::function<bool(std::int64_t done, std::int64_t total, std::string_view what)>;

// Thrown by work that stopped because its ProgressFn returned false.
class Cancelled : public std::runtime_error {
 public:
  Cancelled() : std::runtime_error("cancelled") {}
};

// Calls progress when it is set; throws Cancelled when it asks to stop.
inline void report_progress(const ProgressFn& progress, std::int64_t done, std::int64_t total,
                            std::string_view what = {}) {
  if (progress && !progress(done, total, what)) throw Cancelled();
}

class ProgressLine {
 public:
  // label: what is being done ("sweep"); total: number of units (0 if unknown).
  ProgressLine(std::string label, std::int64_t total);
  ~ProgressLine();
  ProgressLine(const ProgressLine&) = delete;
  ProgressLine& operator=(const ProgressLine&) = delete;

  // Reports that done units are complete; redraws at most ~10 times a second.
  void update(std::int64_t done, const std::string& detail = "");
  // Clears the line.
  void finish();
  // The line as the progress contract's callback: takes each report's total and
  // detail and never asks to stop (the caller owns the line and outlives the work).
  ProgressFn callback() {
    return [this](std::int64_t done, std::int64_t total, std::string_view what) {
      total_ = total;
      update(done, std::string(what));
      return true;
    };
  }

  bool enabled() const { return enabled_; }
  // Forces the display on or off (tests, --progress flags).
  void set_enabled(bool on) { enabled_ = on; }

 private:
  std::string label_;
  std::int64_t total_;
  bool enabled_;
  bool drawn_ = false;
  std::chrono::steady_clock::time_point start_;
  std::chrono::steady_clock::time_point last_draw_;
};

}  // namespace strata
