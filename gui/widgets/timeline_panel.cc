#include "gui/widgets/timeline_panel.h"

#include <QCheckBox>
#include <QHBoxLayout>
#include <QLabel>
#include <QPlainTextEdit>
#include <QPushButton>
#include <QScrollBar>
#include <QSplitter>
#include <QVBoxLayout>

#include "gui/model/timeline_layout.h"
#include "gui/widgets/colors.h"
#include "gui/widgets/timeline_widget.h"

namespace strata::gui {
namespace {

QString legend_html() {
  QString html;
  for (int c = 0; c < kNumCategories; ++c) {
    const auto cat = static_cast<Category>(c);
    html += QStringLiteral("<span style=\"color:%1\">■</span>&nbsp;%2&nbsp;&nbsp; ")
                .arg(category_color(cat).name(), QString::fromLatin1(to_string(cat)));
  }
  // Compute tasks are shaded by phase (task_color), shown on gemm's blue.
  html += QStringLiteral("&nbsp;&nbsp;compute:");
  for (const auto& [phase, name] : {std::pair{Phase::kFwd, "forward"}, std::pair{Phase::kBwd, "backward (B)"},
                                    std::pair{Phase::kWgrad, "W"}, std::pair{Phase::kRecompute, "recompute"}}) {
    html += QStringLiteral("&nbsp;<span style=\"color:%1\">■</span>&nbsp;%2")
                .arg(task_color(Category::kGemm, phase).name(), QString::fromLatin1(name));
  }
  return html;
}

const char* kHint =
    "Click a task to see its details. Wheel: zoom at the cursor · Shift+wheel: scroll lanes · "
    "drag: pan · F: fit · click a node row to fold or unfold it · a selected pipeline send or "
    "receive shows its flow arrow, G follows it.";

}  // namespace

TimelinePanel::TimelinePanel(QWidget* parent) : QWidget(parent) {
  timeline_ = new TimelineWidget(this);
  scroll_ = new QScrollBar(Qt::Vertical, this);
  details_ = new QPlainTextEdit(this);
  details_->setReadOnly(true);
  details_->setPlainText(kHint);

  auto* fit = new QPushButton(tr("Fit"), this);
  fit->setToolTip(tr("Show the whole step (F)"));
  auto* expand = new QPushButton(tr("Unfold nodes"), this);
  auto* collapse = new QPushButton(tr("Fold nodes"), this);
  auto* flows = flows_ = new QCheckBox(tr("Flows"), this);
  flows->setObjectName(QStringLiteral("show_flows"));
  flows->setToolTip(tr("Draw every pipeline transfer as an arrow from its send to its receive "
                       "(the selected task's always)"));
  auto* legend = new QLabel(legend_html(), this);
  legend->setTextFormat(Qt::RichText);
  // Ten categories do not fit beside the buttons of a narrow window: wrap.
  legend->setWordWrap(true);

  auto* tools = new QHBoxLayout;
  tools->addWidget(fit);
  tools->addWidget(expand);
  tools->addWidget(collapse);
  tools->addWidget(flows);
  tools->addSpacing(16);
  tools->addWidget(legend, 1);

  auto* view_row = new QWidget(this);
  auto* view_layout = new QHBoxLayout(view_row);
  view_layout->setContentsMargins(0, 0, 0, 0);
  view_layout->setSpacing(0);
  view_layout->addWidget(timeline_, 1);
  view_layout->addWidget(scroll_);

  auto* split = new QSplitter(Qt::Vertical, this);
  split->addWidget(view_row);
  split->addWidget(details_);
  split->setStretchFactor(0, 5);
  split->setStretchFactor(1, 1);

  auto* layout = new QVBoxLayout(this);
  layout->setContentsMargins(4, 4, 4, 4);
  layout->addLayout(tools);
  layout->addWidget(split, 1);

  connect(fit, &QPushButton::clicked, timeline_, &TimelineWidget::fit);
  connect(expand, &QPushButton::clicked, this, [this] { timeline_->set_all_collapsed(false); });
  connect(collapse, &QPushButton::clicked, this, [this] { timeline_->set_all_collapsed(true); });
  connect(flows, &QCheckBox::toggled, timeline_, &TimelineWidget::set_show_all_flows);
  connect(timeline_, &TimelineWidget::contentHeightChanged, this, &TimelinePanel::sync_scroll_bar);
  connect(timeline_, &TimelineWidget::viewChanged, this, &TimelinePanel::sync_scroll_bar);
  connect(scroll_, &QScrollBar::valueChanged, timeline_, &TimelineWidget::set_scroll_y);
  connect(timeline_, &TimelineWidget::selectionChanged, this, &TimelinePanel::show_selection);
}

QString TimelinePanel::details_text() const { return details_->toPlainText(); }

void TimelinePanel::set_show_all_flows(bool show) { flows_->setChecked(show); }

void TimelinePanel::sync_scroll_bar() {
  const QSignalBlocker block(scroll_);
  scroll_->setRange(0, timeline_->max_scroll_y());
  scroll_->setPageStep(timeline_->lanes_height_px());
  scroll_->setSingleStep(kLaneHeightPx);
  scroll_->setValue(timeline_->scroll_y());
}

void TimelinePanel::show_selection() {
  const QString text = timeline_->selection_text();
  details_->setPlainText(text.isEmpty() ? QString::fromUtf8(kHint) : text);
}

}  // namespace strata::gui
