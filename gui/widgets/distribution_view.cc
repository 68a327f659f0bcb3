#include "gui/widgets/distribution_view.h"

#include <QHelpEvent>
#include <QPainter>
#include <QToolTip>
#include <algorithm>
#include <cmath>

#include "gui/model/time_view.h"

namespace strata::gui {
namespace {

constexpr int kLeftPx = 60, kBottomPx = 44, kHeaderPx = 48;
constexpr int kMarkRowPx = 15;                    // one row of mark labels above the plot
constexpr int kWhatIfPx = 300, kGapPx = 24;       // the what-if panel, right of the plot
constexpr int kTopPx = kHeaderPx + 4 * kMarkRowPx;

const QColor kBarColor(0x4c, 0x78, 0xa8);
const QColor kNoiselessColor(0x54, 0xa2, 0x4b);
const QColor kSlowedColor(0xe4, 0x57, 0x56);

QString time_text(double seconds) { return QString::fromStdString(format_time_ns(seconds * 1e9)); }

QColor mark_color(DistributionView::Mark m) {
  switch (m) {
    case DistributionView::Mark::kNoiseless: return kNoiselessColor;
    case DistributionView::Mark::kP50: return Qt::black;
    case DistributionView::Mark::kP90: return QColor(0xf5, 0x85, 0x18);
    case DistributionView::Mark::kP99: return kSlowedColor;
  }
  return Qt::black;
}

constexpr DistributionView::Mark kMarks[] = {DistributionView::Mark::kNoiseless, DistributionView::Mark::kP50,
                                             DistributionView::Mark::kP90, DistributionView::Mark::kP99};

}  // namespace

DistributionView::DistributionView(QWidget* parent) : QWidget(parent) {
  setMinimumSize(kLeftPx + kWhatIfPx + kGapPx + 240, kTopPx + kBottomPx + 120);
}

void DistributionView::set_result(std::optional<StepDistributionData> distribution,
                                  std::optional<WhatIfData> what_if, const QString& title) {
  distribution_ = std::move(distribution);
  what_if_ = std::move(what_if);
  title_ = title;
  histogram_ = distribution_ ? histogram_of(distribution_->step_time_s) : Histogram{};
  tallest_ = histogram_.counts.empty() ? 0 : *std::max_element(histogram_.counts.begin(), histogram_.counts.end());
  if (distribution_) {
    // The bins and the noiseless step, with a margin of 4% of that range each side.
    const double lo = std::min(histogram_.lo, distribution_->noiseless_step_time_s);
    const double hi = std::max(histogram_.hi(), distribution_->noiseless_step_time_s);
    const double margin = std::max(hi - lo, 1e-9) * 0.04;
    x_lo_ = lo - margin;
    x_hi_ = hi + margin;
  }
  update();
}

QRectF DistributionView::plot_rect() const {
  return QRectF(kLeftPx, kTopPx, std::max(10, width() - kLeftPx - kWhatIfPx - kGapPx),
                std::max(10, height() - kTopPx - kBottomPx));
}

double DistributionView::x_of(double seconds) const {
  const QRectF plot = plot_rect();
  return plot.left() + (seconds - x_lo_) / (x_hi_ - x_lo_) * plot.width();
}

QRectF DistributionView::bar_rect(int bin) const {
  if (bin < 0 || bin >= static_cast<int>(histogram_.counts.size())) return {};
  const QRectF plot = plot_rect();
  // The tallest bar fills 90% of the height.
  const double h = 0.9 * plot.height() * histogram_.counts[static_cast<std::size_t>(bin)] / std::max(1, tallest_);
  const double left = x_of(histogram_.lo + histogram_.width * bin);
  const double right = x_of(histogram_.lo + histogram_.width * (bin + 1));
  return QRectF(left, plot.bottom() - h, right - left, h);
}

double DistributionView::mark_seconds(Mark mark) const {
  if (!distribution_) return 0.0;
  switch (mark) {
    case Mark::kNoiseless: return distribution_->noiseless_step_time_s;
    case Mark::kP50: return distribution_->p50.value;
    case Mark::kP90: return distribution_->p90.value;
    case Mark::kP99: return distribution_->p99.value;
  }
  return 0.0;
}

double DistributionView::mark_x(Mark mark) const { return x_of(mark_seconds(mark)); }

QRectF DistributionView::what_if_rect() const {
  const QRectF plot = plot_rect();
  return QRectF(plot.right() + kGapPx, plot.top(), kWhatIfPx - 10, 150);
}

QRectF DistributionView::what_if_bar(bool slowed) const {
  if (!what_if_) return {};
  const QRectF box = what_if_rect();
  const double longest = std::max(what_if_->baseline_step_time_s, what_if_->step_time_s);
  const double seconds = slowed ? what_if_->step_time_s : what_if_->baseline_step_time_s;
  const double w = longest > 0.0 ? (box.width() - 10) * seconds / longest : 0.0;
  return QRectF(box.left(), box.top() + (slowed ? 96 : 44), w, 22);
}

QString DistributionView::tooltip_for(QPointF pos) const {
  for (int bin = 0; bin < static_cast<int>(histogram_.counts.size()); ++bin) {
    const QRectF bar = bar_rect(bin);
    if (pos.x() >= bar.left() && pos.x() < bar.right() && pos.y() >= plot_rect().top() &&
        pos.y() <= plot_rect().bottom()) {
      const double from = histogram_.lo + histogram_.width * bin;
      return tr("%1 – %2: %3 of %4 samples")
          .arg(time_text(from), time_text(from + histogram_.width))
          .arg(histogram_.counts[static_cast<std::size_t>(bin)])
          .arg(distribution_->step_time_s.size());
    }
  }
  return {};
}

bool DistributionView::event(QEvent* e) {
  if (e->type() == QEvent::ToolTip) {
    auto* help = static_cast<QHelpEvent*>(e);
    const QString tip = tooltip_for(help->pos());
    if (tip.isEmpty()) {
      QToolTip::hideText();
    } else {
      QToolTip::showText(help->globalPos(), tip, this);
    }
    return true;
  }
  return QWidget::event(e);
}

void DistributionView::paintEvent(QPaintEvent*) {
  QPainter p(this);
  p.fillRect(rect(), Qt::white);
  const QRectF plot = plot_rect();
  QFont bold = font();
  bold.setBold(true);
  if (!distribution_ && !what_if_) {
    p.setPen(Qt::darkGray);
    p.drawText(rect(), Qt::AlignCenter | Qt::TextWordWrap,
               tr("No sampled steps or what-if in this result.\n`strata simulate ... --samples 64 --clock-cv 0.03` "
                  "samples the step with every GPU's speed drawn per step; `--slow-rank 7:1.2` (or --slow-node, "
                  "--slow-nic) simulates a slow GPU beside the step at speed."));
    return;
  }
  p.setFont(bold);
  p.setPen(Qt::black);
  p.drawText(QRectF(10, 6, width() - 20, 20), Qt::AlignLeft | Qt::AlignVCenter, title_);
  p.setFont(font());

  if (!distribution_) {
    p.setPen(Qt::darkGray);
    p.drawText(plot, Qt::AlignCenter | Qt::TextWordWrap,
               tr("No sampled steps: `strata simulate ... --samples 64 --clock-cv 0.03` draws every GPU's speed "
                  "per step and shows the step-time distribution here."));
  } else {
    const StepDistributionData& d = *distribution_;
    auto figure = [](const SampledFigure& f) {
      return tr("%1 [%2, %3]").arg(time_text(f.value), time_text(f.ci_low), time_text(f.ci_high));
    };
    p.setPen(Qt::black);
    p.drawText(QRectF(10, 26, width() - 20, 18), Qt::AlignLeft | Qt::AlignVCenter,
               tr("%1 sampled steps, each GPU's speed lognormal with CV %2% per step (%3) · mean %4, %5% against "
                  "the noiseless step, %6 · 95% confidence intervals")
                   .arg(d.step_time_s.size())
                   .arg(100.0 * d.clock_cv, 0, 'f', 1)
                   .arg(d.origin.rfind("assumed", 0) == 0 ? tr("assumed") : QString::fromStdString(d.origin))
                   .arg(figure(d.mean))
                   .arg(QString::asprintf("%+.1f", 100.0 * (d.mean.value / d.noiseless_step_time_s - 1.0)))
                   .arg(time_text(d.noiseless_step_time_s)));

    // Bars, then the axis with a few step-time ticks.
    for (int bin = 0; bin < static_cast<int>(histogram_.counts.size()); ++bin) {
      const QRectF bar = bar_rect(bin);
      p.fillRect(bar.adjusted(0.5, 0, -0.5, 0), kBarColor);
    }
    p.setPen(Qt::black);
    p.drawLine(plot.bottomLeft(), plot.bottomRight());
    const TimeView axis(x_lo_ * 1e9, x_hi_ * 1e9, static_cast<int>(plot.width()));
    for (const RulerTick& tick : ruler_ticks(axis, 90.0)) {
      const double x = x_of(tick.t_ns / 1e9);
      p.drawLine(QPointF(x, plot.bottom()), QPointF(x, plot.bottom() + 4));
      p.drawText(QRectF(x - 45, plot.bottom() + 4, 90, 16), Qt::AlignCenter, QString::fromStdString(tick.label));
    }
    p.drawText(QRectF(plot.left(), plot.bottom() + 22, plot.width(), 18), Qt::AlignCenter, tr("step time"));
    p.drawText(QRectF(0, plot.bottom() - 0.9 * plot.height() - 9, kLeftPx - 8, 18), Qt::AlignRight | Qt::AlignVCenter,
               tr("%1 steps").arg(tallest_));

    // The marks, each labelled in its own row above the plot.
    int row = 0;
    for (Mark m : kMarks) {
      const double x = mark_x(m);
      const QString name = m == Mark::kNoiseless ? tr("noiseless") : m == Mark::kP50 ? tr("P50")
                                                                : m == Mark::kP90 ? tr("P90")
                                                                                  : tr("P99");
      p.setPen(QPen(mark_color(m), 2, m == Mark::kNoiseless ? Qt::DashLine : Qt::SolidLine));
      const double label_y = kHeaderPx + kMarkRowPx * row;
      p.drawLine(QPointF(x, label_y + kMarkRowPx), QPointF(x, plot.bottom()));
      const QString text = tr("%1 %2").arg(name, time_text(mark_seconds(m)));
      const double text_w = QFontMetrics(font()).horizontalAdvance(text) + 6;
      // Right of the line, or left of it where the plot ends.
      const double left = x + text_w + 2 > plot.right() + kGapPx / 2 ? x - text_w - 2 : x + 3;
      p.drawText(QRectF(left, label_y, text_w, kMarkRowPx), Qt::AlignLeft | Qt::AlignVCenter, text);
      ++row;
    }
  }

  // The what-if beside the plot.
  const QRectF box = what_if_rect();
  p.setPen(Qt::black);
  p.setFont(bold);
  p.drawText(QRectF(box.left(), box.top(), box.width(), 18), Qt::AlignLeft | Qt::AlignVCenter, tr("What-if"));
  p.setFont(font());
  if (!what_if_) {
    p.setPen(Qt::darkGray);
    p.drawText(QRectF(box.left(), box.top() + 22, box.width(), 90), Qt::AlignLeft | Qt::TextWordWrap,
               tr("None in this result: `--slow-rank 7:1.2`, `--slow-node 0:1.2` or `--slow-nic 0:0:2` simulates "
                  "the step with them beside the step at speed."));
    return;
  }
  const WhatIfData& w = *what_if_;
  auto bar = [&](bool slowed, const QString& label, double seconds, const QColor& color) {
    const QRectF r = what_if_bar(slowed);
    p.setPen(Qt::black);
    p.drawText(QRectF(box.left(), r.top() - 18, box.width(), 16), Qt::AlignLeft | Qt::AlignVCenter, label);
    p.fillRect(r, color);
    p.setPen(Qt::white);
    p.drawText(r.adjusted(4, 0, -4, 0), Qt::AlignRight | Qt::AlignVCenter, time_text(seconds));
  };
  bar(false, tr("every GPU and NIC at speed"), w.baseline_step_time_s, kNoiselessColor);
  bar(true, QString::fromStdString(w.slowed.empty() ? std::string("slowed") : w.slowed), w.step_time_s, kSlowedColor);
  p.setPen(Qt::black);
  p.drawText(QRectF(box.left(), what_if_bar(true).bottom() + 4, box.width(), 18), Qt::AlignLeft | Qt::AlignVCenter,
             tr("%1% step time").arg(QString::asprintf("%+.1f", 100.0 * (w.step_time_s / w.baseline_step_time_s - 1.0))));
}

}  // namespace strata::gui
