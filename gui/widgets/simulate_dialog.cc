#include "gui/widgets/simulate_dialog.h"

#include <QComboBox>
#include <QDialogButtonBox>
#include <QFormLayout>
#include <QSpinBox>

#include "core/data_paths.h"

namespace strata::gui {
namespace {

// An editable list of the shipped names under subdir; typing a path works too.
QComboBox* names_box(const std::string& subdir, const char* preferred, QWidget* parent) {
  auto* box = new QComboBox(parent);
  box->setEditable(true);
  for (const std::string& name : shipped_names(subdir)) box->addItem(QString::fromStdString(name));
  const int i = box->findText(QString::fromLatin1(preferred));
  if (i >= 0) box->setCurrentIndex(i);
  box->setMinimumContentsLength(28);
  return box;
}

}  // namespace

SimulateDialog::SimulateDialog(QWidget* parent) : QDialog(parent) {
  setWindowTitle(tr("Simulate one step"));
  // The defaults are the shipped 8-GPU Llama 3 8B plan: quick to simulate.
  model_ = names_box("scenarios/models", "llama3-8b", this);
  plan_ = names_box("scenarios/plans", "llama3-8b-8", this);
  cluster_ = names_box("scenarios/clusters", "dgx-a100-1node", this);
  profile_ = names_box("calib/profiles", "", this);
  profile_->insertItem(0, tr("(the cluster's)"));
  profile_->setCurrentIndex(0);
  fidelity_ = new QComboBox(this);
  fidelity_->addItem(tr("full: every rank"));
  fidelity_->addItem(tr("folded: one rank per stage"));

  auto* buttons = new QDialogButtonBox(QDialogButtonBox::Ok | QDialogButtonBox::Cancel, this);
  connect(buttons, &QDialogButtonBox::accepted, this, &QDialog::accept);
  connect(buttons, &QDialogButtonBox::rejected, this, &QDialog::reject);
  auto* form = new QFormLayout(this);
  form->addRow(tr("Model"), model_);
  form->addRow(tr("Plan"), plan_);
  form->addRow(tr("Cluster"), cluster_);
  form->addRow(tr("Profile"), profile_);
  form->addRow(tr("Fidelity"), fidelity_);
  form->addRow(buttons);
}

ScenarioArgs SimulateDialog::scenario_args() const {
  ScenarioArgs a;
  a.model = model_->currentText().trimmed().toStdString();
  a.plan = plan_->currentText().trimmed().toStdString();
  a.cluster = cluster_->currentText().trimmed().toStdString();
  if (profile_->currentIndex() != 0) a.profile = profile_->currentText().trimmed().toStdString();
  return a;
}

sim::Fidelity SimulateDialog::fidelity() const {
  return fidelity_->currentIndex() == 0 ? sim::Fidelity::kFull : sim::Fidelity::kFolded;
}

SweepDialog::SweepDialog(QWidget* parent) : QDialog(parent) {
  setWindowTitle(tr("Sweep every plan"));
  model_ = names_box("scenarios/models", "llama3-8b", this);
  cluster_ = names_box("scenarios/clusters", "dgx-a100-1node", this);
  profile_ = names_box("calib/profiles", "", this);
  profile_->insertItem(0, tr("(the cluster's)"));
  profile_->setCurrentIndex(0);
  global_batch_ = new QSpinBox(this);
  global_batch_->setRange(0, 1 << 24);
  global_batch_->setSpecialValueText(tr("default (about 4M tokens)"));
  global_batch_->setValue(0);

  auto* buttons = new QDialogButtonBox(QDialogButtonBox::Ok | QDialogButtonBox::Cancel, this);
  connect(buttons, &QDialogButtonBox::accepted, this, &QDialog::accept);
  connect(buttons, &QDialogButtonBox::rejected, this, &QDialog::reject);
  auto* form = new QFormLayout(this);
  form->addRow(tr("Model"), model_);
  form->addRow(tr("Cluster"), cluster_);
  form->addRow(tr("Profile"), profile_);
  form->addRow(tr("Global batch"), global_batch_);
  form->addRow(buttons);
}

SweepRequest SweepDialog::request() const {
  SweepRequest r;
  r.model = model_->currentText().trimmed().toStdString();
  r.cluster = cluster_->currentText().trimmed().toStdString();
  if (profile_->currentIndex() != 0) r.profile = profile_->currentText().trimmed().toStdString();
  r.global_batch_size = global_batch_->value();
  return r;
}

}  // namespace strata::gui
