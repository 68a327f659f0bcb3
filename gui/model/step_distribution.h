// What the Distribution tab shows of a result.json: the sampled step times
// (`strata simulate --samples N --clock-cv X`, the `distribution` section) as a
// histogram with their quantiles, and the slow-GPU / slow-NIC what-if (`what_if`)
// beside it. Keys are docs/formats.md's; read by result_data.cc.
#pragma once

#include <string>
#include <vector>

namespace strata::gui {

// A sample statistic and its 95% confidence interval, as result.json gives it.
struct SampledFigure {
  double value = 0.0;
  double ci_low = 0.0;
  double ci_high = 0.0;
};

struct StepDistributionData {
  double clock_cv = 0.0;
  std::string origin;               // "assumed (--clock-cv) ..."
  double noiseless_step_time_s = 0.0;  // every GPU at speed
  SampledFigure mean, p50, p90, p99;
  std::vector<double> step_time_s;  // every sampled step, in sample order
  int traced_sample = -1;           // the sample written as trace-sample-K.json, or -1
};

struct WhatIfData {
  std::string slowed;  // "rank 7 x1.20, node 0 NIC 0 at 1/2.00"
  double baseline_step_time_s = 0.0;
  double step_time_s = 0.0;
};

// Equal-width bins over [lo, lo + width * counts.size()] that hold every value.
struct Histogram {
  double lo = 0.0;
  double width = 0.0;
  std::vector<int> counts;
  double hi() const { return lo + width * static_cast<double>(counts.size()); }
};

// NumPy's "auto" bins (numpy.histogram_bin_edges): the narrower of Sturges'
// width, range / (log2(n) + 1), and the Freedman–Diaconis width, 2 IQR / n^(1/3)
// (when the IQR is not 0), the bin count rounded up to cover the range; at most
// max_bins. One bin of width 0 is one of width 1e-9 s around the value. A value
// on an inner edge goes to the bin it starts (the last bin holds the maximum).
Histogram histogram_of(const std::vector<double>& values, int max_bins = 60);

}  // namespace strata::gui
