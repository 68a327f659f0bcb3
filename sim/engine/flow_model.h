// What the event engine needs from a network: flows over links whose rates are
// shared max-min fairly and change whenever a flow starts or ends. The topology
// part's FlowSharing implements it (TopologyFlowModel in
// sim/costs/topology_comm_costs.h adapts it); tests use simple models with
// hand-computable rates.
#pragma once

#include <cstdint>
#include <vector>

namespace strata::sim {

class FlowModel {
 public:
  using FlowId = std::int64_t;
  virtual ~FlowModel() = default;
  // Starts a flow over `links`, never faster than rate_cap_bytes_per_s (> 0); at
  // rate r it loads links[i] with weights[i] * r (empty weights: 1 each).
  virtual FlowId add(const std::vector<std::int32_t>& links, double rate_cap_bytes_per_s,
                     const std::vector<double>& weights) = 0;
  virtual void remove(FlowId id) = 0;
  // Several flows starting (ending) at the same instant: the same end state as
  // add (remove) one by one; models may re-solve once for all of them.
  virtual std::vector<FlowId> add_all(const std::vector<const std::vector<std::int32_t>*>& links,
                                      const std::vector<double>& rate_caps_bytes_per_s,
                                      const std::vector<const std::vector<double>*>& weights) {
    std::vector<FlowId> ids;
    for (std::size_t i = 0; i < links.size(); ++i) ids.push_back(add(*links[i], rate_caps_bytes_per_s[i], *weights[i]));
    return ids;
  }
  virtual void remove_all(const std::vector<FlowId>& ids) {
    for (FlowId id : ids) remove(id);
  }
  // Current rate in bytes per second (> 0 for an active flow).
  virtual double rate(FlowId id) const = 0;
  // Flows whose rate changed since the last call, including flows just added.
  virtual std::vector<FlowId> take_changed() = 0;
};

}  // namespace strata::sim
