// The window as a whole: files load (in the background), bad files give a
// message box naming the file and JSON path and change nothing, selecting a
// sweep row loads that plan, jobs cancel; and `strata-gui --screenshot`.
#include "gui/widgets/main_window.h"

#include <QDir>
#include <QFile>
#include <QFileInfo>
#include <QGraphicsLineItem>
#include <QGraphicsScene>
#include <QCheckBox>
#include <QImage>
#include <QLabel>
#include <QMessageBox>
#include <QProcess>
#include <QSignalSpy>
#include <QTabWidget>
#include <QTemporaryDir>
#include <QTest>
#include <thread>

#include "core/error.h"
#include "gui/widgets/job_runner.h"
#include "gui/widgets/memory_widget.h"
#include "gui/widgets/pareto_plot.h"
#include "gui/widgets/sweep_view.h"
#include "gui/widgets/timeline_panel.h"
#include "gui/widgets/timeline_widget.h"
#include "gui/widgets/topology_view.h"
#include "gui/model/range_stats.h"
#include "gui_test_support.h"

namespace strata::gui {
namespace {

QString data(const char* name) { return QString::fromStdString(testing::data_file(name)); }

std::string read_text(const QString& path) {
  QFile f(path);
  if (!f.open(QIODevice::ReadOnly)) return {};
  return f.readAll().toStdString();
}

int current_tab(const MainWindow& w) { return w.findChild<QTabWidget*>()->currentIndex(); }

void open_and_wait(MainWindow& w, const QString& path, bool measured = false) {
  w.open_files({path}, measured);
  QVERIFY(w.jobs()->wait_idle(30000));
}

// Run ▸ Simulate on shipped inputs, waiting for the job.
void simulate_and_wait(MainWindow& w, const char* model, const char* plan, const char* cluster, sim::Fidelity f) {
  ScenarioArgs args;
  args.model = model;
  args.plan = plan;
  args.cluster = cluster;
  w.simulate(args, f);
  QVERIFY(w.jobs()->wait_idle(60000));
}

}  // namespace

class MainWindowTest : public QObject {
  Q_OBJECT

 private slots:
  void opens_traces_predicted_then_measured() {
    MainWindow w;
    open_and_wait(w, data("trace_small.json"));
    TimelineWidget* t = w.timeline_panel()->timeline();
    QCOMPARE(t->traces().size(), std::size_t{1});
    QVERIFY(w.headline_text().startsWith("predicted · tiny"));
    QCOMPARE(current_tab(w), static_cast<int>(View::kTimeline));
    open_and_wait(w, data("trace_measured.json"));
    QCOMPARE(t->traces().size(), std::size_t{2});
    QCOMPARE(t->traces()[1]->kind, std::string("measured"));
    QVERIFY(w.last_error().isEmpty());
  }

  void opens_a_result_with_its_trace() {
    MainWindow w;
    open_and_wait(w, data("run/result.json"));
    QVERIFY2(w.headline_text().contains("MFU 41.0%"), qPrintable(w.headline_text()));
    QVERIFY(w.headline_text().contains("bubble 25.0% (analytic 33.3%)"));
    // Short figures (the fixture: 301,176 tokens/s; exposed pp 20 us, dp 100 us).
    QVERIFY2(w.headline_text().contains("301K tokens/s"), qPrintable(w.headline_text()));
    QVERIFY(w.headline_text().contains("exposed TP 0, PP 20 µs, DP 100 µs, ZeRO 0"));
    QCOMPARE(w.memory_widget()->memory()->stages.size(), std::size_t{2});
    QCOMPARE(w.topology_view()->item_count(), 4);  // leaf0, spine0, two node boxes
    // Every link a line at least 2 screen pixels wide whatever the zoom (a cosmetic
    // pen), with its tooltip.
    int lines = 0;
    for (QGraphicsItem* item : w.topology_view()->scene()->items()) {
      auto* line = qgraphicsitem_cast<QGraphicsLineItem*>(item);
      if (line == nullptr) continue;
      ++lines;
      QVERIFY(line->pen().isCosmetic());
      QVERIFY(line->pen().widthF() >= 2.0);
      QVERIFY(!line->toolTip().isEmpty());
    }
    QVERIFY(lines > 0);
    QCOMPARE(w.timeline_panel()->timeline()->traces().size(), std::size_t{1});
    w.topology_view()->show_node(1);
    QCOMPARE(w.topology_view()->item_count(), 5);
  }

