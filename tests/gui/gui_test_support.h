// Shared by the GUI test executables: where the fixtures are, and how the test
// classes of one executable are run one after another (QTest runs one class per
// qExec call).
#pragma once

#include <QObject>
#include <QTest>
#include <string>

namespace strata::gui::testing {

// tests/gui/data, compiled in.
inline std::string data_file(const std::string& name) {
  return std::string(STRATA_GUI_TEST_DATA) + "/" + name;
}

// Runs a QTest class; returns the number of failed tests.
template <typename T>
int run(int argc, char** argv) {
  T test;
  return QTest::qExec(&test, argc, argv);
}

}  // namespace strata::gui::testing
