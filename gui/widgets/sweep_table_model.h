// The sweep's plans as a Qt table: one row per plan, one column per sweep.csv
// column, headed in words with the column's unit (gui/model/sweep_format.h; the
// header's tooltip names the sweep.csv column). Display text has one unit and
// precision per column; kSortRole holds
// the number (or the text; invalid for an empty cell) so sorting is numeric;
// kFitsRole says whether the plan fits in memory.
#pragma once

#include <QAbstractTableModel>
#include <QSortFilterProxyModel>
#include <memory>

#include <vector>

#include "gui/model/sweep_data.h"
#include "gui/model/sweep_format.h"

namespace strata::gui {

class SweepTableModel : public QAbstractTableModel {
  Q_OBJECT

 public:
  static constexpr int kSortRole = Qt::UserRole;
  static constexpr int kFitsRole = Qt::UserRole + 1;

  explicit SweepTableModel(QObject* parent = nullptr);

  // Replaces the table's contents (a model reset).
  void set_sweep(std::shared_ptr<const SweepData> sweep);
  const std::shared_ptr<const SweepData>& sweep() const { return sweep_; }

  int rowCount(const QModelIndex& parent = QModelIndex()) const override;
  int columnCount(const QModelIndex& parent = QModelIndex()) const override;
  QVariant data(const QModelIndex& index, int role = Qt::DisplayRole) const override;
  QVariant headerData(int section, Qt::Orientation orientation,
                      int role = Qt::DisplayRole) const override;

 private:
  std::shared_ptr<const SweepData> sweep_;
  std::vector<ColumnFormat> formats_;
};

// Sorting on kSortRole (numbers before text, empty cells last in either order,
// ties in the sweep's order), filtering by text (any column contains it, case
// insensitive) and by whether a plan fits.
class SweepFilterProxy : public QSortFilterProxyModel {
  Q_OBJECT

 public:
  enum class Fits { kAll, kFits, kDoesNotFit };

  explicit SweepFilterProxy(QObject* parent = nullptr);
  void set_text(const QString& text);
  void set_fits(Fits fits);

 protected:
  bool filterAcceptsRow(int source_row, const QModelIndex& source_parent) const override;
  bool lessThan(const QModelIndex& left, const QModelIndex& right) const override;

 private:
  QString text_;
  Fits fits_ = Fits::kAll;
};

}  // namespace strata::gui
