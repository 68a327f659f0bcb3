#include "jobs/sharded_sweep.h"

#include <cstring>
#include <type_traits>

#include <fmt/format.h>

#include "core/error.h"
#include "runtime/comm/gather_bytes.h"

namespace strata::jobs {

static_assert(std::is_trivially_copyable_v<SimulatedPlan>);
static_assert(sizeof(SimulatedPlan) == sizeof(std::uint64_t) + sizeof(double) * (8 + sim::kNumCommKinds),
              "SimulatedPlan must have no padding, so its bytes are its values");

std::string encode(const std::vector<SimulatedPlan>& plans) {
  std::string bytes(plans.size() * sizeof(SimulatedPlan), '\0');
  if (!plans.empty()) std::memcpy(bytes.data(), plans.data(), bytes.size());
  return bytes;
}

std::vector<SimulatedPlan> decode(const std::string& bytes) {
  if (bytes.size() % sizeof(SimulatedPlan) != 0) {
    throw InternalError(fmt::format("a sweep shard's message of {} bytes is not a whole number of {}-byte records",
                                    bytes.size(), sizeof(SimulatedPlan)));
  }
  std::vector<SimulatedPlan> plans(bytes.size() / sizeof(SimulatedPlan));
  if (!plans.empty()) std::memcpy(plans.data(), bytes.data(), bytes.size());
  return plans;
}

std::vector<SimulatedPlan> simulated_plans(const sim::SweepResult& sweep) {
  std::vector<SimulatedPlan> out;
  for (std::size_t i = 0; i < sweep.plans.size(); ++i) {
    const sim::PlanOutcome& o = sweep.plans[i];
    if (!o.simulated) continue;
    SimulatedPlan r;
    r.index = i;
    r.metrics = o;  // its PlanMetrics
    out.push_back(r);
  }
  return out;
}

void apply(const SimulatedPlan& r, sim::SweepResult& sweep) {
  if (r.index >= sweep.plans.size()) {
    throw InternalError(fmt::format("a sweep shard sent plan {} of a sweep of {} plans: the ranks enumerated "
                                    "different plan spaces",
                                    r.index, sweep.plans.size()));
  }
  sim::PlanOutcome& o = sweep.plans[r.index];
  o.simulated = true;
  o.fidelity = "folded";
  static_cast<sim::PlanMetrics&>(o) = r.metrics;
}

sim::SweepResult run_sharded_sweep(const ModelSpec& model, const sim::Simulator& simulator,
                                   const sim::PlanSpaceRequest& request, sim::SweepOptions options,
                                   rt::Communicator& world) {
  options.shard_index = world.rank();
  options.shard_count = world.size();
  sim::SweepResult sweep = sim::run_sweep(model, simulator, request, options);
  if (world.size() == 1) return sweep;
  const std::vector<std::string> messages = rt::all_gather_bytes(world, encode(simulated_plans(sweep)));
  std::int64_t simulated = 0;
  for (const std::string& m : messages) {
    for (const SimulatedPlan& r : decode(m)) {
      apply(r, sweep);
      ++simulated;
    }
  }
  sweep.counts.simulated = simulated;
  return sweep;
}

}  // namespace strata::jobs
