// Run ▸ Simulate…: pick a model, plan and cluster (shipped names, or type a
// path), optionally a device profile, and the fidelity; as `strata simulate`.
#pragma once

#include <QDialog>

#include "sim/scenario.h"
#include "sim/workload/workload.h"

class QComboBox;

namespace strata::gui {

class SimulateDialog : public QDialog {
  Q_OBJECT

 public:
  explicit SimulateDialog(QWidget* parent = nullptr);
  // What was chosen (names or paths, as `strata simulate` takes them).
  ScenarioArgs scenario_args() const;
  sim::Fidelity fidelity() const;

 private:
  QComboBox* model_;
  QComboBox* plan_;
  QComboBox* cluster_;
  QComboBox* profile_;
  QComboBox* fidelity_;
};

}  // namespace strata::gui
