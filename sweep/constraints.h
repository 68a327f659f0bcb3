// Constraints on the plans a sweep enumerates: pin a plan key, restrict it to a
// set, or bound it. Written as JSON (a constraints file) or as expressions on the
// command line:
//   {"tp": "<=4", "zero_stage": [1, 2], "sequence_parallel": true}
//   --where 'tp<=4' --where 'zero_stage in [1,2]' --where 'recompute=selective'
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "plan/plan_spec.h"

namespace strata::sim {

struct Constraint {
  std::string key;  // a plan.json key
  enum class Kind { kOneOf, kCompare } kind = Kind::kOneOf;
  std::vector<std::string> allowed;  // kOneOf: values as plan.json would write them
  std::string op;                    // kCompare: "<", "<=", ">", ">=", "==", "!="
  double bound = 0.0;
};

// The plan keys a constraint may name, and whether they are numeric.
const std::vector<std::string>& constrainable_keys();

// Reads a constraints file. Throws InputError naming the file and JSON path.
std::vector<Constraint> read_constraints(const nlohmann::json& doc, const std::string& file);
std::vector<Constraint> load_constraints(const std::string& path);
// Parses one expression ("tp<=4", "zero_stage in [1,2]", "recompute=selective").
// Throws InputError naming `where` (e.g. "--where").
Constraint parse_constraint(const std::string& expression, const std::string& where);

// True when the plan satisfies every constraint.
bool satisfies(const PlanSpec& plan, const std::vector<Constraint>& constraints);
// The plan's value for a constrainable key, as plan.json would write it.
std::string plan_value(const PlanSpec& plan, const std::string& key);

nlohmann::ordered_json to_json(const std::vector<Constraint>& constraints);

}  // namespace strata::sim
