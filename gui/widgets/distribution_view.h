// The Distribution tab: a sampled result's step times (`strata simulate --samples
// N --clock-cv X`) as a histogram with the noiseless step (every GPU at its mean
// speed; slowed ranks of a what-if stay slowed) and the P50, P90 and P99 marked, and beside it the what-if (`--slow-rank`, `--slow-node`, `--slow-nic`):
// the step at speed against the slowed one. Painted with QPainter; the bins are
// gui/model/step_distribution.h's.
#pragma once

#include <QRectF>
#include <QString>
#include <QWidget>
#include <optional>

#include "gui/model/step_distribution.h"

namespace strata::gui {

class DistributionView : public QWidget {
  Q_OBJECT

 public:
  enum class Mark { kNoiseless, kP50, kP90, kP99 };

  explicit DistributionView(QWidget* parent = nullptr);

  // Shows a result's samples and what-if (either may be absent; without both the
  // view says how to get them).
  void set_result(std::optional<StepDistributionData> distribution, std::optional<WhatIfData> what_if,
                  const QString& title);
  const std::optional<StepDistributionData>& distribution() const { return distribution_; }
  const Histogram& histogram() const { return histogram_; }

  // Geometry of the current size, for painting and tests.
  QRectF plot_rect() const;
  double x_of(double seconds) const;     // a step time's x in the plot
  QRectF bar_rect(int bin) const;        // histogram bin `bin`
  double mark_x(Mark mark) const;        // a marked step time's x
  QRectF what_if_bar(bool slowed) const; // the what-if's bar: at speed, or slowed
  QString tooltip_for(QPointF pos) const;

 protected:
  bool event(QEvent* e) override;
  void paintEvent(QPaintEvent* e) override;

 private:
  double mark_seconds(Mark mark) const;
  QRectF what_if_rect() const;

  std::optional<StepDistributionData> distribution_;
  std::optional<WhatIfData> what_if_;
  Histogram histogram_;
  int tallest_ = 0;  // the histogram's largest count
  double x_lo_ = 0.0, x_hi_ = 1.0;  // the plot's step-time range
  QString title_;
};

}  // namespace strata::gui
