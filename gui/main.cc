// strata-gui: look at plans — timelines, the sweep table, memory per stage and
// link utilization on the cluster graph.
//
//   strata-gui [FILE...]                       opens the window
//   strata-gui --screenshot OUT.png [--view timeline|sweep|memory|topology|distribution]
//              [--select-plan N] [--show-wait KIND] [--range-ms START END]
//              [--select-range-ms START END] [--show-flows] FILE...
//                                              renders one view offscreen to a PNG
// Exit codes as for strata: 0 success, 2 bad input, 1 internal failure.
#include <CLI/CLI.hpp>
#include <QApplication>
#include <QBuffer>
#include <QPixmap>
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "core/atomic_file.h"
#include "core/error.h"
#include "core/log.h"
#include "gui/widgets/job_runner.h"
#include "gui/widgets/main_window.h"
#include "gui/widgets/sweep_view.h"
#include "gui/widgets/timeline_panel.h"
#include "gui/widgets/timeline_widget.h"

namespace {

struct Args {
  std::vector<std::string> files;
  std::vector<std::string> measured;
  std::string screenshot;
  std::string view;
  int width = 1400;
  int height = 900;
  int select_plan = 0;
  std::string show_wait;
  std::vector<double> range_ms;
  std::vector<double> select_range_ms;
  bool show_flows = false;
};

// Renders the chosen view of the loaded files to a PNG, written atomically.
int screenshot(strata::gui::MainWindow& window, const Args& args) {
  for (const std::string& f : args.files) {
    const QString error = window.open_file_now(QString::fromStdString(f));
    if (!error.isEmpty()) {
      std::fprintf(stderr, "error: %s\n", error.toStdString().c_str());
      return strata::kExitBadInput;
    }
  }
  for (const std::string& f : args.measured) {
    const QString error = window.open_file_now(QString::fromStdString(f), true);
    if (!error.isEmpty()) {
      std::fprintf(stderr, "error: %s\n", error.toStdString().c_str());
      return strata::kExitBadInput;
    }
  }
  if (args.select_plan > 0) {
    const int rows = window.sweep_view()->view_rows();
    if (args.select_plan > rows) {
      if (rows == 0) {
        std::fprintf(stderr, "error: --select-plan %d: no sweep is open (give a sweep.json or sweep.csv)\n",
                     args.select_plan);
      } else {
        std::fprintf(stderr, "error: --select-plan %d: the sweep lists %d plans (1 to %d)\n", args.select_plan,
                     rows, rows);
      }
      return strata::kExitBadInput;
    }
    window.sweep_view()->select_view_row(args.select_plan - 1);
    // A plan's trace, if the sweep wrote one, loads in the background.
    window.jobs()->wait_idle(600000);
  }
  if (!args.view.empty()) {
    strata::gui::View view;
    strata::gui::parse_view(args.view, &view);
    window.show_view(view);
  }
  window.resize(args.width, args.height);
  window.show();
  QApplication::processEvents();
  // After the window has its size, so the zoom fits the lanes' width.
  if (!args.show_wait.empty() && !window.show_longest_wait(QString::fromStdString(args.show_wait))) {
    std::fprintf(stderr, "error: --show-wait %s: the trace has no %s interval on its exposed lanes\n",
                 args.show_wait.c_str(), args.show_wait.c_str());
    return strata::kExitBadInput;
  }
  strata::gui::TimelinePanel* panel = window.timeline_panel();
  if (args.range_ms.size() == 2) {
    if (!(args.range_ms[1] > args.range_ms[0])) {
      std::fprintf(stderr, "error: --range-ms %g %g: the end must come after the start\n", args.range_ms[0],
                   args.range_ms[1]);
      return strata::kExitBadInput;
    }
    panel->timeline()->set_view(args.range_ms[0] * 1e6, args.range_ms[1] * 1e6);
  }
  if (args.select_range_ms.size() == 2) {
    panel->timeline()->set_range(std::pair{static_cast<strata::TimeNs>(std::llround(args.select_range_ms[0] * 1e6)),
                                           static_cast<strata::TimeNs>(std::llround(args.select_range_ms[1] * 1e6))});
  }
  if (args.show_flows) panel->set_show_all_flows(true);
  QApplication::processEvents();
  const QPixmap pixmap = window.grab();
  QByteArray png;
  QBuffer buffer(&png);
  buffer.open(QIODevice::WriteOnly);
  if (!pixmap.save(&buffer, "PNG")) {
    std::fprintf(stderr, "internal error: could not encode the screenshot as PNG\n");
    return strata::kExitInternal;
  }
  strata::write_file_atomic(args.screenshot, std::string(png.constData(), png.size()));
  return strata::kExitOk;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App cli{"strata-gui: timelines, the sweep table, memory and topology views"};
  Args args;
  cli.add_option("files", args.files,
                 "result.json, trace.json, sweep.csv or sweep.json, memory.json to open");
  cli.add_option("--measured", args.measured,
                 "a measured trace (strata run) to show under "
                 "the predicted one");
  cli.add_option("--screenshot", args.screenshot,
                 "render a view offscreen to this PNG file and exit");
  cli.add_option("--view", args.view, "the view to show")
      ->check(CLI::IsMember({"timeline", "sweep", "memory", "topology", "distribution"}));
  cli.add_option("--width", args.width, "screenshot width in pixels")->check(CLI::Range(400, 8000));
  cli.add_option("--height", args.height, "screenshot height in pixels")
      ->check(CLI::Range(300, 8000));
  cli.add_option("--select-plan", args.select_plan,
                 "select this row (1 = first, as sorted) of an opened sweep")
      ->check(CLI::PositiveNumber);
  cli.add_option("--show-wait", args.show_wait,
                 "follow the headline's link: select and zoom to the longest exposed interval of this kind")
      ->check(CLI::IsMember({"tp", "cp", "ep", "pp", "dp", "zero", "copy", "host", "bubble", "wait"}));
  cli.add_option("--range-ms", args.range_ms, "show this time range of the timeline: START END in ms")
      ->expected(2);
  cli.add_option("--select-range-ms", args.select_range_ms,
                 "select this time range (START END in ms): the details show its summary")
      ->expected(2);
  cli.add_flag("--show-flows", args.show_flows, "draw every pipeline transfer as an arrow (the Flows box)");
  cli.set_version_flag("--version", "strata-gui 0.1.0");
  try {
    cli.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const int code = cli.exit(e);
    return code == 0 ? 0 : strata::kExitBadInput;
  }
  strata::init_logging(0);

  // Screenshots need no display: Qt's offscreen platform renders into memory.
  if (!args.screenshot.empty()) qputenv("QT_QPA_PLATFORM", "offscreen");
  QApplication app(argc, argv);
  QApplication::setApplicationName("strata-gui");
  try {
    strata::gui::MainWindow window;
    if (!args.screenshot.empty()) return screenshot(window, args);
    QStringList files;
    for (const std::string& f : args.files) files << QString::fromStdString(f);
    window.open_files(files);
    QStringList measured;
    for (const std::string& f : args.measured) measured << QString::fromStdString(f);
    window.open_files(measured, true);
    window.show();
    return QApplication::exec();
  } catch (const strata::InputError& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return strata::kExitBadInput;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "internal error: %s\n", e.what());
    return strata::kExitInternal;
  }
}
