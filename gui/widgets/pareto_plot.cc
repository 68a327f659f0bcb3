#include "gui/widgets/pareto_plot.h"

#include <QHelpEvent>
#include <QMouseEvent>
#include <QPainter>
#include <QPainterPath>
#include <QToolTip>
#include <algorithm>
#include <cmath>

#include "gui/widgets/colors.h"

namespace strata::gui {
namespace {

constexpr int kMarginLeft = 70, kMarginRight = 16, kMarginTop = 34, kMarginBottom = 44;
constexpr double kMarkerPx = 4.5;
constexpr double kHitPx = 6.0;

// TP's colours: Tableau 10, the legend's order.
QColor tp_color(int index) {
  static const QColor palette[] = {QColor(0x4e, 0x79, 0xa7), QColor(0xf2, 0x8e, 0x2b), QColor(0xe1, 0x57, 0x59),
                                   QColor(0x76, 0xb7, 0xb2), QColor(0x59, 0xa1, 0x4f), QColor(0xed, 0xc9, 0x48),
                                   QColor(0xb0, 0x7a, 0xa1), QColor(0xff, 0x9d, 0xa7), QColor(0x9c, 0x75, 0x5f),
                                   QColor(0xba, 0xb0, 0xac)};
  return palette[index % 10];
}

// PP's markers, the legend's order: circle, square, triangle, diamond, cross.
void draw_marker(QPainter& p, QPointF c, int shape, double r) {
  switch (shape % 5) {
    case 0: p.drawEllipse(c, r, r); break;
    case 1: p.drawRect(QRectF(c.x() - r, c.y() - r, 2 * r, 2 * r)); break;
    case 2: {
      const QPointF tri[] = {{c.x(), c.y() - r * 1.2}, {c.x() - r * 1.1, c.y() + r * 0.8}, {c.x() + r * 1.1, c.y() + r * 0.8}};
      p.drawPolygon(tri, 3);
      break;
    }
    case 3: {
      const QPointF dia[] = {{c.x(), c.y() - r * 1.3}, {c.x() + r * 1.3, c.y()}, {c.x(), c.y() + r * 1.3}, {c.x() - r * 1.3, c.y()}};
      p.drawPolygon(dia, 4);
      break;
    }
    default:
      p.drawLine(QPointF(c.x() - r, c.y() - r), QPointF(c.x() + r, c.y() + r));
      p.drawLine(QPointF(c.x() - r, c.y() + r), QPointF(c.x() + r, c.y() - r));
      break;
  }
}

int index_of(const std::vector<int>& values, int v) {
  return static_cast<int>(std::lower_bound(values.begin(), values.end(), v) - values.begin());
}

QString tick_text(double v) {
  if (std::abs(v) >= 1e6) return QString::number(v / 1e6, 'g', 3) + QStringLiteral("M");
  if (std::abs(v) >= 1e3) return QString::number(v / 1e3, 'g', 3) + QStringLiteral("K");
  return QString::number(v, 'g', 3);
}

}  // namespace

ParetoPlot::ParetoPlot(QWidget* parent) : QWidget(parent) {
  setMinimumSize(320, 240);
  setMouseTracking(false);
}

void ParetoPlot::set_sweep(std::shared_ptr<const SweepData> sweep) {
  sweep_ = std::move(sweep);
  data_ = sweep_ ? pareto_data(*sweep_) : ParetoData();
  selected_row_ = -1;
  // Axes from zero (memory and throughput are ratios to zero), to the largest
  // point or the capacity, with a twentieth of air.
  x_lo_ = 0.0;
  y_lo_ = 0.0;
  x_hi_ = std::max(1.0, data_.capacity_gib);
  y_hi_ = 1.0;
  for (const ParetoPoint& p : data_.points) {
    x_hi_ = std::max(x_hi_, p.peak_gib);
    y_hi_ = std::max(y_hi_, p.tokens_per_s);
  }
  x_hi_ *= 1.05;
  y_hi_ *= 1.05;
  update();
}

void ParetoPlot::set_selected_row(int row) {
  if (row == selected_row_) return;
  selected_row_ = row;
  update();
}

QRectF ParetoPlot::plot_area() const {
  return QRectF(kMarginLeft, kMarginTop, std::max(10, width() - kMarginLeft - kMarginRight),
                std::max(10, height() - kMarginTop - kMarginBottom));
}

double ParetoPlot::x_of(double gib) const {
  const QRectF a = plot_area();
  return a.left() + (gib - x_lo_) / (x_hi_ - x_lo_) * a.width();
}

double ParetoPlot::y_of(double tokens) const {
  const QRectF a = plot_area();
  return a.bottom() - (tokens - y_lo_) / (y_hi_ - y_lo_) * a.height();
}

QPointF ParetoPlot::point_position(int point) const {
  const ParetoPoint& p = data_.points[point];
  return QPointF(x_of(p.peak_gib), y_of(p.tokens_per_s));
}

int ParetoPlot::point_at(QPoint pos) const {
  int best = -1;
  double best_d2 = kHitPx * kHitPx;
  for (int i = 0; i < static_cast<int>(data_.points.size()); ++i) {
    const QPointF d = point_position(i) - QPointF(pos);
    const double d2 = d.x() * d.x() + d.y() * d.y();
    if (d2 <= best_d2) {
      best = i;
      best_d2 = d2;
    }
  }
  return best;
}

bool ParetoPlot::event(QEvent* e) {
  if (e->type() == QEvent::ToolTip && sweep_) {
    auto* help = static_cast<QHelpEvent*>(e);
    const int i = point_at(help->pos());
    if (i >= 0) {
      QToolTip::showText(help->globalPos(), QString::fromStdString(describe_point(*sweep_, data_.points[i])), this);
    } else {
      QToolTip::hideText();
      e->ignore();
    }
    return true;
  }
  return QWidget::event(e);
}

void ParetoPlot::mouseReleaseEvent(QMouseEvent* e) {
  if (e->button() != Qt::LeftButton) return;
  const int i = point_at(e->position().toPoint());
  if (i < 0) return;
  set_selected_row(data_.points[i].row);
  emit pointSelected(data_.points[i].row);
}

void ParetoPlot::paintEvent(QPaintEvent*) {
  QPainter p(this);
  p.fillRect(rect(), Qt::white);
  p.setRenderHint(QPainter::Antialiasing, true);
  const QRectF a = plot_area();
  if (data_.points.empty()) {
    p.setPen(Qt::darkGray);
    p.drawText(rect(), Qt::AlignCenter | Qt::TextWordWrap,
               sweep_ ? tr("No simulated plan fits: nothing to plot") : tr("Open a sweep to see its Pareto plot"));
    return;
  }
  // Grid and ticks.
  const QFontMetrics fm(font());
  p.setPen(QColor(0xe6, 0xe6, 0xe6));
  const auto xt = nice_ticks(x_lo_, x_hi_, std::max(2, static_cast<int>(a.width() / 70)));
  const auto yt = nice_ticks(y_lo_, y_hi_, std::max(2, static_cast<int>(a.height() / 40)));
  for (double t : xt) {
    if (t > x_hi_) continue;
    p.setPen(QColor(0xe6, 0xe6, 0xe6));
    p.drawLine(QPointF(x_of(t), a.top()), QPointF(x_of(t), a.bottom()));
    p.setPen(Qt::black);
    p.drawText(QRectF(x_of(t) - 30, a.bottom() + 2, 60, fm.height()), Qt::AlignHCenter | Qt::AlignTop, tick_text(t));
  }
  for (double t : yt) {
    if (t > y_hi_) continue;
    p.setPen(QColor(0xe6, 0xe6, 0xe6));
    p.drawLine(QPointF(a.left(), y_of(t)), QPointF(a.right(), y_of(t)));
    p.setPen(Qt::black);
    p.drawText(QRectF(0, y_of(t) - fm.height() / 2.0, a.left() - 6, fm.height()), Qt::AlignRight | Qt::AlignVCenter,
               tick_text(t));
  }
  p.setPen(Qt::gray);
  p.drawRect(a);
  p.setPen(Qt::black);
  p.drawText(QRectF(a.left(), height() - fm.height() - 4, a.width(), fm.height()), Qt::AlignHCenter,
             tr("peak memory per GPU (GiB)"));
  p.save();
  p.translate(14, a.center().y());
  p.rotate(-90);
  p.drawText(QRectF(-a.height() / 2, -fm.height() / 2.0, a.height(), fm.height()), Qt::AlignCenter, tr("tokens/s"));
  p.restore();
  // The capacity.
  if (data_.capacity_gib > 0) {
    p.setPen(QPen(QColor(0xc0, 0x30, 0x30), 1.5, Qt::DashLine));
    p.drawLine(QPointF(x_of(data_.capacity_gib), a.top()), QPointF(x_of(data_.capacity_gib), a.bottom()));
  }
  // The front, then the points on top.
  if (data_.front.size() > 1) {
    QPainterPath path;
    path.moveTo(point_position(data_.front.front()));
    for (std::size_t i = 1; i < data_.front.size(); ++i) path.lineTo(point_position(data_.front[i]));
    p.setPen(QPen(QColor(0x33, 0x33, 0x33), 1.5));
    p.setBrush(Qt::NoBrush);
    p.drawPath(path);
  }
  for (int i = 0; i < static_cast<int>(data_.points.size()); ++i) {
    const ParetoPoint& pt = data_.points[i];
    const QColor c = tp_color(index_of(data_.tps, pt.tp));
    p.setPen(QPen(pt.front ? QColor(Qt::black) : c.darker(130), pt.front ? 1.5 : 1.0));
    p.setBrush(c);
    draw_marker(p, point_position(i), index_of(data_.pps, pt.pp), kMarkerPx);
  }
  for (int i = 0; i < static_cast<int>(data_.points.size()); ++i) {
    if (data_.points[i].row != selected_row_) continue;
    p.setPen(QPen(Qt::black, 2));
    p.setBrush(Qt::NoBrush);
    p.drawEllipse(point_position(i), kMarkerPx + 4, kMarkerPx + 4);
  }
  // The legend, one line above the plot: colours by TP, markers by PP.
  double x = a.left();
  const double y = 10;
  p.setPen(Qt::black);
  for (std::size_t k = 0; k < data_.tps.size(); ++k) {
    p.setBrush(tp_color(static_cast<int>(k)));
    p.setPen(tp_color(static_cast<int>(k)).darker(130));
    p.drawEllipse(QPointF(x + 5, y + 5), 4.5, 4.5);
    p.setPen(Qt::black);
    const QString text = QStringLiteral("TP %1").arg(data_.tps[k]);
    p.drawText(QPointF(x + 13, y + 9), text);
    x += 22 + fm.horizontalAdvance(text);
  }
  x += 10;
  for (std::size_t k = 0; k < data_.pps.size(); ++k) {
    p.setBrush(Qt::lightGray);
    p.setPen(Qt::darkGray);
    draw_marker(p, QPointF(x + 5, y + 5), static_cast<int>(k), 4.5);
    p.setPen(Qt::black);
    const QString text = QStringLiteral("PP %1").arg(data_.pps[k]);
    p.drawText(QPointF(x + 13, y + 9), text);
    x += 22 + fm.horizontalAdvance(text);
  }
}

}  // namespace strata::gui
