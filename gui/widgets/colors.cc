#include "gui/widgets/colors.h"

#include <algorithm>

namespace strata::gui {

QColor category_color(Category c) {
  // Tableau 10 (Vega's category10 successor), a palette designed for telling
  // categories apart; assigned so related categories get related hues.
  switch (c) {
    case Category::kGemm:
      return QColor(0x4c, 0x78, 0xa8);
    case Category::kAttention:
      return QColor(0x7f, 0x5f, 0xb0);
    case Category::kElementwise:
      return QColor(0x72, 0xb7, 0xb2);
    case Category::kTp:
      return QColor(0xf5, 0x85, 0x18);
    case Category::kPp:
      return QColor(0xe4, 0x57, 0x56);
    case Category::kDp:
      return QColor(0x54, 0xa2, 0x4b);
    case Category::kZero:
      return QColor(0xb2, 0x79, 0xa2);
    case Category::kOptimizer:
      return QColor(0x9d, 0x75, 0x5d);
    case Category::kCopy:
      return QColor(0xba, 0xb0, 0xac);
    case Category::kHost:
      return QColor(0xed, 0xc9, 0x48);
    case Category::kCp:  // beside tp's orange: both are the model's own exchanges
      return QColor(0xff, 0x9d, 0xa7);
    case Category::kEp:  // the MoE all-to-alls: tp's orange toward red, apart from cp's pink
      return QColor(0xd3, 0x72, 0x95);
    case Category::kBubble:  // waiting for other stages: light and neutral, beside the warm exposed comm
      return QColor(0xd9, 0xd9, 0xd9);
    case Category::kWait:  // waiting for a slower peer: neutral like the bubble, but a cool violet-grey
      return QColor(0xb8, 0xa9, 0xc9);
  }
  return Qt::gray;
}

QColor task_color(Category c, Phase phase) {
  const QColor base = category_color(c);
  const bool compute = c == Category::kGemm || c == Category::kAttention || c == Category::kElementwise;
  if (!compute) return base;
  switch (phase) {
    case Phase::kBwd: return base.darker(150);
    case Phase::kWgrad: return base.lighter(145);
    case Phase::kRecompute: {
      float h = 0, s = 0, v = 0;
      base.getHsvF(&h, &s, &v);
      return QColor::fromHsvF(h, s * 0.3f, v);
    }
    case Phase::kNone:
    case Phase::kFwd:
    case Phase::kStep: break;
  }
  return base;
}

QColor utilization_color(double utilization, bool carried_bytes) {
  if (!carried_bytes && utilization <= 0.0) return QColor(0xb0, 0xb0, 0xb0);
  const double u = std::clamp(utilization, 0.0, 1.0);
  // Hue 120 (green) at 0 down to 0 (red) at 1, through yellow at 0.5.
  return QColor::fromHsvF(static_cast<float>((1.0 - u) * 120.0 / 360.0), 0.85f, 0.85f);
}

}  // namespace strata::gui
