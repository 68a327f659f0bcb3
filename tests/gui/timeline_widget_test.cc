// The timeline widget driven as a user would: wheel, drag, hover, click, fold;
// and what it paints, read back from a grab of the widget.
#include "gui/widgets/timeline_widget.h"

#include <fmt/format.h>

#include <QImage>
#include <QLineEdit>
#include <QSpinBox>
#include <QTest>
#include <QWheelEvent>

#include "gui/model/trace_reader.h"
#include "gui/widgets/colors.h"
#include "gui/widgets/overview_strip.h"
#include "gui/widgets/timeline_panel.h"
#include "gui_test_support.h"

namespace strata::gui {
namespace {

constexpr int kGutter = TimelineWidget::kGutterPx;
constexpr int kRuler = TimelineWidget::kRulerPx;

std::shared_ptr<const TraceModel> load(const char* name) {
  return std::make_shared<const TraceModel>(read_trace_file(testing::data_file(name)));
}

// A widget whose lane area is 1000 px wide, showing the fixture trace.
void prepare(TimelineWidget& w, std::vector<std::shared_ptr<const TraceModel>> traces) {
  w.resize(kGutter + 1000, 400);
  w.show();
  QVERIFY(QTest::qWaitForWindowExposed(&w));
  w.set_traces(std::move(traces));
}

// A panel (find box, overview strip, details) around a widget showing the fixture trace.
void prepare(TimelinePanel& panel) {
  panel.resize(kGutter + 1100, 600);
  panel.show();
  QVERIFY(QTest::qWaitForWindowExposed(&panel));
  panel.timeline()->set_traces({load("trace_small.json")});
}

// Rank 0's compute lane as a pipeline stage runs it: forward of micro-batch 0
// (four 10-us GEMMs back to back, 0-40 us), its backward (four 20-us GEMMs,
// 40-120 us), a bubble, then forward of micro-batch 1 with gaps (four 5-us GEMMs
// every 10 us, 200-235 us).
std::shared_ptr<const TraceModel> step_blocks_trace() {
  std::string events;
  auto task = [&](const char* name, double ts, double dur, int mb, const char* phase) {
    events += fmt::format(R"({}{{"ph":"X","name":"{}","cat":"gemm","pid":0,"tid":0,"ts":{},"dur":{},)"
                          R"("args":{{"mb":{},"phase":"{}"}}}})",
                          events.empty() ? "" : ",\n", name, ts, dur, mb, phase);
  };
  for (int k = 0; k < 4; ++k) task("fc1", 10.0 * k, 10.0, 0, "fwd");
  for (int k = 0; k < 4; ++k) task("fc1_bwd", 40.0 + 20.0 * k, 20.0, 0, "bwd");
  for (int k = 0; k < 4; ++k) task("fc1", 200.0 + 10.0 * k, 5.0, 1, "fwd");
  return std::make_shared<const TraceModel>(read_trace_text("{\"traceEvents\":[\n" + events + "]}", "blocks.json"));
}

// Widget y of the middle of layout row `row`.
int row_y(const TimelineWidget& w, int row) {
  const Row& r = w.layout_model().rows()[row];
  return kRuler + r.y_px + r.height_px / 2;
}

}  // namespace

class TimelineWidgetTest : public QObject {
  Q_OBJECT

 private slots:
  void opens_fitted() {
    TimelineWidget w;
    prepare(w, {load("trace_small.json")});
    // 0..850 us with 2% margins over 1000 px.
    QCOMPARE(w.view().start_ns(), -17000.0);
    QCOMPARE(w.view().end_ns(), 867000.0);
  }

  void wheel_zooms_around_the_cursor() {
    TimelineWidget w;
    prepare(w, {load("trace_small.json")});
    const QPointF at(kGutter + 500, 100);
    const double t_before = w.view().t_of(500);  // 425 us
    QWheelEvent wheel(at, w.mapToGlobal(at), QPoint(), QPoint(0, 120), Qt::NoButton, Qt::NoModifier,
                      Qt::NoScrollPhase, false);
    QApplication::sendEvent(&w, &wheel);
    QCOMPARE(w.view().span_ns(), 884000.0 / 1.25);
    QCOMPARE(w.view().t_of(500), t_before);
  }

