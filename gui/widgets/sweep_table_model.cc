#include "gui/widgets/sweep_table_model.h"

#include <QBrush>
#include <QColor>
#include <cmath>

namespace strata::gui {

SweepTableModel::SweepTableModel(QObject* parent) : QAbstractTableModel(parent) {}

void SweepTableModel::set_sweep(std::shared_ptr<const SweepData> sweep) {
  beginResetModel();
  sweep_ = std::move(sweep);
  formats_ = sweep_ ? sweep_column_formats(*sweep_) : std::vector<ColumnFormat>();
  endResetModel();
}

int SweepTableModel::rowCount(const QModelIndex& parent) const {
  if (parent.isValid() || !sweep_) return 0;
  return static_cast<int>(sweep_->rows.size());
}

int SweepTableModel::columnCount(const QModelIndex& parent) const {
  if (parent.isValid() || !sweep_) return 0;
  return static_cast<int>(sweep_->columns.size());
}

QVariant SweepTableModel::data(const QModelIndex& index, int role) const {
  if (!sweep_ || !index.isValid() || index.row() >= rowCount() || index.column() >= columnCount()) {
    return {};
  }
  const SweepRow& row = sweep_->rows[index.row()];
  const std::string& column = sweep_->columns[index.column()];
  const std::string& text = row.cells[index.column()];
  const double number = row.numbers[index.column()];
  const bool numeric = !std::isnan(number);
  switch (role) {
    case Qt::DisplayRole:
      return QString::fromStdString(format_cell(formats_[index.column()], text, number));
    case kSortRole:
      if (numeric) return number;
      if (text.empty()) return QVariant();  // sorts last (SweepFilterProxy::lessThan)
      return QString::fromStdString(text);
    case kFitsRole:
      return row.fits;
    case Qt::ToolTipRole:
      return column == "why" ? QString::fromStdString(text) : QVariant();
    case Qt::TextAlignmentRole:
      return numeric && text != "true" && text != "false"
                 ? QVariant(Qt::AlignRight | Qt::AlignVCenter)
                 : QVariant(Qt::AlignLeft | Qt::AlignVCenter);
    case Qt::ForegroundRole:
      return row.fits ? QVariant() : QVariant(QBrush(QColor(0xa0, 0x30, 0x30)));
    default:
      return {};
  }
}

QVariant SweepTableModel::headerData(int section, Qt::Orientation orientation, int role) const {
  if ((role != Qt::DisplayRole && role != Qt::ToolTipRole) || !sweep_) return {};
  if (orientation == Qt::Vertical) return role == Qt::DisplayRole ? QVariant(section + 1) : QVariant();
  if (section < 0 || section >= columnCount()) return {};
  const ColumnFormat& f = formats_[section];
  return QString::fromStdString(role == Qt::DisplayRole ? f.header : f.tooltip);
}

SweepFilterProxy::SweepFilterProxy(QObject* parent) : QSortFilterProxyModel(parent) {
  setSortRole(SweepTableModel::kSortRole);
  setDynamicSortFilter(true);
}

void SweepFilterProxy::set_text(const QString& text) {
  if (text == text_) return;
  text_ = text;
  invalidateFilter();
}

void SweepFilterProxy::set_fits(Fits fits) {
  if (fits == fits_) return;
  fits_ = fits;
  invalidateFilter();
}

bool SweepFilterProxy::filterAcceptsRow(int source_row, const QModelIndex& source_parent) const {
  const QAbstractItemModel* source = sourceModel();
  if (fits_ != Fits::kAll) {
    const bool fits =
        source->data(source->index(source_row, 0, source_parent), SweepTableModel::kFitsRole)
            .toBool();
    if (fits != (fits_ == Fits::kFits)) return false;
  }
  if (text_.isEmpty()) return true;
  for (int c = 0; c < source->columnCount(source_parent); ++c) {
    if (source->data(source->index(source_row, c, source_parent), Qt::DisplayRole)
            .toString()
            .contains(text_, Qt::CaseInsensitive)) {
      return true;
    }
  }
  return false;
}

bool SweepFilterProxy::lessThan(const QModelIndex& left, const QModelIndex& right) const {
  const QVariant a = left.data(SweepTableModel::kSortRole);
  const QVariant b = right.data(SweepTableModel::kSortRole);
  // Empty cells (a plan that does not fit has no rank) end up last in either order.
  if (a.isValid() != b.isValid()) return a.isValid() == (sortOrder() == Qt::AscendingOrder);
  const bool a_number = a.typeId() == QMetaType::Double;
  const bool b_number = b.typeId() == QMetaType::Double;
  if (a_number && b_number) {
    if (a.toDouble() != b.toDouble()) return a.toDouble() < b.toDouble();
  } else if (a_number != b_number) {
    return a_number;  // numbers before text
  } else {
    const int c = QString::compare(a.toString(), b.toString(), Qt::CaseInsensitive);
    if (c != 0) return c < 0;
  }
  // Ties keep the sweep's order in either direction (Qt sorts descending by
  // calling lessThan(right, left)), so sorting is deterministic.
  if (left.row() == right.row()) return false;
  return (left.row() < right.row()) == (sortOrder() == Qt::AscendingOrder);
}

}  // namespace strata::gui
