// What DeepSpeed's ZeRO stage 3 gathers at each module hook of a training step.
//
// DeepSpeed gathers parameters per submodule: a hook before each module's
// forward (and backward) fetches the module's parameters, then prefetches the
// parameters of the modules that follow in the execution order it recorded on
// the first step, and a hook after it frees them unless they are used again
// soon. This is that bookkeeping (deepspeed/runtime/zero/stage3.py,
// PartitionedParameterCoordinator and PrefetchCoordinator, as released in
// v0.3.13, 2021-03-16), run over the step's module trace ahead of time, so that
// the workload builder can turn each hook's gathers into tasks:
// - fetch: a module's parameters not gathered yet are gathered now; if any were
//   (or any of its are in flight) the hook waits for every gather in flight;
// - prefetch: only when nothing is in flight and fewer than max_live elements
//   are gathered, the parameters of the next modules not gathered, in trace
//   order, until at least prefetch_bucket elements;
// - release: after the module ran, its parameters are freed unless the
//   elements of the modules between this use and its next one are fewer than
//   max_reuse_distance (its next use is soon), or it is persistent.
// Parameters below the persistence threshold never appear here: they stay
// gathered (the caller leaves them out of `gathered_elements`).
#pragma once

#include <cstdint>
#include <vector>

#include "costmodel/framework_profile.h"

namespace strata::sim {

// One pre-hook of a module with parameters, in execution order.
struct ModuleUse {
  int module = 0;                      // which module: the same id at each of its uses
  std::int64_t gathered_elements = 0;  // its parameters that are partitioned (0: all persistent)
  std::int64_t elements = 0;           // all its parameters (what reuse distances count)
};

// What happens at one hook.
struct HookGathers {
  std::vector<int> fetched;     // modules gathered here that the module waits for
  bool waits = false;           // the hook waits for every gather in flight
  std::vector<int> prefetched;  // modules gathered here for later hooks, in issue order
  bool releases = false;        // the module's gathered parameters are freed after it ran
};

// One entry per entry of `trace`.
std::vector<HookGathers> plan_module_gathers(const std::vector<ModuleUse>& trace, const ModuleGather& config);

}  // namespace strata::sim
