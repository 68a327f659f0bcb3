#include "sweep/constraints.h"

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <optional>

#include <fmt/format.h>

#include "core/error.h"
#include "core/json_reader.h"

namespace strata::sim {
namespace {

bool is_numeric_key(const std::string& key) {
  return key == "tp" || key == "cp" || key == "ep" || key == "etp" || key == "zero_shard_size" || key == "pp" || key == "dp" || key == "vpp" || key == "micro_batch_size" ||
         key == "zero_stage";
}

std::string trim(const std::string& s) {
  std::size_t a = 0, b = s.size();
  while (a < b && std::isspace(static_cast<unsigned char>(s[a]))) ++a;
  while (b > a && std::isspace(static_cast<unsigned char>(s[b - 1]))) --b;
  return s.substr(a, b - a);
}

std::string scalar_text(const nlohmann::json& v) {
  if (v.is_string()) return v.get<std::string>();
  if (v.is_boolean()) return v.get<bool>() ? "true" : "false";
  if (v.is_number_integer()) return std::to_string(v.get<long long>());
  return v.dump();
}

// Parses "<=4" style comparisons; false when `text` is not one.
bool parse_comparison(const std::string& text, std::string& op, double& bound) {
  static const char* ops[] = {"<=", ">=", "==", "!=", "<", ">"};
  for (const char* o : ops) {
    const std::string sop = o;
    if (text.rfind(sop, 0) == 0) {
      const std::string number = trim(text.substr(sop.size()));
      char* end = nullptr;
      bound = std::strtod(number.c_str(), &end);
      if (number.empty() || end != number.c_str() + number.size()) return false;
      op = sop;
      return true;
    }
  }
  return false;
}

void check_value(const std::string& key, const std::string& value, const std::string& file,
                 const std::string& path) {
  static const std::vector<std::string> bools = {"true", "false"};
  std::vector<std::string> allowed;
  if (key == "schedule") allowed = schedule_names();
  if (key == "recompute") allowed = {"none", "selective", "full"};
  if (key == "dtype") allowed = {"bf16", "fp16", "fp32"};
  if (key == "cp_comm_type") allowed = cp_comm_type_names();
  if (key == "offload_optimizer" || key == "sequence_parallel" || key == "flash_attention" ||
      key == "overlap_grad_reduce" || key == "overlap_param_gather") {
    allowed = bools;
  }
  if (!allowed.empty()) {
    if (std::find(allowed.begin(), allowed.end(), value) == allowed.end()) {
      std::string list;
      for (const auto& a : allowed) list += (list.empty() ? "" : ", ") + ("\"" + a + "\"");
      throw InputError(file, path, fmt::format("\"{}\" is not a value of {} (allowed: {})", value, key, list));
    }
    return;
  }
  if (is_numeric_key(key)) {
    char* end = nullptr;
    std::strtol(value.c_str(), &end, 10);
    if (value.empty() || end != value.c_str() + value.size()) {
      throw InputError(file, path, fmt::format("{} takes integers, got \"{}\"", key, value));
    }
  }
}

}  // namespace

const std::vector<std::string>& constrainable_keys() {
  static const std::vector<std::string> keys = {
      "tp", "cp", "pp", "dp", "vpp", "micro_batch_size", "schedule", "zero_stage", "offload_optimizer",
      "recompute", "sequence_parallel", "flash_attention", "overlap_grad_reduce",
      "overlap_param_gather", "dtype", "cp_comm_type", "zero_shard_size", "ep", "etp"};
  return keys;
}

std::string plan_value(const PlanSpec& p, const std::string& key) {
  if (key == "tp") return std::to_string(p.tp);
  if (key == "cp") return std::to_string(p.cp);
  if (key == "cp_comm_type") return to_string(p.cp_comm_type);
  // An MoE plan's expert-parallel sizes (resolved: etp defaults to tp).
  if (key == "ep") return std::to_string(p.moe.ep);
  if (key == "etp") return std::to_string(p.moe.etp > 0 ? p.moe.etp : p.tp);
  if (key == "zero_shard_size") return std::to_string(p.zero_shards());
  if (key == "pp") return std::to_string(p.pp);
  if (key == "dp") return std::to_string(p.dp);
  if (key == "vpp") return std::to_string(p.vpp);
  if (key == "micro_batch_size") return std::to_string(p.micro_batch_size);
  if (key == "zero_stage") return std::to_string(p.zero_stage);
  if (key == "schedule") return to_string(p.schedule);
  if (key == "recompute") return to_string(p.recompute);
  if (key == "dtype") return to_string(p.dtype);
  auto b = [](bool v) { return std::string(v ? "true" : "false"); };
  if (key == "offload_optimizer") return b(p.offload_optimizer);
  if (key == "sequence_parallel") return b(p.sequence_parallel);
  if (key == "flash_attention") return b(p.flash_attention);
  if (key == "overlap_grad_reduce") return b(p.overlap_grad_reduce);
  if (key == "overlap_param_gather") return b(p.overlap_param_gather);
  return "";
}

bool satisfies(const PlanSpec& plan, const std::vector<Constraint>& constraints) {
  for (const Constraint& c : constraints) {
    // Without context parallelism there is no cp exchange to choose.
    if (c.key == "cp_comm_type" && plan.cp == 1) continue;
    const std::string value = plan_value(plan, c.key);
    if (c.kind == Constraint::Kind::kOneOf) {
      if (std::find(c.allowed.begin(), c.allowed.end(), value) == c.allowed.end()) return false;
      continue;
    }
    const double x = std::strtod(value.c_str(), nullptr);
    bool ok = true;
    if (c.op == "<") ok = x < c.bound;
    if (c.op == "<=") ok = x <= c.bound;
    if (c.op == ">") ok = x > c.bound;
    if (c.op == ">=") ok = x >= c.bound;
    if (c.op == "==") ok = x == c.bound;
    if (c.op == "!=") ok = x != c.bound;
    if (!ok) return false;
  }
  return true;
}

std::vector<Constraint> read_constraints(const nlohmann::json& doc, const std::string& file) {
  json::ObjectReader r(doc, file);
  std::vector<Constraint> out;
  for (const std::string& key : constrainable_keys()) {
    if (!r.has(key)) {
      r.allow_text(key);  // registers the key as allowed
      continue;
    }
    const nlohmann::json& v = r.raw(key);
    const std::string path = r.path_of(key);
    Constraint c;
    c.key = key;
    if (v.is_array()) {
      if (v.empty()) throw InputError(file, path, "an empty list allows no plan");
      for (std::size_t i = 0; i < v.size(); ++i) {
        const std::string text = scalar_text(v[i]);
        check_value(key, text, file, r.element_path(key, i));
        c.allowed.push_back(text);
      }
    } else if (v.is_string() && is_numeric_key(key)) {
      c.kind = Constraint::Kind::kCompare;
      if (!parse_comparison(trim(v.get<std::string>()), c.op, c.bound)) {
        throw InputError(file, path, "expected a number, a list, or a comparison such as \"<=4\" or \">=2\"");
      }
    } else if (v.is_string() || v.is_boolean() || v.is_number_integer()) {
      const std::string text = scalar_text(v);
      check_value(key, text, file, path);
      c.allowed.push_back(text);
    } else {
      throw InputError(file, path, "expected a value, a list of values or a comparison, got " + json::describe(v));
    }
    out.push_back(std::move(c));
  }
  r.allow_text("source");
  r.finish();
  return out;
}

std::vector<Constraint> load_constraints(const std::string& path) {
  return read_constraints(json::parse_file(path), path);
}

namespace {

// "[1, 2]", "[none,full]" or "[\"none\", \"full\"]" as a JSON array: a shell user
// writes bare words; each item is a JSON value where it parses as one (numbers,
// true/false, quoted strings), else the word as a string.
std::optional<nlohmann::json> parse_list_literal(const std::string& text) {
  if (text.size() < 2 || text.front() != '[' || text.back() != ']') return std::nullopt;
  nlohmann::json list = nlohmann::json::array();
  const std::string inner = trim(text.substr(1, text.size() - 2));
  if (inner.empty()) return list;
  std::size_t start = 0;
  while (start <= inner.size()) {
    const std::size_t comma = inner.find(',', start);
    const std::string item = trim(inner.substr(start, comma == std::string::npos ? std::string::npos : comma - start));
    if (item.empty()) return std::nullopt;
    nlohmann::json value = nlohmann::json::parse(item, nullptr, /*allow_exceptions=*/false);
    if (value.is_discarded() || value.is_structured()) {
      if (item.find_first_of("[]{}\"") != std::string::npos) return std::nullopt;
      value = item;
    }
    list.push_back(std::move(value));
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return list;
}

}  // namespace

Constraint parse_constraint(const std::string& expression, const std::string& where) {
  const std::string e = trim(expression);
  std::size_t i = 0;
  while (i < e.size() && (std::isalnum(static_cast<unsigned char>(e[i])) || e[i] == '_')) ++i;
  const std::string key = e.substr(0, i);
  const std::string rest = trim(e.substr(i));
  const auto& keys = constrainable_keys();
  if (std::find(keys.begin(), keys.end(), key) == keys.end()) {
    std::string list;
    for (const auto& k : keys) list += (list.empty() ? "" : ", ") + k;
    throw InputError("", where, fmt::format("\"{}\": unknown plan key \"{}\" (allowed: {})", expression, key, list));
  }
  nlohmann::json doc = nlohmann::json::object();
  if (rest.rfind("in", 0) == 0) {
    std::optional<nlohmann::json> list = parse_list_literal(trim(rest.substr(2)));
    if (!list) {
      throw InputError("", where,
                       fmt::format("\"{}\": expected a list such as [1, 2] or [none, full]", expression));
    }
    doc[key] = *list;
  } else if (rest.rfind("=", 0) == 0 && rest.rfind("==", 0) != 0) {
    const std::string value = trim(rest.substr(1));
    if (is_numeric_key(key)) {
      doc[key] = "==" + value;
    } else if (value == "true" || value == "false") {
      doc[key] = value == "true";
    } else {
      doc[key] = value;
    }
  } else if (is_numeric_key(key)) {
    doc[key] = rest;
  } else {
    throw InputError("", where, fmt::format("\"{}\": expected key=value, key in [..] or a comparison", expression));
  }
  try {
    return read_constraints(doc, where).front();
  } catch (const InputError& err) {
    throw InputError("", where, fmt::format("\"{}\": {}", expression, err.message()));
  }
}

nlohmann::ordered_json to_json(const std::vector<Constraint>& constraints) {
  nlohmann::ordered_json j = nlohmann::ordered_json::object();
  for (const Constraint& c : constraints) {
    std::string text;
    if (c.kind == Constraint::Kind::kCompare) {
      text = fmt::format("{}{}", c.op, c.bound);
    } else {
      for (const auto& a : c.allowed) text += (text.empty() ? "" : ",") + a;
      text = "in [" + text + "]";
    }
    if (j.contains(c.key)) {
      j[c.key] = j[c.key].get<std::string>() + " and " + text;
    } else {
      j[c.key] = text;
    }
  }
  return j;
}

}  // namespace strata::sim