  void bad_files_give_a_message_and_change_nothing_data() {
    QTest::addColumn<QString>("file");
    QTest::addColumn<QStringList>("says");
    QTest::newRow("category") << "bad_category.json"
                              << QStringList{"bad_category.json", "$.traceEvents[5].cat", "gemmm",
                                             "allowed"};
    QTest::newRow("malformed") << "bad_malformed.json"
                               << QStringList{"bad_malformed.json:2:", "malformed JSON"};
    QTest::newRow("schema") << "bad_schema.json" << QStringList{"$.schema", "strata-result/1"};
    QTest::newRow("csv") << "bad_sweep.csv" << QStringList{"bad_sweep.csv:3", "maybe"};
    QTest::newRow("unknown") << "bad_unknown.json" << QStringList{"expected a Strata file"};
    QTest::newRow("absent") << "does_not_exist.json" << QStringList{"cannot open"};
  }
  void bad_files_give_a_message_and_change_nothing() {
    QFETCH(QString, file);
    QFETCH(QStringList, says);
    MainWindow w;
    open_and_wait(w, data("trace_small.json"));
    const QString headline = w.headline_text();
    open_and_wait(w, data(file.toUtf8().constData()));
    QVERIFY(w.error_box() != nullptr);
    const QString text = w.error_box()->text();
    for (const QString& s : says) QVERIFY2(text.contains(s), qPrintable(text));
    QCOMPARE(w.last_error(), text);
    // The trace loaded before is still shown.
    QCOMPARE(w.timeline_panel()->timeline()->traces().size(), std::size_t{1});
    QCOMPARE(w.headline_text(), headline);
  }

  // A result and a sweep opened together: the headline stays the result's step,
  // the title names both files; in either order.
  void a_sweep_opened_beside_a_result_keeps_its_headline() {
    MainWindow alone;
    open_and_wait(alone, data("run/result.json"));
    const QString step = alone.headline_text();
    QVERIFY(!step.isEmpty());
    for (bool result_first : {true, false}) {
      MainWindow w;
      open_and_wait(w, data(result_first ? "run/result.json" : "sweep.json"));
      open_and_wait(w, data(result_first ? "sweep.json" : "run/result.json"));
      QCOMPARE(w.headline_text(), step);
      QCOMPARE(w.windowTitle(), QString("Strata — result.json + sweep.json"));
    }
    MainWindow sweep_only;
    open_and_wait(sweep_only, data("sweep.json"));
    QVERIFY(sweep_only.headline_text().startsWith("sweep of "));
    QCOMPARE(sweep_only.windowTitle(), QString("Strata — sweep.json"));
  }

