#include "gui/model/sweep_data.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <charconv>
#include <cmath>
#include <filesystem>
#include <string_view>
#include <fstream>
#include <limits>
#include <sstream>

#include "core/error.h"
#include "core/json_reader.h"
#include "plan/plan_spec.h"

namespace strata::gui {
namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

// The number a cell holds: decimal numbers and booleans (true = 1, so sorting by
// fits groups the plans); NaN otherwise.
double number_of(const std::string& text) {
  if (text == "true") return 1.0;
  if (text == "false") return 0.0;
  if (text.empty()) return kNaN;
  double v = 0.0;
  auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec != std::errc() || ptr != text.data() + text.size()) return kNaN;
  return v;
}

// Splits one CSV record starting at pos; advances pos past its line end.
// Returns false (with a message) on an unterminated quote.
bool split_record(const std::string& text, std::size_t* pos, std::vector<std::string>* fields,
                  std::size_t* line, std::string* error) {
  fields->clear();
  std::string field;
  bool quoted = false;
  bool field_was_quoted = false;
  std::size_t i = *pos;
  for (; i < text.size(); ++i) {
    const char c = text[i];
    if (quoted) {
      if (c == '"') {
        if (i + 1 < text.size() && text[i + 1] == '"') {
          field += '"';
          ++i;
        } else {
          quoted = false;
        }
      } else {
        if (c == '\n') ++*line;
        field += c;
      }
      continue;
    }
    if (c == '"' && field.empty() && !field_was_quoted) {
      quoted = true;
      field_was_quoted = true;
    } else if (c == ',') {
      fields->push_back(std::move(field));
      field.clear();
      field_was_quoted = false;
    } else if (c == '\n') {
      ++i;
      break;
    } else if (c != '\r') {
      field += c;
    }
  }
  if (quoted) {
    *error = "unterminated quoted field";
    return false;
  }
  fields->push_back(std::move(field));
  *pos = i;
  return true;
}

std::string cell_text(const nlohmann::json& v) {
  if (v.is_null()) return "";
  if (v.is_string()) return v.get<std::string>();
  if (v.is_boolean()) return v.get<bool>() ? "true" : "false";
  if (v.is_number_integer()) return std::to_string(v.get<std::int64_t>());
  if (v.is_number_unsigned()) return std::to_string(v.get<std::uint64_t>());
  if (v.is_number_float()) return fmt::format("{}", v.get<double>());
  return v.dump();
}

}  // namespace

const std::vector<std::string>& sweep_columns() {
  static const std::vector<std::string> columns = {"rank",
                                                   "tp",
                                                   "cp",
                                                   "pp",
                                                   "dp",
                                                   "vpp",
                                                   "micro_batch_size",
                                                   "global_batch_size",
                                                   "schedule",
                                                   "zero_stage",
                                                   "offload_optimizer",
                                                   "recompute",
                                                   "sequence_parallel",
                                                   "fits",
                                                   "step_time_s",
                                                   "tokens_per_s",
                                                   "mfu",
                                                   "hfu",
                                                   "tflops_per_gpu",
                                                   "bubble_ratio",
                                                   "exposed_tp_s",
                                                   "exposed_pp_s",
                                                   "exposed_dp_s",
                                                   "exposed_zero_s",
                                                   "exposed_cp_s",
                                                   "peak_bytes",
                                                   "capacity_bytes",
                                                   "headroom",
                                                   "pareto",
                                                   "fidelity",
                                                   "why"};
  return columns;
}

int SweepData::column(const std::string& name) const {
  for (std::size_t i = 0; i < columns.size(); ++i) {
    if (columns[i] == name) return static_cast<int>(i);
  }
  return -1;
}

SweepData read_sweep_csv_text(const std::string& text, const std::string& file_label) {
  SweepData sweep;
  sweep.file = file_label;
  std::size_t pos = 0;
  std::size_t line = 1;
  std::string error;
  std::vector<std::string> fields;
  if (text.empty() || !split_record(text, &pos, &fields, &line, &error)) {
    throw InputError(file_label + ":1", "",
                     text.empty() ? "empty file: expected a header row "
                                    "(docs/formats.md, \"sweep.csv\")"
                                  : error);
  }
  sweep.columns = fields;
  for (const char* required : {"tp", "pp", "dp", "fits"}) {
    if (sweep.column(required) < 0) {
      throw InputError(file_label + ":1", "",
                       fmt::format("the header has no \"{}\" column; a sweep.csv header names "
                                   "the columns {}",
                                   required, fmt::join(sweep_columns(), ",")));
    }
  }
  const int fits_col = sweep.column("fits");
  while (pos < text.size()) {
    const std::size_t record_line = ++line;
    if (!split_record(text, &pos, &fields, &line, &error)) {
      throw InputError(fmt::format("{}:{}", file_label, record_line), "", error);
    }
    if (fields.size() == 1 && fields[0].empty()) continue;  // blank line (the file's last)
    if (fields.size() != sweep.columns.size()) {
      throw InputError(fmt::format("{}:{}", file_label, record_line), "",
                       fmt::format("{} fields, but the header has {} columns", fields.size(),
                                   sweep.columns.size()));
    }
    const std::string& fits = fields[fits_col];
    if (fits != "true" && fits != "false") {
      throw InputError(fmt::format("{}:{}", file_label, record_line), "",
                       "column \"fits\": expected true or false, got \"" + fits + "\"");
    }
    SweepRow row;
    row.fits = fits == "true";
    for (const std::string& f : fields) row.numbers.push_back(number_of(f));
    row.cells = std::move(fields);
    fields = {};
    sweep.rows.push_back(std::move(row));
  }
  for (SweepRow& row : sweep.rows) row.plan = plan_from_row(sweep, row);
  return sweep;
}

