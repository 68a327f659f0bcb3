#include "gui/model/step_distribution.h"

#include <algorithm>
#include <cmath>

#include "sim/sampling.h"

namespace strata::gui {

Histogram histogram_of(const std::vector<double>& values, int max_bins) {
  Histogram h;
  if (values.empty()) return h;
  const auto [min_it, max_it] = std::minmax_element(values.begin(), values.end());
  const double lo = *min_it, range = *max_it - *min_it;
  const double n = static_cast<double>(values.size());
  int bins = 1;
  if (range > 0.0) {
    double width = range / (std::log2(n) + 1.0);  // Sturges
    const double iqr = sim::quantile(values, 0.75) - sim::quantile(values, 0.25);
    if (iqr > 0.0) width = std::min(width, 2.0 * iqr / std::cbrt(n));  // Freedman–Diaconis
    bins = std::clamp(static_cast<int>(std::ceil(range / width)), 1, std::max(1, max_bins));
  }
  h.lo = lo;
  h.width = range > 0.0 ? range / bins : 1e-9;
  if (range == 0.0) h.lo = lo - h.width / 2;
  h.counts.assign(static_cast<std::size_t>(bins), 0);
  for (double v : values) {
    const int bin = range > 0.0 ? static_cast<int>((v - lo) / h.width) : 0;
    ++h.counts[static_cast<std::size_t>(std::clamp(bin, 0, bins - 1))];
  }
  return h;
}

}  // namespace strata::gui
