#include "gui/model/lod.h"

#include <algorithm>
#include <cmath>

namespace strata::gui {

void build_marks(const Lane& lane, const TimeView& view, double min_px, std::vector<Mark>* out) {
  out->clear();
  const auto& spans = lane.spans;
  const double start = view.start_ns();
  const double end = view.end_ns();
  const double px_per_ns = 1.0 / view.ns_per_px();
  std::size_t i = first_span_ending_after(lane, static_cast<TimeNs>(std::floor(start)));

  bool open = false;  // a merged run is being collected
  Mark run;
  std::array<double, kNumCategories> run_ns{};
  auto close_run = [&] {
    if (!open) return;
    const auto longest = std::max_element(run_ns.begin(), run_ns.end());
    // Zero-length tasks only: keep the first task's category.
    if (run.count > 1 && *longest > 0.0) {
      run.category = static_cast<Category>(longest - run_ns.begin());
    }
    out->push_back(run);
    open = false;
  };

  for (; i < spans.size(); ++i) {
    const Span& s = spans[i];
    if (static_cast<double>(s.start_ns) >= end) break;
    if (static_cast<double>(s.end_ns()) <= start && s.dur_ns > 0) continue;  // overlap leftovers
    const double x0 = (static_cast<double>(s.start_ns) - start) * px_per_ns;
    const double x1 = (static_cast<double>(s.end_ns()) - start) * px_per_ns;
    if (x1 - x0 >= min_px) {
      close_run();
      out->push_back(Mark{x0, x1, 1, static_cast<std::uint32_t>(i), s.category});
      continue;
    }
    if (open && x0 - run.x1_px < min_px) {
      run.x1_px = std::max(run.x1_px, x1);
      ++run.count;
      run_ns[static_cast<int>(s.category)] += static_cast<double>(s.dur_ns);
      continue;
    }
    close_run();
    open = true;
    run = Mark{x0, x1, 1, static_cast<std::uint32_t>(i), s.category};
    run_ns.fill(0.0);
    run_ns[static_cast<int>(s.category)] = static_cast<double>(s.dur_ns);
  }
  close_run();
}

}  // namespace strata::gui
