#include "gui/model/plan_memory.h"

#include "gui/model/run_simulation.h"

namespace strata::gui {

MemoryReport memory_for_sweep_plan(const SweepData& sweep, const SweepRow& row) {
  const Scenario s = scenario_for_sweep_plan(sweep, row);
  return memory_report(s.model, s.plan, s.profile);
}

}  // namespace strata::gui
