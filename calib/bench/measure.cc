#include "calib/bench/measure.h"

#include <algorithm>
#include <cmath>

#include "core/error.h"
#include "core/units.h"

namespace strata::calib {
namespace {

// Linear interpolation between order statistics (the "type 7" quantile of R and NumPy).
double quantile(const std::vector<double>& sorted, double q) {
  const double pos = q * static_cast<double>(sorted.size() - 1);
  const auto lo = static_cast<std::size_t>(std::floor(pos));
  const std::size_t hi = std::min(lo + 1, sorted.size() - 1);
  return sorted[lo] + (pos - static_cast<double>(lo)) * (sorted[hi] - sorted[lo]);
}

}  // namespace

TimingOptions quick_timing() {
  TimingOptions o;
  o.warmup = 1;
  o.repeats = 3;
  o.min_sample_s = 5e-4;
  o.max_calls_per_sample = 200;
  return o;
}

TimingOptions full_timing() { return TimingOptions{}; }

Timing summarize_samples(std::vector<double> per_call_s, int calls_per_sample) {
  if (per_call_s.empty()) throw InternalError("summarize_samples: no samples");
  std::sort(per_call_s.begin(), per_call_s.end());
  Timing t;
  t.median_s = quantile(per_call_s, 0.5);
  t.spread = t.median_s > 0 ? (quantile(per_call_s, 0.75) - quantile(per_call_s, 0.25)) / t.median_s : 0;
  t.calls_per_sample = calls_per_sample;
  return t;
}

int calls_for(double probe_s, const TimingOptions& options) {
  if (!(probe_s > 0.0)) return options.max_calls_per_sample;
  const double calls = std::ceil(options.min_sample_s / probe_s);
  return static_cast<int>(std::clamp(calls, 1.0, static_cast<double>(options.max_calls_per_sample)));
}

Timing time_on_device(rt::Device& device, const std::function<void()>& op,
                      const TimingOptions& options) {
  for (int i = 0; i < options.warmup; ++i) op();
  auto start = device.create_event();
  auto end = device.create_event();
  device.record(*start);
  op();
  device.record(*end);
  const double probe_s = device.elapsed(*start, *end).seconds();
  const int calls = calls_for(probe_s, options);
  std::vector<double> samples;
  for (int r = 0; r < options.repeats; ++r) {
    device.record(*start);
    for (int c = 0; c < calls; ++c) op();
    device.record(*end);
    samples.push_back(device.elapsed(*start, *end).seconds() / calls);
  }
  return summarize_samples(std::move(samples), calls);
}

}  // namespace strata::calib
