#include "sim/workload/module_gathers.h"

#include <algorithm>
#include <map>

namespace strata::sim {
namespace {

enum class Status { kNotAvailable, kInFlight, kAvailable };

// DeepSpeed's get_reuse_distance_in_numel: the elements of the modules used
// between trace step `step` and the next use of the same module; "far" when
// there is none.
std::int64_t reuse_distance(const std::vector<ModuleUse>& trace, std::size_t step) {
  constexpr std::int64_t kFar = std::int64_t{1} << 62;
  std::int64_t distance = 0;
  for (std::size_t j = step + 1; j < trace.size(); ++j) {
    if (trace[j].module == trace[step].module) return distance;
    distance += trace[j].elements;
  }
  return kFar;
}

}  // namespace

std::vector<HookGathers> plan_module_gathers(const std::vector<ModuleUse>& trace, const ModuleGather& config) {
  std::map<int, Status> status;
  std::map<int, std::int64_t> size;
  for (const ModuleUse& u : trace) {
    status[u.module] = u.gathered_elements > 0 ? Status::kNotAvailable : Status::kAvailable;
    size[u.module] = u.gathered_elements;
  }
  std::vector<int> in_flight;
  std::int64_t available = 0;  // gathered or in flight (DeepSpeed's total_available_parameter_numel)
  std::vector<HookGathers> out(trace.size());
  for (std::size_t i = 0; i < trace.size(); ++i) {
    const int u = trace[i].module;
    HookGathers& h = out[i];
    // fetch_sub_module: gather what is not there, then wait for everything in
    // flight when anything of this module was gathered or is in flight.
    const bool was_in_flight = status[u] == Status::kInFlight;
    if (status[u] == Status::kNotAvailable) {
      h.fetched.push_back(u);
      available += size[u];
    }
    if (!h.fetched.empty() || was_in_flight) {
      h.waits = true;
      for (int m : in_flight) status[m] = Status::kAvailable;
      in_flight.clear();
    }
    status[u] = Status::kAvailable;
    // prefetch_next_sub_modules.
    if (in_flight.empty() && available < config.max_live_elements) {
      std::int64_t total = 0;
      for (std::size_t j = i; j < trace.size() && total < config.prefetch_bucket_elements; ++j) {
        const int m = trace[j].module;
        if (status[m] != Status::kNotAvailable) continue;
        status[m] = Status::kInFlight;
        h.prefetched.push_back(m);
        in_flight.push_back(m);
        total += size[m];
        available += size[m];
      }
    }
    // release_sub_module, after the module ran.
    if (size[u] > 0 && reuse_distance(trace, i) >= config.max_reuse_distance_elements) {
      h.releases = true;
      status[u] = Status::kNotAvailable;
      available -= size[u];
    }
  }
  return out;
}

}  // namespace strata::sim
