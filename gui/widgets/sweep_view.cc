#include "gui/widgets/sweep_view.h"

#include <QComboBox>
#include <QHBoxLayout>
#include <QHeaderView>
#include <QItemSelectionModel>
#include <QLabel>
#include <QLineEdit>
#include <QProxyStyle>
#include <QStyleOptionHeader>
#include <QTableView>
#include <QSplitter>
#include <QVBoxLayout>

#include "gui/widgets/pareto_plot.h"

namespace strata::gui {
namespace {

// "request: gpt3-175b on dgx-a100-128node · enumerated 340, pruned by memory 120, simulated 220".
QString sweep_summary(const SweepData& sweep) {
  QStringList parts;
  if (sweep.request.is_object()) {
    QStringList request;
    for (auto it = sweep.request.begin(); it != sweep.request.end(); ++it) {
      if (it.value().is_string()) {
        request << QString::fromStdString(it.key() + " " + it.value().get<std::string>());
      }
    }
    if (!request.isEmpty()) parts << request.join(", ");
  }
  if (sweep.counts.is_object()) {
    QStringList counts;
    for (auto it = sweep.counts.begin(); it != sweep.counts.end(); ++it) {
      if (it.value().is_number()) {
        counts << QString::fromStdString(it.key() + " " + it.value().dump());
      }
    }
    if (!counts.isEmpty()) parts << counts.join(", ");
  }
  parts << QString::fromStdString(sweep.file);
  return parts.join(" · ");
}

// Qt's header asks the style for a "sort down" arrow when a column is sorted
// ascending (a Windows convention), which reads upside down here: the table's
// rank 1, 2, 3 under a ▼. This style draws ▲ for ascending, ▼ for descending.
class SortArrowStyle : public QProxyStyle {
 public:
  void drawPrimitive(PrimitiveElement element, const QStyleOption* option, QPainter* painter,
                     const QWidget* widget) const override {
    if (element == PE_IndicatorHeaderArrow) {
      if (const auto* header = qstyleoption_cast<const QStyleOptionHeader*>(option)) {
        QStyleOptionHeader flipped = *header;
        if (header->sortIndicator == QStyleOptionHeader::SortUp) flipped.sortIndicator = QStyleOptionHeader::SortDown;
        if (header->sortIndicator == QStyleOptionHeader::SortDown) flipped.sortIndicator = QStyleOptionHeader::SortUp;
        QProxyStyle::drawPrimitive(element, &flipped, painter, widget);
        return;
      }
    }
    QProxyStyle::drawPrimitive(element, option, painter, widget);
  }
};

}  // namespace

SweepView::SweepView(QWidget* parent) : QWidget(parent) {
  model_ = new SweepTableModel(this);
  proxy_ = new SweepFilterProxy(this);
  proxy_->setSourceModel(model_);

  filter_ = new QLineEdit(this);
  filter_->setPlaceholderText(tr("Filter plans (any column contains…)"));
  filter_->setClearButtonEnabled(true);
  fits_ = new QComboBox(this);
  fits_->addItem(tr("All plans"));
  fits_->addItem(tr("Fits in memory"));
  fits_->addItem(tr("Does not fit"));
  count_ = new QLabel(this);
  summary_ = new QLabel(this);
  summary_->setTextInteractionFlags(Qt::TextSelectableByMouse);
  summary_->setWordWrap(true);

  table_ = new QTableView(this);
  table_->setModel(proxy_);
  table_->setSortingEnabled(true);
  table_->setSelectionBehavior(QAbstractItemView::SelectRows);
  table_->setSelectionMode(QAbstractItemView::SingleSelection);
  table_->setAlternatingRowColors(true);
  table_->verticalHeader()->setVisible(false);
  table_->verticalHeader()->setDefaultSectionSize(22);
  table_->horizontalHeader()->setStretchLastSection(true);
  // The default-constructed proxy follows the application's style and is owned
  // here (a proxy built on a given style would own that style).
  auto* arrows = new SortArrowStyle;
  arrows->setParent(table_->horizontalHeader());
  table_->horizontalHeader()->setStyle(arrows);
  table_->sortByColumn(0, Qt::AscendingOrder);

  auto* tools = new QHBoxLayout;
  tools->addWidget(filter_, 1);
  tools->addWidget(fits_);
  tools->addWidget(count_);
  auto* layout = new QVBoxLayout(this);
  layout->setContentsMargins(4, 4, 4, 4);
  layout->addLayout(tools);
  layout->addWidget(summary_);
  plot_ = new ParetoPlot(this);
  auto* split = new QSplitter(Qt::Horizontal, this);
  split->addWidget(table_);
  split->addWidget(plot_);
  split->setStretchFactor(0, 3);
  split->setStretchFactor(1, 2);
  layout->addWidget(split, 1);

  connect(filter_, &QLineEdit::textChanged, this, [this](const QString& text) {
    proxy_->set_text(text);
    update_count();
  });
  connect(fits_, &QComboBox::currentIndexChanged, this, [this](int index) {
    proxy_->set_fits(static_cast<SweepFilterProxy::Fits>(index));
    update_count();
  });
  connect(table_->selectionModel(), &QItemSelectionModel::currentRowChanged, this,
          [this](const QModelIndex& current) {
            if (!current.isValid()) return;
            const int row = proxy_->mapToSource(current).row();
            plot_->set_selected_row(row);
            emit planSelected(row);
          });
  connect(plot_, &ParetoPlot::pointSelected, this, [this](int row) {
    select_sweep_row(row);
    emit planOpened(row);
  });
  update_count();
}

void SweepView::set_sweep(std::shared_ptr<const SweepData> sweep) {
  summary_->setText(sweep ? sweep_summary(*sweep) : QString());
  plot_->set_sweep(sweep);
  model_->set_sweep(std::move(sweep));
  table_->resizeColumnsToContents();
  update_count();
}

void SweepView::select_view_row(int proxy_row) {
  const QModelIndex index = proxy_->index(proxy_row, 0);
  if (!index.isValid()) return;
  table_->selectionModel()->setCurrentIndex(
      index, QItemSelectionModel::ClearAndSelect | QItemSelectionModel::Rows);
  table_->scrollTo(index);
}

void SweepView::select_sweep_row(int sweep_row) {
  const QModelIndex index = proxy_->mapFromSource(model_->index(sweep_row, 0));
  if (index.isValid()) {
    select_view_row(index.row());  // emits planSelected through the table's selection
    return;
  }
  // Filtered out of the table: selected in the plot alone.
  plot_->set_selected_row(sweep_row);
  emit planSelected(sweep_row);
}

int SweepView::view_rows() const { return proxy_->rowCount(); }

QString SweepView::count_text() const { return count_->text(); }

void SweepView::update_count() {
  count_->setText(tr("%1 of %2 plans").arg(proxy_->rowCount()).arg(model_->rowCount()));
}

}  // namespace strata::gui
