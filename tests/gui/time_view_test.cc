// The timeline's time arithmetic: zoom anchored at the cursor, pan, fit, resize,
// wheel steps and ruler ticks, each checked against values computed by hand.
#include "gui/model/time_view.h"

#include <QTest>

#include "gui_test_support.h"

namespace strata::gui {

class TimeViewTest : public QObject {
  Q_OBJECT

 private slots:
  void zoom_data() {
    QTest::addColumn<double>("start");
    QTest::addColumn<double>("end");
    QTest::addColumn<int>("width");
    QTest::addColumn<double>("factor");
    QTest::addColumn<double>("anchor_x");
    QTest::addColumn<double>("expected_start");
    QTest::addColumn<double>("expected_end");
    // [0, 1000] over 100 px, 2x at the middle: the anchor t = 500 keeps x = 50,
    // span 500 -> [500 - 0.5*500, 500 + 0.5*500].
    QTest::newRow("in at the middle") << 0.0 << 1000.0 << 100 << 2.0 << 50.0 << 250.0 << 750.0;
    QTest::newRow("in at the left edge") << 0.0 << 1000.0 << 100 << 2.0 << 0.0 << 0.0 << 500.0;
    QTest::newRow("in at the right edge")
        << 0.0 << 1000.0 << 100 << 2.0 << 100.0 << 500.0 << 1000.0;
    // Out by 2 at x = 25: anchor t = 250 at a quarter of a 2000 ns span.
    QTest::newRow("out at a quarter") << 0.0 << 1000.0 << 100 << 0.5 << 25.0 << -250.0 << 1750.0;
    // A huge factor stops at kMinViewSpanNs = 100 around the anchor t = 500.
    QTest::newRow("clamped at 100 ns") << 0.0 << 1000.0 << 100 << 1e9 << 50.0 << 450.0 << 550.0;
    // 1000 s into a trace: 4x at x = 250 of 1000 px, anchor 1e12 + 2.5e8 ns,
    // new span 2.5e8, start = anchor - 0.25*2.5e8.
    QTest::newRow("far from zero")
        << 1e12 << 1e12 + 1e9 << 1000 << 4.0 << 250.0 << 1e12 + 1.875e8 << 1e12 + 4.375e8;
  }
  void zoom() {
    QFETCH(double, start);
    QFETCH(double, end);
    QFETCH(int, width);
    QFETCH(double, factor);
    QFETCH(double, anchor_x);
    QFETCH(double, expected_start);
    QFETCH(double, expected_end);
    TimeView v(start, end, width);
    const double anchor_t = v.t_of(anchor_x);
    v.zoom(factor, anchor_x);
    QCOMPARE(v.start_ns(), expected_start);
    QCOMPARE(v.end_ns(), expected_end);
    // The time under the cursor does not move.
    QCOMPARE(v.t_of(anchor_x), anchor_t);
  }

  void pan_data() {
    QTest::addColumn<double>("dx");
    QTest::addColumn<double>("expected_start");
    QTest::addColumn<double>("expected_end");
    // [0, 1000] over 100 px = 10 ns/px.
    QTest::newRow("drag right 10 px") << 10.0 << -100.0 << 900.0;
    QTest::newRow("drag left 25 px") << -25.0 << 250.0 << 1250.0;
    QTest::newRow("half a pixel") << 0.5 << -5.0 << 995.0;
  }
  void pan() {
    QFETCH(double, dx);
    QFETCH(double, expected_start);
    QFETCH(double, expected_end);
    TimeView v(0.0, 1000.0, 100);
    v.pan(dx);
    QCOMPARE(v.start_ns(), expected_start);
    QCOMPARE(v.end_ns(), expected_end);
  }

  void fit_and_resize() {
    TimeView v(0.0, 1.0, 1000);
    // The fixture trace ends at 850 us; 2% margin each side = 17 us.
    v.fit(0.0, 850000.0);
    QCOMPARE(v.start_ns(), -17000.0);
    QCOMPARE(v.end_ns(), 867000.0);
    QCOMPARE(v.ns_per_px(), 884.0);
    // Widening keeps the start and the scale.
    TimeView w(0.0, 1000.0, 100);
    w.resize(200);
    QCOMPARE(w.start_ns(), 0.0);
    QCOMPARE(w.end_ns(), 2000.0);
    // An empty range still gives a usable view.
    TimeView e(0.0, 1.0, 10);
    e.fit(5.0, 5.0, 0.0);
    QCOMPARE(e.span_ns(), kMinViewSpanNs);
  }

