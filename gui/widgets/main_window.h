// The strata-gui window: a headline bar (step time, MFU, bubble, exposed
// communication), four tabs (Timeline, Sweep, Memory, Topology), and the status
// bar's progress and cancel for background work. Files open on a worker thread;
// a file that cannot be read gives a message box naming the file, the JSON path
// and what is allowed, and changes nothing else.
#pragma once

#include <QMainWindow>
#include <QStringList>
#include <map>
#include <memory>
#include <optional>

#include "gui/model/export_plan.h"
#include "gui/model/file_loader.h"
#include "gui/model/result_data.h"
#include "gui/model/run_simulation.h"
#include "gui/model/run_sweep.h"
#include "gui/model/sweep_data.h"
#include "gui/model/trace_model.h"
#include "gui/widgets/job_runner.h"
#include "sim/scenario.h"
#include "sim/workload/workload.h"

class QLabel;
class QMessageBox;
class QProgressBar;
class QPushButton;
class QTabWidget;

namespace strata::gui {

class DistributionView;
class MemoryWidget;
class SweepView;
class TimelinePanel;
class TopologyView;

enum class View { kTimeline, kSweep, kMemory, kTopology, kDistribution };
// "timeline", "sweep", "memory", "topology", "distribution"; false for other names.
bool parse_view(const std::string& name, View* out);

class MainWindow : public QMainWindow {
  Q_OBJECT

 public:
  explicit MainWindow(QWidget* parent = nullptr);
  ~MainWindow() override;

  // Opens files one after another in the background. A trace goes to the
  // measured slot when its otherData.strata.kind is "measured" or as_measured is
  // set, else to the predicted slot.
  void open_files(const QStringList& paths, bool as_measured = false);
  // Reads a file on the calling thread and shows it; returns the error text
  // ("" on success) without a message box (for --screenshot).
  QString open_file_now(const QString& path, bool as_measured = false);

  // Simulates one step in the background (as `strata simulate`) and shows it.
  void simulate(const ScenarioArgs& args, sim::Fidelity fidelity);
  // Sweeps in the background (as `strata sweep`) and shows the table.
  void sweep(const SweepRequest& request);
  // Writes the last sweep's sweep.csv and sweep.json into dir; the error text or "".
  QString save_sweep_to(const QString& dir);
  const std::shared_ptr<const SweepOutput>& last_sweep() const { return sweep_output_; }
  // Writes the last simulation's result.json and trace.json into dir; returns
  // the error text ("" on success).
  QString save_simulation_to(const QString& dir);
  const std::shared_ptr<const SimulationOutput>& last_simulation() const { return simulation_; }

  // The plan on screen, as File ▸ Export Plan… exports it: the last Run ▸
  // Simulate, the selected sweep row, or an opened result.json. Null when none
  // (export_unavailable() says why).
  const std::shared_ptr<const Scenario>& export_scenario() const { return export_scenario_; }
  QString export_unavailable() const { return export_unavailable_; }
  // Exports the plan on screen into dir in the background, as `strata export`
  // does (gui/model/export_plan.h); an error goes to the message box.
  void export_plan_to(const QString& dir);
  const std::optional<ExportedPlan>& last_export() const { return last_export_; }

  void show_view(View view);
  // Shows plan sweep_row of the loaded sweep: its memory and headline at once;
  // its timeline from the trace the sweep wrote, else by simulating the plan in
  // the background (a newer selection cancels it).
  void select_sweep_plan(int sweep_row);

  TimelinePanel* timeline_panel() const { return timeline_; }
  SweepView* sweep_view() const { return sweep_; }
  MemoryWidget* memory_widget() const { return memory_; }
  TopologyView* topology_view() const { return topology_; }
  DistributionView* distribution_view() const { return distribution_; }
  JobRunner* jobs() const { return jobs_; }
  // The headline's words, plain (the label shows them with links).
  QString headline_text() const;
  // The headline's bubble and exposed-communication links: selects and zooms to
  // the longest interval of that category ("tp", "bubble", ...) on the predicted
  // trace's exposed lanes. False (with a status-bar message) when there is none.
  bool show_longest_wait(const QString& category);
  // The text of the last error shown ("" if none) and its message box, if open.
  QString last_error() const { return last_error_; }
  QMessageBox* error_box() const { return error_box_; }
  int selected_sweep_row() const { return selected_sweep_row_; }

 private:
  struct PendingJob {
    QString label;
    JobRunner::Work work;
    JobRunner::Done done;
    bool plan_job = false;  // simulates a sweep plan: superseded by the next selection
  };

  void build_menus();
  void enqueue(PendingJob job);
  void start_next_job();
  void load_later(const QString& path, bool as_measured, bool quiet);
  void run_simulate_dialog();
  void run_sweep_dialog();
  void save_sweep_dialog();
  void save_simulation_dialog();
  // Shows a loaded file. quiet: a sweep plan's own trace, which neither changes
  // the tab nor the headline.
  void apply(LoadedFile file, bool as_measured, bool quiet = false);
  void show_error(const QString& text);
  // The headline as plain words and, when given, as rich text with links.
  void set_headline(const QString& plain, const QString& rich = {});
  void show_result(const ResultData& result, const QString& source);
  void set_trace(std::shared_ptr<const TraceModel> trace, bool measured);
  void refresh_timeline(const QString& message = QString());
  void on_job_finished(bool ok, bool cancelled, const QString& error);
  void choose_files(bool as_measured);
  void export_plan_dialog();
  void set_export_scenario(std::shared_ptr<const Scenario> scenario, const QString& why_not = {});

  TimelinePanel* timeline_;
  SweepView* sweep_;
  MemoryWidget* memory_;
  TopologyView* topology_;
  DistributionView* distribution_;
  QTabWidget* tabs_;
  QLabel* headline_;
  QString headline_plain_;
  QProgressBar* progress_;
  QPushButton* cancel_;
  JobRunner* jobs_;
  QMessageBox* error_box_ = nullptr;

  // The headline shows a step (a result or a predicted trace): a sweep opened beside
  // it keeps that headline (its own count is under its table).
  bool step_headline_ = false;
  // The files the window shows, by role (0: the step, 1: the sweep, 2: memory): the title.
  std::map<int, QString> shown_files_;
  void update_title(int role, const QString& source);

  QList<PendingJob> pending_;
  bool running_plan_job_ = false;
  QAction* save_simulation_ = nullptr;
  std::shared_ptr<const SimulationOutput> simulation_;
  QAction* export_action_ = nullptr;
  QAction* save_sweep_ = nullptr;
  std::shared_ptr<const SweepOutput> sweep_output_;
  std::shared_ptr<const Scenario> export_scenario_;
  QString export_unavailable_;
  std::optional<ExportedPlan> last_export_;

  std::shared_ptr<const TraceModel> predicted_, measured_;
  std::shared_ptr<const SweepData> sweep_data_;
  int selected_sweep_row_ = -1;
  QString last_error_;
};

}  // namespace strata::gui
