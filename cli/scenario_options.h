// The --model/--plan/--cluster/--profile options that several commands share,
// and --from-sweep/--rank for the commands that take a sweep's ranked plan instead.
#pragma once

#include <string>

#include <CLI/CLI.hpp>

#include "sim/scenario.h"
#include "sim/simulate.h"

namespace strata::cli {

void add_scenario_options(CLI::App& command, ScenarioArgs& args, bool plan_required = true);

// A scenario given as files (--model/--plan/--cluster) or as a sweep's ranked
// plan (--from-sweep FILE --rank K): export and simulate take either.
struct ScenarioChoice {
  ScenarioArgs scenario;
  std::string from_sweep;
  int rank = 0;
};

void add_scenario_or_sweep_options(CLI::App& command, ScenarioChoice& choice);

// The chosen scenario; InputError when both ways, or neither, are given.
Scenario load_chosen_scenario(const ScenarioChoice& choice);

// Simulates the scenario with a progress line named `command` on a terminal
// (quiet otherwise), for the commands whose simulation is a step of their work.
sim::SimulationResult simulate_with_progress(const Scenario& s, sim::SimulationOptions options,
                                             const std::string& command);

}  // namespace strata::cli
