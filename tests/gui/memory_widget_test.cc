// The memory bars: heights proportional to bytes against the capacity line, and
// the colors actually painted where each part of the stack should be.
#include "gui/widgets/memory_widget.h"

#include <QImage>
#include <QTest>

#include "gui/model/result_data.h"
#include "gui_test_support.h"

namespace strata::gui {

class MemoryWidgetTest : public QObject {
  Q_OBJECT

 private slots:
  void bars_against_capacity() {
    const ResultData r = read_result_file(testing::data_file("run/result.json"));
    MemoryWidget w;
    w.resize(800, 500);
    w.set_memory(*r.memory, "fixture");
    // Stage totals 50 GB and 85 GB, capacity 80 GB; the scale leaves 10% above 85 GB.
    const QRectF plot = w.plot_rect();
    QCOMPARE(w.bytes_per_px(), 85e9 * 1.1 / plot.height());
    QCOMPARE(w.bar_rect(1).height(), plot.height() / 1.1);
    QCOMPARE(w.bar_rect(0).height() / w.bar_rect(1).height(), 50.0 / 85.0);
    QCOMPARE(w.capacity_y(), plot.bottom() - 80e9 / w.bytes_per_px());
    QVERIFY(w.bar_rect(1).top() < w.capacity_y());  // stage 1 pokes through the line
    QVERIFY(w.bar_rect(0).top() > w.capacity_y());

    const QImage img = w.grab().toImage();
    const int x1 = static_cast<int>(w.bar_rect(1).center().x());
    // Bottom of the stack: weights (2 GB).
    QCOMPARE(img.pixelColor(x1, static_cast<int>(plot.bottom() - 2)).rgb(),
             QColor(0x4c, 0x78, 0xa8).rgb());
    // Weights + grads + optimizer = 16 GB; activations (65 GB) above: 48 GB is inside them.
    QCOMPARE(img.pixelColor(x1, static_cast<int>(plot.bottom() - 48e9 / w.bytes_per_px())).rgb(),
             QColor(0xe4, 0x57, 0x56).rgb());
    const QString tip = w.tooltip_for(1);
    QVERIFY2(tip.contains("activations: 60.5 GiB"), qPrintable(tip));  // 65e9 / 2^30
    QVERIFY(tip.contains("does not fit"));
  }

  void nothing_loaded_shows_a_message() {
    MemoryWidget w;
    w.set_memory(std::nullopt, QString(), "no breakdown");
    QVERIFY(!w.memory().has_value());
    QVERIFY(w.tooltip_for(0).isEmpty());
  }
};

int run_memory_widget_tests(int argc, char** argv) {
  return testing::run<MemoryWidgetTest>(argc, argv);
}

}  // namespace strata::gui

#include "memory_widget_test.moc"
