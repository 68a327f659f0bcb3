// How the sweep table heads and shows each column: a header in words with its
// unit ("step time (s)", "exposed TP (ms)", "peak memory (GiB)", "MFU (%)") and,
// per column, one unit and one number of decimals for every row, chosen from the
// column's largest value so it shows three or four significant digits — so a
// column reads down without units changing from row to row. Qt-free.
#pragma once

#include <string>
#include <vector>

#include "gui/model/sweep_data.h"

namespace strata::gui {

struct ColumnFormat {
  std::string name;     // the sweep.csv column ("step_time_s")
  std::string header;   // "step time (s)"
  std::string tooltip;  // "step_time_s: seconds per training step"
  double scale = 1.0;   // the shown number is value × scale
  int decimals = -1;    // -1: the cell as written (text, booleans, plan keys)
  bool thousands = false;  // group digits by thousands ("101,301")
};

// One format per column of sweep, in its column order.
std::vector<ColumnFormat> sweep_column_formats(const SweepData& sweep);

// A cell as the table shows it ("" stays "", text stays as written).
std::string format_cell(const ColumnFormat& format, const std::string& text, double number);

}  // namespace strata::gui
