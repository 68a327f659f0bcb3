// Every input loader of Strata, callable on a parsed document: what the fuzz
// targets (tests/fuzz) run on each input, and what loader_regressions_test.cc
// replays their findings through. A loader either returns (the input is
// accepted) or throws InputError (refused cleanly, the CLI's exit 2); anything
// else is a defect.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace strata::testing {

struct Loader {
  std::string name;  // "model": the fuzz target fuzz_model, the folder regressions/model
  std::string file;  // the file name its errors name ("model.json")
  void (*load)(const nlohmann::json& doc, const std::string& file);
};

// model, plan, cluster, device_profile, framework_profile, constraints, run_config, measured, calculon.
const std::vector<Loader>& loaders();
// Throws std::out_of_range for an unknown name.
const Loader& loader(const std::string& name);

}  // namespace strata::testing
