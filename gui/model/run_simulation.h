// Running the simulator from the GUI: the same calls as `strata simulate`
// (sim/simulate.h), with the result and trace read back into what the views
// show, and the files kept so the user can save them. Qt-free: it runs on a
// worker thread and in tests.
#pragma once

#include <memory>
#include <string>

#include "gui/model/load_progress.h"
#include "gui/model/result_data.h"
#include "gui/model/sweep_data.h"
#include "gui/model/trace_model.h"
#include "sim/scenario.h"
#include "sim/workload/workload.h"

namespace strata::gui {

struct SimulationOutput {
  ResultData result;
  std::shared_ptr<const TraceModel> trace;
  std::string result_json;  // result.json's text, as `strata simulate` writes it
  std::string trace_json;   // trace.json's text
};

// Simulates one step of scenario (default trace ranks, as `strata simulate`).
// progress covers the simulation; returning false stops it with Cancelled.
// Throws InputError for a scenario the simulator refuses.
SimulationOutput run_simulation(const Scenario& scenario, sim::Fidelity fidelity,
                                const ProgressFn& progress);

// The scenario of one sweep plan: the request's model and cluster (shipped names
// or paths; request.profile overrides the cluster's profile) and the row's plan,
// checked against them. Throws InputError naming what is missing or wrong (a
// sweep.csv has no request: the message says to open sweep.json).
Scenario scenario_for_sweep_plan(const SweepData& sweep, const SweepRow& row);

// Writes DIR/result.json and DIR/trace.json (both or neither). Throws InputError
// when DIR is not writable.
void save_simulation(const SimulationOutput& output, const std::string& dir);

}  // namespace strata::gui
