// The Memory tab: one stacked bar per pipeline stage (weights, gradients,
// optimizer state, activations, buffers, reserve) against the device's capacity
// line, painted with QPainter. Hovering a bar lists its parts.
#pragma once

#include <QRectF>
#include <QString>
#include <QWidget>
#include <optional>

#include "plan/memory_model.h"

namespace strata::gui {

class MemoryWidget : public QWidget {
  Q_OBJECT

 public:
  // The stacked parts, bottom to top.
  static constexpr int kNumParts = 6;
  static const char* part_name(int part);
  static double part_bytes(const StageMemory& stage, int part);

  explicit MemoryWidget(QWidget* parent = nullptr);

  // Shows a report (title: what it is of); nullopt shows message instead.
  void set_memory(std::optional<MemoryReport> memory, const QString& title,
                  const QString& message = QString());
  const std::optional<MemoryReport>& memory() const { return memory_; }
  QString title() const { return title_; }

  // Geometry of the current size, for painting, hovering and tests.
  QRectF plot_rect() const;
  double bytes_per_px() const;             // vertical scale
  QRectF bar_rect(int stage_index) const;  // the whole bar of stages[stage_index]
  double capacity_y() const;               // the capacity line
  QString tooltip_for(int stage_index) const;

 protected:
  bool event(QEvent* e) override;
  void paintEvent(QPaintEvent* e) override;

 private:
  std::optional<MemoryReport> memory_;
  QString title_;
  QString message_;
};

}  // namespace strata::gui
