// The Timeline tab: a tool row (fit, fold and unfold nodes, the category
// legend), the timeline with its vertical scroll bar, and the details of the
// selected task below.
#pragma once

#include <QWidget>

class QLabel;
class QScrollBar;
class QCheckBox;
class QPlainTextEdit;

namespace strata::gui {

class TimelineWidget;

class TimelinePanel : public QWidget {
  Q_OBJECT

 public:
  explicit TimelinePanel(QWidget* parent = nullptr);
  TimelineWidget* timeline() const { return timeline_; }
  // The details panel's text (the selected task, or a hint).
  QString details_text() const;
  // Ticks the Flows box: every pipeline transfer drawn as an arrow.
  void set_show_all_flows(bool show);

 private:
  void sync_scroll_bar();
  void show_selection();

  TimelineWidget* timeline_;
  QScrollBar* scroll_;
  QPlainTextEdit* details_;
  QCheckBox* flows_;
};

}  // namespace strata::gui
