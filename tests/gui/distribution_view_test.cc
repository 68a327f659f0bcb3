// The Distribution tab against the hand-made sampled fixture
// (tests/gui/data/make_fixtures.py: 20 steps whose bins and quantiles it works
// out by hand): bins, bar heights, where the marks are drawn and in what colour,
// the what-if bars in proportion, and the window switching to the tab for a
// sampled result without a trace.
#include "gui/widgets/distribution_view.h"

#include <QImage>
#include <QTabWidget>
#include <QTest>

#include "gui/model/result_data.h"
#include "gui/widgets/job_runner.h"
#include "gui/widgets/main_window.h"
#include "gui_test_support.h"

namespace strata::gui {

class DistributionViewTest : public QObject {
  Q_OBJECT

 private slots:
  void histogram_quantiles_and_what_if() {
    const ResultData r = read_result_file(testing::data_file("sampled/result.json"));
    QVERIFY(r.distribution.has_value());
    QVERIFY(r.what_if.has_value());
    QCOMPARE(r.distribution->traced_sample, 19);
    QCOMPARE(r.what_if->slowed, std::string("rank 7 x1.20"));
    DistributionView v;
    v.resize(1000, 520);
    v.set_result(r.distribution, r.what_if, "fixture");
    QCOMPARE(v.histogram().counts, (std::vector<int>{4, 7, 5, 2, 1, 0, 1}));
    QCOMPARE(v.histogram().lo, 1.0);
    QVERIFY(std::abs(v.histogram().width - 0.15 / 7) < 1e-12);

    // The tallest bin fills 90% of the plot; the others in proportion.
    const QRectF plot = v.plot_rect();
    QVERIFY(std::abs(v.bar_rect(1).height() - 0.9 * plot.height()) < 1e-9);
    QVERIFY(std::abs(v.bar_rect(0).height() / v.bar_rect(1).height() - 4.0 / 7.0) < 1e-9);
    QCOMPARE(v.bar_rect(5).height(), 0.0);
    QCOMPARE(v.bar_rect(0).left(), v.x_of(1.0));
    // P50 (1.04 s) falls in the second bin, P99 (1.1405 s) in the last; the
    // noiseless step (0.98 s) left of every bar.
    QVERIFY(v.mark_x(DistributionView::Mark::kP50) > v.bar_rect(1).left());
    QVERIFY(v.mark_x(DistributionView::Mark::kP50) < v.bar_rect(1).right());
    QVERIFY(v.mark_x(DistributionView::Mark::kP99) > v.bar_rect(6).left());
    QVERIFY(v.mark_x(DistributionView::Mark::kNoiseless) < v.bar_rect(0).left());
    QCOMPARE(v.mark_x(DistributionView::Mark::kP90), v.x_of(1.082));

    // Painted: the bars' colour inside a bar away from the marks, each mark's colour
    // on its line near the plot's bottom.
    const QImage img = v.grab().toImage();
    const QRectF bar2 = v.bar_rect(2);
    QCOMPARE(img.pixelColor(static_cast<int>(bar2.center().x()), static_cast<int>(plot.bottom() - 3)).rgb(),
             QColor(0x4c, 0x78, 0xa8).rgb());
    auto on_line = [&](DistributionView::Mark m) {
      return img.pixelColor(static_cast<int>(v.mark_x(m)), static_cast<int>(plot.bottom() - 3)).rgb();
    };
    QCOMPARE(on_line(DistributionView::Mark::kP50), QColor(Qt::black).rgb());
    QCOMPARE(on_line(DistributionView::Mark::kP90), QColor(0xf5, 0x85, 0x18).rgb());
    QCOMPARE(on_line(DistributionView::Mark::kP99), QColor(0xe4, 0x57, 0x56).rgb());

    // The what-if: 0.98 s against 0.784 s, bars in that ratio.
    QVERIFY(std::abs(v.what_if_bar(true).width() / v.what_if_bar(false).width() - 0.98 / 0.784) < 1e-9);
    const QString tip = v.tooltip_for(v.bar_rect(1).center());
    QVERIFY2(tip.contains("7 of 20 samples"), qPrintable(tip));
    QVERIFY(v.tooltip_for(QPointF(2, 2)).isEmpty());
  }

  // One value, or all alike: one bin holding them all.
  void histogram_of_equal_values() {
    const Histogram one = histogram_of({2.5});
    QCOMPARE(one.counts, std::vector<int>{1});
    QVERIFY(one.lo < 2.5 && one.hi() > 2.5);
    QCOMPARE(histogram_of({3.0, 3.0, 3.0}).counts, std::vector<int>{3});
    QVERIFY(histogram_of({}).counts.empty());
    // The largest value lands in the last bin, not past it.
    const Histogram two = histogram_of({1.0, 2.0});
    QVERIFY(two.counts.back() >= 1);
    int total = 0;
    for (int c : two.counts) total += c;
    QCOMPARE(total, 2);
  }

  void window_shows_a_sampled_result_on_its_tab() {
    MainWindow w;
    w.open_files({QString::fromStdString(testing::data_file("sampled/result.json"))});
    QVERIFY(w.jobs()->wait_idle(30000));
    QCOMPARE(w.findChild<QTabWidget*>()->currentIndex(), static_cast<int>(View::kDistribution));
    QCOMPARE(w.distribution_view()->distribution()->step_time_s.size(), std::size_t{20});
    // A result without samples empties the tab again.
    w.open_files({QString::fromStdString(testing::data_file("run/result.json"))});
    QVERIFY(w.jobs()->wait_idle(30000));
    QVERIFY(!w.distribution_view()->distribution().has_value());
  }
};

int run_distribution_view_tests(int argc, char** argv) { return testing::run<DistributionViewTest>(argc, argv); }

}  // namespace strata::gui

#include "distribution_view_test.moc"
