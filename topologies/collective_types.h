// Names shared by the collective model and its callers: NCCL's algorithms and
// protocols, and the estimate of one collective.
#pragma once

#include <optional>
#include <string>

namespace strata::topo {

enum class CollectiveAlgorithm {
  kRing,          // NCCL Ring
  kTree,          // NCCL Tree: double binary tree between nodes, chain inside a node (all-reduce)
  kNvls,          // NCCL NVLS: NVSwitch in-switch reduction (NVLink SHARP), one node
  kNvlsTree,      // NCCL NVLS_TREE: NVLS inside nodes, tree between nodes (all-reduce)
  kHierarchical,  // intra-node reduce-scatter, inter-node all-reduce, intra-node all-gather
  kDirect,        // point-to-point transfers (all-to-all, send/recv)
};

enum class Protocol { kLL, kLL128, kSimple };

const char* to_string(CollectiveAlgorithm algorithm);  // "ring", "tree", "nvls", "nvls_tree", ...
const char* to_string(Protocol protocol);              // "LL", "LL128", "Simple"
std::optional<CollectiveAlgorithm> parse_collective_algorithm(const std::string& name);

struct CollectiveEstimate {
  CollectiveAlgorithm algorithm = CollectiveAlgorithm::kRing;
  Protocol protocol = Protocol::kSimple;
  int channels = 0;
  double time_s = 0.0;
  double latency_s = 0.0;          // the latency part of the time
  double bandwidth_s = 0.0;        // the bandwidth part (time_s = latency_s + bandwidth_s)
  double algbw_bytes_per_s = 0.0;  // nccl-tests: bytes / time
  double busbw_bytes_per_s = 0.0;  // nccl-tests: algbw × the op's bus factor
  // True when a measured efficiency (from a device profile) scaled the wire
  // bandwidth; false when datasheet figures were used.
  bool calibrated = false;
};

}  // namespace strata::topo
