// The sweep table: models checked by QAbstractItemModelTester while sorting any
// column and filtering by text and by fits.
#include <QAbstractItemModelTester>
#include <QComboBox>
#include <QHeaderView>
#include <QImage>
#include <QTableView>
#include <QLineEdit>
#include <QTest>

#include "gui/model/pareto_plot.h"
#include "gui/model/sweep_data.h"
#include "gui/widgets/pareto_plot.h"
#include "gui/widgets/sweep_table_model.h"
#include "gui/widgets/sweep_view.h"
#include "gui_test_support.h"

namespace strata::gui {
namespace {

// The sweep rows in the proxy's current order.
std::vector<int> order(const SweepFilterProxy& proxy) {
  std::vector<int> rows;
  for (int r = 0; r < proxy.rowCount(); ++r)
    rows.push_back(proxy.mapToSource(proxy.index(r, 0)).row());
  return rows;
}

std::shared_ptr<const SweepData> fixture() {
  return std::make_shared<const SweepData>(read_sweep_json(testing::data_file("sweep.json")));
}

}  // namespace

class SweepModelTest : public QObject {
  Q_OBJECT

 private slots:
  void model_contract() {
    SweepTableModel model;
    QAbstractItemModelTester source_tester(&model,
                                           QAbstractItemModelTester::FailureReportingMode::QtTest);
    SweepFilterProxy proxy;
    proxy.setSourceModel(&model);
    QAbstractItemModelTester proxy_tester(&proxy,
                                          QAbstractItemModelTester::FailureReportingMode::QtTest);
    const auto sweep = fixture();
    model.set_sweep(sweep);
    QCOMPARE(model.rowCount(), 5);
    // sweep_columns(), then compute_s, exposed_offload_s, flash_attention, prune_reason.
    QCOMPARE(model.columnCount(), static_cast<int>(sweep_columns().size()) + 4);
    const int step = sweep->column("step_time_s"), mfu = sweep->column("mfu"), peak = sweep->column("peak_bytes");
    QCOMPARE(model.headerData(step, Qt::Horizontal).toString(), QStringLiteral("step time (s)"));
    QCOMPARE(model.headerData(step, Qt::Horizontal, Qt::ToolTipRole).toString(),
             QStringLiteral("step_time_s: time per training step"));
    QCOMPARE(model.headerData(peak, Qt::Horizontal).toString(), QStringLiteral("peak memory (GiB)"));
    // Cells in their column's unit (row 0 of data/sweep.json: mfu 0.52, step_time_s 9.5).
    QCOMPARE(model.data(model.index(0, mfu)).toString(), QStringLiteral("52.0"));
    QCOMPARE(model.data(model.index(0, peak)).toString(), QStringLiteral("56.8"));
    QCOMPARE(model.data(model.index(0, step)).toString(), QStringLiteral("9.5"));
    QCOMPARE(model.data(model.index(0, step), SweepTableModel::kSortRole).toDouble(), 9.5);
    QVERIFY(!model.data(model.index(3, 0), SweepTableModel::kSortRole).isValid());
    for (int c = 0; c < model.columnCount(); ++c) {
      proxy.sort(c, Qt::AscendingOrder);
      proxy.sort(c, Qt::DescendingOrder);
    }
    proxy.set_text("nvlink");
    proxy.set_fits(SweepFilterProxy::Fits::kDoesNotFit);
    proxy.set_text("");
    model.set_sweep(nullptr);
    QCOMPARE(proxy.rowCount(), 0);
  }

