// Writes a simulated (or measured) step as Chrome trace events (docs/formats.md,
// "trace.json"): a process per rank, a thread per stream, a complete event per
// op. Compute blocks are expanded into their ops; a pipeline transfer appears on
// the sender's pp-send and the receiver's pp-recv lanes.
//
// Written with fmt into one buffer (a million events is ~150 MB of JSON; a DOM
// would double that), sorted by (pid, tid, ts), deterministic.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "sim/engine/engine.h"
#include "sim/memory_timeline.h"
#include "sim/workload/workload.h"

namespace strata::sim {

struct TraceOptions {
  std::vector<int> ranks;          // simulated rank indices to write (empty: all)
  bool expand_ops = true;          // compute blocks as their ops (else one event each)
  std::vector<std::string> rank_names;  // per simulated rank: "node 0 gpu 3 (rank 3)"
  nlohmann::ordered_json other_data;    // otherData.strata
  // Per simulated rank, memory over the step (sim/memory_timeline.h), written as a
  // "memory" counter of each rank written; empty: none.
  std::vector<RankMemory> memory;
  // The busiest links' utilization over the step (0..1), written as counters of
  // a process of their own, "busiest links", after the ranks.
  struct LinkSeries {
    std::string name;  // "n0.nic0 → leaf0 (ib)"
    std::vector<std::pair<TimeNs, double>> utilization;
  };
  std::vector<LinkSeries> links;
};

// The trace as a JSON document (a string ending in a newline).
std::string trace_json(const Workload& workload, const RunResult& run, const TraceOptions& options);

// Events trace_json would write for these ranks (to decide whether to expand ops).
std::int64_t trace_event_count(const Workload& workload, const TraceOptions& options);

}  // namespace strata::sim
