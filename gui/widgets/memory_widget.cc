#include "gui/widgets/memory_widget.h"

#include <QHelpEvent>
#include <QPainter>
#include <QToolTip>
#include <algorithm>
#include <cmath>

#include "core/units.h"

namespace strata::gui {
namespace {

constexpr int kLeftPx = 80, kRightPx = 170, kTopPx = 44, kBottomPx = 44;

QColor part_color(int part) {
  static const QColor colors[MemoryWidget::kNumParts] = {
      QColor(0x4c, 0x78, 0xa8),  // weights
      QColor(0x72, 0xb7, 0xb2),  // gradients
      QColor(0xf5, 0x85, 0x18),  // optimizer
      QColor(0xe4, 0x57, 0x56),  // activations
      QColor(0x54, 0xa2, 0x4b),  // buffers
      QColor(0xba, 0xb0, 0xac),  // reserve
  };
  return colors[part];
}

QString gib(double bytes) { return QString::number(bytes / kGiB, 'f', 1) + " GiB"; }

// A round axis step (1, 2, 5 x 10^k GiB) giving about five grid lines.
double axis_step_bytes(double top_bytes) {
  const double raw = std::max(top_bytes / kGiB / 5.0, 1e-3);
  const double decade = std::pow(10.0, std::floor(std::log10(raw)));
  for (double m : {1.0, 2.0, 5.0, 10.0}) {
    if (m * decade >= raw) return m * decade * kGiB;
  }
  return 10.0 * decade * kGiB;
}

}  // namespace

const char* MemoryWidget::part_name(int part) {
  static const char* names[kNumParts] = {"weights",     "gradients", "optimizer",
                                         "activations", "buffers",   "reserve"};
  return names[part];
}

double MemoryWidget::part_bytes(const StageMemory& s, int part) {
  switch (part) {
    case 0:
      return s.params_bytes;
    case 1:
      return s.grads_bytes;
    case 2:
      return s.optimizer_bytes;
    case 3:
      return s.activations_bytes;
    case 4:
      return s.buffers_bytes;
    case 5:
      return s.reserve_bytes;
    default:
      return 0.0;
  }
}

MemoryWidget::MemoryWidget(QWidget* parent) : QWidget(parent) {
  setMinimumSize(kLeftPx + kRightPx + 200, kTopPx + kBottomPx + 150);
}

void MemoryWidget::set_memory(std::optional<MemoryReport> memory, const QString& title,
                              const QString& message) {
  memory_ = std::move(memory);
  title_ = title;
  message_ = message;
  update();
}

QRectF MemoryWidget::plot_rect() const {
  return QRectF(kLeftPx, kTopPx, std::max(10, width() - kLeftPx - kRightPx),
                std::max(10, height() - kTopPx - kBottomPx));
}

double MemoryWidget::bytes_per_px() const {
  if (!memory_) return 1.0;
  double top = memory_->capacity_bytes;
  for (const StageMemory& s : memory_->stages) top = std::max(top, s.total_bytes);
  // 10% headroom above the tallest bar or the capacity line.
  return std::max(1.0, top * 1.1) / plot_rect().height();
}

QRectF MemoryWidget::bar_rect(int i) const {
  if (!memory_ || i < 0 || i >= static_cast<int>(memory_->stages.size())) return {};
  const QRectF plot = plot_rect();
  const double slot = plot.width() / static_cast<double>(memory_->stages.size());
  const double bar = std::max(1.0, std::min(slot * 0.7, 80.0));
  const double h = memory_->stages[i].total_bytes / bytes_per_px();
  return QRectF(plot.left() + slot * (i + 0.5) - bar / 2, plot.bottom() - h, bar, h);
}

double MemoryWidget::capacity_y() const {
  if (!memory_) return plot_rect().top();
  return plot_rect().bottom() - memory_->capacity_bytes / bytes_per_px();
}

QString MemoryWidget::tooltip_for(int i) const {
  if (!memory_ || i < 0 || i >= static_cast<int>(memory_->stages.size())) return {};
  const StageMemory& s = memory_->stages[i];
  QString text = tr("stage %1 · %2 layers").arg(s.stage).arg(s.layers);
  for (int part = kNumParts - 1; part >= 0; --part) {
    text += QStringLiteral("\n%1: %2")
                .arg(QString::fromLatin1(part_name(part)), gib(part_bytes(s, part)));
  }
  text += tr("\ntotal: %1 of %2 (%3)")
              .arg(gib(s.total_bytes), gib(memory_->capacity_bytes),
                   s.fits ? tr("fits") : tr("does not fit"));
  if (s.host_bytes > 0) text += tr("\nhost (offloaded): %1").arg(gib(s.host_bytes));
  return text;
}

bool MemoryWidget::event(QEvent* e) {
  if (e->type() == QEvent::ToolTip && memory_) {
    auto* help = static_cast<QHelpEvent*>(e);
    for (int i = 0; i < static_cast<int>(memory_->stages.size()); ++i) {
      const QRectF bar = bar_rect(i);
      if (help->pos().x() >= bar.left() - 2 && help->pos().x() <= bar.right() + 2) {
        QToolTip::showText(help->globalPos(), tooltip_for(i), this);
        return true;
      }
    }
    QToolTip::hideText();
    return true;
  }
  return QWidget::event(e);
}

void MemoryWidget::paintEvent(QPaintEvent*) {
  QPainter p(this);
  p.fillRect(rect(), Qt::white);
  if (!memory_) {
    p.setPen(Qt::darkGray);
    p.drawText(rect(), Qt::AlignCenter | Qt::TextWordWrap,
               message_.isEmpty() ? tr("No memory breakdown loaded. Open a result.json, "
                                       "memory.json or a sweep and pick a plan.")
                                  : message_);
    return;
  }
  const MemoryReport& m = *memory_;
  const QRectF plot = plot_rect();
  const double per_px = bytes_per_px();

  QFont bold = font();
  bold.setBold(true);
  p.setFont(bold);
  p.setPen(Qt::black);
  p.drawText(QRectF(10, 6, width() - 20, 20), Qt::AlignLeft | Qt::AlignVCenter, title_);
  p.setFont(font());
  p.drawText(QRectF(10, 24, width() - 20, 18), Qt::AlignLeft | Qt::AlignVCenter,
             tr("peak %1 on stage %2 · %3")
                 .arg(gib(m.peak_bytes))
                 .arg(m.peak_stage)
                 .arg(m.fits ? tr("fits, %1% headroom")
                                   .arg(100.0 * (1.0 - m.peak_bytes / m.capacity_bytes), 0, 'f', 1)
                             : tr("DOES NOT FIT")));

  // Axis and grid.
  const double step = axis_step_bytes(plot.height() * per_px);
  for (double b = 0.0; b / per_px <= plot.height() + 0.5; b += step) {
    const double y = plot.bottom() - b / per_px;
    p.setPen(QColor(0xe6, 0xe6, 0xe6));
    p.drawLine(QPointF(plot.left(), y), QPointF(plot.right(), y));
    p.setPen(Qt::black);
    p.drawText(QRectF(0, y - 9, kLeftPx - 8, 18), Qt::AlignRight | Qt::AlignVCenter,
               QString::number(b / kGiB, 'g', 4) + " GiB");
  }
  p.drawLine(plot.bottomLeft(), plot.bottomRight());

  // Bars.
  const int n = static_cast<int>(m.stages.size());
  const QFontMetrics metrics(font());
  const int label_every =
      std::max(1, static_cast<int>(std::ceil(metrics.horizontalAdvance("000") * 1.5 /
                                             (plot.width() / std::max(1, n)))));
  for (int i = 0; i < n; ++i) {
    const StageMemory& s = m.stages[i];
    const QRectF bar = bar_rect(i);
    double bottom = plot.bottom();
    for (int part = 0; part < kNumParts; ++part) {
      const double h = part_bytes(s, part) / per_px;
      p.fillRect(QRectF(bar.left(), bottom - h, bar.width(), h), part_color(part));
      bottom -= h;
    }
    if (!s.fits) {
      p.setPen(QPen(Qt::red, 2));
      p.drawRect(bar);
    }
    p.setPen(Qt::black);
    if (i % label_every == 0) {
      p.drawText(QRectF(bar.center().x() - 30, plot.bottom() + 2, 60, 18), Qt::AlignCenter,
                 QString::number(s.stage));
    }
    if (bar.width() >= 34) {
      p.drawText(QRectF(bar.center().x() - 40, bar.top() - 18, 80, 16), Qt::AlignCenter,
                 QString::number(s.total_bytes / kGiB, 'f', 1));
    }
  }
  p.drawText(QRectF(plot.left(), plot.bottom() + 20, plot.width(), 18), Qt::AlignCenter,
             tr("pipeline stage"));

  // Capacity.
  const double cap_y = capacity_y();
  p.setPen(QPen(Qt::red, 2, Qt::DashLine));
  p.drawLine(QPointF(plot.left(), cap_y), QPointF(plot.right(), cap_y));
  p.drawText(QRectF(plot.right() + 6, cap_y - 9, kRightPx - 10, 18),
             Qt::AlignLeft | Qt::AlignVCenter, tr("capacity %1").arg(gib(m.capacity_bytes)));

  // Legend, top to bottom in stacking order from the top, under the capacity
  // label (it sits beside the plot, where the label is) and inside the plot's height.
  double ly = std::min(cap_y + 24, plot.bottom() - kNumParts * 20.0);
  if (ly < cap_y + 12 && ly + kNumParts * 20.0 > cap_y - 12) ly = cap_y - 16 - kNumParts * 20.0;
  ly = std::max(ly, plot.top());
  for (int part = kNumParts - 1; part >= 0; --part) {
    p.fillRect(QRectF(plot.right() + 10, ly, 14, 14), part_color(part));
    p.setPen(Qt::black);
    p.drawText(QRectF(plot.right() + 30, ly - 2, kRightPx - 34, 18),
               Qt::AlignLeft | Qt::AlignVCenter, QString::fromLatin1(part_name(part)));
    ly += 20;
  }
}

}  // namespace strata::gui
