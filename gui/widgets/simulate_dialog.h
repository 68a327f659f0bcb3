// Run ▸ Simulate…: pick a model, plan and cluster (shipped names, or type a
// path), optionally a device profile, and the fidelity; as `strata simulate`.
// Run ▸ Sweep…: a model and a cluster, optionally the profile and the global
// batch; as `strata sweep`.
#pragma once

#include <QDialog>

#include "gui/model/run_sweep.h"
#include "sim/scenario.h"
#include "sim/workload/workload.h"

class QComboBox;
class QSpinBox;

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

class SweepDialog : public QDialog {
  Q_OBJECT

 public:
  explicit SweepDialog(QWidget* parent = nullptr);
  SweepRequest request() const;

 private:
  QComboBox* model_;
  QComboBox* cluster_;
  QComboBox* profile_;
  QSpinBox* global_batch_;
};

}  // namespace strata::gui