  void selecting_a_sweep_row_loads_that_plan() {
    MainWindow w;
    open_and_wait(w, data("sweep.json"));
    QCOMPARE(current_tab(w), static_cast<int>(View::kSweep));
    SweepView* sweep = w.sweep_view();
    // Sorted by rank: the first row is the fastest plan, which stored its result
    // (one stage, 61 GB) and names its trace.
    sweep->select_view_row(0);
    QCOMPARE(w.selected_sweep_row(), 0);
    QCOMPARE(w.memory_widget()->memory()->stages[0].total_bytes, 61e9);
    // The plan named as the sweep names it, not as raw plan JSON.
    QVERIFY2(w.memory_widget()->title().contains("plan 1 of the sweep · tp2 "), qPrintable(w.memory_widget()->title()));
    QVERIFY(!w.memory_widget()->title().contains("{"));
    QVERIFY(w.jobs()->wait_idle(30000));
    QCOMPARE(w.timeline_panel()->timeline()->traces().size(), std::size_t{1});
    QCOMPARE(w.timeline_panel()->timeline()->traces()[0]->num_spans(), std::size_t{12});
    QCOMPARE(current_tab(w), static_cast<int>(View::kSweep));  // the user stays on the table

    // Sorted by peak memory, the first row is the tp 8 plan (row 4): no stored
    // memory, so the memory model computes it; no trace, so the plan is simulated
    // in the background and its trace is that plan's (tp 8, dp 1).
    sweep->proxy()->sort(sweep->table_model()->sweep()->column("peak_bytes"), Qt::AscendingOrder);
    sweep->select_view_row(0);
    QCOMPARE(w.selected_sweep_row(), 4);
    QVERIFY(w.memory_widget()->memory().has_value());
    QVERIFY2(w.memory_widget()->title().contains("plan 5 of the sweep · tp8 "), qPrintable(w.memory_widget()->title()));
    QCOMPARE(w.memory_widget()->memory()->stages.size(), std::size_t{1});
    QVERIFY(w.jobs()->wait_idle(60000));
    QCOMPARE(w.timeline_panel()->timeline()->traces().size(), std::size_t{1});
    const TraceModel& simulated = *w.timeline_panel()->timeline()->traces()[0];
    QCOMPARE(simulated.plan["tp"].get<int>(), 8);
    QCOMPARE(simulated.plan["dp"].get<int>(), 1);
    QCOMPARE(simulated.model_name, std::string("llama3-8b"));
    // The sweep's memory model figure and the simulation's agree (same model).
    QCOMPARE(w.last_simulation()->result.memory->peak_bytes,
             w.memory_widget()->memory()->peak_bytes);
    QCOMPARE(current_tab(w), static_cast<int>(View::kSweep));

    // Picking another row while a plan simulates cancels that simulation.
    sweep->select_view_row(1);  // row 2: tp 2 pp 2 dp 2
    sweep->select_view_row(2);  // row 1: tp 4
    QVERIFY(w.jobs()->wait_idle(60000));
    QCOMPARE(w.selected_sweep_row(), 1);
    QCOMPARE(w.timeline_panel()->timeline()->traces()[0]->plan["tp"].get<int>(), 4);
  }

  // A click on the Pareto plot selects that plan and shows its timeline (the
  // table's selection leaves the user on the table).
  void clicking_the_pareto_plot_opens_the_plans_timeline() {
    MainWindow w;
    w.resize(1400, 820);
    open_and_wait(w, data("sweep.json"));
    w.show();
    QVERIFY(QTest::qWaitForWindowExposed(&w));
    ParetoPlot* plot = w.sweep_view()->pareto_plot();
    // Point 0 is row 0, the fastest plan, whose trace the sweep wrote.
    QCOMPARE(plot->data().points[0].row, 0);
    QTest::mouseClick(plot, Qt::LeftButton, {}, plot->point_position(0).toPoint());
    QVERIFY(w.jobs()->wait_idle(30000));
    QCOMPARE(w.selected_sweep_row(), 0);
    QCOMPARE(current_tab(w), static_cast<int>(View::kTimeline));
    QCOMPARE(w.timeline_panel()->timeline()->traces()[0]->num_spans(), std::size_t{12});
  }

  void a_sweep_csv_alone_cannot_be_simulated() {
    MainWindow w;
    open_and_wait(w, data("sweep.csv"));
    w.sweep_view()->select_view_row(1);
    QVERIFY(w.jobs()->wait_idle(30000));
    QVERIFY(w.last_error().isEmpty());  // no message box per click
    QVERIFY(w.timeline_panel()->timeline()->message().contains("sweep.json"));
    QVERIFY(!w.memory_widget()->memory().has_value());
  }