  void drag_pans() {
    TimelineWidget w;
    prepare(w, {load("trace_small.json")});
    QTest::mousePress(&w, Qt::LeftButton, {}, QPoint(kGutter + 500, 100));
    QMouseEvent move(QEvent::MouseMove, QPointF(kGutter + 600, 100),
                     w.mapToGlobal(QPointF(kGutter + 600, 100)), Qt::NoButton, Qt::LeftButton,
                     Qt::NoModifier);
    QApplication::sendEvent(&w, &move);
    QTest::mouseRelease(&w, Qt::LeftButton, {}, QPoint(kGutter + 600, 100));
    // 100 px at 884 ns/px: the window moves 88.4 us earlier.
    QCOMPARE(w.view().start_ns(), -17000.0 - 88400.0);
    QVERIFY(!w.selection().has_value());  // a drag is not a click
  }

  void hover_names_the_task() {
    TimelineWidget w;
    prepare(w, {load("trace_small.json")});
    w.set_view(0.0, 1e6);  // 1000 ns per px
    // Row 5 is rank 1's compute lane; 330 us is inside attn_bwd of micro-batch 0.
    const QString tip = w.tooltip_at(QPoint(kGutter + 330, row_y(w, 5)));
    QVERIFY2(tip.startsWith("attn_bwd\n"), qPrintable(tip));
    QVERIFY(tip.contains("micro-batch: 0"));
    QVERIFY(tip.contains("duration: 45.5 µs"));
  }

  void click_selects_and_shows_details() {
    TimelinePanel panel;
    prepare(panel);
    TimelineWidget& w = *panel.timeline();
    w.set_view(0.0, 1e6);
    const double ns_per_px = w.view().ns_per_px();
    const int x = kGutter + static_cast<int>(330000 / ns_per_px);
    QTest::mouseClick(&w, Qt::LeftButton, {}, QPoint(x, row_y(w, 5)));
    QVERIFY(w.selection().has_value());
    QCOMPARE(*w.selection(), (TimelineWidget::Selection{0, 2, 2}));
    QVERIFY(panel.details_text().contains("attn_bwd"));
    QVERIFY(panel.details_text().contains("layer: 1"));
    // A click on empty lane space clears the selection.
    QTest::mouseClick(&w, Qt::LeftButton, {},
                      QPoint(kGutter + static_cast<int>(700000 / ns_per_px), row_y(w, 5)));
    QVERIFY(!w.selection().has_value());
  }

  // Find: Enter goes to the next match at the current zoom, Shift+Enter back,
  // wrapping; the status counts; a bad query says why.
  void find_walks_the_matches() {
    TimelinePanel panel;
    prepare(panel);
    TimelineWidget& w = *panel.timeline();
    w.set_view(0.0, 1e5);  // the first 100 us: 100 ns per px
    auto* find = panel.findChild<QLineEdit*>(QStringLiteral("find"));
    QVERIFY(find != nullptr);
    QTest::keyClicks(find, "fc1 phase:fwd");
    QCOMPARE(panel.find_status(), QStringLiteral("4 matches"));
    // Forwards start at 0, 100, 110 and 210 us (rank 0, 0, 1, 1).
    const TimeNs starts[] = {0, 100000, 110000, 210000};
    auto selected_start = [&] {
      const auto sel = w.selection();
      return sel ? w.traces()[0]->lanes[sel->lane].spans[sel->span].start_ns : TimeNs{-1};
    };
    QTest::keyClick(find, Qt::Key_Return);
    QCOMPARE(selected_start(), starts[0]);
    QCOMPARE(panel.find_status(), QStringLiteral("1 of 4"));
    QTest::keyClick(find, Qt::Key_Return);
    QTest::keyClick(find, Qt::Key_Return);
    QCOMPARE(selected_start(), starts[2]);
    QCOMPARE(w.view().span_ns(), 1e5);  // the zoom kept, the match panned into view
    QVERIFY(w.view().start_ns() <= 110000.0 && w.view().end_ns() >= 210000.0);
    QTest::keyClick(find, Qt::Key_Return, Qt::ShiftModifier);
    QCOMPARE(selected_start(), starts[1]);
    QTest::keyClick(find, Qt::Key_Return, Qt::ShiftModifier);
    QTest::keyClick(find, Qt::Key_Return, Qt::ShiftModifier);
    QCOMPARE(selected_start(), starts[3]);  // wrapped backwards
    panel.set_find_text(QStringLiteral("cat:gemx"));
    QVERIFY(panel.find_status().contains(QStringLiteral("allowed")));
    QVERIFY(!panel.find_next());
  }

