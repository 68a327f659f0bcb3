// The Timeline tab: a tool row (fit, fold and unfold nodes, flows, the category
// legend), a find row (gui/model/trace_search.h), the timeline with its vertical
// scroll bar, and below the details of the selected task or the summary of the
// selected time range (gui/model/range_stats.h).
#pragma once

#include <QWidget>
#include <memory>
#include <vector>

#include "gui/model/trace_model.h"

class QLabel;
class QLineEdit;
class QScrollBar;
class QCheckBox;
class QPlainTextEdit;

namespace strata::gui {

class OverviewStrip;
class TimelineWidget;

class TimelinePanel : public QWidget {
  Q_OBJECT

 public:
  explicit TimelinePanel(QWidget* parent = nullptr);
  TimelineWidget* timeline() const { return timeline_; }
  OverviewStrip* overview() const { return overview_; }
  // The details panel's text (the selected task, or a hint).
  QString details_text() const;
  // Ticks the Flows box: every pipeline transfer drawn as an arrow.
  void set_show_all_flows(bool show);

  // Puts text in the Find box (matches are counted at once).
  void set_find_text(const QString& text);
  // Selects the next (or previous) match of the Find box in the first trace,
  // after the selection or the view's start, wrapping around, and brings it into
  // view at the current zoom. False when nothing matches or the query is bad.
  bool find_next(bool backwards = false);
  // "3 of 120", "no match", or the query's error.
  QString find_status() const;

 protected:
  bool eventFilter(QObject* watched, QEvent* event) override;

 private:
  void sync_scroll_bar();
  void show_selection();
  // Recomputes the matches when the query or the trace changed.
  void update_matches();

  TimelineWidget* timeline_;
  OverviewStrip* overview_;
  QScrollBar* scroll_;
  QPlainTextEdit* details_;
  QCheckBox* flows_;
  QLineEdit* find_;
  QLabel* find_status_;
  std::vector<SpanRef> matches_;
  // The trace the matches are of (weak: a new trace at the old one's address is
  // still a new trace).
  std::weak_ptr<const TraceModel> matched_trace_;
  QString matched_query_;
  QString find_error_;
};

}  // namespace strata::gui
