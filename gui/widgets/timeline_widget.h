// The timeline: one viewport-sized widget that paints every visible lane (the
// pattern of Qt Creator's timeline), never one item per task. Per frame it asks
// the Qt-free model for the marks of each visible lane (binary search plus
// level-of-detail merging, gui/model/lod.h) and paints them as batched
// rectangles, antialiasing off.
//
// Mouse: wheel zooms around the cursor, Shift+wheel scrolls lanes, Ctrl+wheel
// makes lanes taller or shorter, drag pans, click selects a task (or folds a node
// when on its header row), Shift+drag selects a time range; F fits.
#pragma once

#include <QRectF>
#include <QString>
#include <QWidget>
#include <array>
#include <memory>
#include <optional>
#include <vector>

#include "gui/model/lod.h"
#include "gui/model/time_view.h"
#include "gui/model/timeline_layout.h"
#include "gui/model/trace_model.h"

namespace strata::gui {

class TimelineWidget : public QWidget {
  Q_OBJECT

 public:
  static constexpr int kGutterPx = 200;  // lane labels on the left
  static constexpr int kRulerPx = 26;    // time ruler on top

  explicit TimelineWidget(QWidget* parent = nullptr);

  // Shows traces top to bottom on one time axis (predicted, then measured) and
  // fits them to the width. An empty list shows message instead.
  void set_traces(std::vector<std::shared_ptr<const TraceModel>> traces,
                  const QString& message = QString());
  const std::vector<std::shared_ptr<const TraceModel>>& traces() const { return traces_; }
  QString message() const { return message_; }

  const TimeView& view() const { return view_; }
  // Shows [start_ns, end_ns] across the lane area.
  void set_view(double start_ns, double end_ns);
  // Shows every task of every trace.
  void fit();
  // Zooms by factor (> 1 in) keeping the time under widget x where it is.
  void zoom_at(double factor, int x);
  // Drags the content by (dx, dy) pixels.
  void pan_by(int dx, int dy);

  int scroll_y() const { return scroll_y_; }
  void set_scroll_y(int y);  // clamped to [0, max_scroll_y()]
  int max_scroll_y() const;
  int lanes_height_px() const { return height() - kRulerPx; }

  const TimelineLayout& layout_model() const { return layout_; }
  // A lane's height in pixels (clamped to 10..60; counters are twice as tall);
  // Ctrl+wheel changes it 2 px a notch.
  void set_lane_height(int px);
  void set_all_collapsed(bool collapsed);
  // Folds or unfolds the node of a kNode row.
  void toggle_node_row(int row);

  struct Hit {
    int row = -1;  // layout row under the point, -1 when none
    int trace = -1;
    int lane = -1;                   // lane index in the trace (lane rows)
    std::int64_t span = -1;          // single task under the point
    std::uint32_t merged_count = 0;  // > 1: a merged mark of that many tasks
    std::uint32_t merged_first_span = 0;
    TimeNs merged_start_ns = 0, merged_end_ns = 0;
  };
  // What lies under a widget point (lane area or gutter).
  Hit hit_at(QPoint pos) const;
  // The hover text at a point ("" when nothing is under it).
  QString tooltip_at(QPoint pos) const;

  struct Selection {
    int trace = 0;
    int lane = 0;
    std::int64_t span = 0;
    bool operator==(const Selection&) const = default;
  };
  std::optional<Selection> selection() const { return selection_; }
  void select(std::optional<Selection> selection);
  // Selects span of lane in trace and brings it into view: unfolds its node,
  // scrolls its row into sight and zooms so the span takes the middle third of
  // the lane area (without zoom: pans to centre it at the current zoom). False
  // when there is no such span.
  bool reveal(int trace, int lane, std::int64_t span, bool zoom = true);

  // Flows (a pipeline send to its receive): the selected task's are always
  // drawn as arrows; with show_all_flows, every flow with an end in view too
  // (at most kMaxFlowArrows a frame).
  static constexpr int kMaxFlowArrows = 4000;
  void set_show_all_flows(bool show);
  bool show_all_flows() const { return show_all_flows_; }
  // Selects the other end of the selected task's flow and scrolls and pans to it,
  // keeping the zoom (key G). False when the selection has no flow.
  bool follow_flow();
  // Arrows drawn by the last paint (for tests).
  int flow_arrows_drawn() const { return flow_arrows_drawn_; }
  // The selected task's fields, one per line; "" without a selection.
  QString selection_text() const;

  // The time range selected with Shift+drag (start <= end), if any; Esc clears it.
  std::optional<std::pair<TimeNs, TimeNs>> range() const { return range_; }
  void set_range(std::optional<std::pair<TimeNs, TimeNs>> range);

 signals:
  void selectionChanged();
  void rangeChanged();
  void viewChanged();
  void contentHeightChanged();
  void laneHeightChanged(int px);

 protected:
  bool event(QEvent* e) override;
  void paintEvent(QPaintEvent* e) override;
  void resizeEvent(QResizeEvent* e) override;
  void wheelEvent(QWheelEvent* e) override;
  void mousePressEvent(QMouseEvent* e) override;
  void mouseMoveEvent(QMouseEvent* e) override;
  void mouseReleaseEvent(QMouseEvent* e) override;
  void keyPressEvent(QKeyEvent* e) override;

 private:
  void paint_ruler(QPainter& p, const std::vector<RulerTick>& ticks);
  void paint_row(QPainter& p, const Row& row, int y);
  // Adds a lane's marks to the batches (the fills are drawn once per category);
  // labels point into trace's names, alive for the frame.
  void collect_marks(const TraceModel& trace, const Lane& lane, int y, int height, bool labels);
  void flush_batches(QPainter& p);
  void paint_flows(QPainter& p);
  // A counter row: the value as a filled step curve on the scale shared by the
  // trace's counters of that name (memory: at least the GPU's capacity, dashed).
  void paint_counter(QPainter& p, const TraceModel& trace, const CounterTrack& counter, int y, int height);
  // Brings span into sight: unfolds its node, scrolls its row to a third of the
  // height; zoom: the span fills the middle third, else the view pans to centre it.
  void bring_into_view(int trace, int lane, std::int64_t span, bool zoom);
  int lane_width_px() const { return std::max(1, width() - kGutterPx); }

  std::vector<std::shared_ptr<const TraceModel>> traces_;
  QString message_;
  TimelineLayout layout_;
  TimeView view_;
  bool needs_fit_ = true;
  int scroll_y_ = 0;
  std::optional<Selection> selection_;
  bool show_all_flows_ = false;
  int flow_arrows_drawn_ = 0;

  std::optional<std::pair<TimeNs, TimeNs>> range_;

  // Mouse drag state (ranging_: a Shift+drag selecting a time range).
  bool pressed_ = false;
  bool dragging_ = false;
  bool ranging_ = false;
  TimeNs range_anchor_ns_ = 0;
  QPoint press_pos_, last_pos_;

  // Per-frame buffers, kept to avoid reallocating every paint.
  mutable std::vector<Mark> marks_;
  // Single tasks by category and phase (task_color), merged marks by category.
  std::array<std::vector<QRectF>, kNumCategories * kNumPhases> single_rects_;
  std::array<std::vector<QRectF>, kNumCategories * kNumPhases> merged_rects_;
  struct Label {
    QRectF rect;
    QString text;
  };
  std::vector<Label> labels_;
  std::vector<Label> block_labels_;  // step blocks' "F3.1"
};

}  // namespace strata::gui
