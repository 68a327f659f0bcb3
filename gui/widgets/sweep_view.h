// The Sweep tab: a filter box, a fits / does-not-fit choice, the count of plans
// shown, the sortable table and beside it the Pareto plot. Selecting a row (or a
// point) emits planSelected with the row's index in the sweep (not in the
// sorted view); a click on a point also emits planOpened, to show its timeline.
#pragma once

#include <QWidget>
#include <memory>

#include "gui/model/sweep_data.h"
#include "gui/widgets/sweep_table_model.h"

class QComboBox;
class QLabel;
class QLineEdit;
class QSplitter;
class QTableView;

namespace strata::gui {

class ParetoPlot;

class SweepView : public QWidget {
  Q_OBJECT

 public:
  explicit SweepView(QWidget* parent = nullptr);

  void set_sweep(std::shared_ptr<const SweepData> sweep);
  SweepTableModel* table_model() const { return model_; }
  SweepFilterProxy* proxy() const { return proxy_; }
  QTableView* table() const { return table_; }
  QLineEdit* filter_edit() const { return filter_; }
  QComboBox* fits_combo() const { return fits_; }
  ParetoPlot* pareto_plot() const { return plot_; }
  // Selects sweep_row (its index in the sweep): in the table when the filter
  // shows it, and in the plot; emits planSelected.
  void select_sweep_row(int sweep_row);
  // Selects the row at proxy_row of the sorted, filtered view (as a click does).
  void select_view_row(int proxy_row);
  // Rows the table shows (after filtering): what --select-plan may name.
  int view_rows() const;
  // "12 of 340 plans" under the current filter.
  QString count_text() const;

 signals:
  void planSelected(int sweep_row);
  void planOpened(int sweep_row);

 private:
  void update_count();

  SweepTableModel* model_;
  SweepFilterProxy* proxy_;
  QTableView* table_;
  QLineEdit* filter_;
  QComboBox* fits_;
  QLabel* count_;
  QLabel* summary_;
  ParetoPlot* plot_;
};

}  // namespace strata::gui