  // Shift+drag selects a time range and the details summarise it (the figures
  // themselves: search_range_test.cc); Esc clears it.
  void shift_drag_selects_a_range() {
    TimelinePanel panel;
    prepare(panel);
    TimelineWidget& w = *panel.timeline();
    w.set_view(0.0, 1e6);  // 1 us per px over the 1000-px lane area
    const int y = row_y(w, 2);
    const auto x_of_us = [&](double us) { return kGutter + static_cast<int>(std::lround(w.view().x_of(us * 1e3))); };
    QTest::mousePress(&w, Qt::LeftButton, Qt::ShiftModifier, QPoint(x_of_us(50), y));
    QMouseEvent move(QEvent::MouseMove, QPointF(x_of_us(450), y), w.mapToGlobal(QPointF(x_of_us(450), y)),
                     Qt::NoButton, Qt::LeftButton, Qt::ShiftModifier);
    QApplication::sendEvent(&w, &move);
    QTest::mouseRelease(&w, Qt::LeftButton, Qt::ShiftModifier, QPoint(x_of_us(450), y));
    QVERIFY(w.range().has_value());
    QVERIFY(std::abs(static_cast<double>(w.range()->first) - 50000.0) <= w.view().ns_per_px());
    QVERIFY(std::abs(static_cast<double>(w.range()->second) - 450000.0) <= w.view().ns_per_px());
    QVERIFY2(panel.details_text().startsWith(QStringLiteral("range ")), qPrintable(panel.details_text()));
    QVERIFY(panel.details_text().contains(QStringLiteral("compute")));
    QVERIFY(!w.selection().has_value());  // a range drag selects no task
    QTest::keyClick(&w, Qt::Key_Escape);
    QVERIFY(!w.range().has_value());
    QVERIFY(!panel.details_text().startsWith(QStringLiteral("range ")));
  }

  // A click on a merged mark zooms to it.
  void click_on_a_merged_mark_zooms_to_it() {
    TimelineWidget w;
    prepare(w, {step_blocks_trace()});
    w.set_view(0.0, 1e7);  // 10 us per px: B0 (40-120 us) is one merged mark at x 4..12
    QTest::mouseClick(&w, Qt::LeftButton, {}, QPoint(kGutter + 8, row_y(w, 2)));
    QVERIFY(!w.selection().has_value());
    // B0's 80 us with 5% margins.
    QCOMPARE(w.view().start_ns(), 40000.0 - 4000.0);
    QCOMPARE(w.view().end_ns(), 120000.0 + 4000.0);
  }

