// CommCosts and the engine's FlowModel backed by the cluster's topology
// (topologies/): NCCL's cost model for each collective, and max-min fair sharing
// of the links for contention.
//
// Full fidelity: a collective becomes one flow per independent part (a ring's or
// tree's rail instance: the channels NCCL runs on that rail) carrying the part's
// share of the message over every link its point-to-point flows cross, weighted
// per link by the bytes those flows put there (NVLink ring edges, PCIe, NICs: each
// carries its own share), capped at its share of the protocol's rate, so that alone
// on the wires it takes NCCL's predicted time; concurrent transfers slow each other
// wherever they share a link, each link loaded by the bytes it really carries, and
// a transfer crossing one rail slows only that rail's part.
// Folded fidelity: only one rank per stage runs, so contention with the symmetric
// copies of a collective (the same collective of the other tensor-parallel or
// data-parallel groups of the stage on the same nodes, which run at the same
// moment) is solved once, statically, and cached.
// Where the device profile measured a collective (op, group size, placement), its
// measured time replaces NCCL's model as the uncontended time.
#pragma once

#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <tuple>

#include "costmodel/cost_model.h"
#include "sim/engine/flow_model.h"
#include "plan/plan_spec.h"
#include "sim/workload/costs.h"
#include "sim/workload/workload.h"
#include "topologies/collective_model.h"
#include "topologies/flow_sharing.h"
#include "topologies/topology.h"

namespace strata::sim {

// A collective's load on the links for one NCCL choice, per message byte. Within
// one algorithm, protocol and channel count every flow's bytes are a fixed multiple
// of the message's and its path is fixed; what varies with the size is the
// protocol's bandwidth time (NCCL's model has size-dependent factors), applied
// per size. One flow build then serves every size that makes the same choice.
struct FlowShape {
  double fixed_ns = 0.0;  // the choice's latency
  // Every link some flow crosses, sorted, and the bytes all the flows put on it
  // per message byte (each flow's share on a 2^-40 grid, summed in flow order).
  std::vector<std::int32_t> links;
  std::vector<double> link_share;
  // The collective's independent parts (CollectiveFlows::part_share: a ring's rail
  // instances), each with its share of the message (on the same grid) and its
  // links' loads per byte of its own; empty when it runs as one part.
  std::vector<CommPart> parts;
};

// Costed collectives, shared by every plan a sweep simulates on one cluster.
// Thread-safe.
class CommCostCache {
 public:
  // (fidelity, tp, cp, dp, op, group, bytes, partner op, partner bytes): folded
  // costs depend on the plan's shape through the symmetric copies they include,
  // and on the collective beside them (-1 and 0 for none). Latency-bound costs, the
  // same for every fidelity and plan, take fidelity -1 and tp = cp = dp = 0.
  using Key = std::tuple<int, int, int, int, int, std::vector<int>, double, int, double>;
  bool find(const Key& key, CommSpec& out) const;
  void insert(Key key, const CommSpec& spec);

  // (op, group, algorithm, protocol, channels). Shapes are never removed, so the
  // reference stays valid as long as the cache.
  using ShapeKey = std::tuple<int, std::vector<int>, int, int, int>;
  const FlowShape* find_shape(const ShapeKey& key) const;
  const FlowShape& insert_shape(ShapeKey key, FlowShape shape);

  // A folded collective's rate with its copies sharing the links, which does not
  // depend on the message size: every flow's rate cap and link load is per message
  // byte. Keyed by what the solve reads: (op, partner op or -1, the group's index
  // among its copies, the copies' GPUs (each copy's size, then its GPUs), and per
  // copy of the group and then of the partner, in order, algorithm, protocol,
  // channels and rate cap, or -1 for a copy that moves nothing), so an entry is the
  // rate a fresh solve would give, to the bit.
  using RateKey = std::tuple<int, int, int, std::vector<int>, std::vector<double>>;
  bool find_rate(const RateKey& key, double& rate) const;
  void insert_rate(RateKey key, double rate);

 private:
  // A map's entry copied out, or a new one kept (the first of equal keys stays),
  // under the lock.
  template <typename Map>
  bool copy_out(const Map& map, const typename Map::key_type& key, typename Map::mapped_type& out) const;
  template <typename Map>
  void put(Map& map, typename Map::key_type key, const typename Map::mapped_type& value);

