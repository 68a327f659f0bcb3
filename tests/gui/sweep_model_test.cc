// The sweep table: models checked by QAbstractItemModelTester while sorting any
// column and filtering by text and by fits.
#include <QAbstractItemModelTester>
#include <QComboBox>
#include <QLineEdit>
#include <QTest>

#include "gui/model/sweep_data.h"
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
    QCOMPARE(model.headerData(step, Qt::Horizontal).toString(), QStringLiteral("step_time_s"));
    // Cells as shown: percent, GiB, time (row 0 of data/sweep.json: mfu 0.52, step_time_s 9.5).
    QCOMPARE(model.data(model.index(0, mfu)).toString(), QStringLiteral("52.0%"));
    QCOMPARE(model.data(model.index(0, peak)).toString(), QStringLiteral("56.8 GiB"));
    QCOMPARE(model.data(model.index(0, step)).toString(), QStringLiteral("9.5 s"));
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
    // The shown text is searched: 44e9 bytes shows as "41.0 GiB".
    QTest::newRow("formatted cell") << "41.0 GiB" << 0 << std::vector<int>{1};
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
