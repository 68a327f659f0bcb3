// What NCCL's topology search would build for a group of GPUs: the ring order,
// the rails its channels use, how many channels at what per-channel speed, and the
// NVLS graph. Internal to the collective model.
//
// The search follows src/graph/search.cc in spirit: a ring visits each node once,
// its GPUs in an order that follows the cheapest links (NVLink first, then the PCIe
// switch, then the socket); between nodes each channel stays on one rail (NCCL's
// crossNic = 0), entering and leaving every node through GPUs next to that rail's
// NIC. Channels go round-robin over the rails; the per-channel speed is the
// largest entry of NCCL's speed list for which the channels fit the links'
// capacities, and channels are duplicated as NCCL does.
#pragma once

#include <functional>
#include <vector>

#include "topologies/nccl_tuning.h"
#include "topologies/topology.h"

namespace strata::topo {

// Capacity of a link for this search, bytes/s (the achievable bandwidth, or a
// calibrated share of the line rate).
using CapacityFn = std::function<double(LinkId)>;

struct GroupShape {
  std::vector<int> gpus;                   // in rank order
  std::vector<int> nodes;                  // distinct nodes, in order of first appearance
  std::vector<std::vector<int>> members;   // per entry of `nodes`: its GPUs, in rank order
  int min_compute_capability = 80;
  int max_compute_capability = 80;
  bool amd_cpu = false;                    // socket link is xGMI
  int ranks() const { return static_cast<int>(gpus.size()); }
  int node_count() const { return static_cast<int>(nodes.size()); }
  int generation() const {                 // 0 Volta, 1 Ampere, 2 Hopper (NCCL's compCapIndex)
    return min_compute_capability >= 90 ? 2 : min_compute_capability >= 80 ? 1 : 0;
  }
};

GroupShape make_group_shape(const Topology& topology, const std::vector<int>& group);

// One ring through the whole group, on one rail (-1 within a node).
struct RingInstance {
  int rail = -1;
  std::vector<int> order;                         // GPUs in ring order
  std::vector<std::vector<LinkId>> edge_paths;    // edge i: order[i] → order[i+1 mod n]
  std::vector<std::pair<LinkId, int>> link_uses;  // (link, edges crossing it), sorted by link
};

struct RingGraph {
  std::vector<RingInstance> instances;
  int channels = 0;                  // after duplication
  double speed_gbytes_per_s = 0.0;   // per channel, after duplication
  bool nvlink_intra = false;         // every intra-node edge is NVLink only (NCCL PATH_NVL)
  bool nic_near_gpu = true;          // GPU↔NIC paths avoid the CPU (NCCL PATH_PXB or better)
  double max_single_channel_gbytes_per_s = 0.0;  // one channel alone, on its best rail
  double busbw_gbytes_per_s() const { return channels * speed_gbytes_per_s; }
  // Share of the channels on instance i.
  double share(std::size_t i) const;
  // Channels on instance i (after duplication; 0 for an instance given none).
  int channels_on(std::size_t i) const;
};

RingGraph search_ring(const Topology& topology, const NcclTuning& tuning, const GroupShape& shape,
                      const CapacityFn& capacity);

// NCCL's NVLS graph for the group's GPUs on one node: channels = GPUs (each the
// head of one), speed such that (channels + 1) · speed fits every GPU↔NVSwitch link.
struct NvlsGraph {
  bool available = false;
  int channels = 0;
  double speed_intra_gbytes_per_s = 0.0;
  double speed_inter_gbytes_per_s = 0.0;  // per-channel network speed (multi-node NVLS_TREE)
};

NvlsGraph search_nvls(const Topology& topology, const NcclTuning& tuning, const GroupShape& shape,
                      const CapacityFn& capacity);

// The largest speed of `speeds` (descending) that is ≤ limit, or 0.
double largest_speed_at_most(const std::vector<double>& speeds, double limit);

}  // namespace strata::topo
