#include "gui/model/range_stats.h"

#include <fmt/format.h>

#include <algorithm>
#include <set>

#include "gui/model/time_view.h"

namespace strata::gui {

RangeStats range_stats(const TraceModel& trace, TimeNs start_ns, TimeNs end_ns) {
  RangeStats st;
  st.start_ns = std::min(start_ns, end_ns);
  st.end_ns = std::max(start_ns, end_ns);
  std::set<int> ranks;
  for (const Lane& lane : trace.lanes) {
    ranks.insert(lane.rank);
    const bool exposed = lane.stream_label == trace::kExposedLaneName;
    if (exposed) ++st.exposed_ranks;
    RangeStats::Busy& busy = st.streams[lane.stream_label];
    ++busy.lanes;
    TimeNs covered_to = st.start_ns;  // the union of busy time so far reaches here
    for (std::size_t i = first_span_ending_after(lane, st.start_ns);
         i < lane.spans.size() && lane.spans[i].start_ns < st.end_ns; ++i) {
      const Span& s = lane.spans[i];
      const TimeNs a = std::max(s.start_ns, st.start_ns);
      const TimeNs b = std::min(s.end_ns(), st.end_ns);
      if (b <= a) continue;
      const auto c = static_cast<std::size_t>(s.category);
      (exposed ? st.exposed_ns_per_rank[c] : st.category_ns[c]) += static_cast<double>(b - a);
      const TimeNs from = std::max(a, covered_to);
      if (b > from) {
        busy.busy_ns += static_cast<double>(b - from);
        covered_to = b;
      }
    }
  }
  st.ranks = static_cast<int>(ranks.size());
  if (st.exposed_ranks > 0) {
    for (double& ns : st.exposed_ns_per_rank) ns /= st.exposed_ranks;
  }
  return st;
}

std::string describe(const RangeStats& st) {
  const TimeNs range = st.end_ns - st.start_ns;
  std::string out = fmt::format("range {} to {} ({}), {} ranks", format_time_ns(static_cast<double>(st.start_ns)),
                                format_time_ns(static_cast<double>(st.end_ns)), format_time_ns(static_cast<double>(range)),
                                st.ranks);
  // One line per figure kind, its items separated by " · ".
  auto item = [](std::string& line, const std::string& text) { line += (line.empty() ? "" : " · ") + text; };
  std::string busy;
  for (const auto& [name, b] : st.streams) {
    if (name != trace::kExposedLaneName) item(busy, fmt::format("{} {:.1f}% ({})", name, 100.0 * b.share(range), b.lanes));
  }
  out += "\nbusy, mean over lanes (lanes): " + busy;
  std::string tasks;
  for (int c = 0; c < kNumCategories; ++c) {
    if (st.category_ns[c] > 0.0) item(tasks, fmt::format("{} {}", to_string(static_cast<Category>(c)), format_time_ns(st.category_ns[c])));
  }
  out += "\ntask time, all lanes: " + (tasks.empty() ? std::string("none") : tasks);
  if (st.exposed_ranks > 0) {
    std::string waits;
    for (int c = 0; c < kNumCategories; ++c) {
      if (st.exposed_ns_per_rank[c] <= 0.0) continue;
      const auto cat = static_cast<Category>(c);
      const std::string what = cat == Category::kBubble ? "bubble"
                               : cat == Category::kHost ? "host dispatch"
                                                        : std::string("exposed ") + to_string(cat);
      item(waits, fmt::format("{} {} ({:.1f}%)", what, format_time_ns(st.exposed_ns_per_rank[c]),
                              range > 0 ? 100.0 * st.exposed_ns_per_rank[c] / static_cast<double>(range) : 0.0));
    }
    out += "\ncompute stream waiting, mean per rank: " + (waits.empty() ? std::string("none") : waits);
  }
  return out;
}

}  // namespace strata::gui