  void simulates_a_shipped_scenario() {
    MainWindow w;
    simulate_and_wait(w, "tiny", "tiny-2", "dgx-a100-1node", sim::Fidelity::kFull);
    QVERIFY(w.last_error().isEmpty());
    QVERIFY(w.last_simulation() != nullptr);
    // tiny-2 on 8 GPUs: pp 2, dp 4; every rank traced.
    const TraceModel& t = *w.timeline_panel()->timeline()->traces()[0];
    QCOMPARE(t.num_ranks, 8);
    QCOMPARE(t.plan["pp"].get<int>(), 2);
    QVERIFY(w.headline_text().startsWith("step "));
    QCOMPARE(w.memory_widget()->memory()->stages.size(), std::size_t{2});
    QVERIFY(w.topology_view()->item_count() > 0);
    // Saved files are the ones `strata simulate` writes, and read back the same.
    QTemporaryDir dir;
    QCOMPARE(w.save_simulation_to(dir.path()), QString());
    const LoadedFile back = load_file(dir.filePath("result.json").toStdString());
    QCOMPARE(back.result->step_time_s, w.last_simulation()->result.step_time_s);
    QCOMPARE(back.trace->num_spans(), t.num_spans());
  }

  // Issue 20 item 2: the headline's bubble and exposed figures link to the longest
  // interval of their kind on the exposed lanes; following one unfolds its node,
  // selects it and zooms to it.
  void headline_links_to_the_longest_exposed_interval() {
    MainWindow w;
    w.resize(1400, 900);
    simulate_and_wait(w, "tiny", "tiny-2", "dgx-a100-1node", sim::Fidelity::kFull);
    const QString rich = w.findChild<QLabel*>(QStringLiteral("headline"))->text();
    QVERIFY2(rich.contains(QStringLiteral("<a href=\"wait:bubble\">bubble ")), qPrintable(rich));
    QVERIFY2(rich.contains(QStringLiteral("<a href=\"wait:dp\">DP ")), qPrintable(rich));
    QVERIFY(!w.headline_text().contains(QStringLiteral("<a")));
    TimelineWidget* t = w.timeline_panel()->timeline();
    const TraceModel& trace = *t->traces()[0];
    for (const char* kind : {"bubble", "dp"}) {
      Category category;
      QVERIFY(trace::parse_category(kind, &category));
      // The longest interval, found here the plain way.
      int lane = -1;
      std::int64_t span = -1;
      TimeNs longest = -1;
      for (int l = 0; l < static_cast<int>(trace.lanes.size()); ++l) {
        if (trace.lanes[l].stream_label != "exposed") continue;
        for (std::size_t i = 0; i < trace.lanes[l].spans.size(); ++i) {
          const Span& s = trace.lanes[l].spans[i];
          if (s.category == category && s.dur_ns > longest) {
            longest = s.dur_ns;
            lane = l;
            span = static_cast<std::int64_t>(i);
          }
        }
      }
      QVERIFY2(lane >= 0, kind);
      t->set_all_collapsed(true);
      QVERIFY(w.show_longest_wait(QString::fromLatin1(kind)));
      QVERIFY(t->selection().has_value());
      QCOMPARE(t->selection()->lane, lane);
      QCOMPARE(t->selection()->span, span);
      const Span& s = trace.lanes[lane].spans[span];
      QVERIFY(t->view().start_ns() <= s.start_ns && t->view().end_ns() >= s.end_ns());
      QVERIFY(!t->layout_model().is_collapsed(0, trace.lanes[lane].node));
      QCOMPARE(current_tab(w), static_cast<int>(View::kTimeline));
    }
    // The whole step as a range: the exposed lanes' mean per rank is the headline's.
    const RangeStats whole = range_stats(trace, 0, trace.end_ns());
    const ResultData& r = w.last_simulation()->result;
    QCOMPARE(whole.exposed_ranks, 8);
    QVERIFY(std::abs(whole.exposed_ns_per_rank[static_cast<int>(Category::kDp)] * 1e-9 - r.exposed.dp_s) < 1e-8);
    QVERIFY(std::abs(whole.exposed_ns_per_rank[static_cast<int>(Category::kPp)] * 1e-9 - r.exposed.pp_s) < 1e-8);
    QVERIFY(std::abs(whole.exposed_ns_per_rank[static_cast<int>(Category::kBubble)] * 1e-9 / r.step_time_s -
                     r.bubble_ratio) < 1e-8);
    // No context parallelism in this plan: nothing to follow, and the selection stays.
    const auto before = t->selection();
    QVERIFY(!w.show_longest_wait(QStringLiteral("cp")));
    QCOMPARE(t->selection(), before);
  }

