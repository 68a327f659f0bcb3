#include "gui/widgets/timeline_panel.h"

#include <QCheckBox>
#include <QGridLayout>
#include <QHBoxLayout>
#include <QKeyEvent>
#include <QLineEdit>
#include <QSignalBlocker>
#include <QSpinBox>
#include <QLabel>
#include <QPlainTextEdit>
#include <QPushButton>
#include <QScrollBar>
#include <QSplitter>
#include <QVBoxLayout>

#include "core/error.h"
#include "gui/model/range_stats.h"
#include "gui/model/timeline_layout.h"
#include "gui/model/trace_search.h"
#include "gui/widgets/colors.h"
#include "gui/widgets/overview_strip.h"
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
    "Click a task to see its details. Wheel: zoom at the cursor · Shift+wheel: scroll lanes · Ctrl+wheel: "
    "lane height · "
    "drag: pan · F: fit · click a node row to fold or unfold it, a merged mark to zoom to it · a "
    "selected pipeline send or receive shows its flow arrow, G follows it · Shift+drag: select a "
    "time range for its summary, Esc clears it.";

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
  auto* lane_height = new QSpinBox(this);
  lane_height->setObjectName(QStringLiteral("lane_height"));
  lane_height->setRange(kMinLaneHeightPx, kMaxLaneHeightPx);
  lane_height->setValue(kLaneHeightPx);
  lane_height->setSuffix(tr(" px"));
  lane_height->setToolTip(tr("Lane height (Ctrl+wheel over the lanes)"));
  auto* legend = new QLabel(legend_html(), this);
  legend->setTextFormat(Qt::RichText);
  // Ten categories do not fit beside the buttons of a narrow window: wrap.
  legend->setWordWrap(true);

  auto* tools = new QHBoxLayout;
  tools->addWidget(fit);
  tools->addWidget(expand);
  tools->addWidget(collapse);
  tools->addWidget(flows);
  tools->addWidget(new QLabel(tr("Lanes"), this));
  tools->addWidget(lane_height);
  tools->addSpacing(16);
  tools->addWidget(legend, 1);

  find_ = new QLineEdit(this);
  find_->setObjectName(QStringLiteral("find"));
  find_->setPlaceholderText(tr("Find: fc1 cat:tp mb:3 layer:12 chunk:1 phase:bwd lane:exposed — Enter: next, "
                               "Shift+Enter: previous"));
  find_->setClearButtonEnabled(true);
  find_->installEventFilter(this);
  auto* previous = new QPushButton(QStringLiteral("◀"), this);
  previous->setToolTip(tr("Previous match (Shift+Enter)"));
  auto* next = new QPushButton(QStringLiteral("▶"), this);
  next->setToolTip(tr("Next match (Enter)"));
  find_status_ = new QLabel(this);
  find_status_->setMinimumWidth(160);
  auto* find_row = new QHBoxLayout;
  find_row->addWidget(new QLabel(tr("Find"), this));
  find_row->addWidget(find_, 1);
  find_row->addWidget(previous);
  find_row->addWidget(next);
  find_row->addWidget(find_status_);

  overview_ = new OverviewStrip(timeline_, this);
  auto* view_row = new QWidget(this);
  auto* view_layout = new QGridLayout(view_row);
  view_layout->setContentsMargins(0, 0, 0, 0);
  view_layout->setSpacing(0);
  // The strip over the lanes only, so its columns line up with theirs.
  view_layout->addWidget(overview_, 0, 0);
  view_layout->addWidget(timeline_, 1, 0);
  view_layout->addWidget(scroll_, 1, 1);
  view_layout->setRowStretch(1, 1);
  view_layout->setColumnStretch(0, 1);

  auto* split = new QSplitter(Qt::Vertical, this);
  split->addWidget(view_row);
  split->addWidget(details_);
  split->setStretchFactor(0, 5);
  split->setStretchFactor(1, 1);

  auto* layout = new QVBoxLayout(this);
  layout->setContentsMargins(4, 4, 4, 4);
  layout->addLayout(tools);
  layout->addLayout(find_row);
  layout->addWidget(split, 1);

  connect(fit, &QPushButton::clicked, timeline_, &TimelineWidget::fit);
  connect(expand, &QPushButton::clicked, this, [this] { timeline_->set_all_collapsed(false); });
  connect(collapse, &QPushButton::clicked, this, [this] { timeline_->set_all_collapsed(true); });
  connect(flows, &QCheckBox::toggled, timeline_, &TimelineWidget::set_show_all_flows);
  connect(lane_height, &QSpinBox::valueChanged, timeline_, &TimelineWidget::set_lane_height);
  connect(timeline_, &TimelineWidget::laneHeightChanged, lane_height, [lane_height](int px) {
    const QSignalBlocker block(lane_height);
    lane_height->setValue(px);
  });
  connect(timeline_, &TimelineWidget::contentHeightChanged, this, &TimelinePanel::sync_scroll_bar);
  connect(timeline_, &TimelineWidget::viewChanged, this, &TimelinePanel::sync_scroll_bar);
  connect(scroll_, &QScrollBar::valueChanged, timeline_, &TimelineWidget::set_scroll_y);
  connect(timeline_, &TimelineWidget::selectionChanged, this, &TimelinePanel::show_selection);
  connect(timeline_, &TimelineWidget::rangeChanged, this, &TimelinePanel::show_selection);
  connect(find_, &QLineEdit::textChanged, this, [this] {
    update_matches();
    find_status_->setText(find_status());
  });
  connect(next, &QPushButton::clicked, this, [this] { find_next(false); });
  connect(previous, &QPushButton::clicked, this, [this] { find_next(true); });
}

