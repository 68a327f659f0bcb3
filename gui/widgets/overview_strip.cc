#include "gui/widgets/overview_strip.h"

#include <QMouseEvent>
#include <QPainter>
#include <algorithm>
#include <cmath>

#include "gui/widgets/colors.h"
#include "gui/widgets/timeline_widget.h"

namespace strata::gui {

OverviewStrip::OverviewStrip(TimelineWidget* timeline, QWidget* parent) : QWidget(parent), timeline_(timeline) {
  setFixedHeight(kHeightPx);
  setToolTip(tr("The whole step: compute busy (blue, top), exposed communication (orange) and bubble (grey) "
                "below; click or drag to go there"));
  connect(timeline_, &TimelineWidget::viewChanged, this, qOverload<>(&QWidget::update));
  connect(timeline_, &TimelineWidget::contentHeightChanged, this, [this] {
    refresh();
    update();
  });
}

int OverviewStrip::lane_width() const { return std::max(1, width() - TimelineWidget::kGutterPx); }

void OverviewStrip::refresh() {
  const auto& traces = timeline_->traces();
  const std::shared_ptr<const TraceModel> trace = traces.empty() ? nullptr : traces.front();
  const bool same = trace != nullptr ? trace == trace_.lock() : trace_.expired();
  if (same && computed_width_ == lane_width()) return;
  trace_ = trace;
  computed_width_ = lane_width();
  columns_.clear();
  begin_ns_ = end_ns_ = 0;
  if (trace == nullptr) return;
  begin_ns_ = trace->begin_ns();
  end_ns_ = trace->end_ns();
  columns_ = overview(*trace, begin_ns_, end_ns_, computed_width_);
}

void OverviewStrip::resizeEvent(QResizeEvent*) { refresh(); }

double OverviewStrip::t_of(int x) const {
  return static_cast<double>(begin_ns_) +
         static_cast<double>(x - TimelineWidget::kGutterPx) / lane_width() * static_cast<double>(end_ns_ - begin_ns_);
}

void OverviewStrip::paintEvent(QPaintEvent*) {
  refresh();
  QPainter p(this);
  p.fillRect(rect(), Qt::white);
  p.setPen(Qt::darkGray);
  p.drawText(QRect(6, 0, TimelineWidget::kGutterPx - 12, height()), Qt::AlignVCenter | Qt::AlignLeft, tr("overview"));
  if (columns_.empty()) return;
  const int gutter = TimelineWidget::kGutterPx;
  const double half = (height() - 4) / 2.0;
  const QColor compute = category_color(Category::kGemm);
  const QColor exposed = category_color(Category::kTp);
  const QColor bubble = category_color(Category::kBubble).darker(115);
  for (int c = 0; c < static_cast<int>(columns_.size()); ++c) {
    const OverviewColumn& col = columns_[c];
    const double x = gutter + c;
    if (col.compute > 0) p.fillRect(QRectF(x, 2 + half * (1 - col.compute), 1, half * col.compute), compute);
    // Below the midline: exposed communication, then bubble under it.
    double y = 2 + half;
    if (col.exposed > 0) {
      p.fillRect(QRectF(x, y, 1, half * col.exposed), exposed);
      y += half * col.exposed;
    }
    if (col.bubble > 0) p.fillRect(QRectF(x, y, 1, half * col.bubble), bubble);
  }
  // The part the timeline shows.
  const double span = static_cast<double>(end_ns_ - begin_ns_);
  const auto x_of = [&](double t) { return gutter + (t - static_cast<double>(begin_ns_)) / span * lane_width(); };
  const double x0 = std::clamp(x_of(timeline_->view().start_ns()), static_cast<double>(gutter), width() - 1.0);
  const double x1 = std::clamp(x_of(timeline_->view().end_ns()), static_cast<double>(gutter), width() - 1.0);
  p.setPen(QPen(Qt::black, 1.5));
  p.setBrush(QColor(0, 0, 0, 25));
  p.drawRect(QRectF(x0, 1, std::max(2.0, x1 - x0), height() - 2));
}

void OverviewStrip::centre_at(int x) {
  if (columns_.empty() || x < TimelineWidget::kGutterPx) return;
  const double span = timeline_->view().span_ns();
  const double t = t_of(x);
  timeline_->set_view(t - span / 2, t + span / 2);
}

void OverviewStrip::mousePressEvent(QMouseEvent* e) {
  if (e->button() == Qt::LeftButton) centre_at(e->position().toPoint().x());
}

void OverviewStrip::mouseMoveEvent(QMouseEvent* e) {
  if (e->buttons() & Qt::LeftButton) centre_at(e->position().toPoint().x());
}

}  // namespace strata::gui
