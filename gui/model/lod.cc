#include "gui/model/lod.h"

#include <algorithm>
#include <cmath>

namespace strata::gui {

double busy_share(const Mark& mark, const TimeView& view) {
  const double width_ns = (mark.x1_px - mark.x0_px) * view.ns_per_px();
  if (!(width_ns > 0.0)) return 1.0;
  return std::clamp(mark.busy_ns / width_ns, 0.0, 1.0);
}

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
    run.busy_ns = 0.0;
    for (double ns : run_ns) run.busy_ns += ns;
    out->push_back(run);
    open = false;
  };

  // A block of spans merges into the open run in one step when every span of it
  // surely would one by one: all narrower than min_px, all gaps below min_px,
  // nothing before the run reaching past its end, all inside the view. The
  // margin keeps borderline spans on the one-by-one path, so marks are the same.
  const double sure_px = min_px * (1.0 - 1e-9);
  TimeNs run_end_ns = 0;
  std::uint32_t run_group = 0;
  // Lanes built without groups (all one block) merge as before.
  auto group_of = [&](std::size_t k) { return lane.group.empty() ? 0u : lane.group[k]; };
  for (; i < spans.size(); ++i) {
    // Groups never decrease, so a block whose last span is in the run's group is
    // wholly in it.
    if (open && i % kLodBlockSpans == 0 && i / kLodBlockSpans < lane.blocks.size() &&
        group_of(i + kLodBlockSpans - 1) == run_group &&
        lane.max_end_ns[i - 1] == run_end_ns && static_cast<double>(spans[i].start_ns) >= start &&
        static_cast<double>(spans[i + kLodBlockSpans - 1].start_ns) < end) {
      const LodBlock& b = lane.blocks[i / kLodBlockSpans];
      if (static_cast<double>(b.max_dur_ns) * px_per_ns < sure_px &&
          static_cast<double>(b.max_gap_ns) * px_per_ns < sure_px) {
        run_end_ns = lane.max_end_ns[i + kLodBlockSpans - 1];
        run.x1_px = (static_cast<double>(run_end_ns) - start) * px_per_ns;
        run.count += static_cast<std::uint32_t>(kLodBlockSpans);
        for (int c = 0; c < kNumCategories; ++c) run_ns[c] += b.category_ns[c];
        i += kLodBlockSpans - 1;
        continue;
      }
    }
    const Span& s = spans[i];
    if (static_cast<double>(s.start_ns) >= end) break;
    if (static_cast<double>(s.end_ns()) <= start && s.dur_ns > 0) continue;  // overlap leftovers
    const double x0 = (static_cast<double>(s.start_ns) - start) * px_per_ns;
    const double x1 = (static_cast<double>(s.end_ns()) - start) * px_per_ns;
    if (x1 - x0 >= min_px) {
      close_run();
      out->push_back(Mark{x0, x1, 1, static_cast<std::uint32_t>(i), s.category, static_cast<double>(s.dur_ns)});
      continue;
    }
    if (open && x0 - run.x1_px < min_px && group_of(i) == run_group) {
      run.x1_px = std::max(run.x1_px, x1);
      run_end_ns = std::max(run_end_ns, s.end_ns());
      ++run.count;
      run_ns[static_cast<int>(s.category)] += static_cast<double>(s.dur_ns);
      continue;
    }
    close_run();
    open = true;
    run = Mark{x0, x1, 1, static_cast<std::uint32_t>(i), s.category};
    run_end_ns = s.end_ns();
    run_group = group_of(i);
    run_ns.fill(0.0);
    run_ns[static_cast<int>(s.category)] = static_cast<double>(s.dur_ns);
  }
  close_run();
}

}  // namespace strata::gui