QString TimelinePanel::details_text() const { return details_->toPlainText(); }

void TimelinePanel::set_show_all_flows(bool show) { flows_->setChecked(show); }

void TimelinePanel::sync_scroll_bar() {
  const QSignalBlocker block(scroll_);
  scroll_->setRange(0, timeline_->max_scroll_y());
  scroll_->setPageStep(timeline_->lanes_height_px());
  scroll_->setSingleStep(timeline_->layout_model().lane_height());
  scroll_->setValue(timeline_->scroll_y());
}

void TimelinePanel::show_selection() {
  const auto range = timeline_->range();
  if (range && !timeline_->traces().empty()) {
    // The range's summary over the first trace (the predicted one when both are open).
    details_->setPlainText(QString::fromStdString(
        describe(range_stats(*timeline_->traces().front(), range->first, range->second))));
    return;
  }
  const QString text = timeline_->selection_text();
  details_->setPlainText(text.isEmpty() ? QString::fromUtf8(kHint) : text);
}

void TimelinePanel::set_find_text(const QString& text) { find_->setText(text); }

void TimelinePanel::update_matches() {
  const std::shared_ptr<const TraceModel> trace =
      timeline_->traces().empty() ? nullptr : timeline_->traces().front();
  if (trace == matched_trace_.lock() && !matched_trace_.expired() && find_->text() == matched_query_) return;
  matched_trace_ = trace;
  matched_query_ = find_->text();
  matches_.clear();
  find_error_.clear();
  if (trace == nullptr) return;
  try {
    matches_ = find_spans(*trace, parse_search(matched_query_.toStdString()));
  } catch (const InputError& e) {
    find_error_ = QString::fromStdString(e.message());
  }
}

QString TimelinePanel::find_status() const {
  if (!find_error_.isEmpty()) return find_error_;
  if (find_->text().trimmed().isEmpty()) return {};
  if (matches_.empty()) return tr("no match");
  const auto sel = timeline_->selection();
  if (sel && sel->trace == 0) {
    for (std::size_t i = 0; i < matches_.size(); ++i) {
      if (matches_[i] == SpanRef{sel->lane, sel->span}) return tr("%1 of %2").arg(i + 1).arg(matches_.size());
    }
  }
  return tr("%1 matches").arg(matches_.size());
}

bool TimelinePanel::find_next(bool backwards) {
  update_matches();
  bool found = false;
  if (!matches_.empty()) {
    const auto sel = timeline_->selection();
    std::optional<SpanRef> current;
    if (sel && sel->trace == 0) current = SpanRef{sel->lane, sel->span};
    const auto from = static_cast<TimeNs>(timeline_->view().start_ns());
    const std::int64_t k = next_match(*timeline_->traces().front(), matches_, current, from, backwards);
    found = k >= 0 && timeline_->reveal(0, matches_[k].lane, matches_[k].span, false);
  }
  find_status_->setText(find_status());
  return found;
}

bool TimelinePanel::eventFilter(QObject* watched, QEvent* event) {
  if (watched == find_ && event->type() == QEvent::KeyPress) {
    auto* key = static_cast<QKeyEvent*>(event);
    if (key->key() == Qt::Key_Return || key->key() == Qt::Key_Enter) {
      find_next(key->modifiers() & Qt::ShiftModifier);
      return true;
    }
  }
  return QWidget::eventFilter(watched, event);
}

}  // namespace strata::gui
