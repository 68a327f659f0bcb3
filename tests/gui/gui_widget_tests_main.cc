// The widgets' tests, offscreen (CTest sets QT_QPA_PLATFORM=offscreen).
#include <QApplication>

namespace strata::gui {
int run_sweep_model_tests(int argc, char** argv);
int run_timeline_widget_tests(int argc, char** argv);
int run_memory_widget_tests(int argc, char** argv);
int run_main_window_tests(int argc, char** argv);
int run_distribution_view_tests(int argc, char** argv);
}  // namespace strata::gui

int main(int argc, char** argv) {
  QApplication app(argc, argv);
  int failed = 0;
  failed += strata::gui::run_sweep_model_tests(argc, argv);
  failed += strata::gui::run_timeline_widget_tests(argc, argv);
  failed += strata::gui::run_memory_widget_tests(argc, argv);
  failed += strata::gui::run_main_window_tests(argc, argv);
  failed += strata::gui::run_distribution_view_tests(argc, argv);
  return failed == 0 ? 0 : 1;
}
