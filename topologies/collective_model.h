// How long a collective takes on the cluster's wires, as NCCL would run it.
//
// estimate(): NCCL's own cost model (src/graph/tuning.cc, constants from an
// NcclTuning table) on the channels Strata's topology search finds for the group:
// for each algorithm and protocol NCCL considers, time = latency + bytes / bandwidth,
// and NCCL's choice is the fastest. all_to_all and send_recv, which tuning.cc does
// not model, are point-to-point transfers timed on the links they load.
// flows(): the same collective as a few point-to-point flows for the event engine.
//
// Sizes follow nccl-tests: all_reduce, broadcast and send_recv move `bytes` per
// rank; all_gather's bytes are the gathered output, reduce_scatter's the input,
// all_to_all's each rank's send buffer. algbw = bytes / time; busbw = algbw × the
// op's bus factor (core/collective.h).
//
// Thread safety: const methods may be called concurrently (a mutex guards the
// per-group cache of channel searches).
#pragma once

#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "core/collective.h"
#include "topologies/collective_types.h"
#include "topologies/nccl_tuning.h"
#include "topologies/topology.h"

namespace strata::topo {

enum class Scope { kIntraNode, kInterNode };

// Measured efficiencies from a calibrated device profile: for an op and a scope,
// the share of the wire's line rate NCCL's Simple protocol reached (busbw at large
// sizes / the datasheet bottleneck). Where present it replaces the link's
// datasheet efficiency for that op: intra-node links (NVLink, PCIe, sockets) take
// the intra-node figure, network links the inter-node one.
struct CollectiveEfficiency {
  std::map<std::pair<CollectiveOp, Scope>, double> factor;  // in (0, 1]
  std::string source;  // the profile it came from

  bool empty() const { return factor.empty(); }
  std::optional<double> get(CollectiveOp op, Scope scope) const;
};

// One point-to-point flow of a collective.
struct FlowSpec {
  std::vector<LinkId> path;
  double bytes = 0.0;
  double rate_cap_bytes_per_s = 0.0;
  int src_gpu = 0;
  int dst_gpu = 0;
  // Which of the collective's independent pipelines carries it (CollectiveFlows::
  // part_share): a ring's or tree's rail instance; 0 for the other algorithms.
  int part = 0;
};

struct CollectiveFlows {
  CollectiveAlgorithm algorithm = CollectiveAlgorithm::kRing;
  Protocol protocol = Protocol::kSimple;
  // The latency part of NCCL's model (steps × per-hop latency + base).
  double fixed_latency_ns = 0.0;
  // Concurrent flows, each aggregated over the algorithm's steps (one per ring
  // edge and rail, one per GPU to and from the NVSwitch for NVLS, ...).
  std::vector<FlowSpec> flows;
  // Share of the message each part carries (they sum to 1). A ring or tree algorithm
  // runs one part per rail instance (its channels: NCCL's channels progress
  // independently, so a link shared on one rail slows that rail's part and the
  // collective ends when its slowest part does); other algorithms are one part.
  std::vector<double> part_share{1.0};
};

class CollectiveModel {
 public:
  // Keeps references to topology and tuning: both must outlive the model.
  CollectiveModel(const Topology& topology, const NcclTuning& tuning,
                  CollectiveEfficiency efficiency = {});
  ~CollectiveModel();
  CollectiveModel(const CollectiveModel&) = delete;
  CollectiveModel& operator=(const CollectiveModel&) = delete;

  // NCCL's choice (the fastest algorithm and protocol its model predicts) and its
  // time, for this group (global GPU indices, in rank order) and size. A group of
  // one GPU takes no time. Throws InputError (file "", path "group") for GPUs that
  // do not exist or repeat.
  CollectiveEstimate estimate(CollectiveOp op, const std::vector<int>& group, double bytes) const;
  // The same with the algorithm forced (the fastest protocol for it). Throws
  // InputError (path "algorithm") when the algorithm does not apply: tree and
  // nvls_tree are all-reduce only, nvls needs one NVLS node and NCCL ≥ 2.17's
  // table, hierarchical is all-reduce with the same GPU count on every node,
  // direct is all_to_all and send_recv only.
  CollectiveEstimate estimate(CollectiveOp op, const std::vector<int>& group, double bytes,
                              CollectiveAlgorithm forced) const;
  // The algorithms that apply to this op and group, in NCCL's order.
  std::vector<CollectiveAlgorithm> algorithms(CollectiveOp op, const std::vector<int>& group) const;

  // The collective as flows. CONTRACT: with no other traffic, running every flow at
  // min(rate_cap, path bottleneck) and adding fixed_latency_ns gives estimate().time
  // within 1%; under contention FlowSharing slows them.
  CollectiveFlows flows(CollectiveOp op, const std::vector<int>& group, double bytes) const;
  CollectiveFlows flows(CollectiveOp op, const std::vector<int>& group, double bytes,
                        CollectiveAlgorithm forced) const;

  const NcclTuning& tuning() const { return tuning_; }
  bool calibrated() const { return !efficiency_.empty(); }

 private:
  struct Plan;
  struct Choice;
  const Plan& plan(CollectiveOp op, const std::vector<int>& group) const;
  Choice choose(CollectiveOp op, const Plan& plan, double bytes,
                std::optional<CollectiveAlgorithm> forced) const;
  CollectiveEstimate to_estimate(CollectiveOp op, const Plan& plan, const Choice& c,
                                 double bytes) const;
  CollectiveFlows build_flows(CollectiveOp op, const Plan& plan, const Choice& c,
                              double bytes) const;
  double capacity(CollectiveOp op, LinkId link) const;

  const Topology& topology_;
  const NcclTuning& tuning_;
  CollectiveEfficiency efficiency_;
  mutable std::mutex mutex_;
  mutable std::map<std::pair<int, std::vector<int>>, std::unique_ptr<Plan>> plans_;
};

}  // namespace strata::topo