  // Issue 20 item 3: every pipeline send is a flow to its receive on the next
  // stage; the selected one is drawn as an arrow, G follows it there and back.
  void pipeline_sends_flow_to_their_receives() {
    MainWindow w;
    w.resize(1400, 900);
    simulate_and_wait(w, "tiny", "tiny-2", "dgx-a100-1node", sim::Fidelity::kFull);
    w.show();  // laid out: the timeline has its size
    QCoreApplication::processEvents();
    TimelineWidget* t = w.timeline_panel()->timeline();
    const TraceModel& trace = *t->traces()[0];
    std::size_t sends = 0;
    for (const Lane& lane : trace.lanes) {
      if (lane.stream_label != "pp-send") continue;
      for (const Span& s : lane.spans) sends += s.dur_ns > 0;  // an empty slice holds no flow
    }
    QVERIFY(sends > 0);
    QCOMPARE(trace.flows.size(), sends);
    for (const Flow& f : trace.flows) {
      const Lane& from = trace.lanes[f.from.lane];
      const Lane& to = trace.lanes[f.to.lane];
      QCOMPARE(from.stream_label, std::string("pp-send"));
      QCOMPARE(to.stream_label, std::string("pp-recv"));
      QVERIFY(from.rank != to.rank);
      QCOMPARE(to.spans[f.to.span].start_ns, from.spans[f.from.span].start_ns);
    }
    const Flow f = trace.flows[trace.flows.size() / 2];
    QVERIFY(t->reveal(0, f.from.lane, f.from.span));
    QVERIFY(w.timeline_panel()->details_text().contains("flow to rank"));
    t->grab();
    QCOMPARE(t->flow_arrows_drawn(), 1);
    const double zoom = t->view().span_ns();
    QVERIFY(t->follow_flow());
    QCOMPARE(t->selection()->lane, f.to.lane);
    QCOMPARE(t->selection()->span, f.to.span);
    QCOMPARE(t->view().span_ns(), zoom);  // following keeps the zoom
    QVERIFY(w.timeline_panel()->details_text().contains("flow from rank"));
    QTest::keyClick(t, Qt::Key_G);
    QCOMPARE(t->selection()->lane, f.from.lane);
    QCOMPARE(t->selection()->span, f.from.span);
    // All flows at fit zoom: one arrow per transfer whose rows are laid out.
    t->select(std::nullopt);
    t->fit();
    w.timeline_panel()->findChild<QCheckBox*>(QStringLiteral("show_flows"))->setChecked(true);
    t->grab();
    QCOMPARE(t->flow_arrows_drawn(), static_cast<int>(std::min<std::size_t>(sends, TimelineWidget::kMaxFlowArrows)));
  }

  // An MoE plan, exported from the GUI as `strata export` exports it.
  void exports_an_moe_plan_with_its_run_config_and_megatron_flags() {
    MainWindow w;
    simulate_and_wait(w, "mixtral-8x7b", "mixtral-8x7b-64", "dgx-h100-8node", sim::Fidelity::kFolded);
    QVERIFY2(w.last_error().isEmpty(), qPrintable(w.last_error()));
    QTemporaryDir dir;
    w.export_plan_to(dir.path());
    QVERIFY(w.jobs()->wait_idle(60000));
    QVERIFY2(w.last_error().isEmpty(), qPrintable(w.last_error()));
    // strata run takes the plan (tp 1, whole experts, alltoall): its run config and
    // launchers beside Megatron-LM's flags; no deepspeed.json (DeepSpeed-MoE is model code).
    for (const char* f : {"megatron-args.sh", "prediction.json", "strata-run.json", "launch-mpirun.sh"}) {
      QVERIFY2(QFile::exists(dir.filePath(f)), f);
    }
    QVERIFY(!QFile::exists(dir.filePath("deepspeed.json")));
    QVERIFY(read_text(dir.filePath("megatron-args.sh")).find("--expert-model-parallel-size 8") != std::string::npos);
    const nlohmann::json run = nlohmann::json::parse(read_text(dir.filePath("strata-run.json")));
    QCOMPARE(run["parallel"]["expert_model_parallel_size"].get<int>(), 8);
  }