  void x_and_t_are_inverse() {
    TimeView v(-17000.0, 867000.0, 1000);
    QCOMPARE(v.x_of(-17000.0), 0.0);
    QCOMPARE(v.x_of(867000.0), 1000.0);
    QCOMPARE(v.t_of(500.0), 425000.0);
    QCOMPARE(v.x_of(v.t_of(123.25)), 123.25);
  }

  void wheel_data() {
    QTest::addColumn<int>("delta");
    QTest::addColumn<double>("factor");
    QTest::newRow("one notch in") << 120 << 1.25;
    QTest::newRow("one notch out") << -120 << 0.8;
    QTest::newRow("two notches") << 240 << 1.5625;
    QTest::newRow("half a notch") << 60 << 1.118033988749895;  // sqrt(1.25)
  }
  void wheel() {
    QFETCH(int, delta);
    QFETCH(double, factor);
    QCOMPARE(wheel_zoom_factor(delta), factor);
  }

  void ruler_step_data() {
    QTest::addColumn<double>("span");
    QTest::addColumn<int>("width");
    QTest::addColumn<double>("step");
    // min step = span/width * 90 px, rounded up to 1, 2 or 5 x 10^k.
    QTest::newRow("1 ms over 1000 px -> 90 us -> 100 us") << 1e6 << 1000 << 1e5;
    QTest::newRow("1.5 ms -> 135 us -> 200 us") << 1.5e6 << 1000 << 2e5;
    QTest::newRow("4 ms -> 360 us -> 500 us") << 4e6 << 1000 << 5e5;
    QTest::newRow("1 s -> 90 ms -> 100 ms") << 1e9 << 1000 << 1e8;
    QTest::newRow("1 us -> 90 ns -> 100 ns") << 1e3 << 1000 << 1e2;
  }
  void ruler_step() {
    QFETCH(double, span);
    QFETCH(int, width);
    QFETCH(double, step);
    QCOMPARE(ruler_step_ns(TimeView(0.0, span, width), 90.0), step);
  }

  void ruler_ticks_cover_the_view() {
    // [0, 1 ms] at 100 us steps: 0, 100, ..., 1000 us.
    const auto ticks = ruler_ticks(TimeView(0.0, 1e6, 1000), 90.0);
    QCOMPARE(ticks.size(), std::size_t{11});
    QCOMPARE(ticks[0].label, std::string("0 µs"));
    QCOMPARE(ticks[3].x_px, 300.0);
    QCOMPARE(ticks[3].label, std::string("300 µs"));
    QCOMPARE(ticks[10].label, std::string("1.0 ms"));
    // A view starting between ticks begins at the next multiple of the step.
    const auto shifted = ruler_ticks(TimeView(-17000.0, 867000.0, 1000), 90.0);
    QCOMPARE(shifted.front().t_ns, 0.0);
    QCOMPARE(shifted.front().x_px, 17000.0 / 884.0);
  }

  void format_time_data() {
    QTest::addColumn<double>("t");
    QTest::addColumn<double>("step");
    QTest::addColumn<QString>("text");
    QTest::newRow("ruler ms") << 12.5e6 << 5e5 << QStringLiteral("12.5 ms");
    QTest::newRow("ruler zero") << 0.0 << 1e5 << QStringLiteral("0 µs");
    QTest::newRow("rounded") << 1234600.0 << 0.0 << QStringLiteral("1.235 ms");
    QTest::newRow("whole") << 2000.0 << 0.0 << QStringLiteral("2 µs");
    QTest::newRow("ns") << 850.0 << 0.0 << QStringLiteral("850 ns");
    QTest::newRow("s") << 3.5e9 << 0.0 << QStringLiteral("3.5 s");
    QTest::newRow("ns precision") << 45500.0 << 0.0 << QStringLiteral("45.5 µs");
  }
  void format_time() {
    QFETCH(double, t);
    QFETCH(double, step);
    QFETCH(QString, text);
    QCOMPARE(QString::fromStdString(format_time_ns(t, step)), text);
  }
};

int run_time_view_tests(int argc, char** argv) { return testing::run<TimeViewTest>(argc, argv); }

}  // namespace strata::gui

#include "time_view_test.moc"
