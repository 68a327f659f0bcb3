// A sweep's plans as the sweep table shows them: sweep.csv (one row per plan) or
// sweep.json (the same fields, plus each plan's plan.json object and result).
// Columns and their meaning: docs/formats.md ("sweep.csv"). Qt-free.
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "gui/model/result_data.h"

namespace strata::gui {

// The columns of sweep.csv, in the order `strata sweep` writes them.
const std::vector<std::string>& sweep_columns();

struct SweepRow {
  std::vector<std::string> cells;  // text per column, as written ("" when empty)
  std::vector<double> numbers;     // per column: the value as a number, NaN when not numeric
  bool fits = false;
  nlohmann::json plan;  // a plan.json object (from sweep.json, else built from the columns)
  std::optional<ResultData> result;  // sweep.json only
  std::string trace_file;            // a per-plan trace, when the sweep wrote one ("" if none)
};

struct SweepData {
  std::string file;
  std::vector<std::string> columns;
  std::vector<SweepRow> rows;
  nlohmann::json request;  // sweep.json's request (model, cluster, ...); null for sweep.csv
  nlohmann::json counts;   // sweep.json's counts; null for sweep.csv

  // Index of a column by name; -1 when absent.
  int column(const std::string& name) const;
};

// Reads sweep.csv (RFC 4180 quoting; booleans as true/false). The header must
// name the columns tp, pp, dp and fits; others are kept as they come. Throws
// InputError naming the file, the line and the column at fault.
SweepData read_sweep_csv(const std::string& path);
SweepData read_sweep_csv_text(const std::string& text, const std::string& file_label);

// Reads sweep.json ("schema": "strata-sweep/1"). A plan may name a trace file
// (key `trace`, relative to the sweep file's folder). Throws InputError naming
// the file and the JSON path at fault.
SweepData read_sweep_json(const std::string& path);
// The same for a parsed document; path names it in errors and anchors `trace`.
SweepData read_sweep_json_value(const nlohmann::json& doc, const std::string& path);

// A plan.json object built from a row's columns (tp, pp, dp, vpp, micro_batch_size,
// global_batch_size, schedule, zero_stage, offload_optimizer, recompute,
// sequence_parallel): what the simulator needs to rerun the plan.
nlohmann::json plan_from_row(const SweepData& sweep, const SweepRow& row);

}  // namespace strata::gui