  void sorting_data() {
    QTest::addColumn<QString>("column");
    QTest::addColumn<bool>("ascending");
    QTest::addColumn<std::vector<int>>("rows");
    // step_time_s: 9.5, 10.25, 11.0; rows 3 and 4 have none and stay last either way.
    QTest::newRow("step ascending") << "step_time_s" << true << std::vector<int>{0, 1, 2, 3, 4};
    QTest::newRow("step descending") << "step_time_s" << false << std::vector<int>{2, 1, 0, 3, 4};
    // peak_bytes: 61, 44, 40, 98, 30 GB.
    QTest::newRow("peak ascending") << "peak_bytes" << true << std::vector<int>{4, 2, 1, 0, 3};
    // tp: 2, 4, 2, 1, 8; ties keep the sweep's order.
    QTest::newRow("tp ascending") << "tp" << true << std::vector<int>{3, 0, 2, 1, 4};
    // why (text), case-insensitive: does, fastest, more, pipeline, pruned.
    QTest::newRow("why ascending") << "why" << true << std::vector<int>{3, 0, 1, 2, 4};
    // fits: false (0) before true (1).
    QTest::newRow("fits ascending") << "fits" << true << std::vector<int>{3, 0, 1, 2, 4};
  }
  void sorting() {
    QFETCH(QString, column);
    QFETCH(bool, ascending);
    QFETCH(std::vector<int>, rows);
    auto sweep = fixture();
    SweepTableModel model;
    model.set_sweep(sweep);
    SweepFilterProxy proxy;
    proxy.setSourceModel(&model);
    proxy.sort(sweep->column(column.toStdString()),
               ascending ? Qt::AscendingOrder : Qt::DescendingOrder);
    QCOMPARE(order(proxy), rows);
  }

  void filtering_data() {
    QTest::addColumn<QString>("text");
    QTest::addColumn<int>("fits");
    QTest::addColumn<std::vector<int>>("rows");
    QTest::newRow("everything") << "" << 0 << std::vector<int>{0, 1, 2, 3, 4};
    QTest::newRow("fits") << "" << 1 << std::vector<int>{0, 1, 2, 4};
    QTest::newRow("does not fit") << "" << 2 << std::vector<int>{3};
    QTest::newRow("text, any case") << "NVLINK" << 0 << std::vector<int>{0};
    // "pruned" is in row 4's why; row 4 fits, so the does-not-fit filter hides it.
    QTest::newRow("text and fits") << "pruned" << 2 << std::vector<int>{};
    // The shown text is searched: 44e9 bytes shows as "41.0" under "peak memory (GiB)".
    QTest::newRow("formatted cell") << "41.0" << 0 << std::vector<int>{1};
  }
  void filtering() {
    QFETCH(QString, text);
    QFETCH(int, fits);
    QFETCH(std::vector<int>, rows);
    SweepView view;
    view.set_sweep(fixture());
    view.proxy()->sort(-1);  // the sweep's order
    view.filter_edit()->setText(text);
    view.fits_combo()->setCurrentIndex(fits);
    QCOMPARE(order(*view.proxy()), rows);
    QCOMPARE(view.count_text(), QStringLiteral("%1 of 5 plans").arg(rows.size()));
  }

  // Sorted ascending the header shows ▲ (narrow at the top), descending ▼ — Qt's
  // own header draws them the other way round.
  void the_sort_arrow_points_the_way_values_grow() {
    SweepView view;
    view.resize(1200, 400);
    view.show();
    QVERIFY(QTest::qWaitForWindowExposed(&view));
    view.set_sweep(fixture());
    QHeaderView* header = view.table()->horizontalHeader();
    // The arrow's dark pixels in the rank column's header, row by row: the width of
    // its top row against its bottom row.
    auto arrow_points_up = [&](Qt::SortOrder order) -> int {
      view.table()->sortByColumn(0, order);
      QCoreApplication::processEvents();
      const QImage img = header->grab().toImage();
      const int x0 = header->sectionViewportPosition(0), x1 = x0 + header->sectionSize(0);
      std::vector<int> widths;
      for (int y = 0; y < img.height(); ++y) {
        int dark = 0;
        // The arrow sits at the section's right end, away from the text.
        for (int x = x1 - 20; x < x1 - 2; ++x) dark += qGray(img.pixel(x, y)) < 128;
        if (dark > 0) widths.push_back(dark);
      }
      if (widths.size() < 2 || widths.front() == widths.back()) return -1;  // no arrow found
      return widths.front() < widths.back() ? 1 : 0;
    };
    QCOMPARE(arrow_points_up(Qt::AscendingOrder), 1);
    QCOMPARE(arrow_points_up(Qt::DescendingOrder), 0);
  }

