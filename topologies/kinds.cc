#include "topologies/kinds.h"

namespace strata::topo {

const char* to_string(VertexKind kind) {
  switch (kind) {
    case VertexKind::kGpu: return "gpu";
    case VertexKind::kNvSwitch: return "nvswitch";
    case VertexKind::kPcieSwitch: return "pcie_switch";
    case VertexKind::kCpu: return "cpu";
    case VertexKind::kNic: return "nic";
    case VertexKind::kLeaf: return "leaf";
    case VertexKind::kSpine: return "spine";
    case VertexKind::kCore: return "core";
  }
  return "gpu";
}

const char* to_string(LinkKind kind) {
  switch (kind) {
    case LinkKind::kNvlink: return "nvlink";
    case LinkKind::kPcie: return "pcie";
    case LinkKind::kSocket: return "socket";
    case LinkKind::kInfiniband: return "infiniband";
    case LinkKind::kEthernet: return "ethernet";
  }
  return "nvlink";
}

std::optional<VertexKind> parse_vertex_kind(const std::string& name) {
  for (VertexKind k : {VertexKind::kGpu, VertexKind::kNvSwitch, VertexKind::kPcieSwitch,
                       VertexKind::kCpu, VertexKind::kNic, VertexKind::kLeaf, VertexKind::kSpine,
                       VertexKind::kCore}) {
    if (name == to_string(k)) return k;
  }
  return std::nullopt;
}

std::optional<LinkKind> parse_link_kind(const std::string& name) {
  if (name == "upi" || name == "xgmi") return LinkKind::kSocket;
  for (LinkKind k : {LinkKind::kNvlink, LinkKind::kPcie, LinkKind::kSocket, LinkKind::kInfiniband,
                     LinkKind::kEthernet}) {
    if (name == to_string(k)) return k;
  }
  return std::nullopt;
}

}  // namespace strata::topo
