// The sweep's Pareto plot in numbers: every simulated plan that fits as a point
// (peak memory per GPU against tokens/s), its colour by TP and marker by PP, the
// front of plans no other beats on both (sweep.csv's `pareto` column, tokens/s
// against headroom), and axis ticks. Qt-free; gui/widgets/pareto_plot draws it.
#pragma once

#include <string>
#include <vector>

#include "gui/model/sweep_data.h"

namespace strata::gui {

struct ParetoPoint {
  int row = 0;  // index into the sweep's rows
  double peak_gib = 0.0;
  double tokens_per_s = 0.0;
  int tp = 1, pp = 1;
  bool front = false;  // on the Pareto front
};

struct ParetoData {
  std::vector<ParetoPoint> points;  // in the sweep's row order
  std::vector<int> front;           // indices into points, by peak memory ascending
  std::vector<int> tps, pps;        // distinct values, ascending (legend order)
  double capacity_gib = 0.0;        // the largest capacity_bytes of the rows (0 if none)
};

// Plans without tokens/s (not simulated) or that do not fit are left out.
ParetoData pareto_data(const SweepData& sweep);

// Axis ticks 1, 2 or 5 × 10^k apart covering [lo, hi], at most max_ticks of them
// (at least two when hi > lo).
std::vector<double> nice_ticks(double lo, double hi, int max_ticks);

// The hover text of a point: "plan 3 · tp 2, pp 2, dp 2 · 47,663 tokens/s · 37.3 GiB peak".
std::string describe_point(const SweepData& sweep, const ParetoPoint& point);

}  // namespace strata::gui
