#include "gui/model/overview.h"

#include <algorithm>
#include <cmath>

namespace strata::gui {

std::vector<OverviewColumn> overview(const TraceModel& trace, TimeNs begin_ns, TimeNs end_ns, int columns) {
  std::vector<OverviewColumn> out(std::max(0, columns));
  if (columns <= 0 || end_ns <= begin_ns) return out;
  const double width = static_cast<double>(end_ns - begin_ns) / columns;  // ns per column
  int compute_lanes = 0, exposed_lanes = 0;
  // Adds [a, b) of a span to the columns it covers, field by field.
  auto spread = [&](TimeNs a, TimeNs b, double OverviewColumn::*field) {
    a = std::max(a, begin_ns);
    b = std::min(b, end_ns);
    if (b <= a) return;
    const double x0 = static_cast<double>(a - begin_ns) / width;
    const double x1 = static_cast<double>(b - begin_ns) / width;
    for (int c = static_cast<int>(x0); c < columns && c < x1; ++c) {
      const double covered = std::min(x1, c + 1.0) - std::max(x0, static_cast<double>(c));
      out[c].*field += covered;  // in columns: a whole column is 1
    }
  };
  for (const Lane& lane : trace.lanes) {
    const bool compute = lane.stream == 0 && lane.stream_label == "compute";
    const bool exposed = lane.stream_label == trace::kExposedLaneName;
    if (!compute && !exposed) continue;
    (compute ? compute_lanes : exposed_lanes) += 1;
    TimeNs covered_to = begin_ns;  // a compute lane's overlapping tasks count once
    for (const Span& s : lane.spans) {
      if (compute) {
        const TimeNs a = std::max(s.start_ns, covered_to);
        if (s.end_ns() > a) {
          spread(a, s.end_ns(), &OverviewColumn::compute);
          covered_to = s.end_ns();
        }
      } else {
        spread(s.start_ns, s.end_ns(), s.category == Category::kBubble ? &OverviewColumn::bubble : &OverviewColumn::exposed);
      }
    }
  }
  for (OverviewColumn& c : out) {
    if (compute_lanes > 0) c.compute = std::min(1.0, c.compute / compute_lanes);
    if (exposed_lanes > 0) {
      c.exposed = std::min(1.0, c.exposed / exposed_lanes);
      c.bubble = std::min(1.0, c.bubble / exposed_lanes);
    }
  }
  return out;
}

}  // namespace strata::gui
