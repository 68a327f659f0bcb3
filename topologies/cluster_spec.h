// cluster.json: the machines a plan runs on. A cluster is `nodes` identical nodes
// (a node preset from topologies/presets/nodes/, or an inline node description)
// joined by a fabric, plus the device profile that says what each GPU can do.
// Every key, its unit and default is documented in docs/formats.md.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "topologies/graph_spec.h"

namespace strata {

// A link class inside a node, per GPU (or per socket pair) and per direction.
struct LinkParams {
  double bandwidth_bytes_per_s = 0.0;  // line rate, per direction (datasheet)
  double latency_ns = 0.0;
  // Achievable share of the line rate for bulk GPU transfers (NCCL's own per-link
  // figures; see the presets' sources). 1 = the line rate.
  double efficiency = 1.0;
  std::string source;

  double achievable_bytes_per_s() const { return bandwidth_bytes_per_s * efficiency; }
};

// One node's parts. Node presets are files of exactly this schema.
struct NodeSpec {
  std::string name;             // preset name, or "inline"
  int gpus = 0;
  std::string gpu;              // the GPU model, informational ("A100-SXM4-80GB")
  // CUDA compute capability x10 (80 = A100, 90 = H100/H200): selects NCCL's
  // per-architecture tuning constants.
  int compute_capability = 80;
  int sockets = 1;              // CPU sockets = NUMA domains; GPUs are spread evenly
  // NVLink: absent (kind "none") on PCIe-only boxes.
  std::string nvlink_kind = "none";  // "none" | "nvswitch"
  LinkParams nvlink;                 // per GPU, per direction (all links of a GPU together)
  bool nvls = false;                 // NVSwitch in-switch reduction (NVLink SHARP)
  int nvswitches = 0;
  // PCIe tree: each socket has switches, each switch holds GPUs and NICs.
  int pcie_generation = 4;
  LinkParams pcie;                   // one x16 link, per direction
  int gpus_per_pcie_switch = 2;
  int nics_per_pcie_switch = 2;
  LinkParams socket_link;            // CPU-to-CPU (UPI / xGMI), per direction
  std::string socket_link_kind = "upi";  // "upi" | "xgmi"
  // NICs for the compute fabric.
  int nics = 0;
  double nic_gbps = 0.0;             // line rate, Gb/s, per NIC per direction
  std::string source;
};

struct FabricSpec {
  std::string name = "inline";       // preset name (topologies/presets/fabrics/), or "inline"
  std::string kind = "infiniband";   // "infiniband" | "roce"
  int nics_per_node = 0;             // defaults to the node's NIC count
  double nic_gbps = 0.0;             // defaults to the node's NIC rate
  double oversubscription = 1.0;     // leaf down : up bandwidth ratio (1 = non-blocking)
  int tiers = 0;                     // 2 or 3; 0 = the fewest that hold the cluster
  int switch_radix = 64;             // ports per switch (NDR QM9700: 64)
  double efficiency = 0.0;           // achievable share of line rate; 0 = the kind's default
  double latency_ns = 0.0;           // per switch hop; 0 = the kind's default
  // Rail-optimized: NIC r of every node in a group of nodes goes to that group's
  // rail-r leaf. Otherwise a leaf holds whole nodes (all their NICs).
  bool rail_optimized = true;
  // Queue pairs per inter-node connection (NCCL_IB_QPS_PER_CONNECTION, NCCL's
  // default 1). The fabric's ECMP hashes each queue pair to a path of its own,
  // so a connection's bytes spread over that many paths; with one, connections
  // that hash to the same switch link share it (the collisions Meta measured on
  // baseline ECMP before raising the count: Meta's SIGCOMM 2024 paper on its RoCE
  // training fabric, summarised in "A RoCE network for distributed AI training at
  // scale", engineering.fb.com, 2024-08-05).
  int qps_per_connection = 1;
  std::string source;
};

// The achievable share of line rate for the fabric (the spec's figure, else the
// kind's default; sources in topologies/cluster_spec.cc).
double fabric_efficiency(const FabricSpec& fabric);
// Latency of one switch traversal (the spec's figure, else the kind's default).
double fabric_hop_latency_ns(const FabricSpec& fabric);

struct ClusterSpec {
  std::string name;
  int nodes = 1;
  int gpus_per_node = 8;
  NodeSpec node;
  FabricSpec fabric;
  std::string profile;          // shipped profile name or path
  // An inline graph replaces the generated one (node preset + fat-tree) when not empty.
  topo::GraphSpec graph;
  std::string file;             // the file it was read from (for error messages)
  std::string source;

  int num_gpus() const { return nodes * gpus_per_node; }
};

// Reads a node description (a preset file or the inline `node` object).
NodeSpec read_node_spec(const nlohmann::json& doc, const std::string& file,
                        const std::string& path);
// Loads a shipped node preset by name (topologies/presets/nodes/NAME.json).
NodeSpec load_node_preset(const std::string& name);

// Reads a fabric description (a preset file or the inline `fabric` object); NIC
// count and rate default to the node's.
FabricSpec read_fabric_spec(const nlohmann::json& doc, const std::string& file,
                            const std::string& path, const NodeSpec& node);
// Loads a shipped fabric preset by name (topologies/presets/fabrics/NAME.json).
FabricSpec load_fabric_preset(const std::string& name, const NodeSpec& node);

// path: the JSON path of the cluster object in its file ("$" for a cluster.json).
ClusterSpec read_cluster_spec(const nlohmann::json& doc, const std::string& file,
                              const std::string& path = "$");
ClusterSpec load_cluster_spec(const std::string& path_or_name);

nlohmann::ordered_json to_json(const ClusterSpec& cluster);
nlohmann::ordered_json to_json(const NodeSpec& node);
nlohmann::ordered_json to_json(const FabricSpec& fabric);

}  // namespace strata
