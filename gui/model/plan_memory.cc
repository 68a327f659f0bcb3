#include "gui/model/plan_memory.h"

#include "gui/model/run_simulation.h"
#include "sim/device_memory.h"

namespace strata::gui {

MemoryReport memory_for_sweep_plan(const SweepData& sweep, const SweepRow& row) {
  const Scenario s = scenario_for_sweep_plan(sweep, row);
  return memory_report(s.model, s.plan, device_memory(s.profile));
}

}  // namespace strata::gui
