// cluster.json: the machines a plan runs on. A cluster is `nodes` identical nodes
// (a node preset from topologies/presets/nodes/, or an inline node description)
// joined by a fabric, plus the device profile that says what each GPU can do.
// Every key, its unit and default is documented in docs/formats.md.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

namespace strata {

// A link class inside a node, per GPU (or per socket pair) and per direction.
struct LinkParams {
  double bandwidth_bytes_per_s = 0.0;  // per direction
  double latency_ns = 0.0;
  std::string source;
};

// One node's parts. Node presets are files of exactly this schema.
struct NodeSpec {
  std::string name;             // preset name, or "inline"
  int gpus = 0;
  std::string gpu;              // the GPU model, informational ("A100-SXM4-80GB")
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
  std::string kind = "infiniband";   // "infiniband" | "roce"
  int nics_per_node = 0;             // defaults to the node's NIC count
  double nic_gbps = 0.0;             // defaults to the node's NIC rate
  double oversubscription = 1.0;     // leaf down : up bandwidth ratio (1 = non-blocking)
  int tiers = 0;                     // 2 or 3; 0 = the fewest that hold the cluster
  int switch_radix = 64;             // ports per switch (NDR QM9700: 64)
  double efficiency = 0.0;           // achievable share of line rate; 0 = the kind's default
  double latency_ns = 0.0;           // per switch hop; 0 = the kind's default
  std::string source;
};

struct ClusterSpec {
  std::string name;
  int nodes = 1;
  int gpus_per_node = 8;
  NodeSpec node;
  FabricSpec fabric;
  std::string profile;          // shipped profile name or path
  std::string file;             // the file it was read from (for error messages)
  std::string source;

  int num_gpus() const { return nodes * gpus_per_node; }
};

// Reads a node description (a preset file or the inline `node` object).
NodeSpec read_node_spec(const nlohmann::json& doc, const std::string& file,
                        const std::string& path);
// Loads a shipped node preset by name (topologies/presets/nodes/NAME.json).
NodeSpec load_node_preset(const std::string& name);

ClusterSpec read_cluster_spec(const nlohmann::json& doc, const std::string& file);
ClusterSpec load_cluster_spec(const std::string& path_or_name);

nlohmann::ordered_json to_json(const ClusterSpec& cluster);
nlohmann::ordered_json to_json(const NodeSpec& node);

}  // namespace strata
