#include "gui/widgets/main_window.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <QAction>
#include <QApplication>
#include <QFileDialog>
#include <QFileInfo>
#include <QKeySequence>
#include <QLabel>
#include <QMenuBar>
#include <QMessageBox>
#include <QProgressBar>
#include <QPushButton>
#include <QStatusBar>
#include <QTabWidget>
#include <QVBoxLayout>
#include <algorithm>
#include <cmath>

#include "core/error.h"
#include "gui/model/plan_memory.h"
#include "gui/model/time_view.h"
#include "gui/model/timeline_layout.h"
#include "gui/widgets/distribution_view.h"
#include "gui/widgets/memory_widget.h"
#include "gui/widgets/simulate_dialog.h"
#include "gui/widgets/sweep_view.h"
#include "gui/widgets/timeline_panel.h"
#include "gui/widgets/timeline_widget.h"
#include "gui/widgets/topology_view.h"
#include "plan/plan_spec.h"
#include "sweep/plan_space.h"

namespace strata::gui {
namespace {

QString qstr(const std::string& s) { return QString::fromStdString(s); }

std::string percent(double ratio) { return fmt::format("{:.1f}%", ratio * 100.0); }

// Three significant digits in the unit that suits ("451 ms", "4.62 s", "0"): the
// headline's exposed times, short enough that the line fits a 1,400-px window.
std::string short_time(double seconds) {
  const double ns = seconds * 1e9;
  if (ns == 0.0) return "0";
  const double magnitude = std::abs(ns);
  if (magnitude >= 1e9) return fmt::format("{:.3g} s", ns / 1e9);
  if (magnitude >= 1e6) return fmt::format("{:.3g} ms", ns / 1e6);
  if (magnitude >= 1e3) return fmt::format("{:.3g} µs", ns / 1e3);
  return fmt::format("{:.3g} ns", ns);
}

// Tokens per second as the sweep table writes them: "66.2K", "1.32M".
std::string short_rate(double per_s) {
  if (per_s >= 1e6) return fmt::format("{:.3g}M", per_s / 1e6);
  if (per_s >= 1e3) return fmt::format("{:.3g}K", per_s / 1e3);
  return fmt::format("{:.0f}", per_s);
}

// The headline of a result, in Megatron-LM's and the papers' words. With links,
// rich text whose bubble and exposed figures link to "wait:<category>" (the
// longest such interval on the exposed lanes); else the same words, plain.
QString result_headline(const ResultData& r, bool links) {
  auto plain = [&](const std::string& text) { return links ? qstr(text).toHtmlEscaped() : qstr(text); };
  auto linked = [&](const char* category, const std::string& text) {
    if (!links) return qstr(text);
    return QStringLiteral("<a href=\"wait:%1\">%2</a>").arg(QString::fromLatin1(category), qstr(text).toHtmlEscaped());
  };
  QString text = plain("step " + format_time_ns(r.step_time_s * 1e9));
  if (r.mfu > 0) text += plain(" · MFU " + percent(r.mfu));
  if (r.hfu > 0) text += plain(" · HFU " + percent(r.hfu));
  if (r.tflops_per_gpu > 0) text += plain(fmt::format(" · {:.0f} TFLOP/s per GPU", r.tflops_per_gpu));
  if (r.tokens_per_s > 0) text += plain(" · " + short_rate(r.tokens_per_s) + " tokens/s");
  text += plain(" · ") + linked("bubble", "bubble " + percent(r.bubble_ratio));
  if (r.bubble_ratio_analytic > 0) text += plain(" (analytic " + percent(r.bubble_ratio_analytic) + ")");
  text += plain(" · exposed ") + linked("tp", "TP " + short_time(r.exposed.tp_s)) + plain(", ") +
          linked("pp", "PP " + short_time(r.exposed.pp_s)) + plain(", ") +
          linked("dp", "DP " + short_time(r.exposed.dp_s)) + plain(", ") +
          linked("zero", "ZeRO " + short_time(r.exposed.zero_s));
  if (r.exposed.cp_s >= 0) text += plain(", ") + linked("cp", "CP " + short_time(r.exposed.cp_s));
  if (r.exposed.ep_s >= 0) text += plain(", ") + linked("ep", "EP " + short_time(r.exposed.ep_s));
  if (r.peer_wait_s > 0) text += plain(" · ") + linked("wait", "waiting for peers " + short_time(r.peer_wait_s));
  if (r.num_gpus > 0) text += plain(fmt::format(" · {} GPUs", r.num_gpus));
  if (!r.fidelity.empty()) text += plain(" · " + r.fidelity + " fidelity");
  return text;
}

const char* kFileFilter =
    "Strata files (*.json *.csv);;Traces (trace*.json *.json);;Sweeps (*.csv *.json);;All files "
    "(*)";

}  // namespace

bool parse_view(const std::string& name, View* out) {
  if (name == "timeline") return *out = View::kTimeline, true;
  if (name == "sweep") return *out = View::kSweep, true;
  if (name == "memory") return *out = View::kMemory, true;
  if (name == "topology") return *out = View::kTopology, true;
  if (name == "distribution") return *out = View::kDistribution, true;
  return false;
}

MainWindow::MainWindow(QWidget* parent) : QMainWindow(parent) {
  setWindowTitle(tr("Strata"));
  timeline_ = new TimelinePanel(this);
  sweep_ = new SweepView(this);
  memory_ = new MemoryWidget(this);
  topology_ = new TopologyView(this);
  distribution_ = new DistributionView(this);
  jobs_ = new JobRunner(this);

  tabs_ = new QTabWidget(this);
  tabs_->addTab(timeline_, tr("Timeline"));
  tabs_->addTab(sweep_, tr("Sweep"));
  tabs_->addTab(memory_, tr("Memory"));
  tabs_->addTab(topology_, tr("Topology"));
  tabs_->addTab(distribution_, tr("Distribution"));

  headline_ = new QLabel(tr("Open a result.json, trace.json, sweep.csv/json or memory.json "
                            "(File ▸ Open…)"),
                         this);
  headline_->setTextInteractionFlags(Qt::TextSelectableByMouse | Qt::LinksAccessibleByMouse);
  connect(headline_, &QLabel::linkActivated, this, [this](const QString& link) {
    if (link.startsWith(QStringLiteral("wait:"))) show_longest_wait(link.mid(5));
  });
  headline_->setObjectName(QStringLiteral("headline"));
  headline_->setWordWrap(true);
  QFont bold = headline_->font();
  bold.setBold(true);
  headline_->setFont(bold);

  auto* central = new QWidget(this);
  auto* layout = new QVBoxLayout(central);
  layout->setContentsMargins(6, 6, 6, 0);
  layout->addWidget(headline_);
  layout->addWidget(tabs_, 1);
  setCentralWidget(central);

  progress_ = new QProgressBar(this);
  progress_->setRange(0, 1000);
  progress_->setMaximumWidth(260);
  progress_->setVisible(false);
  cancel_ = new QPushButton(tr("Cancel"), this);
  cancel_->setVisible(false);
  statusBar()->addPermanentWidget(progress_);
  statusBar()->addPermanentWidget(cancel_);

  connect(cancel_, &QPushButton::clicked, jobs_, &JobRunner::cancel);
  connect(jobs_, &JobRunner::started, this, [this](const QString& label) {
    progress_->setValue(0);
    progress_->setVisible(true);
    cancel_->setVisible(true);
    statusBar()->showMessage(label);
  });
  connect(jobs_, &JobRunner::progress, this,
          [this](double f) { progress_->setValue(static_cast<int>(f * 1000.0)); });
  connect(jobs_, &JobRunner::finished, this, &MainWindow::on_job_finished);
  connect(sweep_, &SweepView::planSelected, this, &MainWindow::select_sweep_plan);
  // A click on the Pareto plot opens the plan's timeline.
  connect(sweep_, &SweepView::planOpened, this, [this] { show_view(View::kTimeline); });

  build_menus();
  resize(1400, 900);
}

MainWindow::~MainWindow() = default;

void MainWindow::build_menus() {
  QMenu* file = menuBar()->addMenu(tr("&File"));
  QAction* open = file->addAction(tr("&Open…"), this, [this] { choose_files(false); });
  open->setShortcut(QKeySequence::Open);
  file->addAction(tr("Open &Measured Trace…"), this, [this] { choose_files(true); });
  save_simulation_ =
      file->addAction(tr("&Save Simulation…"), this, [this] { save_simulation_dialog(); });
  save_simulation_->setEnabled(false);
  save_sweep_ = file->addAction(tr("Save S&weep…"), this, [this] { save_sweep_dialog(); });
  save_sweep_->setEnabled(false);
  export_action_ = file->addAction(tr("&Export Plan…"), this, [this] { export_plan_dialog(); });
  export_action_->setShortcut(QKeySequence(Qt::CTRL | Qt::Key_E));
  export_action_->setEnabled(false);
  file->addSeparator();
  QAction* quit = file->addAction(tr("&Quit"), this, &QWidget::close);
  quit->setShortcut(QKeySequence::Quit);

  QMenu* run = menuBar()->addMenu(tr("&Run"));
  QAction* simulate_action =
      run->addAction(tr("&Simulate…"), this, [this] { run_simulate_dialog(); });
  simulate_action->setShortcut(QKeySequence(Qt::CTRL | Qt::Key_R));
  QAction* sweep_action = run->addAction(tr("S&weep…"), this, [this] { run_sweep_dialog(); });
  sweep_action->setShortcut(QKeySequence(Qt::CTRL | Qt::SHIFT | Qt::Key_R));
  run->addAction(tr("&Cancel"), jobs_, &JobRunner::cancel);

  QMenu* view = menuBar()->addMenu(tr("&View"));
  view->addAction(tr("&Fit Timeline"), timeline_->timeline(), &TimelineWidget::fit);
  view->addAction(tr("&Unfold All Nodes"), this,
                  [this] { timeline_->timeline()->set_all_collapsed(false); });
  view->addAction(tr("F&old All Nodes"), this,
                  [this] { timeline_->timeline()->set_all_collapsed(true); });
  view->addSeparator();
  for (auto [name, v] : {std::pair{"&Timeline", View::kTimeline},
                         {"&Sweep", View::kSweep},
                         {"&Memory", View::kMemory},
                         {"To&pology", View::kTopology},
                         {"&Distribution", View::kDistribution}}) {
    view->addAction(tr(name), this, [this, v = v] { show_view(v); });
  }
}

void MainWindow::choose_files(bool as_measured) {
  const QStringList paths = QFileDialog::getOpenFileNames(
      this, as_measured ? tr("Open measured trace") : tr("Open"), QString(), tr(kFileFilter));
  if (!paths.isEmpty()) open_files(paths, as_measured);
}

void MainWindow::open_files(const QStringList& paths, bool as_measured) {
  for (const QString& p : paths) load_later(p, as_measured, false);
}

void MainWindow::load_later(const QString& path, bool as_measured, bool quiet) {
  // Filled by the worker, applied on the UI thread once it is done.
  auto target = std::make_shared<LoadedFile>();
  const std::string file = path.toStdString();
  enqueue({tr("Opening %1").arg(path),
           [target, file](const ProgressFn& progress) { *target = load_file(file, progress); },
           [this, target, as_measured, quiet] { apply(std::move(*target), as_measured, quiet); },
           /*plan_job=*/quiet});
}

void MainWindow::enqueue(PendingJob job) {
  pending_.append(std::move(job));
  start_next_job();
}

void MainWindow::start_next_job() {
  if (jobs_->busy() || pending_.isEmpty()) return;
  PendingJob next = pending_.takeFirst();
  jobs_->start(next.label, std::move(next.work), std::move(next.done));
  running_plan_job_ = next.plan_job;
}

void MainWindow::simulate(const ScenarioArgs& args, sim::Fidelity fidelity) {
  auto out = std::make_shared<SimulationOutput>();
  auto scenario = std::make_shared<Scenario>();
  enqueue({tr("Simulating %1 · %2 · %3").arg(qstr(args.model), qstr(args.plan), qstr(args.cluster)),
           [out, scenario, args, fidelity](const ProgressFn& progress) {
             *scenario = load_scenario(args);
             *out = run_simulation(*scenario, fidelity, progress);
           },
           [this, out, scenario] {
             simulation_ = out;
             set_export_scenario(scenario);
             save_simulation_->setEnabled(true);
             show_result(out->result, tr("the simulation"));
             set_trace(out->trace, false);
             show_view(View::kTimeline);
             setWindowTitle(tr("Strata — simulation"));
           },
           false});
}

void MainWindow::sweep(const SweepRequest& request) {
  auto out = std::make_shared<SweepOutput>();
  enqueue({tr("Sweeping %1 on %2").arg(qstr(request.model), qstr(request.cluster)),
           [out, request](const ProgressFn& progress) { *out = run_sweep(request, progress); },
           [this, out] {
             sweep_output_ = out;
             save_sweep_->setEnabled(true);
             LoadedFile file;
             file.kind = FileKind::kSweep;
             file.path = out->sweep.file;
             file.sweep = out->sweep;
             apply(std::move(file), false);
           },
           false});
}

void MainWindow::run_sweep_dialog() {
  SweepDialog dialog(this);
  if (dialog.exec() == QDialog::Accepted) sweep(dialog.request());
}

QString MainWindow::save_sweep_to(const QString& dir) {
  if (!sweep_output_) return tr("nothing swept yet");
  try {
    save_sweep(*sweep_output_, dir.toStdString());
    statusBar()->showMessage(tr("Wrote %1/sweep.csv and %1/sweep.json").arg(dir), 5000);
    return {};
  } catch (const std::exception& e) {
    return qstr(e.what());
  }
}

void MainWindow::save_sweep_dialog() {
  const QString dir = QFileDialog::getExistingDirectory(this, tr("Save sweep.csv and sweep.json in"));
  if (dir.isEmpty()) return;
  const QString error = save_sweep_to(dir);
  if (!error.isEmpty()) show_error(error);
}

void MainWindow::run_simulate_dialog() {
  SimulateDialog dialog(this);
  if (dialog.exec() == QDialog::Accepted) simulate(dialog.scenario_args(), dialog.fidelity());
}

QString MainWindow::save_simulation_to(const QString& dir) {
  if (!simulation_) return tr("nothing simulated yet");
  try {
    save_simulation(*simulation_, dir.toStdString());
    statusBar()->showMessage(tr("Wrote %1/result.json and %1/trace.json").arg(dir), 5000);
    return {};
  } catch (const std::exception& e) {
    return qstr(e.what());
  }
}

void MainWindow::save_simulation_dialog() {
  const QString dir =
      QFileDialog::getExistingDirectory(this, tr("Save result.json and trace.json in"));
  if (dir.isEmpty()) return;
  const QString error = save_simulation_to(dir);
  if (!error.isEmpty()) show_error(error);
}

void MainWindow::set_export_scenario(std::shared_ptr<const Scenario> scenario,
                                     const QString& why_not) {
  export_scenario_ = std::move(scenario);
  export_unavailable_ = export_scenario_ ? QString() : why_not;
  export_action_->setEnabled(export_scenario_ != nullptr);
  export_action_->setToolTip(export_unavailable_);
}

void MainWindow::export_plan_to(const QString& dir) {
  if (!export_scenario_) {
    show_error(export_unavailable_.isEmpty() ? tr("No plan to export: simulate one (Run ▸ "
                                                  "Simulate…), pick a sweep row or open a result.json")
                                             : export_unavailable_);
    return;
  }
  auto scenario = export_scenario_;
  auto out = std::make_shared<ExportedPlan>();
  const std::string target = dir.toStdString();
  enqueue({tr("Exporting the plan to %1").arg(dir),
           [scenario, out, target](const ProgressFn& progress) {
             *out = gui::export_plan_to(*scenario, target, progress);
           },
           [this, out] {
             last_export_ = *out;
             QString text = tr("Wrote %1 to %2").arg(qstr(fmt::format("{}", fmt::join(out->files, ", "))),
                                                    qstr(out->dir));
             statusBar()->showMessage(text, 10000);
           },
           false});
}

void MainWindow::export_plan_dialog() {
  const QString dir = QFileDialog::getExistingDirectory(
      this, tr("Export the plan (strata-run.json, launch scripts, …) into"));
  if (!dir.isEmpty()) export_plan_to(dir);
}

void MainWindow::on_job_finished(bool ok, bool cancelled, const QString& error) {
  progress_->setVisible(false);
  cancel_->setVisible(false);
  if (cancelled) {
    statusBar()->showMessage(tr("Cancelled: %1").arg(jobs_->label()), 5000);
  } else if (!ok) {
    show_error(error);
  } else {
    statusBar()->showMessage(tr("Done: %1").arg(jobs_->label()), 5000);
  }
  running_plan_job_ = false;
  start_next_job();
}

QString MainWindow::open_file_now(const QString& path, bool as_measured) {
  try {
    apply(load_file(path.toStdString()), as_measured);
    return {};
  } catch (const InputError& e) {
    return qstr(e.what());
  } catch (const std::exception& e) {
    return tr("internal error: %1").arg(qstr(e.what()));
  }
}

void MainWindow::show_error(const QString& text) {
  last_error_ = text;
  if (error_box_ == nullptr) {
    error_box_ = new QMessageBox(QMessageBox::Warning, tr("Cannot open file"), QString(),
                                 QMessageBox::Ok, this);
    error_box_->setWindowModality(Qt::WindowModal);
  }
  error_box_->setText(text);
  error_box_->open();
}

void MainWindow::apply(LoadedFile file, bool as_measured, bool quiet) {
  const QString source = qstr(file.path);
  switch (file.kind) {
    case FileKind::kTrace: {
      const bool measured = as_measured || file.trace->kind == "measured";
      set_trace(file.trace, measured);
      if (quiet) return;
      if (!measured) {
        set_export_scenario(nullptr, tr("%1 alone does not name the cluster and profile: open the "
                                        "result.json written beside it to export its plan")
                                         .arg(source));
      }
      // A measured trace joins the predicted one: the predicted headline stays.
      if (!measured || !predicted_) set_headline(qstr(trace_label(*file.trace)));
      step_headline_ = step_headline_ || !measured;
      update_title(0, source);
      show_view(View::kTimeline);
      break;
    }
    case FileKind::kResult:
      try {
        set_export_scenario(std::make_shared<const Scenario>(scenario_from_result(*file.result)));
      } catch (const InputError& e) {
        set_export_scenario(nullptr, qstr(e.what()));
      }
      show_result(*file.result, source);
      step_headline_ = true;
      update_title(0, source);
      if (file.trace) set_trace(file.trace, false);
      show_view(file.trace                  ? View::kTimeline
                : file.result->distribution ? View::kDistribution
                                            : View::kMemory);
      break;
    case FileKind::kMemory:
      memory_->set_memory(
          file.memory->memory,
          tr("Memory per GPU · %1").arg(qstr(describe_inputs(file.memory->inputs))));
      update_title(2, source);
      show_view(View::kMemory);
      break;
    case FileKind::kSweep:
      sweep_data_ = std::make_shared<const SweepData>(std::move(*file.sweep));
      selected_sweep_row_ = -1;
      sweep_->set_sweep(sweep_data_);
      set_export_scenario(nullptr, tr("pick a plan in the sweep table to export it"));
      if (!step_headline_) {
        set_headline(tr("sweep of %1 plans · %2").arg(sweep_data_->rows.size()).arg(source));
      }
      update_title(1, source);
      show_view(View::kSweep);
      break;
  }
}

void MainWindow::update_title(int role, const QString& source) {
  shown_files_[role] = QFileInfo(source).fileName();
  QStringList names;
  for (const auto& [r, name] : shown_files_) names << name;
  setWindowTitle(tr("Strata — %1").arg(names.join(QStringLiteral(" + "))));
}

void MainWindow::show_result(const ResultData& r, const QString& source) {
  set_headline(result_headline(r, false), result_headline(r, true));
  const QString what = qstr(describe_inputs(r.inputs));
  if (r.memory) {
    memory_->set_memory(*r.memory, tr("Memory per GPU · %1").arg(what));
  } else {
    memory_->set_memory(std::nullopt, QString(), tr("%1 has no memory breakdown").arg(source));
  }
  topology_->set_links(r.links, what, tr("%1 has no link_utilization").arg(source));
  distribution_->set_result(r.distribution, r.what_if, tr("Step time · %1").arg(what));
}

void MainWindow::set_trace(std::shared_ptr<const TraceModel> trace, bool measured) {
  (measured ? measured_ : predicted_) = std::move(trace);
  refresh_timeline();
}

void MainWindow::refresh_timeline(const QString& message) {
  std::vector<std::shared_ptr<const TraceModel>> traces;
  if (predicted_) traces.push_back(predicted_);
  if (measured_) traces.push_back(measured_);
  timeline_->timeline()->set_traces(std::move(traces), message);
}

void MainWindow::select_sweep_plan(int row_index) {
  if (!sweep_data_ || row_index < 0 || row_index >= static_cast<int>(sweep_data_->rows.size())) {
    return;
  }
  selected_sweep_row_ = row_index;
  const SweepData& sweep = *sweep_data_;
  const SweepRow& row = sweep.rows[row_index];
  // The plan as the sweep table and the why lines name it ("tp2 cp2 pp8 dp32 vpp2 …").
  QString plan_text;
  try {
    plan_text = qstr(sim::plan_label(read_plan_spec(row.plan, sweep.file)));
  } catch (const InputError&) {
    plan_text = qstr(row.plan.dump());  // not a plan the reader takes: as written
  }
  const QString title =
      tr("Memory per GPU · plan %1 of the sweep · %2").arg(row_index + 1).arg(plan_text);
  if (row.result) {
    show_result(*row.result, qstr(sweep.file));
  }
  if (row.result && row.result->memory) {
    memory_->set_memory(*row.result->memory, title);
  } else {
    try {
      memory_->set_memory(memory_for_sweep_plan(sweep, row), title);
    } catch (const InputError& e) {
      memory_->set_memory(std::nullopt, QString(), qstr(e.what()));
    }
  }
  measured_.reset();
  predicted_.reset();
  // A newer selection supersedes the simulation of an older one.
  pending_.erase(std::remove_if(pending_.begin(), pending_.end(),
                                [](const PendingJob& j) { return j.plan_job; }),
                 pending_.end());
  if (running_plan_job_) jobs_->cancel();
  // Checked here, on the UI thread, so a sweep that cannot be simulated (a
  // sweep.csv without its sweep.json) says so in the timeline, not in a box per click.
  std::shared_ptr<const Scenario> scenario;
  try {
    scenario = std::make_shared<const Scenario>(scenario_for_sweep_plan(sweep, row));
    set_export_scenario(scenario);
  } catch (const InputError& e) {
    set_export_scenario(nullptr, qstr(e.what()));
    if (row.trace_file.empty()) {
      refresh_timeline(tr("No trace for this plan (%1):\n%2").arg(plan_text, qstr(e.what())));
      return;
    }
  }
  if (!row.trace_file.empty()) {
    refresh_timeline(tr("Loading the plan's trace…"));
    load_later(qstr(row.trace_file), false, true);
    return;
  }
  refresh_timeline(tr("Simulating this plan (%1)…").arg(plan_text));
  auto out = std::make_shared<SimulationOutput>();
  auto sweep_ptr = sweep_data_;
  // The sweep's own fidelity for this plan, else every rank.
  const int fidelity_col = sweep.column("fidelity");
  const sim::Fidelity fidelity = fidelity_col >= 0 && row.cells[fidelity_col] == "folded"
                                     ? sim::Fidelity::kFolded
                                     : sim::Fidelity::kFull;
  enqueue({tr("Simulating plan %1 of the sweep").arg(row_index + 1),
           [out, scenario, fidelity](const ProgressFn& progress) {
             *out = run_simulation(*scenario, fidelity, progress);
           },
           [this, out, sweep_ptr, row_index] {
             if (sweep_ptr != sweep_data_ || row_index != selected_sweep_row_) return;
             simulation_ = out;
             save_simulation_->setEnabled(true);
             if (!sweep_ptr->rows[row_index].result) {
               set_headline(result_headline(out->result, false), result_headline(out->result, true));
             }
             topology_->set_links(out->result.links, qstr(describe_inputs(out->result.inputs)));
             set_trace(out->trace, false);
           },
           true});
}

void MainWindow::set_headline(const QString& plain, const QString& rich) {
  headline_plain_ = plain;
  headline_->setTextFormat(rich.isEmpty() ? Qt::PlainText : Qt::RichText);
  headline_->setText(rich.isEmpty() ? plain : rich);
}

bool MainWindow::show_longest_wait(const QString& category_name) {
  trace::Category category;
  if (!trace::parse_category(category_name.toStdString(), &category)) return false;
  TimelineWidget* timeline = timeline_->timeline();
  const auto& traces = timeline->traces();
  std::optional<SpanRef> longest;
  if (!traces.empty()) longest = longest_span(*traces.front(), trace::kExposedLaneName, category);
  if (!longest) {
    statusBar()->showMessage(
        traces.empty() ? tr("No trace to show: open the trace.json written beside the result.json")
                       : tr("The trace has no exposed %1 interval on its exposed lanes").arg(category_name),
        8000);
    return false;
  }
  show_view(View::kTimeline);
  return timeline->reveal(0, longest->lane, longest->span);
}

QString MainWindow::headline_text() const { return headline_plain_; }

void MainWindow::show_view(View view) { tabs_->setCurrentIndex(static_cast<int>(view)); }

}  // namespace strata::gui
