// The Sweep tab's Pareto plot: each simulated plan that fits as a marker at its
// peak memory per GPU (x) and tokens/s (y), coloured by TP, shaped by PP; the
// Pareto front joined by a line; the GPUs' capacity as a dashed red line. Hover
// names the plan, a click selects it (pointSelected with its sweep row).
// Painted with QPainter (Qt Charts is not used); the numbers are
// gui/model/pareto_plot.h's.
#pragma once

#include <QWidget>
#include <memory>

#include "gui/model/pareto_plot.h"

namespace strata::gui {

class ParetoPlot : public QWidget {
  Q_OBJECT

 public:
  explicit ParetoPlot(QWidget* parent = nullptr);

  void set_sweep(std::shared_ptr<const SweepData> sweep);
  const ParetoData& data() const { return data_; }
  // Rings the point of this sweep row (-1: none).
  void set_selected_row(int row);
  int selected_row() const { return selected_row_; }

  // The point under a widget position (within 6 px), as an index into
  // data().points; -1 when none. Where a point is drawn: point_position.
  int point_at(QPoint pos) const;
  QPointF point_position(int point) const;

 signals:
  void pointSelected(int sweep_row);

 protected:
  bool event(QEvent* e) override;
  void paintEvent(QPaintEvent* e) override;
  void mouseReleaseEvent(QMouseEvent* e) override;

 private:
  QRectF plot_area() const;
  double x_of(double gib) const;
  double y_of(double tokens) const;

  std::shared_ptr<const SweepData> sweep_;
  ParetoData data_;
  double x_lo_ = 0, x_hi_ = 1, y_lo_ = 0, y_hi_ = 1;
  int selected_row_ = -1;
};

}  // namespace strata::gui
