// A sweep split over the ranks of a communicator: rank r simulates every
// size-th plan, the shards' outcomes travel as typed messages, and every rank
// ends with the whole sweep, bit for bit what one process computes.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "runtime/comm/communicator.h"
#include "sweep/sweep.h"

namespace strata::jobs {

// What a shard tells the others of one plan it simulated: the plan's index in
// the enumeration and the folded simulation's metrics.
struct SimulatedPlan {
  std::uint64_t index = 0;
  sim::PlanMetrics metrics;
};

// The message: the records' bytes back to back (no padding: every field is 8
// bytes), so decode(encode(x)) is x bit for bit.
std::string encode(const std::vector<SimulatedPlan>& plans);
// Throws InternalError when the bytes are not a whole number of records.
std::vector<SimulatedPlan> decode(const std::string& bytes);

// This process's simulated plans as records, and a record written back into its
// plan (index checked against the sweep).
std::vector<SimulatedPlan> simulated_plans(const sim::SweepResult& sweep);
void apply(const SimulatedPlan& record, sim::SweepResult& sweep);

// run_sweep with options.shard_index/shard_count set from world, then every
// shard's records gathered onto every rank. No ranking (rank_sweep) is done:
// the caller ranks once, on one rank. Collective over world.
sim::SweepResult run_sharded_sweep(const ModelSpec& model, const sim::Simulator& simulator,
                                   const sim::PlanSpaceRequest& request, sim::SweepOptions options,
                                   rt::Communicator& world);

}  // namespace strata::jobs
