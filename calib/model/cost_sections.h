// The cost-model sections of a profile and their strict validation.
// Each section is parsed by the cost model that evaluates it; validating a
// profile means parsing every section it carries.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace strata {

// Section keys a profile may carry besides "device" and "memory".
const std::vector<std::string>& cost_section_names();

// Throws InputError (file, path) when the section is malformed.
void check_cost_section(const std::string& section, const nlohmann::json& value,
                        const std::string& file, const std::string& path);

}  // namespace strata