  // File ▸ Export Plan: the files of `strata export` (export/export.h) for the plan
  // on screen, from a simulation, from a result.json and from a sweep row.
  void exports_the_plan_on_screen() {
    MainWindow w;
    QVERIFY(w.export_scenario() == nullptr);
    simulate_and_wait(w, "tiny", "tiny-2", "dgx-a100-1node", sim::Fidelity::kFull);
    QVERIFY(w.export_scenario() != nullptr);
    QTemporaryDir dir;
    w.export_plan_to(dir.path());
    QVERIFY(w.jobs()->wait_idle(60000));
    QVERIFY2(w.last_error().isEmpty(), qPrintable(w.last_error()));
    QVERIFY(w.last_export().has_value());
    for (const char* f : {"strata-run.json", "megatron-args.sh", "launch.slurm",
                          "launch-mpirun.sh", "prediction.json"}) {
      QVERIFY2(QFile::exists(dir.filePath(f)), f);
    }
    QVERIFY(QFileInfo(dir.filePath("launch-mpirun.sh")).isExecutable());
    // The launch script carries strata export's mpirun settings (runtime/launch/mpi_launch.h).
    QFile script(dir.filePath("launch-mpirun.sh"));
    QVERIFY(script.open(QIODevice::ReadOnly));
    QVERIFY(QString::fromUtf8(script.readAll()).contains("OMPI_ALLOW_RUN_AS_ROOT=1"));
    // tiny-2 on 8 GPUs: pp 2, dp 4 (derived), as the simulation on screen.
    const nlohmann::json run = nlohmann::json::parse(read_text(dir.filePath("strata-run.json")));
    QCOMPARE(run["parallel"]["pipeline_model_parallel_size"].get<int>(), 2);
    QCOMPARE(run["parallel"]["data_parallel_size"].get<int>(), 4);
    QCOMPARE(run["parallel"]["world_size"].get<int>(), 8);
    // The prediction is the simulation's (both full fidelity, deterministic).
    const LoadedFile prediction = load_file(dir.filePath("prediction.json").toStdString());
    QCOMPARE(prediction.result->step_time_s, w.last_simulation()->result.step_time_s);
    QCOMPARE(w.last_export()->step_time_s, w.last_simulation()->result.step_time_s);

    // From a result.json `strata simulate` wrote: its inputs name the scenario.
    QTemporaryDir saved, again;
    QCOMPARE(w.save_simulation_to(saved.path()), QString());
    MainWindow w2;
    open_and_wait(w2, saved.filePath("result.json"));
    QVERIFY2(w2.export_scenario() != nullptr, qPrintable(w2.export_unavailable()));
    QCOMPARE(w2.export_scenario()->plan.dp, 4);
    w2.export_plan_to(again.path());
    QVERIFY(w2.jobs()->wait_idle(60000));
    QVERIFY2(w2.last_error().isEmpty(), qPrintable(w2.last_error()));
    QCOMPARE(read_text(again.filePath("strata-run.json")), read_text(dir.filePath("strata-run.json")));

    // A result.json without its inputs cannot be exported: the reason names the path,
    // and asking anyway gives a message box, writing nothing.
    MainWindow w3;
    open_and_wait(w3, data("run/result.json"));
    QVERIFY(w3.export_scenario() == nullptr);
    QVERIFY2(w3.export_unavailable().contains("$.inputs.model"), qPrintable(w3.export_unavailable()));
    QTemporaryDir none;
    w3.export_plan_to(none.path());
    QVERIFY(w3.jobs()->wait_idle(10000));
    QVERIFY(w3.last_error().contains("$.inputs.model"));
    QVERIFY(QDir(none.path()).isEmpty());

    // A sweep row: the selected plan (rank 2: tp 4, dp 2) of llama3-8b.
    MainWindow w4;
    open_and_wait(w4, data("sweep.json"));
    QVERIFY(w4.export_scenario() == nullptr);
    w4.sweep_view()->select_view_row(1);
    QVERIFY(w4.jobs()->wait_idle(120000));
    QVERIFY(w4.export_scenario() != nullptr);
    QTemporaryDir from_sweep;
    w4.export_plan_to(from_sweep.path());
    QVERIFY(w4.jobs()->wait_idle(120000));
    QVERIFY2(w4.last_error().isEmpty(), qPrintable(w4.last_error()));
    const nlohmann::json run4 =
        nlohmann::json::parse(read_text(from_sweep.filePath("strata-run.json")));
    QCOMPARE(run4["parallel"]["tensor_model_parallel_size"].get<int>(), 4);
    QCOMPARE(run4["parallel"]["data_parallel_size"].get<int>(), 2);
    QCOMPARE(run4["model"]["name"].get<std::string>(), std::string("llama3-8b"));
  }

