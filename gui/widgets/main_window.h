// The strata-gui window: a headline bar (step time, MFU, bubble, exposed
// communication), four tabs (Timeline, Sweep, Memory, Topology), and the status
// bar's progress and cancel for background work. Files open on a worker thread;
// a file that cannot be read gives a message box naming the file, the JSON path
// and what is allowed, and changes nothing else.
#pragma once

#include <QMainWindow>
#include <QStringList>
#include <memory>
#include <optional>

#include "gui/model/file_loader.h"
#include "gui/model/result_data.h"
#include "gui/model/sweep_data.h"
#include "gui/model/trace_model.h"

class QLabel;
class QMessageBox;
class QProgressBar;
class QPushButton;
class QTabWidget;

namespace strata::gui {

class JobRunner;
class MemoryWidget;
class SweepView;
class TimelinePanel;
class TopologyView;

enum class View { kTimeline, kSweep, kMemory, kTopology };
// "timeline", "sweep", "memory", "topology"; false for other names.
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

  void show_view(View view);
  // Shows plan sweep_row of the loaded sweep: its memory, headline and timeline.
  void select_sweep_plan(int sweep_row);

  TimelinePanel* timeline_panel() const { return timeline_; }
  SweepView* sweep_view() const { return sweep_; }
  MemoryWidget* memory_widget() const { return memory_; }
  TopologyView* topology_view() const { return topology_; }
  JobRunner* jobs() const { return jobs_; }
  QString headline_text() const;
  // The text of the last error shown ("" if none) and its message box, if open.
  QString last_error() const { return last_error_; }
  QMessageBox* error_box() const { return error_box_; }
  int selected_sweep_row() const { return selected_sweep_row_; }

 private:
  void build_menus();
  void start_next_load();
  // Shows a loaded file. quiet: a sweep plan's own trace, which neither changes
  // the tab nor the headline.
  void apply(LoadedFile file, bool as_measured, bool quiet = false);
  void show_error(const QString& text);
  void show_result(const ResultData& result, const QString& source);
  void set_trace(std::shared_ptr<const TraceModel> trace, bool measured);
  void refresh_timeline(const QString& message = QString());
  void on_job_finished(bool ok, bool cancelled, const QString& error);
  void choose_files(bool as_measured);

  TimelinePanel* timeline_;
  SweepView* sweep_;
  MemoryWidget* memory_;
  TopologyView* topology_;
  QTabWidget* tabs_;
  QLabel* headline_;
  QProgressBar* progress_;
  QPushButton* cancel_;
  JobRunner* jobs_;
  QMessageBox* error_box_ = nullptr;

  struct Pending {
    QString path;
    bool as_measured = false;
    bool quiet = false;
  };
  QList<Pending> pending_;

  std::shared_ptr<const TraceModel> predicted_, measured_;
  std::shared_ptr<const SweepData> sweep_data_;
  int selected_sweep_row_ = -1;
  QString last_error_;
};

}  // namespace strata::gui
