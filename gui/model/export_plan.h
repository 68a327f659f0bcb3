// Exporting the plan on screen as the files that launch it: the same calls as
// `strata export` (export/export.h): the plan is simulated at full fidelity, then
// sim::export_plan builds strata-run.json, megatron-args.sh, deepspeed.json,
// launch.slurm, launch-mpirun.sh and prediction.json, written all or nothing.
// Qt-free: it runs on a worker thread and in tests.
#pragma once

#include <string>
#include <vector>

#include "gui/model/load_progress.h"
#include "gui/model/result_data.h"
#include "sim/scenario.h"

namespace strata::gui {

struct ExportedPlan {
  std::string dir;
  std::vector<std::string> files;  // names written, in export order
  std::vector<std::string> notes;  // what does not map, and why (sim::ExportResult::notes)
  double step_time_s = 0.0;        // the prediction's step time
};

// Simulates scenario (full fidelity, as `strata export` by default) and writes the
// export files into dir with `strata export`'s defaults (10 steps, 2 warm-up, seed
// 1234, the profile's backend, mpirun settings of core/mpirun_settings.h); launch
// scripts are made executable. progress covers the simulation (false cancels:
// Cancelled). Throws InputError when the plan does not fit in memory (naming the
// stage; nothing is written) or dir cannot be written.
ExportedPlan export_plan_to(const Scenario& scenario, const std::string& dir,
                            const ProgressFn& progress = {});

// The scenario a result.json was simulated from: its `inputs` hold the model,
// plan and cluster in full and the profile by name (sim/scenario.h,
// inputs_json). Throws InputError naming the file and the JSON path when they are
// missing or the profile is not a shipped one.
Scenario scenario_from_result(const ResultData& result);

}  // namespace strata::gui
