#include "calib/model/cost_sections.h"

#include "core/error.h"
#include "core/json_reader.h"

namespace strata {

const std::vector<std::string>& cost_section_names() {
  static const std::vector<std::string> names = {"gemm",        "memory_bound", "attention",
                                                 "host_copy",   "collectives",  "fit_quality",
                                                 "provenance"};
  return names;
}

void check_cost_section(const std::string& section, const nlohmann::json& value,
                        const std::string& file, const std::string& path) {
  if (!value.is_object()) {
    throw InputError(file, path, "expected an object, got " + json::describe(value));
  }
}

}  // namespace strata