SweepData read_sweep_csv(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw InputError(path, "", "cannot open file for reading");
  std::ostringstream s;
  s << in.rdbuf();
  return read_sweep_csv_text(s.str(), path);
}

SweepData read_sweep_json(const std::string& path) {
  return read_sweep_json_value(json::parse_file(path), path);
}

SweepData read_sweep_json_value(const nlohmann::json& doc, const std::string& path) {
  json::ObjectReader r(doc, path);
  const std::string schema = r.string("schema");
  if (schema != "strata-sweep/1") {
    r.fail("schema",
           "expected \"strata-sweep/1\" (a sweep.json of `strata sweep`), got \"" + schema + "\"");
  }
  SweepData sweep;
  sweep.file = path;
  sweep.columns = sweep_columns();
  // Columns sweep.csv has beyond the table's first ones (docs/formats.md).
  for (const char* extra : {"compute_s", "exposed_offload_s", "flash_attention", "prune_reason"}) {
    sweep.columns.push_back(extra);
  }
  if (r.has("request")) sweep.request = r.raw("request");
  if (r.has("counts")) sweep.counts = r.raw("counts");
  const nlohmann::json& plans = r.array("plans");
  const std::filesystem::path folder = std::filesystem::path(path).parent_path();
  for (std::size_t i = 0; i < plans.size(); ++i) {
    json::ObjectReader p(plans[i], path, r.element_path("plans", i));
    SweepRow row;
    row.fits = p.boolean("fits");
    // A column's value: the plan entry's own key (rank, fits, pareto, why), else
    // the plan's (tp, schedule, ...), else the result's (step_time_s, ...), with
    // exposed_X_s from result.exposed_comm_s.X (docs/formats.md, "sweep.json").
    const nlohmann::json& entry = plans[i];
    const nlohmann::json* plan_obj =
        entry.contains("plan") && entry["plan"].is_object() ? &entry["plan"] : nullptr;
    const nlohmann::json* result_obj =
        entry.contains("result") && entry["result"].is_object() ? &entry["result"] : nullptr;
    // plan.json leaves out the sizes at their defaults (cp 1, ep 1, vpp 1): the
    // table shows them (PlanSpec's defaults).
    static const nlohmann::json kPlanDefaults = {{"cp", PlanSpec().cp}, {"ep", MoePlan().ep}, {"vpp", PlanSpec().vpp}};
    auto lookup = [&](const std::string& c) -> const nlohmann::json* {
      if (entry.contains(c)) return &entry[c];
      if (plan_obj != nullptr && plan_obj->contains(c)) return &(*plan_obj)[c];
      if (plan_obj != nullptr && kPlanDefaults.contains(c)) return &kPlanDefaults[c];
      if (result_obj == nullptr) return nullptr;
      if (result_obj->contains(c)) return &(*result_obj)[c];
      constexpr std::string_view kPrefix = "exposed_", kSuffix = "_s";
      if (c.size() > kPrefix.size() + kSuffix.size() && c.compare(0, kPrefix.size(), kPrefix) == 0 &&
          c.compare(c.size() - kSuffix.size(), kSuffix.size(), kSuffix) == 0) {
        const std::string kind = c.substr(kPrefix.size(), c.size() - kPrefix.size() - kSuffix.size());
        auto comm = result_obj->find("exposed_comm_s");
        if (comm != result_obj->end() && comm->is_object() && comm->contains(kind)) {
          return &(*comm)[kind];
        }
      }
      return nullptr;
    };
    for (const std::string& c : sweep.columns) {
      std::string text;
      if (c == "fits") {
        text = row.fits ? "true" : "false";
      } else if (const nlohmann::json* v = lookup(c)) {
        text = cell_text(*v);
      }
      row.numbers.push_back(number_of(text));
      row.cells.push_back(std::move(text));
    }
    if (p.has("plan")) {
      json::ObjectReader plan(p.raw("plan"), path, p.path_of("plan"));  // checks it is an object
      row.plan = plan.value();
    } else {
      row.plan = plan_from_row(sweep, row);
    }
    if (p.has("result") && !p.raw("result").is_null()) {
      row.result = read_result_object(p.raw("result"), path, p.path_of("result"));
    }
    if (p.has("trace")) {
      const std::string trace = p.string("trace");
      row.trace_file = (folder / trace).string();
    }
    sweep.rows.push_back(std::move(row));
  }
  return sweep;
}

nlohmann::json plan_from_row(const SweepData& sweep, const SweepRow& row) {
  nlohmann::json plan = nlohmann::json::object();
  for (const char* key :
       {"tp", "cp", "pp", "dp", "vpp", "micro_batch_size", "global_batch_size", "zero_stage"}) {
    const int c = sweep.column(key);
    if (c >= 0 && std::isfinite(row.numbers[c])) plan[key] = std::llround(row.numbers[c]);
  }
  for (const char* key : {"schedule", "recompute", "cp_comm_type"}) {
    const int c = sweep.column(key);
    if (c >= 0 && !row.cells[c].empty()) plan[key] = row.cells[c];
  }
  for (const char* key : {"offload_optimizer", "sequence_parallel"}) {
    const int c = sweep.column(key);
    if (c >= 0 && (row.cells[c] == "true" || row.cells[c] == "false")) {
      plan[key] = row.cells[c] == "true";
    }
  }
  return plan;
}

}  // namespace strata::gui
