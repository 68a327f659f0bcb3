// Level of detail: the marks one lane draws in a view.
//
// Tasks at least min_px wide are drawn one by one. A run of consecutive tasks
// each narrower than min_px, each starting less than min_px after the run's end
// so far, and all of one step block (Lane::group: one phase of one micro-batch
// and chunk), becomes one mark with a count (as Tracy and Perfetto do), so a lane
// of a million tasks is never more marks than it has pixels plus step blocks. Cost per lane: one
// binary search plus one pass over the visible tasks.
#pragma once

#include <array>
#include <cstdint>
#include <vector>

#include "gui/model/time_view.h"
#include "gui/model/trace_model.h"

namespace strata::gui {

// The width under which tasks merge (the design notes' "about 3 px").
inline constexpr double kMergeBelowPx = 3.0;

struct Mark {
  double x0_px = 0.0;       // left edge in view pixels (may be < 0 for tasks that start earlier)
  double x1_px = 0.0;       // right edge
  std::uint32_t count = 0;  // tasks in the mark (1: a single task)
  std::uint32_t first_span = 0;         // index into the lane's spans of the first task
  Category category = Category::kGemm;  // the single task's, or the longest total time's
  // The time its tasks take together: with the mark's width, how busy the lane is
  // there (a merged mark is drawn as tall as that share, so a lane 30% exposed
  // reads as such at fit zoom).
  double busy_ns = 0.0;
};

// The share of [x0_px, x1_px] a mark's tasks take, in [0, 1] (overlapping tasks
// of a measured trace can sum past the width).
double busy_share(const Mark& mark, const TimeView& view);

// Appends the marks of lane inside view to out (out is cleared first). Marks are
// in time order.
void build_marks(const Lane& lane, const TimeView& view, double min_px, std::vector<Mark>* out);

}  // namespace strata::gui
