// The Qt-free model's tests (QTest for its data-driven tables).
#include <QCoreApplication>

namespace strata::gui {
int run_time_view_tests(int argc, char** argv);
int run_lod_layout_tests(int argc, char** argv);
int run_trace_reader_tests(int argc, char** argv);
int run_files_tests(int argc, char** argv);
int run_run_sweep_tests(int argc, char** argv);
int run_search_range_tests(int argc, char** argv);
}  // namespace strata::gui

int main(int argc, char** argv) {
  QCoreApplication app(argc, argv);
  int failed = 0;
  failed += strata::gui::run_time_view_tests(argc, argv);
  failed += strata::gui::run_lod_layout_tests(argc, argv);
  failed += strata::gui::run_trace_reader_tests(argc, argv);
  failed += strata::gui::run_files_tests(argc, argv);
  failed += strata::gui::run_run_sweep_tests(argc, argv);
  failed += strata::gui::run_search_range_tests(argc, argv);
  return failed == 0 ? 0 : 1;
}
