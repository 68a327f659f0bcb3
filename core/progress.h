// A one-line progress display for long work (calibration, sweeps, runs).
// It redraws a single line on stderr when stderr is a terminal and stays
// silent otherwise, so logs and CI output are not flooded.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>

namespace strata {

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
