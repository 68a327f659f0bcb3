// The --model/--plan/--cluster/--profile options that several commands share.
#pragma once

#include <CLI/CLI.hpp>

#include "sim/scenario.h"

namespace strata::cli {

void add_scenario_options(CLI::App& command, ScenarioArgs& args, bool plan_required = true);

}  // namespace strata::cli
