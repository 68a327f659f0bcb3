// The timeline's overview strip in numbers: the whole step cut into columns, and
// per column how busy the compute lanes are and how much of the time the exposed
// lanes wait (exposed communication, host, bubble), each a mean over the lanes of
// that kind — so warm-up, steady state, flush and where communication is exposed
// read at a glance, whatever the zoom. Qt-free.
#pragma once

#include <vector>

#include "gui/model/trace_model.h"

namespace strata::gui {

struct OverviewColumn {
  double compute = 0.0;  // mean busy share of the compute lanes, 0..1
  double exposed = 0.0;  // mean share of the exposed lanes' waiting other than bubble, 0..1
  double bubble = 0.0;   // mean share of the exposed lanes' bubble, 0..1
};

// columns columns over [begin_ns, end_ns). A span is split over the columns it
// covers in proportion to its time in each.
std::vector<OverviewColumn> overview(const TraceModel& trace, TimeNs begin_ns, TimeNs end_ns, int columns);

}  // namespace strata::gui
