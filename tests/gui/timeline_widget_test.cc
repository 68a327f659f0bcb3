// The timeline widget driven as a user would: wheel, drag, hover, click, fold;
// and what it paints, read back from a grab of the widget.
#include "gui/widgets/timeline_widget.h"

#include <QImage>
#include <QTest>
#include <QWheelEvent>

#include "gui/model/trace_reader.h"
#include "gui/widgets/colors.h"
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
    // Zoomed out to 1 ms per px, rank 0's five compute tasks are one merged mark.
    w.set_view(0.0, 1e9);
    const QString merged = w.tooltip_at(QPoint(kGutter, row_y(w, 2)));
    QVERIFY2(merged.startsWith("5 tasks merged"), qPrintable(merged));
  }

  void click_selects_and_shows_details() {
    TimelinePanel panel;
    panel.resize(kGutter + 1100, 600);
    panel.show();
    QVERIFY(QTest::qWaitForWindowExposed(&panel));
    TimelineWidget& w = *panel.timeline();
    w.set_traces({load("trace_small.json")});
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
    // Zoomed out, the merged mark is drawn darker in its dominant category (gemm:
    // 600 of 650 us), as tall as the lane is busy under it: 650 of 850 us, so 11
    // of the bar's 14 px, on the lane's baseline.
    w.set_view(0.0, 1e9);
    const QImage out = w.grab().toImage();
    const Row& lane = w.layout_model().rows()[2];
    const int bar_top = kRuler + lane.y_px + 2, bar_h = lane.height_px - 4;
    const QRgb merged = category_color(Category::kGemm).darker(135).rgb();
    int painted = 0;
    for (int y = bar_top; y < bar_top + bar_h; ++y) painted += out.pixelColor(kGutter, y).rgb() == merged;
    QCOMPARE(painted, static_cast<int>(std::lround(bar_h * 650.0 / 850.0)));
    QCOMPARE(out.pixelColor(kGutter, bar_top + bar_h - 1).rgb(), merged);
    QVERIFY(out.pixelColor(kGutter, bar_top).rgb() != merged);
  }

  // A zero-bubble step's F, B, W and recompute of one GEMM, each in its phase's
  // shade of gemm blue: B and W told apart at a glance; the optimizer keeps its color.
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
