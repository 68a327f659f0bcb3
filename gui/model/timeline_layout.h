// The rows of the timeline, top to bottom: for each trace (predicted above
// measured) a header row, then per node a header row, then the node's lanes
// (rank x stream) and under each rank's lanes its counters (memory), unless the
// node is collapsed. A collapsed node's header row
// draws the compute lanes of all its ranks on top of each other, so the pipeline
// bubble stays visible with the node folded away. Qt-free.
#pragma once

#include <set>
#include <string>
#include <utility>
#include <vector>

#include "gui/model/trace_model.h"

namespace strata::gui {

inline constexpr int kLaneHeightPx = 18;  // the default; set_lane_height changes it
inline constexpr int kMinLaneHeightPx = 10;
inline constexpr int kMaxLaneHeightPx = 60;
inline constexpr int kHeaderHeightPx = 20;
// Traces with more lanes than this open with every node collapsed.
inline constexpr int kCollapseAboveLanes = 48;

// kCounter: a counter track of a rank (TraceModel::counters), under its lanes.
enum class RowKind { kTrace, kNode, kLane, kCounter };

// The node number of the header row over the counters of process pid when it has
// no lanes (the simulator's "busiest links"): below every real node number.
inline int counter_group_node(int pid) { return -1000 - pid; }

struct Row {
  RowKind kind = RowKind::kLane;
  int trace = 0;                   // index into the layout's traces
  int node = -1;                   // node number (kNode, kLane); -1 when the trace names none
  int lane = -1;                   // lane index in the trace (kLane)
  int counter = -1;                // counter index in the trace (kCounter)
  std::vector<int> overlay_lanes;  // kNode when collapsed: lanes drawn in the header row
  bool collapsed = false;          // kNode
  int y_px = 0;
  int height_px = 0;
  std::string label;
};

class TimelineLayout {
 public:
  // Lays out traces (not owned; they must outlive the layout or the next call).
  // Nodes start collapsed when a trace has more than kCollapseAboveLanes lanes.
  void set_traces(std::vector<const TraceModel*> traces);
  const std::vector<const TraceModel*>& traces() const { return traces_; }

  // Collapses or expands one node of one trace.
  void set_collapsed(int trace, int node, bool collapsed);
  void toggle(int trace, int node) { set_collapsed(trace, node, !is_collapsed(trace, node)); }
  bool is_collapsed(int trace, int node) const;

  // A lane row's height, clamped to [kMinLaneHeightPx, kMaxLaneHeightPx]; a counter
  // row is twice as tall. Headers keep theirs.
  void set_lane_height(int px);
  int lane_height() const { return lane_height_px_; }
  int counter_height() const { return 2 * lane_height_px_; }

  const std::vector<Row>& rows() const { return rows_; }
  int total_height_px() const;
  // The row covering y (layout coordinates, 0 = top of the first row); -1 if none.
  int row_at(int y_px) const;
  // First row that reaches below y_px (for painting only what is visible).
  int first_row_below(int y_px) const;

 private:
  void rebuild();

  std::vector<const TraceModel*> traces_;
  std::set<std::pair<int, int>> collapsed_;  // (trace, node)
  int lane_height_px_ = kLaneHeightPx;
  std::vector<Row> rows_;
};

// The header text of a trace row: "predicted · gpt3-175b · step 1.234 s · 1,000 tasks".
std::string trace_label(const TraceModel& trace);

}  // namespace strata::gui