  // Run ▸ Sweep: the sweep runs in the background, fills the table, and saves as
  // `strata sweep --out` does; a cancel leaves the window as it was.
  void sweeps_in_the_background() {
    MainWindow w;
    SweepRequest r;
    r.model = "tiny";
    r.cluster = "dgx-a100-1node";
    r.global_batch_size = 16;
    w.sweep(r);
    QVERIFY(w.jobs()->busy());
    QVERIFY(w.jobs()->wait_idle(120000));
    QVERIFY2(w.last_error().isEmpty(), qPrintable(w.last_error()));
    QVERIFY(w.last_sweep() != nullptr);
    QCOMPARE(current_tab(w), static_cast<int>(View::kSweep));
    const int plans = static_cast<int>(w.last_sweep()->sweep.rows.size());
    QVERIFY(plans > 0);
    QCOMPARE(w.sweep_view()->proxy()->rowCount(), plans);
    QVERIFY(w.headline_text().contains(QString("sweep of %1 plans").arg(plans)));
    QTemporaryDir dir;
    QCOMPARE(w.save_sweep_to(dir.path()), QString());
    const LoadedFile back = load_file(dir.filePath("sweep.json").toStdString());
    QCOMPARE(back.sweep->rows.size(), std::size_t(plans));
    QCOMPARE(read_text(dir.filePath("sweep.csv")), w.last_sweep()->sweep_csv);
    // Selecting the best plan simulates it from the sweep's request.
    w.sweep_view()->select_view_row(0);
    QVERIFY(w.jobs()->wait_idle(120000));
    QCOMPARE(w.timeline_panel()->timeline()->traces().size(), std::size_t{1});
    QCOMPARE(w.timeline_panel()->timeline()->traces()[0]->model_name, std::string("tiny"));

    // Cancelled at once: nothing changes.
    MainWindow w2;
    w2.sweep(r);
    w2.jobs()->cancel();
    QVERIFY(w2.jobs()->wait_idle(120000));
    QVERIFY(w2.last_sweep() == nullptr);
    QVERIFY(w2.last_error().isEmpty());
    QCOMPARE(w2.sweep_view()->proxy()->rowCount(), 0);
  }

