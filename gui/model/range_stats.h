// What a time range of a timeline holds (the range selection's summary):
// per category the task time inside the range; per lane kind (compute,
// tp-comm, ...) how busy its lanes are; per kind the exposed lanes' waiting,
// as a mean over ranks like result.json's figures. Qt-free.
#pragma once

#include <array>
#include <map>
#include <string>

#include "gui/model/trace_model.h"

namespace strata::gui {

struct RangeStats {
  TimeNs start_ns = 0, end_ns = 0;
  int ranks = 0;  // distinct ranks (pids) with a lane in the trace
  // Task time inside the range, summed over every lane except the exposed ones.
  std::array<double, kNumCategories> category_ns{};
  // Per lane name: the lanes' busy time inside the range (overlapping tasks on a
  // lane counted once), summed, and how many lanes have that name.
  struct Busy {
    double busy_ns = 0.0;
    int lanes = 0;
    double share(TimeNs range_ns) const {
      return lanes > 0 && range_ns > 0 ? busy_ns / lanes / static_cast<double>(range_ns) : 0.0;
    }
  };
  std::map<std::string, Busy> streams;
  // The exposed lanes' time inside the range per category, mean over the ranks
  // that have an exposed lane (0 without exposed lanes).
  std::array<double, kNumCategories> exposed_ns_per_rank{};
  int exposed_ranks = 0;
};

RangeStats range_stats(const TraceModel& trace, TimeNs start_ns, TimeNs end_ns);

// The summary as the details panel shows it, one figure per line.
std::string describe(const RangeStats& stats);

}  // namespace strata::gui
