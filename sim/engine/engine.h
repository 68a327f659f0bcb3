// The discrete-event engine: runs a TaskGraph and reports when each task started
// and ended.
//
// Time is integer nanoseconds. Events are ordered by (time, insertion sequence),
// so ties resolve the same way on every run and outputs are byte-identical.
// Stale completion events (a flow whose rate changed) are skipped by a version
// number, never searched for in the queue. Time never runs backwards (checked).
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "core/units.h"
#include "sim/engine/flow_model.h"
#include "sim/engine/task_graph.h"

namespace strata::sim {

struct RunResult {
  std::vector<TimeNs> start_ns;  // per task
  std::vector<TimeNs> end_ns;
  // The task whose completion let the task start: the last of its dependencies or
  // of its stream predecessors to finish (-1 for tasks ready at the step's start).
  // Metrics follow these chains to say what a rank's compute stream waited for.
  std::vector<TaskId> blocker;
  TimeNs makespan_ns = 0;
  std::int64_t events = 0;
};

// How far a run is: tasks finished of the graph's, events handled so far. Called
// every kEngineProgressEvents events (a long full-fidelity step runs millions);
// it may throw to stop the run (Cancelled).
using EngineProgress = std::function<void(std::int64_t tasks_done, std::int64_t tasks, std::int64_t events)>;
inline constexpr std::int64_t kEngineProgressEvents = 1 << 16;

// Runs the graph. network may be null: communications are then costed without
// links (fixed latency + bytes / rate cap). Throws InternalError on a deadlock
// (tasks left that can never start), which would be a workload-builder bug.
// durations, when given, replace the graph's task durations (one per task; a
// communication task's own time stays its CommSpec's).
RunResult run_task_graph(const TaskGraph& graph, FlowModel* network, const EngineProgress& progress = {},
                         const std::vector<TimeNs>* durations = nullptr);

}  // namespace strata::sim