  // A counter row draws its curve and its hover gives the value at that time.
  void counter_rows_show_their_value() {
    TimelineWidget w;
    prepare(w, {std::make_shared<const TraceModel>(read_trace_text(
                   R"json({"traceEvents":[
{"ph":"X","name":"fc1","cat":"gemm","pid":0,"tid":0,"ts":0,"dur":1000},
{"ph":"C","name":"memory","pid":0,"ts":0,"args":{"bytes":1073741824}},
{"ph":"C","name":"memory","pid":0,"ts":500,"args":{"bytes":3221225472}}],
"otherData":{"strata":{"kind":"predicted","memory_capacity_bytes":4294967296}}})json",
                   "counter.json"))});
    w.set_view(0.0, 1e6);  // 1 us per px
    int row = -1;
    for (int i = 0; i < static_cast<int>(w.layout_model().rows().size()); ++i) {
      if (w.layout_model().rows()[i].kind == RowKind::kCounter) row = i;
    }
    QVERIFY(row >= 0);
    const QString early = w.tooltip_at(QPoint(kGutter + 100, row_y(w, row)));
    const QString late = w.tooltip_at(QPoint(kGutter + 700, row_y(w, row)));
    QVERIFY2(early.startsWith(QStringLiteral("rank 0 memory: 1.0 GiB at 100 µs")), qPrintable(early));
    QVERIFY2(late.contains(QStringLiteral("3.0 GiB")) && late.contains(QStringLiteral("of 4.0 GiB")), qPrintable(late));
    // The curve: 3 of 4 GiB fills three quarters of the row's height at 700 us, a quarter at 100 us.
    const QImage img = w.grab().toImage();
    const Row& r = w.layout_model().rows()[row];
    auto filled = [&](int x) {
      int n = 0;
      for (int y = kRuler + r.y_px + 2; y < kRuler + r.y_px + r.height_px - 2; ++y) {
        n += img.pixelColor(kGutter + x, y) == QColor(0x9e, 0xc5, 0xe8);  // the curve's fill
      }
      return n;
    };
    QVERIFY2(std::abs(filled(700) - 3 * filled(100)) <= 2, qPrintable(QString("%1 %2").arg(filled(700)).arg(filled(100))));
  }

  // The overview strip shows the whole step; a click there centres the timeline
  // at that time, keeping its zoom.
  void overview_strip_navigates() {
    TimelinePanel panel;
    prepare(panel);
    TimelineWidget& w = *panel.timeline();
    w.set_view(0.0, 1e5);  // 100 us
    OverviewStrip* strip = panel.overview();
    QCoreApplication::processEvents();
    QCOMPARE(strip->begin_ns(), TimeNs{0});
    QCOMPARE(strip->end_ns(), TimeNs{850000});
    QCOMPARE(static_cast<int>(strip->columns().size()), strip->width() - kGutter);
    const int x = kGutter + (strip->width() - kGutter) * 3 / 4;  // about 637 us
    QTest::mouseClick(strip, Qt::LeftButton, {}, QPoint(x, strip->height() / 2));
    QCOMPARE(w.view().span_ns(), 1e5);
    QVERIFY(std::abs(0.5 * (w.view().start_ns() + w.view().end_ns()) - strip->t_of(x)) < 1.0);
    QVERIFY(std::abs(strip->t_of(x) - 637500.0) < 2000.0);
  }

  // Ctrl+wheel makes lanes taller, 2 px a notch; the panel's box follows.
  void ctrl_wheel_resizes_the_lanes() {
    TimelinePanel panel;
    prepare(panel);
    TimelineWidget& w = *panel.timeline();
    const int before = w.layout_model().total_height_px();
    const QPointF at(kGutter + 500, 100);
    QWheelEvent wheel(at, w.mapToGlobal(at), QPoint(), QPoint(0, 3 * 120), Qt::NoButton, Qt::ControlModifier,
                      Qt::NoScrollPhase, false);
    QApplication::sendEvent(&w, &wheel);
    QCOMPARE(w.layout_model().lane_height(), kLaneHeightPx + 6);
    QCOMPARE(w.layout_model().total_height_px(), before + 4 * 6);  // the fixture's four lanes
    QCOMPARE(panel.findChild<QSpinBox*>(QStringLiteral("lane_height"))->value(), kLaneHeightPx + 6);
    QCOMPARE(w.view().span_ns(), 884000.0);  // no zoom
    panel.findChild<QSpinBox*>(QStringLiteral("lane_height"))->setValue(12);
    QCOMPARE(w.layout_model().lane_height(), 12);
  }

  void click_on_a_node_row_folds_it() {
    TimelineWidget w;
    prepare(w, {load("trace_small.json")});
    QCOMPARE(w.layout_model().rows().size(), std::size_t{7});
    QTest::mouseClick(&w, Qt::LeftButton, {}, QPoint(40, row_y(w, 1)));
    QCOMPARE(w.layout_model().rows().size(), std::size_t{5});
    QTest::mouseClick(&w, Qt::LeftButton, {}, QPoint(40, row_y(w, 1)));
    QCOMPARE(w.layout_model().rows().size(), std::size_t{7});
  }

  void paints_tasks_in_their_category_color() {
    TimelineWidget w;
    prepare(w, {load("trace_small.json")});
    w.set_view(0.0, 1e6);
    const QImage img = w.grab().toImage();
    const int top = kRuler + w.layout_model().rows()[2].y_px + 3;  // inside rank 0's bars
    // fc1 of micro-batch 0 covers x 0..100: gemm blue (away from its label).
    QCOMPARE(img.pixelColor(kGutter + 95, top).rgb(), category_color(Category::kGemm).rgb());
    // 350 us is rank 0's pipeline bubble: nothing drawn.
    QCOMPARE(img.pixelColor(kGutter + 350, top).rgb(), QColor(Qt::white).rgb());
    // adam, 800..850 us: optimizer color.
    QCOMPARE(img.pixelColor(kGutter + 845, top).rgb(), category_color(Category::kOptimizer).rgb());
  }

  // A zero-bubble step's F, B, W and recompute of one GEMM, each in its phase's
  // shade of gemm blue: B and W told apart at a glance; the optimizer keeps its color.
  // Zoomed out (10 us per px), every task merges, but never across a step block:
  // F0, B0 and F1 are three marks in their phase's shade of gemm blue (a shade
  // darker: merged), each as tall as the lane is busy under it, on the baseline.
  void paints_step_blocks_when_zoomed_out() {
    TimelineWidget w;
    prepare(w, {step_blocks_trace()});
    w.set_view(0.0, 1e7);
    const QImage img = w.grab().toImage();
    const Row& lane = w.layout_model().rows()[2];  // under the trace's and the node's headers
    QCOMPARE(lane.kind, RowKind::kLane);
    const int bar_top = kRuler + lane.y_px + 2, bar_h = lane.height_px - 4, bottom = bar_top + bar_h - 1;
    const QRgb forward = task_color(Category::kGemm, Phase::kFwd).darker(120).rgb();
    const QRgb backward = task_color(Category::kGemm, Phase::kBwd).darker(120).rgb();
    QCOMPARE(img.pixelColor(kGutter + 2, bottom).rgb(), forward);   // F0, 0-40 us
    QCOMPARE(img.pixelColor(kGutter + 2, bar_top).rgb(), forward);  // fully busy: full height
    QCOMPARE(img.pixelColor(kGutter + 8, bottom).rgb(), backward);  // B0, 40-120 us
    QVERIFY(img.pixelColor(kGutter + 15, bottom).rgb() != forward);  // the bubble
    // F1 (200-235 us) is busy 20 of 35 us: 8 of the bar's 14 px.
    int painted = 0;
    for (int y = bar_top; y < bar_top + bar_h; ++y) painted += img.pixelColor(kGutter + 21, y).rgb() == forward;
    QCOMPARE(painted, static_cast<int>(std::lround(bar_h * 20.0 / 35.0)));
    QCOMPARE(img.pixelColor(kGutter + 21, bottom).rgb(), forward);
    // The hover names the block and its merge.
    const QString tip = w.tooltip_at(QPoint(kGutter + 8, row_y(w, 2)));
    QVERIFY2(tip.startsWith("backward of micro-batch 0\n4 tasks merged"), qPrintable(tip));
  }

  void paints_compute_tasks_by_phase() {
    TimelineWidget w;
    prepare(w, {load("trace_phases.json")});
    w.set_view(0.0, 1e6);  // 1 us per px
    const QImage img = w.grab().toImage();
    const int top = kRuler + w.layout_model().rows()[2].y_px + 3;
    const QRgb forward = img.pixelColor(kGutter + 95, top).rgb();
    const QRgb backward = img.pixelColor(kGutter + 295, top).rgb();
    const QRgb weight_grad = img.pixelColor(kGutter + 395, top).rgb();
    const QRgb recompute = img.pixelColor(kGutter + 495, top).rgb();
    QCOMPARE(forward, category_color(Category::kGemm).rgb());
    QCOMPARE(backward, task_color(Category::kGemm, Phase::kBwd).rgb());
    QCOMPARE(weight_grad, task_color(Category::kGemm, Phase::kWgrad).rgb());
    QCOMPARE(recompute, task_color(Category::kGemm, Phase::kRecompute).rgb());
    QVERIFY(backward != weight_grad && backward != forward && weight_grad != forward && recompute != forward);
    QCOMPARE(img.pixelColor(kGutter + 545, top).rgb(), category_color(Category::kOptimizer).rgb());
  }

  void predicted_and_measured_share_the_axis() {
    TimelineWidget w;
    prepare(w, {load("trace_small.json"), load("trace_measured.json")});
    const auto& rows = w.layout_model().rows();
    QCOMPARE(rows.size(), std::size_t{14});
    QCOMPARE(rows[7].kind, RowKind::kTrace);
    QVERIFY(QString::fromStdString(rows[7].label).startsWith("measured · tiny"));
    // Measured adam ends at 800 + 50 x 1.04 = 852 us: the fit covers both traces.
    QCOMPARE(w.view().end_ns(), 852000.0 * 1.02);
    // The same time is the same x in both: fc1 at 0..100 us on rank 0 in each.
    w.set_view(0.0, 1e6);
    const QString predicted = w.tooltip_at(QPoint(kGutter + 50, row_y(w, 2)));
    const QString measured = w.tooltip_at(QPoint(kGutter + 50, row_y(w, 9)));
    QVERIFY(predicted.contains("duration: 100 µs"));
    QVERIFY(measured.contains("duration: 104 µs"));
  }

  void keys_fit_and_zoom() {
    TimelineWidget w;
    prepare(w, {load("trace_small.json")});
    w.set_view(1000.0, 2000.0);
    QTest::keyClick(&w, Qt::Key_F);
    QCOMPARE(w.view().end_ns(), 867000.0);
    QTest::keyClick(&w, Qt::Key_Plus);
    QCOMPARE(w.view().span_ns(), 884000.0 / 1.25);
  }

  void empty_shows_a_message() {
    TimelineWidget w;
    w.resize(800, 300);
    w.set_traces({}, QStringLiteral("The sweep wrote no trace for this plan"));
    QCOMPARE(w.message(), QStringLiteral("The sweep wrote no trace for this plan"));
    QVERIFY(w.tooltip_at(QPoint(300, 100)).isEmpty());
  }
};

int run_timeline_widget_tests(int argc, char** argv) {
  return testing::run<TimelineWidgetTest>(argc, argv);
}

}  // namespace strata::gui

#include "timeline_widget_test.moc"