  mutable std::mutex mutex_;
  std::map<Key, CommSpec> specs_;
  std::map<ShapeKey, std::unique_ptr<FlowShape>> shapes_;
  std::map<RateKey, double> rates_;
};

class TopologyCommCosts : public CommCosts {
 public:
  // All references must outlive this object.
  TopologyCommCosts(const topo::Topology& topology, const topo::CollectiveModel& collectives,
                    const CostModel& cost_model, const PlanSpec& plan, Fidelity fidelity,
                    CommCostCache& cache);
  CommSpec collective(CollectiveOp op, const std::vector<int>& group, double bytes) const override;
  CommSpec p2p(int src_gpu, int dst_gpu, double bytes) const override;
  // NCCL's estimate (or the profile's measured time) as a fixed time: no flows, no
  // symmetric copies (a gradient norm over 1,024 GPUs would build thousands).
  CommSpec latency_bound(CollectiveOp op, const std::vector<int>& group, double bytes) const override;
  // Folded: the sharing solved with the partner's copies active as well.
  CommSpec collective_beside(CollectiveOp op, const std::vector<int>& group, double bytes, CollectiveOp partner,
                             double partner_bytes) const override;
  // The folded cost (copies shared up front) at either fidelity.
  CommSpec baked(CollectiveOp op, const std::vector<int>& group, double bytes) const override;

 private:
  // A collective alone on the wires: NCCL's choice, the flow shape it loads the
  // links with, and its uncontended time terms.
  struct Alone {
    topo::CollectiveEstimate choice;
    const FlowShape* shape = nullptr;  // null: nothing to move, or no links
    Duration fixed;
    bool moves = false;  // false: no bytes (a measured time left no transfer part)
    double rate_cap_bytes_per_s = 0.0;
  };
  Alone alone(CollectiveOp op, const std::vector<int>& group, double bytes) const;
  // The collective's spec (its flow over the shape's links) from its terms alone.
  static CommSpec spec_of(const Alone& a, double bytes);
  CommSpec from_flows(CollectiveOp op, const std::vector<int>& group, double bytes) const;
  const FlowShape& flow_shape(CollectiveOp op, const std::vector<int>& group, double bytes,
                              const topo::CollectiveEstimate& choice) const;
  // The same collective on the other groups of the stage that run at the same time.
  std::vector<std::vector<int>> symmetric_copies(const std::vector<int>& group) const;
  // partner: a collective of every copy's group running at the same time, or none.
  struct Partner {
    CollectiveOp op;
    double bytes;
  };
  CommSpec folded(CollectiveOp op, const std::vector<int>& group, double bytes,
                  std::optional<Partner> partner = std::nullopt) const;

  // Every collective of a step repeats thousands of times: cost each once.
  CommCostCache& cache_;
  const topo::Topology& topology_;
  const topo::CollectiveModel& collectives_;
  const CostModel& cost_model_;
  PlanSpec plan_;
  Fidelity fidelity_;
};

// The engine's view of topo::FlowSharing.
class TopologyFlowModel : public FlowModel {
 public:
  explicit TopologyFlowModel(const topo::Topology& topology) : sharing_(topology) {}
  FlowId add(const std::vector<std::int32_t>& links, double rate_cap_bytes_per_s,
             const std::vector<double>& weights) override {
    return sharing_.add(links, rate_cap_bytes_per_s, weights);
  }
  void remove(FlowId id) override { sharing_.remove(id); }
  std::vector<FlowId> add_all(const std::vector<const std::vector<std::int32_t>*>& links,
                              const std::vector<double>& rate_caps_bytes_per_s,
                              const std::vector<const std::vector<double>*>& weights) override {
    const auto ids = sharing_.add_all_by_pointer(links, rate_caps_bytes_per_s, weights);
    return {ids.begin(), ids.end()};
  }
  void remove_all(const std::vector<FlowId>& ids) override {
    sharing_.remove_all({ids.begin(), ids.end()});
  }
  double rate(FlowId id) const override { return sharing_.rate(id); }
  std::vector<FlowId> take_changed() override { return sharing_.take_changed(); }

 private:
  topo::FlowSharing sharing_;
};

}  // namespace strata::sim
