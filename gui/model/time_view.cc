#include "gui/model/time_view.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

namespace strata::gui {

TimeView::TimeView(double start_ns, double end_ns, int width_px)
    : start_ns_(start_ns), end_ns_(end_ns), width_px_(std::max(1, width_px)) {
  if (!(end_ns_ - start_ns_ >= kMinViewSpanNs)) end_ns_ = start_ns_ + kMinViewSpanNs;
}

void TimeView::zoom(double factor, double anchor_x_px) {
  if (!(factor > 0.0)) return;
  const double anchor_ns = t_of(anchor_x_px);
  const double new_span = std::max(kMinViewSpanNs, span_ns() / factor);
  // The anchor keeps its fraction of the width: it stays under the cursor.
  const double fraction = anchor_x_px / width_px_;
  start_ns_ = anchor_ns - fraction * new_span;
  end_ns_ = start_ns_ + new_span;
}

void TimeView::pan(double dx_px) {
  const double dt = dx_px * ns_per_px();
  start_ns_ -= dt;
  end_ns_ -= dt;
}

void TimeView::fit(double begin_ns, double end_ns, double margin_fraction) {
  double span = std::max(kMinViewSpanNs, end_ns - begin_ns);
  const double margin = span * std::max(0.0, margin_fraction);
  start_ns_ = begin_ns - margin;
  end_ns_ = begin_ns + span + margin;
}

void TimeView::resize(int width_px) {
  const double per_px = ns_per_px();
  width_px_ = std::max(1, width_px);
  end_ns_ = start_ns_ + std::max(kMinViewSpanNs, per_px * width_px_);
}

double wheel_zoom_factor(int angle_delta) {
  // 1.25x per 120-eighths notch; touchpads send smaller deltas, which scale smoothly.
  return std::pow(1.25, angle_delta / 120.0);
}

double ruler_step_ns(const TimeView& view, double min_spacing_px) {
  const double min_step = std::max(1.0, view.ns_per_px() * min_spacing_px);
  double decade = std::pow(10.0, std::floor(std::log10(min_step)));
  for (;;) {
    for (double m : {1.0, 2.0, 5.0}) {
      if (m * decade >= min_step * (1.0 - 1e-12)) return m * decade;
    }
    decade *= 10.0;
  }
}

std::vector<RulerTick> ruler_ticks(const TimeView& view, double min_spacing_px) {
  const double step = ruler_step_ns(view, min_spacing_px);
  std::vector<RulerTick> ticks;
  for (double k = std::ceil(view.start_ns() / step); k * step <= view.end_ns(); k += 1.0) {
    const double t = k * step;
    ticks.push_back({t, view.x_of(t), format_time_ns(t, step)});
  }
  return ticks;
}

std::string format_time_ns(double t_ns, double step_ns) {
  // The unit suits the larger of the time and the step: "12.5 ms", not "12500 µs".
  const double magnitude = std::max(std::abs(t_ns), step_ns);
  double unit = 1.0;
  const char* name = "ns";
  if (magnitude >= 1e9) {
    unit = 1e9, name = "s";
  } else if (magnitude >= 1e6) {
    unit = 1e6, name = "ms";
  } else if (magnitude >= 1e3) {
    unit = 1e3, name = "µs";
  }
  int decimals = 3;
  if (step_ns > 0.0) {
    decimals = std::clamp(static_cast<int>(std::ceil(-std::log10(step_ns / unit) - 1e-9)), 0, 3);
  }
  std::string number = fmt::format("{:.{}f}", t_ns / unit, decimals);
  if (step_ns <= 0.0 && number.find('.') != std::string::npos) {
    while (number.back() == '0') number.pop_back();
    if (number.back() == '.') number.pop_back();
  }
  if (number == "-0") number = "0";
  return number + " " + name;
}

}  // namespace strata::gui
