// Colors shared by the views: one per task category (timeline, legend) and the
// utilization ramp of the topology view.
#pragma once

#include <QColor>

#include "gui/model/trace_model.h"

namespace strata::gui {

// The fill of a task category. Compute categories are cool colors, communication
// warm ones, so exposed communication stands out on a compute lane.
QColor category_color(Category c);

// The fill of one task: a compute task (gemm, attention, elementwise) shaded by
// its phase so a pipeline schedule reads at a glance: forward its category's
// color, backward darker, a zero-bubble schedule's W (weight gradients) paler,
// recompute greyed; every other task its category's color.
QColor task_color(Category c, Phase phase);

// Green (idle) through yellow to red (saturated) for utilization in [0, 1];
// grey for a link that carried nothing.
QColor utilization_color(double utilization, bool carried_bytes = true);

}  // namespace strata::gui
