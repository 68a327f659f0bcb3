// The overview strip above the timeline's lanes: the whole step at once — the
// compute lanes' busy share (blue, upper half) and the exposed lanes' waiting
// (exposed communication orange, bubble grey, lower half) per pixel column
// (gui/model/overview.h) — with the part the timeline shows outlined. A click or
// drag centres the timeline there at its zoom. It shares the timeline's gutter,
// so its columns line up with the lanes below.
#pragma once

#include <QWidget>
#include <memory>
#include <vector>

#include "gui/model/overview.h"

namespace strata::gui {

class TimelineWidget;

class OverviewStrip : public QWidget {
  Q_OBJECT

 public:
  static constexpr int kHeightPx = 34;
  explicit OverviewStrip(TimelineWidget* timeline, QWidget* parent = nullptr);

  // The step's range the strip shows (the first trace's tasks), {0, 0} when none.
  TimeNs begin_ns() const { return begin_ns_; }
  TimeNs end_ns() const { return end_ns_; }
  // The time under strip x (x of the widget, gutter included).
  double t_of(int x) const;
  const std::vector<OverviewColumn>& columns() const { return columns_; }

 protected:
  void paintEvent(QPaintEvent* e) override;
  void mousePressEvent(QMouseEvent* e) override;
  void mouseMoveEvent(QMouseEvent* e) override;
  void resizeEvent(QResizeEvent* e) override;

 private:
  // Recomputes the columns when the trace or the width changed.
  void refresh();
  void centre_at(int x);
  int lane_width() const;

  TimelineWidget* timeline_;
  std::weak_ptr<const TraceModel> trace_;  // weak: a new trace at the old address is new
  int computed_width_ = -1;
  TimeNs begin_ns_ = 0, end_ns_ = 0;
  std::vector<OverviewColumn> columns_;
};

}  // namespace strata::gui