  // The plot's numbers from data/sweep.json: plans 1-3 fit and were simulated
  // (row 4 fits but has no tokens/s, row 3 does not fit); the front is rows 2
  // (40 GB) and 0 (61 GB) by memory; capacity 80 GB.
  void pareto_points_front_and_ticks() {
    const ParetoData d = pareto_data(*fixture());
    QCOMPARE(d.points.size(), std::size_t{3});
    std::vector<int> rows;
    for (const ParetoPoint& p : d.points) rows.push_back(p.row);
    QCOMPARE(rows, (std::vector<int>{0, 1, 2}));
    QCOMPARE(d.front, (std::vector<int>{2, 0}));
    QCOMPARE(d.points[1].tokens_per_s, 51150.0);
    QCOMPARE(d.points[1].peak_gib, 44e9 / (1024.0 * 1024.0 * 1024.0));
    QCOMPARE(d.tps, (std::vector<int>{2, 4}));
    QCOMPARE(d.pps, (std::vector<int>{1, 2}));
    QCOMPARE(d.capacity_gib, 80e9 / (1024.0 * 1024.0 * 1024.0));
    QCOMPARE(nice_ticks(0.0, 57000.0, 5), (std::vector<double>{0, 20000, 40000, 60000}));
    QCOMPARE(nice_ticks(0.0, 78.3, 9), (std::vector<double>{0, 10, 20, 30, 40, 50, 60, 70, 80}));
    QVERIFY(nice_ticks(1.0, 1.0, 5).empty());
    // The tooltip names the plan with the sweep table's label (sim::plan_label); 40e9 B = 37.25 GiB.
    QCOMPARE(QString::fromStdString(describe_point(*fixture(), d.points[2])),
             QString::fromUtf8("plan 3 · tp2 pp2 dp2 vpp1 mbs1 1f1b z1 none sp · 47662 tokens/s · 37.3 GiB peak"
                               " · on the Pareto front"));
  }

  // A click on a point selects its plan in the table and asks for its timeline.
  void clicking_a_point_selects_and_opens_its_plan() {
    SweepView view;
    view.resize(1400, 600);
    view.show();
    QVERIFY(QTest::qWaitForWindowExposed(&view));
    view.set_sweep(fixture());
    ParetoPlot* plot = view.pareto_plot();
    std::vector<int> selected, opened;
    connect(&view, &SweepView::planSelected, this, [&](int row) { selected.push_back(row); });
    connect(&view, &SweepView::planOpened, this, [&](int row) { opened.push_back(row); });
    // Point 1 is sweep row 1 (tp 4, 41 GiB, 51,150 tokens/s).
    const QPoint at = plot->point_position(1).toPoint();
    QCOMPARE(plot->point_at(at), 1);
    QCOMPARE(plot->point_at(at + QPoint(40, 40)), -1);
    QTest::mouseClick(plot, Qt::LeftButton, {}, at);
    QCOMPARE(selected, (std::vector<int>{1}));
    QCOMPARE(opened, (std::vector<int>{1}));
    QCOMPARE(plot->selected_row(), 1);
    QCOMPARE(view.proxy()->mapToSource(view.table()->currentIndex()).row(), 1);
    // Selecting a row in the table rings its point.
    view.select_view_row(0);
    QCOMPARE(plot->selected_row(), view.proxy()->mapToSource(view.proxy()->index(0, 0)).row());
  }

  void selecting_a_row_names_the_sweep_row() {
    SweepView view;
    view.set_sweep(fixture());
    const int peak = fixture()->column("peak_bytes");
    view.proxy()->sort(peak, Qt::AscendingOrder);
    std::vector<int> selected;
    connect(&view, &SweepView::planSelected, this, [&](int row) { selected.push_back(row); });
    view.select_view_row(0);  // smallest peak: row 4 (30 GB)
    view.select_view_row(3);  // row 0 (61 GB)
    QCOMPARE(selected, (std::vector<int>{4, 0}));
  }
};

int run_sweep_model_tests(int argc, char** argv) {
  return testing::run<SweepModelTest>(argc, argv);
}

}  // namespace strata::gui

#include "sweep_model_test.moc"
