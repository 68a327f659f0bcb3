#include "gui/model/timeline_layout.h"

#include <fmt/format.h>

#include <algorithm>

#include "gui/model/time_view.h"

namespace strata::gui {

void TimelineLayout::set_traces(std::vector<const TraceModel*> traces) {
  traces_ = std::move(traces);
  collapsed_.clear();
  for (int t = 0; t < static_cast<int>(traces_.size()); ++t) {
    if (static_cast<int>(traces_[t]->lanes.size()) <= kCollapseAboveLanes) continue;
    for (int node : traces_[t]->nodes()) collapsed_.insert({t, node});
  }
  rebuild();
}

void TimelineLayout::set_collapsed(int trace, int node, bool collapsed) {
  if (collapsed) {
    collapsed_.insert({trace, node});
  } else {
    collapsed_.erase({trace, node});
  }
  rebuild();
}

void TimelineLayout::set_lane_height(int px) {
  const int clamped = std::clamp(px, kMinLaneHeightPx, kMaxLaneHeightPx);
  if (clamped == lane_height_px_) return;
  lane_height_px_ = clamped;
  rebuild();
}

bool TimelineLayout::is_collapsed(int trace, int node) const {
  return collapsed_.count({trace, node}) > 0;
}

void TimelineLayout::rebuild() {
  rows_.clear();
  int y = 0;
  auto push = [&](Row row, int height) {
    row.y_px = y;
    row.height_px = height;
    y += height;
    rows_.push_back(std::move(row));
  };
  for (int t = 0; t < static_cast<int>(traces_.size()); ++t) {
    const TraceModel& trace = *traces_[t];
    Row header;
    header.kind = RowKind::kTrace;
    header.trace = t;
    header.label = trace_label(trace);
    push(std::move(header), kHeaderHeightPx);

    const auto& lanes = trace.lanes;
    std::size_t i = 0;
    while (i < lanes.size()) {
      // A node's lanes are consecutive: lanes are sorted by rank, ranks fill nodes in order.
      const int node = lanes[i].node;
      std::size_t j = i;
      while (j < lanes.size() && lanes[j].node == node) ++j;
      Row node_row;
      node_row.kind = RowKind::kNode;
      node_row.trace = t;
      node_row.node = node;
      node_row.collapsed = is_collapsed(t, node);
      std::set<int> ranks;
      for (std::size_t k = i; k < j; ++k) ranks.insert(lanes[k].rank);
      node_row.label = fmt::format("{} · {} rank{}",
                                   node >= 0 ? fmt::format("node {}", node) : std::string("ranks"),
                                   ranks.size(), ranks.size() == 1 ? "" : "s");
      if (node_row.collapsed) {
        for (std::size_t k = i; k < j; ++k) {
          if (lanes[k].stream == 0) node_row.overlay_lanes.push_back(static_cast<int>(k));
        }
        if (node_row.overlay_lanes.empty()) {
          for (std::size_t k = i; k < j; ++k) node_row.overlay_lanes.push_back(static_cast<int>(k));
        }
      }
      const bool collapsed = node_row.collapsed;
      push(std::move(node_row), kHeaderHeightPx);
      if (!collapsed) {
        for (std::size_t k = i; k < j; ++k) {
          Row lane_row;
          lane_row.kind = RowKind::kLane;
          lane_row.trace = t;
          lane_row.node = node;
          lane_row.lane = static_cast<int>(k);
          lane_row.label = fmt::format("rank {} {}", lanes[k].global_rank, lanes[k].stream_label);
          push(std::move(lane_row), lane_height());
          // After a rank's last lane, its counters.
          if (k + 1 < j && lanes[k + 1].rank == lanes[k].rank) continue;
          for (int c = 0; c < static_cast<int>(trace.counters.size()); ++c) {
            if (trace.counters[c].rank != lanes[k].rank) continue;
            Row counter_row;
            counter_row.kind = RowKind::kCounter;
            counter_row.trace = t;
            counter_row.node = node;
            counter_row.counter = c;
            counter_row.label = fmt::format("rank {} {}", lanes[k].global_rank, trace.counters[c].name);
            push(std::move(counter_row), counter_height());
          }
        }
      }
      i = j;
    }
    // Counters of processes without lanes (the simulator's "busiest links"),
    // after the ranks under one header row each.
    std::set<int> lane_ranks;
    for (const Lane& lane : lanes) lane_ranks.insert(lane.rank);
    int header_rank = -1;
    bool group_collapsed = false;
    for (int c = 0; c < static_cast<int>(trace.counters.size()); ++c) {
      const CounterTrack& counter = trace.counters[c];
      if (lane_ranks.count(counter.rank) > 0) continue;
      if (counter.rank != header_rank) {
        header_rank = counter.rank;
        Row group;
        group.kind = RowKind::kNode;
        group.trace = t;
        group.node = counter_group_node(counter.rank);  // folds like a node
        group.collapsed = group_collapsed = is_collapsed(t, group.node);
        group.label = counter.process_label;
        push(std::move(group), kHeaderHeightPx);
      }
      if (group_collapsed) continue;
      Row counter_row;
      counter_row.kind = RowKind::kCounter;
      counter_row.trace = t;
      counter_row.counter = c;
      counter_row.label = counter.name;
      push(std::move(counter_row), counter_height());
    }
  }
}

int TimelineLayout::total_height_px() const {
  return rows_.empty() ? 0 : rows_.back().y_px + rows_.back().height_px;
}

int TimelineLayout::first_row_below(int y_px) const {
  auto it = std::upper_bound(rows_.begin(), rows_.end(), y_px,
                             [](int y, const Row& r) { return y < r.y_px + r.height_px; });
  return static_cast<int>(it - rows_.begin());
}

int TimelineLayout::row_at(int y_px) const {
  if (y_px < 0) return -1;
  const int i = first_row_below(y_px);
  return i < static_cast<int>(rows_.size()) && rows_[i].y_px <= y_px ? i : -1;
}

std::string trace_label(const TraceModel& trace) {
  std::string label = trace.kind.empty() ? "trace" : trace.kind;
  if (!trace.model_name.empty()) label += " · " + trace.model_name;
  if (trace.step_time_s > 0.0) label += " · step " + format_time_ns(trace.step_time_s * 1e9);
  label += fmt::format(" · {} tasks on {} lanes", trace.num_spans(), trace.lanes.size());
  return label;
}

}  // namespace strata::gui
