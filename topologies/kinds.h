// The kinds of vertices and links in a cluster graph, and their names in JSON
// files, DOT output and tables.
#pragma once

#include <optional>
#include <string>

namespace strata::topo {

enum class VertexKind { kGpu, kNvSwitch, kPcieSwitch, kCpu, kNic, kLeaf, kSpine, kCore };

// A directed link: one direction of a wire. kSocket is the CPU-to-CPU link (UPI or xGMI).
enum class LinkKind { kNvlink, kPcie, kSocket, kInfiniband, kEthernet };

// "gpu", "nvswitch", "pcie_switch", "cpu", "nic", "leaf", "spine", "core".
const char* to_string(VertexKind kind);
// "nvlink", "pcie", "socket", "infiniband", "ethernet".
const char* to_string(LinkKind kind);

std::optional<VertexKind> parse_vertex_kind(const std::string& name);
// Accepts the names above and "upi"/"xgmi" for kSocket.
std::optional<LinkKind> parse_link_kind(const std::string& name);

// True for vertices that belong to one node (GPU, NVSwitch, PCIe switch, CPU, NIC).
inline bool is_node_local(VertexKind kind) {
  return kind == VertexKind::kGpu || kind == VertexKind::kNvSwitch ||
         kind == VertexKind::kPcieSwitch || kind == VertexKind::kCpu || kind == VertexKind::kNic;
}

// True for links between nodes (the fabric).
inline bool is_network(LinkKind kind) {
  return kind == LinkKind::kInfiniband || kind == LinkKind::kEthernet;
}

}  // namespace strata::topo
