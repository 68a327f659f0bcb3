// Memory of one plan of a sweep, from the memory model (sim/memory_model.h),
// for sweeps that did not store a per-plan breakdown (sweep.csv beside no
// sweep.json, or results without `memory`).
#pragma once

#include "gui/model/sweep_data.h"
#include "plan/memory_model.h"

namespace strata::gui {

// Loads request.model and request.cluster (shipped names or paths; request.profile
// overrides the cluster's profile), checks row.plan against them and returns the
// per-stage report. Throws InputError naming what is missing or wrong (a sweep.csv
// has no request: the message says to open sweep.json).
MemoryReport memory_for_sweep_plan(const SweepData& sweep, const SweepRow& row);

}  // namespace strata::gui
