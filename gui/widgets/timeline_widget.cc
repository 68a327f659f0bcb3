#include "gui/widgets/timeline_widget.h"

#include <fmt/format.h>

#include <QHelpEvent>
#include <QKeyEvent>
#include <QMouseEvent>
#include <QPainter>
#include <QToolTip>
#include <QWheelEvent>
#include <algorithm>
#include <cmath>
#include <limits>

#include "gui/model/span_text.h"
#include "gui/widgets/colors.h"

namespace strata::gui {
namespace {

// A press that moves less than this is a click, more is a drag.
constexpr int kClickSlopPx = 3;
// Tasks wider than this get their name written inside.
constexpr double kLabelMinWidthPx = 40.0;
// How much darker a merged mark is than its tasks (QColor::darker's percent).
constexpr int kMergedDarker = 120;
// Step blocks (merged marks) wider than this get their label ("F3.1") inside.
constexpr double kBlockLabelMinWidthPx = 24.0;
// ... when their bar is at least this tall (the label's font is a pixel less).
constexpr double kBlockLabelPx = 9.0;
// Ruler labels stay at least this far apart.
constexpr double kRulerSpacingPx = 90.0;

const QColor kPredictedHeader(0xdd, 0xe6, 0xf2);
const QColor kMeasuredHeader(0xf6, 0xe3, 0xcf);
const QColor kNodeHeader(0xf0, 0xf0, 0xf0);
const QColor kGridLine(0xe6, 0xe6, 0xe6);
const QColor kRangeFill(0x33, 0x66, 0xcc, 40);
const QColor kCounterFill(0x9e, 0xc5, 0xe8);
const QColor kCounterLine(0x2c, 0x5f, 0x8a);
const QColor kRangeEdge(0x33, 0x66, 0xcc);

QString qstr(const std::string& s) { return QString::fromStdString(s); }

}  // namespace

TimelineWidget::TimelineWidget(QWidget* parent) : QWidget(parent) {
  setMouseTracking(false);
  setFocusPolicy(Qt::StrongFocus);
  setAttribute(Qt::WA_OpaquePaintEvent);
  setMinimumSize(kGutterPx + 200, kRulerPx + 100);
}

void TimelineWidget::set_traces(std::vector<std::shared_ptr<const TraceModel>> traces,
                                const QString& message) {
  traces_ = std::move(traces);
  message_ = message;
  std::vector<const TraceModel*> raw;
  for (const auto& t : traces_) raw.push_back(t.get());
  layout_.set_traces(std::move(raw));
  selection_.reset();
  range_.reset();
  scroll_y_ = 0;
  needs_fit_ = true;
  fit();
  emit contentHeightChanged();
  emit selectionChanged();
  emit rangeChanged();
  update();
}

void TimelineWidget::set_view(double start_ns, double end_ns) {
  view_ = TimeView(start_ns, end_ns, lane_width_px());
  needs_fit_ = false;
  emit viewChanged();
  update();
}

void TimelineWidget::fit() {
  if (traces_.empty()) return;
  TimeNs begin = traces_.front()->begin_ns();
  TimeNs end = traces_.front()->end_ns();
  for (const auto& t : traces_) {
    begin = std::min(begin, t->begin_ns());
    end = std::max(end, t->end_ns());
  }
  view_ = TimeView(0.0, 1.0, lane_width_px());
  view_.fit(static_cast<double>(begin), static_cast<double>(end));
  emit viewChanged();
  update();
}

void TimelineWidget::zoom_at(double factor, int x) {
  view_.zoom(factor, x - kGutterPx);
  needs_fit_ = false;
  emit viewChanged();
  update();
}

void TimelineWidget::pan_by(int dx, int dy) {
  view_.pan(dx);
  set_scroll_y(scroll_y_ - dy);
  needs_fit_ = false;
  emit viewChanged();
  update();
}

int TimelineWidget::max_scroll_y() const {
  return std::max(0, layout_.total_height_px() - lanes_height_px());
}

void TimelineWidget::set_scroll_y(int y) {
  const int clamped = std::clamp(y, 0, max_scroll_y());
  if (clamped == scroll_y_) return;
  scroll_y_ = clamped;
  emit viewChanged();
  update();
}

void TimelineWidget::set_lane_height(int px) {
  // Keep the row at the top of the view in place as the rows above it grow.
  const int row = layout_.first_row_below(scroll_y_);
  const int offset = row < static_cast<int>(layout_.rows().size()) ? scroll_y_ - layout_.rows()[row].y_px : 0;
  layout_.set_lane_height(px);
  if (row < static_cast<int>(layout_.rows().size())) scroll_y_ = layout_.rows()[row].y_px + offset;
  set_scroll_y(scroll_y_);
  emit contentHeightChanged();
  emit laneHeightChanged(layout_.lane_height());
  update();
}

void TimelineWidget::set_all_collapsed(bool collapsed) {
  for (int t = 0; t < static_cast<int>(traces_.size()); ++t) {
    for (int node : traces_[t]->nodes()) layout_.set_collapsed(t, node, collapsed);
  }
  set_scroll_y(scroll_y_);
  emit contentHeightChanged();
  update();
}

void TimelineWidget::toggle_node_row(int row) {
  const auto& rows = layout_.rows();
  if (row < 0 || row >= static_cast<int>(rows.size()) || rows[row].kind != RowKind::kNode) return;
  layout_.toggle(rows[row].trace, rows[row].node);
  set_scroll_y(scroll_y_);
  emit contentHeightChanged();
  update();
}

TimelineWidget::Hit TimelineWidget::hit_at(QPoint pos) const {
  Hit hit;
  if (pos.y() < kRulerPx) return hit;
  hit.row = layout_.row_at(pos.y() - kRulerPx + scroll_y_);
  if (hit.row < 0) return hit;
  const Row& row = layout_.rows()[hit.row];
  hit.trace = row.trace;
  if (row.kind != RowKind::kLane) return hit;
  hit.lane = row.lane;
  if (pos.x() < kGutterPx) return hit;
  const Lane& lane = traces_[row.trace]->lanes[row.lane];
  // Hit-test the marks as drawn, so what the tooltip names is what is under the cursor.
  build_marks(lane, view_, kMergeBelowPx, &marks_);
  const double x = pos.x() - kGutterPx;
  const Mark* best = nullptr;
  double best_distance = 1e300;
  for (const Mark& m : marks_) {
    // Narrow marks are drawn at least 1 px wide; accept a pixel of slack either side.
    const double x1 = std::max(m.x1_px, m.x0_px + 1.0);
    const double distance = x < m.x0_px ? m.x0_px - x : (x > x1 ? x - x1 : 0.0);
    if (distance <= 1.0 && distance < best_distance) {
      best = &m;
      best_distance = distance;
    }
  }
  if (best == nullptr) return hit;
  if (best->count == 1) {
    hit.span = best->first_span;
  } else {
    hit.merged_count = best->count;
    hit.merged_first_span = best->first_span;
    hit.merged_start_ns = lane.spans[best->first_span].start_ns;
    hit.merged_end_ns = static_cast<TimeNs>(std::llround(view_.t_of(best->x1_px)));
  }
  return hit;
}

QString TimelineWidget::tooltip_at(QPoint pos) const {
  const Hit hit = hit_at(pos);
  if (hit.row < 0) return {};
  const Row& row = layout_.rows()[hit.row];
  if (row.kind == RowKind::kNode) {
    return qstr(row.label) + (row.collapsed ? "\nclick to show its lanes" : "\nclick to fold");
  }
  if (row.kind == RowKind::kTrace) return qstr(row.label);
  if (row.kind == RowKind::kCounter) {
    const TraceModel& trace = *traces_[row.trace];
    const CounterTrack& c = trace.counters[row.counter];
    const auto t = static_cast<TimeNs>(std::llround(view_.t_of(std::max(0, pos.x() - kGutterPx))));
    auto shown = [&](double v) {
      return c.is_bytes() ? format_bytes(v) : c.is_share() ? fmt::format("{:.1f}%", 100.0 * v) : fmt::format("{:.4g}", v);
    };
    std::string text = fmt::format("{}: {} at {}\npeak {}", row.label, shown(c.value_at(t)),
                                   format_time_ns(static_cast<double>(t)), shown(c.max_value));
    if (c.is_bytes() && trace.memory_capacity_bytes > 0.0) text += " of " + shown(trace.memory_capacity_bytes);
    return qstr(text);
  }
  const TraceModel& trace = *traces_[hit.trace];
  const Lane& lane = trace.lanes[hit.lane];
  if (hit.span >= 0) return qstr(span_description(trace, lane, lane.spans[hit.span]));
  if (hit.merged_count > 1) {
    const std::string block = step_block_words(trace.detail_of(lane.spans[hit.merged_first_span]), trace.has_chunks);
    return qstr(merged_description(lane, hit.merged_count, hit.merged_start_ns, hit.merged_end_ns, block));
  }
  return qstr(lane.process_label + " · " + lane.stream_label);
}

void TimelineWidget::select(std::optional<Selection> selection) {
  if (selection == selection_) return;
  selection_ = selection;
  emit selectionChanged();
  update();
}

bool TimelineWidget::reveal(int trace, int lane, std::int64_t span, bool zoom) {
  if (trace < 0 || trace >= static_cast<int>(traces_.size())) return false;
  const TraceModel& t = *traces_[trace];
  if (lane < 0 || lane >= static_cast<int>(t.lanes.size())) return false;
  if (span < 0 || span >= static_cast<std::int64_t>(t.lanes[lane].spans.size())) return false;
  bring_into_view(trace, lane, span, zoom);
  select(Selection{trace, lane, span});
  return true;
}

void TimelineWidget::set_range(std::optional<std::pair<TimeNs, TimeNs>> range) {
  if (range && range->second < range->first) std::swap(range->first, range->second);
  if (range == range_) return;
  range_ = range;
  emit rangeChanged();
  update();
}

void TimelineWidget::bring_into_view(int trace, int lane, std::int64_t span, bool zoom) {
  const Lane& l = traces_[trace]->lanes[lane];
  if (layout_.is_collapsed(trace, l.node)) {
    layout_.set_collapsed(trace, l.node, false);
    emit contentHeightChanged();
  }
  for (const Row& row : layout_.rows()) {
    if (row.kind == RowKind::kLane && row.trace == trace && row.lane == lane) {
      set_scroll_y(row.y_px - lanes_height_px() / 3);
      break;
    }
  }
  const Span& s = l.spans[span];
  const double centre = static_cast<double>(s.start_ns) + 0.5 * static_cast<double>(s.dur_ns);
  const double width = zoom ? std::max<double>(3.0 * static_cast<double>(s.dur_ns), 1000.0) : view_.span_ns();
  set_view(centre - width / 2, centre + width / 2);
}

void TimelineWidget::set_show_all_flows(bool show) {
  show_all_flows_ = show;
  update();
}

bool TimelineWidget::follow_flow() {
  if (!selection_) return false;
  const SpanRef at{selection_->lane, selection_->span};
  const std::vector<Flow> flows = traces_[selection_->trace]->flows_of(at);
  if (flows.empty()) return false;
  const SpanRef other = flows.front().from == at ? flows.front().to : flows.front().from;
  const int trace = selection_->trace;
  bring_into_view(trace, other.lane, other.span, false);
  select(Selection{trace, other.lane, other.span});
  return true;
}

QString TimelineWidget::selection_text() const {
  if (!selection_) return {};
  const TraceModel& trace = *traces_[selection_->trace];
  const Lane& lane = trace.lanes[selection_->lane];
  QString text = qstr(trace.kind.empty() ? "trace" : trace.kind) + " · " + qstr(lane.process_label) + "\n" +
                 qstr(span_description(trace, lane, lane.spans[selection_->span]));
  const SpanRef at{selection_->lane, selection_->span};
  for (const Flow& f : trace.flows_of(at)) {
    const bool out = f.from == at;
    const Lane& peer = trace.lanes[out ? f.to.lane : f.from.lane];
    const Span& ps = peer.spans[out ? f.to.span : f.from.span];
    text += QStringLiteral("\nflow %1 rank %2 %3 at %4 (G follows it)")
                .arg(out ? QStringLiteral("to") : QStringLiteral("from"))
                .arg(peer.global_rank)
                .arg(qstr(peer.stream_label), qstr(format_time_ns(static_cast<double>(ps.start_ns))));
  }
  return text;
}

bool TimelineWidget::event(QEvent* e) {
  if (e->type() == QEvent::ToolTip) {
    auto* help = static_cast<QHelpEvent*>(e);
    const QString text = tooltip_at(help->pos());
    if (text.isEmpty()) {
      QToolTip::hideText();
      e->ignore();
    } else {
      QToolTip::showText(help->globalPos(), text, this);
    }
    return true;
  }
  return QWidget::event(e);
}

void TimelineWidget::resizeEvent(QResizeEvent*) {
  if (needs_fit_) {
    fit();
  } else {
    view_.resize(lane_width_px());
  }
  set_scroll_y(scroll_y_);
  emit contentHeightChanged();
}

void TimelineWidget::wheelEvent(QWheelEvent* e) {
  const QPoint delta = e->angleDelta();
  if (e->modifiers() & Qt::ShiftModifier) {
    // Shift+wheel scrolls the lanes; some platforms report it as horizontal.
    const int notch = delta.y() != 0 ? delta.y() : delta.x();
    set_scroll_y(scroll_y_ - notch * layout_.lane_height() * 3 / 120);
  } else if (e->modifiers() & Qt::ControlModifier) {
    // Ctrl+wheel: taller or shorter lanes, 2 px a notch.
    if (delta.y() != 0) set_lane_height(layout_.lane_height() + 2 * delta.y() / 120);
  } else if (delta.y() != 0) {
    zoom_at(wheel_zoom_factor(delta.y()), static_cast<int>(e->position().x()));
  } else if (delta.x() != 0) {
    pan_by(delta.x() * 40 / 120, 0);  // a sideways notch (touchpads) moves 40 px
  }
  e->accept();
}

void TimelineWidget::mousePressEvent(QMouseEvent* e) {
  if (e->button() != Qt::LeftButton) return;
  pressed_ = true;
  dragging_ = false;
  press_pos_ = last_pos_ = e->position().toPoint();
  ranging_ = (e->modifiers() & Qt::ShiftModifier) && press_pos_.x() >= kGutterPx && !traces_.empty();
  if (ranging_) {
    range_anchor_ns_ = static_cast<TimeNs>(std::llround(view_.t_of(press_pos_.x() - kGutterPx)));
    set_range(std::pair{range_anchor_ns_, range_anchor_ns_});
  }
}

void TimelineWidget::mouseMoveEvent(QMouseEvent* e) {
  if (!pressed_) return;
  const QPoint pos = e->position().toPoint();
  if (ranging_) {
    const auto t = static_cast<TimeNs>(std::llround(view_.t_of(std::max(0, pos.x() - kGutterPx))));
    set_range(std::pair{range_anchor_ns_, t});
    return;
  }
  if (!dragging_ && (pos - press_pos_).manhattanLength() > kClickSlopPx) {
    dragging_ = true;
    setCursor(Qt::ClosedHandCursor);
  }
  if (dragging_) {
    pan_by(pos.x() - last_pos_.x(), pos.y() - last_pos_.y());
    last_pos_ = pos;
  }
}

void TimelineWidget::mouseReleaseEvent(QMouseEvent* e) {
  if (e->button() != Qt::LeftButton || !pressed_) return;
  pressed_ = false;
  if (ranging_) {
    ranging_ = false;
    // A Shift+click without a drag clears the range.
    if (range_ && range_->first == range_->second) set_range(std::nullopt);
    return;
  }
  if (dragging_) {
    dragging_ = false;
    unsetCursor();
    return;
  }
  const Hit hit = hit_at(e->position().toPoint());
  if (hit.row >= 0 && layout_.rows()[hit.row].kind == RowKind::kNode) {
    toggle_node_row(hit.row);
    return;
  }
  if (hit.span >= 0) {
    select(Selection{hit.trace, hit.lane, hit.span});
  } else if (hit.merged_count > 1) {
    // A merged mark: zoom to it, a twentieth of margin either side.
    const double margin = 0.05 * static_cast<double>(hit.merged_end_ns - hit.merged_start_ns);
    set_view(static_cast<double>(hit.merged_start_ns) - margin, static_cast<double>(hit.merged_end_ns) + margin);
  } else {
    select(std::nullopt);
  }
}

void TimelineWidget::keyPressEvent(QKeyEvent* e) {
  const int centre = kGutterPx + lane_width_px() / 2;
  switch (e->key()) {
    case Qt::Key_F:
      fit();
      break;
    case Qt::Key_Plus:
    case Qt::Key_Equal:
      zoom_at(wheel_zoom_factor(120), centre);
      break;
    case Qt::Key_Minus:
      zoom_at(wheel_zoom_factor(-120), centre);
      break;
    case Qt::Key_Left:
      pan_by(lane_width_px() / 8, 0);
      break;
    case Qt::Key_Right:
      pan_by(-lane_width_px() / 8, 0);
      break;
    case Qt::Key_G:
      follow_flow();
      break;
    case Qt::Key_Escape:
      set_range(std::nullopt);
      break;
    default:
      QWidget::keyPressEvent(e);
      return;
  }
  e->accept();
}

void TimelineWidget::paintEvent(QPaintEvent*) {
  QPainter p(this);
  p.setRenderHint(QPainter::Antialiasing, false);
  p.fillRect(rect(), Qt::white);
  if (traces_.empty()) {
    p.setPen(Qt::darkGray);
    p.drawText(rect(), Qt::AlignCenter | Qt::TextWordWrap,
               message_.isEmpty() ? QStringLiteral("No trace loaded. File ▸ Open… a trace.json or "
                                                   "result.json")
                                  : message_);
    return;
  }
  const std::vector<RulerTick> ticks = ruler_ticks(view_, kRulerSpacingPx);
  // Grid lines first, under the tasks.
  p.setPen(kGridLine);
  for (const RulerTick& t : ticks) {
    const int x = kGutterPx + static_cast<int>(std::lround(t.x_px));
    p.drawLine(x, kRulerPx, x, height());
  }
  const auto& rows = layout_.rows();
  for (int i = layout_.first_row_below(scroll_y_); i < static_cast<int>(rows.size()); ++i) {
    const int y = kRulerPx + rows[i].y_px - scroll_y_;
    if (y >= height()) break;
    paint_row(p, rows[i], y);
  }
  flush_batches(p);
  paint_flows(p);
  // The selection outline, on top of the fills.
  if (selection_) {
    for (int i = 0; i < static_cast<int>(rows.size()); ++i) {
      const Row& row = rows[i];
      if (row.kind != RowKind::kLane || row.trace != selection_->trace ||
          row.lane != selection_->lane) {
        continue;
      }
      const Span& s = traces_[row.trace]->lanes[row.lane].spans[selection_->span];
      const double x0 = view_.x_of(static_cast<double>(s.start_ns));
      const double x1 = std::max(view_.x_of(static_cast<double>(s.end_ns())), x0 + 2.0);
      const int y = kRulerPx + row.y_px - scroll_y_;
      p.setClipRect(kGutterPx, kRulerPx, lane_width_px(), height() - kRulerPx);
      p.setPen(QPen(Qt::black, 2));
      p.setBrush(Qt::NoBrush);
      p.drawRect(QRectF(kGutterPx + std::max(-4.0, x0), y + 1,
                        std::min(x1, lane_width_px() + 4.0) - std::max(-4.0, x0),
                        row.height_px - 2));
      p.setClipping(false);
    }
  }
  // The range selection: a translucent band with its edges.
  if (range_) {
    const double x0 = std::clamp(view_.x_of(static_cast<double>(range_->first)), -2.0, lane_width_px() + 2.0);
    const double x1 = std::clamp(view_.x_of(static_cast<double>(range_->second)), -2.0, lane_width_px() + 2.0);
    p.save();
    p.setClipRect(kGutterPx, kRulerPx, lane_width_px(), height() - kRulerPx);
    p.fillRect(QRectF(kGutterPx + x0, kRulerPx, std::max(1.0, x1 - x0), height() - kRulerPx), kRangeFill);
    p.setPen(QPen(kRangeEdge, 1));
    p.drawLine(QPointF(kGutterPx + x0, kRulerPx), QPointF(kGutterPx + x0, height()));
    p.drawLine(QPointF(kGutterPx + x1, kRulerPx), QPointF(kGutterPx + x1, height()));
    p.restore();
  }
  // The gutter's edge and the ruler, over everything.
  p.setPen(Qt::gray);
  p.drawLine(kGutterPx - 1, 0, kGutterPx - 1, height());
  paint_ruler(p, ticks);
}

// Arrows from the start of a flow's source slice to the end of its destination
// slice: a pipeline transfer spans the arrow, pointing where the data lands. An
// end on a folded node attaches to the node's row.
void TimelineWidget::paint_flows(QPainter& p) {
  flow_arrows_drawn_ = 0;
  const auto& rows = layout_.rows();
  // A lane's centre y in widget pixels (above the top or below the bottom when
  // scrolled away), kNoRow when no row shows it.
  constexpr int kNoRow = std::numeric_limits<int>::min();
  std::vector<std::vector<int>> lane_y(traces_.size());
  auto centre_y = [&](int trace, int lane) {
    if (lane_y[trace].empty()) {
      lane_y[trace].assign(traces_[trace]->lanes.size(), kNoRow);
      for (const Row& row : rows) {
        if (row.trace != trace) continue;
        const int y = kRulerPx + row.y_px - scroll_y_ + row.height_px / 2;
        if (row.kind == RowKind::kLane) lane_y[trace][row.lane] = y;
        for (int l : row.overlay_lanes) lane_y[trace][l] = y;
        if (row.kind == RowKind::kNode && row.collapsed) {
          for (int l = 0; l < static_cast<int>(traces_[trace]->lanes.size()); ++l) {
            if (traces_[trace]->lanes[l].node == row.node && lane_y[trace][l] == kNoRow) lane_y[trace][l] = y;
          }
        }
      }
    }
    return lane_y[trace][lane];
  };
  const double right = lane_width_px();
  auto arrow = [&](int trace, const Flow& f, bool selected) {
    const TraceModel& t = *traces_[trace];
    const int y0 = centre_y(trace, f.from.lane), y1 = centre_y(trace, f.to.lane);
    if (y0 == kNoRow || y1 == kNoRow) return;
    const double x0 = view_.x_of(static_cast<double>(t.lanes[f.from.lane].spans[f.from.span].start_ns));
    const double x1 = view_.x_of(static_cast<double>(t.lanes[f.to.lane].spans[f.to.span].end_ns()));
    if (std::max(x0, x1) < 0.0 || std::min(x0, x1) > right) return;
    if (std::max(y0, y1) < kRulerPx || std::min(y0, y1) > height()) return;
    const QPointF a(kGutterPx + x0, y0), b(kGutterPx + x1, y1);
    p.setPen(QPen(selected ? QColor(Qt::black) : QColor(0x8b, 0x1a, 0x1a), selected ? 2.0 : 1.0));
    p.drawLine(a, b);
    // The head: two 7-px strokes at 25 degrees either side of the line's direction.
    const double angle = std::atan2(b.y() - a.y(), b.x() - a.x());
    for (double side : {-0.44, 0.44}) {
      p.drawLine(b, b - QPointF(7.0 * std::cos(angle + side), 7.0 * std::sin(angle + side)));
    }
    ++flow_arrows_drawn_;
  };
  p.save();
  p.setClipRect(kGutterPx, kRulerPx, lane_width_px(), height() - kRulerPx);
  // Every flow without antialiasing (thousands at fit zoom), the selected one with.
  if (show_all_flows_) {
    for (int trace = 0; trace < static_cast<int>(traces_.size()); ++trace) {
      for (const Flow& f : traces_[trace]->flows) {
        if (flow_arrows_drawn_ >= kMaxFlowArrows) break;
        arrow(trace, f, false);
      }
    }
  }
  if (selection_) {
    p.setRenderHint(QPainter::Antialiasing, true);
    for (const Flow& f : traces_[selection_->trace]->flows_of(SpanRef{selection_->lane, selection_->span})) {
      arrow(selection_->trace, f, true);
    }
  }
  p.restore();
}

void TimelineWidget::paint_ruler(QPainter& p, const std::vector<RulerTick>& ticks) {
  p.fillRect(QRect(0, 0, width(), kRulerPx), QColor(0xfa, 0xfa, 0xfa));
  p.setPen(Qt::gray);
  p.drawLine(0, kRulerPx - 1, width(), kRulerPx - 1);
  p.setPen(Qt::black);
  p.drawText(QRect(6, 0, kGutterPx - 12, kRulerPx), Qt::AlignVCenter | Qt::AlignLeft,
             QString::fromStdString("span " + format_time_ns(view_.span_ns())));
  for (const RulerTick& t : ticks) {
    const int x = kGutterPx + static_cast<int>(std::lround(t.x_px));
    p.drawLine(x, kRulerPx - 7, x, kRulerPx - 1);
    p.drawText(QRect(x + 3, 0, static_cast<int>(kRulerSpacingPx), kRulerPx - 4),
               Qt::AlignBottom | Qt::AlignLeft, QString::fromStdString(t.label));
  }
}

void TimelineWidget::paint_row(QPainter& p, const Row& row, int y) {
  const TraceModel& trace = *traces_[row.trace];
  switch (row.kind) {
    case RowKind::kTrace: {
      const QColor bg = trace.kind == "measured" ? kMeasuredHeader : kPredictedHeader;
      p.fillRect(QRect(0, y, width(), row.height_px), bg);
      QFont bold = font();
      bold.setBold(true);
      p.setFont(bold);
      p.setPen(Qt::black);
      p.drawText(QRect(6, y, width() - 12, row.height_px), Qt::AlignVCenter | Qt::AlignLeft,
                 qstr(row.label));
      p.setFont(font());
      break;
    }
    case RowKind::kNode: {
      p.fillRect(QRect(0, y, width(), row.height_px), kNodeHeader);
      p.setPen(Qt::black);
      p.drawText(QRect(6, y, kGutterPx - 12, row.height_px), Qt::AlignVCenter | Qt::AlignLeft,
                 (row.collapsed ? QStringLiteral("▸ ") : QStringLiteral("▾ ")) + qstr(row.label));
      for (int lane : row.overlay_lanes) {
        collect_marks(trace, trace.lanes[lane], y, row.height_px, false);
      }
      break;
    }
    case RowKind::kLane: {
      p.setPen(Qt::black);
      p.drawText(QRect(18, y, kGutterPx - 24, row.height_px), Qt::AlignVCenter | Qt::AlignLeft,
                 qstr(row.label));
      collect_marks(trace, trace.lanes[row.lane], y, row.height_px, true);
      break;
    }
    case RowKind::kCounter: {
      p.setPen(Qt::black);
      p.drawText(QRect(18, y, kGutterPx - 24, row.height_px), Qt::AlignVCenter | Qt::AlignLeft,
                 qstr(row.label));
      paint_counter(p, trace, trace.counters[row.counter], y, row.height_px);
      break;
    }
  }
}

namespace {

double counter_scale(const TraceModel& trace, const CounterTrack& counter) {
  // Every rank's counter of one name on one scale, so ranks compare; memory up
  // to the GPU's capacity at least, so the headroom shows.
  double top = counter.is_bytes() ? trace.memory_capacity_bytes : counter.is_share() ? 1.0 : 0.0;
  for (const CounterTrack& c : trace.counters) {
    if (c.name == counter.name) top = std::max(top, c.max_value);
  }
  return top > 0.0 ? top : 1.0;
}

}  // namespace

void TimelineWidget::paint_counter(QPainter& p, const TraceModel& trace, const CounterTrack& counter, int y,
                                   int height) {
  if (counter.t_ns.empty()) return;
  const double top = counter_scale(trace, counter);
  const double base = y + height - 2.0, h = height - 4.0;
  auto y_of = [&](double v) { return base - h * std::clamp(v / top, 0.0, 1.0); };
  const double right = lane_width_px() + 2.0;
  auto x_of = [&](TimeNs t) { return std::clamp(view_.x_of(static_cast<double>(t)), -2.0, right); };
  // The steps inside the view: from the last point at or before its start.
  auto it = std::upper_bound(counter.t_ns.begin(), counter.t_ns.end(), static_cast<TimeNs>(view_.start_ns()));
  std::size_t i = it == counter.t_ns.begin() ? 0 : static_cast<std::size_t>(it - counter.t_ns.begin()) - 1;
  QPolygonF area;
  area << QPointF(kGutterPx + x_of(counter.t_ns[i]), base);
  for (; i < counter.t_ns.size(); ++i) {
    const double x0 = x_of(counter.t_ns[i]);
    const double x1 = i + 1 < counter.t_ns.size() ? x_of(counter.t_ns[i + 1]) : right;
    area << QPointF(kGutterPx + x0, y_of(counter.value[i])) << QPointF(kGutterPx + x1, y_of(counter.value[i]));
    if (x1 >= right) break;
  }
  area << QPointF(area.back().x(), base);
  p.save();
  p.setClipRect(kGutterPx, kRulerPx, lane_width_px(), this->height() - kRulerPx);
  p.setPen(QPen(kCounterLine, 1));
  p.setBrush(kCounterFill);
  p.drawPolygon(area);
  if (counter.is_bytes() && trace.memory_capacity_bytes > 0.0) {
    // The GPU's capacity, dashed red as on the Memory tab.
    p.setPen(QPen(QColor(0xc0, 0x30, 0x30), 1, Qt::DashLine));
    const double cy = y_of(trace.memory_capacity_bytes);
    p.drawLine(QPointF(kGutterPx, cy), QPointF(kGutterPx + lane_width_px(), cy));
  }
  p.restore();
}

void TimelineWidget::collect_marks(const TraceModel& trace, const Lane& lane, int y, int height,
                                   bool labels) {
  build_marks(lane, view_, kMergeBelowPx, &marks_);
  const double right = lane_width_px() + 2.0;
  const double top = y + 2.0;
  const double h = height - 4.0;
  for (const Mark& m : marks_) {
    // Clamp to just outside the lane area: huge coordinates slow the rasterizer.
    const double x0 = std::max(-2.0, m.x0_px);
    const double x1 = std::min(right, std::max(m.x1_px, m.x0_px + 1.0));
    if (x1 <= x0) continue;
    const QRectF r(kGutterPx + x0, top, x1 - x0, h);
    const int c = static_cast<int>(m.category);
    const SpanDetail& first = trace.detail_of(lane.spans[m.first_span]);
    const auto shade = static_cast<std::size_t>(c * kNumPhases + static_cast<int>(first.phase));
    if (m.count == 1) {
      single_rects_[shade].push_back(r);
      if (labels && x1 - x0 >= kLabelMinWidthPx) labels_.push_back({r, qstr(trace.name_of(lane.spans[m.first_span]))});
    } else {
      // A step block (one phase of one micro-batch and chunk: its tasks share
      // the first's), as tall as the lane is busy under it, on the lane's
      // baseline: a lane exposed 30% of the time reads so at fit zoom.
      const double busy_h = std::max(3.0, std::round(h * busy_share(m, view_)));
      const QRectF bar(r.x(), top + h - busy_h, r.width(), busy_h);
      merged_rects_[shade].push_back(bar);
      if (labels && x1 - x0 >= kBlockLabelMinWidthPx && busy_h >= kBlockLabelPx) {
        const std::string label = step_block_label(first, trace.has_chunks);
        if (!label.empty()) block_labels_.push_back({bar, qstr(label)});
      }
    }
  }
}

void TimelineWidget::flush_batches(QPainter& p) {
  p.save();
  p.setClipRect(kGutterPx, kRulerPx, lane_width_px(), height() - kRulerPx);
  p.setPen(Qt::NoPen);
  for (int c = 0; c < kNumCategories; ++c) {
    for (int ph = 0; ph < kNumPhases; ++ph) {
      std::vector<QRectF>& rects = single_rects_[static_cast<std::size_t>(c * kNumPhases + ph)];
      if (rects.empty()) continue;
      p.setBrush(task_color(static_cast<Category>(c), static_cast<Phase>(ph)));
      p.drawRects(rects.data(), static_cast<int>(rects.size()));
      rects.clear();
    }
    for (int ph = 0; ph < kNumPhases; ++ph) {
      std::vector<QRectF>& rects = merged_rects_[static_cast<std::size_t>(c * kNumPhases + ph)];
      if (rects.empty()) continue;
      // Merged marks a shade darker than their tasks: "many tasks here, zoom in".
      p.setBrush(task_color(static_cast<Category>(c), static_cast<Phase>(ph)).darker(kMergedDarker));
      p.drawRects(rects.data(), static_cast<int>(rects.size()));
      rects.clear();
    }
  }
  p.setPen(Qt::white);
  const QFontMetrics metrics(font());
  for (const Label& l : labels_) {
    const QRectF inner = l.rect.adjusted(3, 0, -3, 0);
    p.drawText(inner, Qt::AlignVCenter | Qt::AlignLeft,
               metrics.elidedText(l.text, Qt::ElideRight, static_cast<int>(inner.width())));
  }
  labels_.clear();
  // Step blocks' labels in a small font, so a block 70% busy (a bar 10 px tall) holds one.
  QFont small = font();
  small.setPixelSize(static_cast<int>(kBlockLabelPx) - 1);
  p.setFont(small);
  const QFontMetrics small_metrics(small);
  for (const Label& l : block_labels_) {
    const QRectF inner = l.rect.adjusted(2, 0, -2, 0);
    p.drawText(inner, Qt::AlignVCenter | Qt::AlignLeft,
               small_metrics.elidedText(l.text, Qt::ElideRight, static_cast<int>(inner.width())));
  }
  p.setFont(font());
  block_labels_.clear();
  p.restore();
}

}  // namespace strata::gui