  void jobs_report_progress_and_cancel() {
    JobRunner jobs;
    QSignalSpy finished(&jobs, &JobRunner::finished);
    QSignalSpy progress(&jobs, &JobRunner::progress);
    // A job that would run for 100 s unless cancelled.
    QVERIFY(jobs.start(
        "long",
        [](const ProgressFn& report) {
          for (int i = 0; i < 100000; ++i) {
            if (!report(i, 100000, {})) throw Cancelled();
            std::this_thread::sleep_for(std::chrono::milliseconds(1));
          }
        },
        [] { QFAIL("a cancelled job must not call its done function"); }));
    QVERIFY(!jobs.start("second", [](const ProgressFn&) {}, {}));  // one at a time
    QTRY_VERIFY(progress.count() > 0);
    jobs.cancel();
    QVERIFY(jobs.wait_idle(10000));
    QCOMPARE(finished.count(), 1);
    QCOMPARE(finished[0][0].toBool(), false);  // ok
    QCOMPARE(finished[0][1].toBool(), true);   // cancelled

    // Errors arrive as text; the done function runs only on success.
    bool done = false;
    jobs.start(
        "bad", [](const ProgressFn&) { throw InputError("f.json", "$.x", "wrong"); },
        [&] { done = true; });
    QVERIFY(jobs.wait_idle(10000));
    QCOMPARE(finished[1][2].toString(), QStringLiteral("f.json: $.x: wrong"));
    jobs.start(
        "good", [](const ProgressFn& report) { report(1, 1, {}); }, [&] { done = true; });
    QVERIFY(jobs.wait_idle(10000));
    QVERIFY(done);
    QCOMPARE(finished[2][0].toBool(), true);
  }

  void screenshot_command() {
    QTemporaryDir dir;
    const QString png = dir.filePath("memory.png");
    QProcess p;
    p.start(STRATA_GUI_BIN, {"--screenshot", png, "--view", "memory", "--width", "900", "--height",
                             "600", data("run/result.json")});
    QVERIFY(p.waitForFinished(60000));
    QCOMPARE(p.exitCode(), 0);
    QImage img(png);
    QCOMPARE(img.size(), QSize(900, 600));

    const QString bad = dir.filePath("bad.png");
    p.start(STRATA_GUI_BIN, {"--screenshot", bad, data("bad_category.json")});
    QVERIFY(p.waitForFinished(60000));
    QCOMPARE(p.exitCode(), 2);
    QVERIFY(QString::fromUtf8(p.readAllStandardError()).contains("$.traceEvents[5].cat"));
    QVERIFY(!QFile::exists(bad));  // no half-written output

    // A plan the sweep does not list, or no sweep at all: exit 2 naming the flag
    // and the range, no picture.
    MainWindow w;
    open_and_wait(w, data("sweep.json"));
    const int plans = w.sweep_view()->view_rows();
    QVERIFY(plans > 0);
    p.start(STRATA_GUI_BIN, {"--screenshot", bad, "--select-plan", "99999", data("sweep.json")});
    QVERIFY(p.waitForFinished(60000));
    QCOMPARE(p.exitCode(), 2);
    QVERIFY(QString::fromUtf8(p.readAllStandardError())
                .contains(QString("--select-plan 99999: the sweep lists %1 plans (1 to %1)").arg(plans)));
    QVERIFY(!QFile::exists(bad));
    p.start(STRATA_GUI_BIN, {"--screenshot", bad, "--select-plan", "1", data("run/result.json")});
    QVERIFY(p.waitForFinished(60000));
    QCOMPARE(p.exitCode(), 2);
    QVERIFY(QString::fromUtf8(p.readAllStandardError()).contains("no sweep is open"));
    QVERIFY(!QFile::exists(bad));
    // The fixture's trace predates the exposed lanes: nothing to follow, no picture.
    p.start(STRATA_GUI_BIN, {"--screenshot", bad, "--show-wait", "dp", data("run/result.json")});
    QVERIFY(p.waitForFinished(60000));
    QCOMPARE(p.exitCode(), 2);
    QVERIFY(QString::fromUtf8(p.readAllStandardError()).contains("--show-wait dp: the trace has no dp interval"));
    QVERIFY(!QFile::exists(bad));
  }
};

int run_main_window_tests(int argc, char** argv) {
  return testing::run<MainWindowTest>(argc, argv);
}

}  // namespace strata::gui

#include "main_window_test.moc"
