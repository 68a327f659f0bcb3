// The visible time window of the timeline and its arithmetic: mapping between
// nanoseconds and pixels, zoom anchored at the cursor, pan, fit, and the ruler's
// ticks. A view is (start, end, pixels), as in Tracy and Perfetto.
#pragma once

#include <string>
#include <vector>

#include "core/units.h"

namespace strata::gui {

// The narrowest window one may zoom into: 100 ns across the whole width shows
// single kernels of a few microseconds comfortably, and stays far above double
// rounding at trace times of hours (1e13 ns).
inline constexpr double kMinViewSpanNs = 100.0;

class TimeView {
 public:
  TimeView() = default;
  // start_ns < end_ns, width_px >= 1 (values are clamped to keep that true).
  TimeView(double start_ns, double end_ns, int width_px);

  double start_ns() const { return start_ns_; }
  double end_ns() const { return end_ns_; }
  double span_ns() const { return end_ns_ - start_ns_; }
  int width_px() const { return width_px_; }
  double ns_per_px() const { return span_ns() / width_px_; }

  // Pixel (from the left edge, fractional) of a time, and the time at a pixel.
  double x_of(double t_ns) const { return (t_ns - start_ns_) * width_px_ / span_ns(); }
  double t_of(double x_px) const { return start_ns_ + x_px * span_ns() / width_px_; }

  // Zooms by factor (> 1 zooms in) keeping the time under anchor_x_px where it
  // is; the span never goes below kMinViewSpanNs.
  void zoom(double factor, double anchor_x_px);
  // Moves the window by dx_px pixels (positive: the content moves right, so
  // earlier times come into view), as dragging the content does.
  void pan(double dx_px);
  // Shows [begin_ns, end_ns] with margin_fraction of the span free on each side.
  void fit(double begin_ns, double end_ns, double margin_fraction = 0.02);
  // Changes the width, keeping start and the time per pixel (the window grows
  // to the right, as resizing a window does).
  void resize(int width_px);

 private:
  double start_ns_ = 0.0;
  double end_ns_ = 1.0;
  int width_px_ = 1;
};

// The zoom factor for a mouse wheel turn: angle_delta in eighths of a degree
// (Qt's QWheelEvent::angleDelta; one notch is 120). One notch zooms by 1.25x.
double wheel_zoom_factor(int angle_delta);

struct RulerTick {
  double t_ns = 0.0;
  double x_px = 0.0;
  std::string label;  // "12.5 ms"
};

// Tick step for the ruler: the smallest of 1, 2, 5 x 10^k ns whose ticks are at
// least min_spacing_px apart.
double ruler_step_ns(const TimeView& view, double min_spacing_px);

// The labelled ticks inside the view, at multiples of ruler_step_ns.
std::vector<RulerTick> ruler_ticks(const TimeView& view, double min_spacing_px);

// A duration or time as a person reads it, in the unit that suits the larger of
// |t| and step_ns. With step_ns > 0 (ruler labels) the decimals resolve the step:
// format_time_ns(12'500'000, 500'000) = "12.5 ms". With step_ns 0 up to three
// decimals are kept, trailing zeros dropped: format_time_ns(1'234'600) = "1.235 ms" (rounded),
// format_time_ns(2'000) = "2 µs".
std::string format_time_ns(double t_ns, double step_ns = 0.0);

}  // namespace strata::gui
