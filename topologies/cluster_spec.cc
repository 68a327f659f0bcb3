#include "topologies/cluster_spec.h"

#include <fmt/format.h>

#include "core/data_paths.h"
#include "core/error.h"
#include "core/json_reader.h"

namespace strata {
namespace {

constexpr double kGB = 1e9;

// Default fabric figures, per kind. The efficiency is the share of the line rate
// left after per-packet headers at a 4096-byte MTU; congestion and ECMP collisions
// are not folded in here: the graph and the link sharing model them.
//  InfiniBand: LRH 8 + BTH 12 + ICRC 4 + VCRC 2 = 26 header bytes per 4096-byte
//    payload (InfiniBand Architecture Specification vol. 1, packet format):
//    4096 / 4122 = 0.9937.
//  RoCE v2: preamble+SFD 8 + Ethernet 14 + IPv4 20 + UDP 8 + BTH 12 + ICRC 4 +
//    FCS 4 + inter-frame gap 12 = 82 bytes per 4096-byte payload (IBTA RoCEv2
//    annex A17; IEEE 802.3 framing): 4096 / 4178 = 0.9804.
constexpr double kInfinibandEfficiency = 4096.0 / 4122.0;
constexpr double kRoceEfficiency = 4096.0 / 4178.0;
// Switch traversal: NVIDIA Quantum QM8700 HDR switch datasheet, 130 ns port to
// port. Ethernet: assumption of 0.6 us, the middle of the 0.4-0.8 us cut-through
// latency that 200/400 GbE data-centre switch datasheets quote; set latency_us
// for your switches.
constexpr double kInfinibandHopNs = 130.0;
constexpr double kRoceHopNs = 600.0;

LinkParams read_link(json::ObjectReader& parent, const std::string& key) {
  json::ObjectReader r = parent.object(key);
  LinkParams link;
  link.bandwidth_bytes_per_s = r.number("bandwidth_gbytes_per_s", 1e-6, 1e6) * kGB;
  link.latency_ns = r.number_or("latency_us", 0.0, 0.0, 1e6) * 1000.0;
  link.efficiency = r.number_or("efficiency", 1.0, 0.01, 1.0);
  if (r.has("source")) link.source = r.string("source");
  r.finish();
  return link;
}

nlohmann::ordered_json link_json(const LinkParams& link) {
  nlohmann::ordered_json j;
  j["bandwidth_gbytes_per_s"] = link.bandwidth_bytes_per_s / kGB;
  j["latency_us"] = link.latency_ns / 1000.0;
  j["efficiency"] = link.efficiency;
  if (!link.source.empty()) j["source"] = link.source;
  return j;
}

}  // namespace

NodeSpec read_node_spec(const nlohmann::json& doc, const std::string& file,
                        const std::string& path) {
  json::ObjectReader r(doc, file, path);
  NodeSpec n;
  n.name = r.string_or("name", "inline");
  n.gpus = static_cast<int>(r.integer("gpus", 1, 1024));
  n.gpu = r.string_or("gpu", "");
  n.compute_capability = static_cast<int>(r.integer_or("compute_capability", 80, 60, 200));
  n.sockets = static_cast<int>(r.integer_or("sockets", 1, 1, 16));
  n.nvlink_kind = r.choice_or("nvlink_kind", "none", {"none", "nvswitch"});
  if (n.nvlink_kind != "none") n.nvlink = read_link(r, "nvlink");
  n.nvls = r.boolean_or("nvls", false);
  n.nvswitches = static_cast<int>(r.integer_or("nvswitches", n.nvlink_kind == "none" ? 0 : 1, 0, 64));
  n.pcie_generation = static_cast<int>(r.integer_or("pcie_generation", 4, 3, 7));
  n.pcie = read_link(r, "pcie");
  n.gpus_per_pcie_switch = static_cast<int>(r.integer_or("gpus_per_pcie_switch", 2, 1, 64));
  n.nics_per_pcie_switch = static_cast<int>(r.integer_or("nics_per_pcie_switch", 2, 0, 64));
  n.socket_link_kind = r.choice_or("socket_link_kind", "upi", {"upi", "xgmi"});
  if (n.sockets > 1 || r.has("socket_link")) n.socket_link = read_link(r, "socket_link");
  n.nics = static_cast<int>(r.integer_or("nics", 0, 0, 64));
  n.nic_gbps = r.number_or("nic_gbps", 0.0, 0.0, 1e5);
  if (r.has("source")) n.source = r.string("source");
  r.allow_text("notes");
  r.finish();

  if (n.nvls && n.nvlink_kind != "nvswitch") {
    throw InputError(file, path + ".nvls", "nvls needs nvlink_kind \"nvswitch\"");
  }
  if (n.gpus % n.sockets != 0) {
    throw InputError(file, path + ".sockets",
                     fmt::format("the {} GPUs must spread evenly over {} sockets", n.gpus, n.sockets));
  }
  if ((n.gpus / n.sockets) % n.gpus_per_pcie_switch != 0) {
    throw InputError(file, path + ".gpus_per_pcie_switch",
                     fmt::format("the {} GPUs of a socket must fill whole PCIe switches of {}",
                                 n.gpus / n.sockets, n.gpus_per_pcie_switch));
  }
  if (n.nics > 0 && n.nic_gbps <= 0.0) {
    throw InputError(file, path + ".nic_gbps", "a node with NICs needs nic_gbps > 0");
  }
  const int pcie_switches = n.gpus / n.gpus_per_pcie_switch;
  if (n.nics > pcie_switches * n.nics_per_pcie_switch) {
    throw InputError(file, path + ".nics",
                     fmt::format("{} NICs do not fit on {} PCIe switches with {} NICs each", n.nics,
                                 pcie_switches, n.nics_per_pcie_switch));
  }
  return n;
}

NodeSpec load_node_preset(const std::string& name) {
  std::string path = resolve_data_file(name, "topologies/presets/nodes", "node preset");
  return read_node_spec(json::parse_file(path), path, "$");
}

double fabric_efficiency(const FabricSpec& fabric) {
  if (fabric.efficiency > 0.0) return fabric.efficiency;
  return fabric.kind == "roce" ? kRoceEfficiency : kInfinibandEfficiency;
}

double fabric_hop_latency_ns(const FabricSpec& fabric) {
  if (fabric.latency_ns > 0.0) return fabric.latency_ns;
  return fabric.kind == "roce" ? kRoceHopNs : kInfinibandHopNs;
}

FabricSpec read_fabric_spec(const nlohmann::json& doc, const std::string& file,
                            const std::string& path, const NodeSpec& node) {
  json::ObjectReader f(doc, file, path);
  FabricSpec fabric;
  fabric.name = f.string_or("name", "inline");
  fabric.kind = f.choice("kind", {"infiniband", "roce"});
  fabric.nics_per_node = static_cast<int>(f.integer_or("nics_per_node", node.nics, 1, 64));
  fabric.nic_gbps = f.number_or("nic_gbps", node.nic_gbps, 1.0, 1e5);
  fabric.oversubscription = f.number_or("oversubscription", 1.0, 1.0, 64.0);
  fabric.tiers = static_cast<int>(f.integer_or("tiers", 0, 2, 3));
  fabric.switch_radix = static_cast<int>(f.integer_or("switch_radix", 64, 4, 1024));
  fabric.efficiency = f.number_or("efficiency", 0.0, 0.01, 1.0);
  fabric.latency_ns = f.number_or("latency_us", 0.0, 0.0, 1e6) * 1000.0;
  fabric.rail_optimized = f.boolean_or("rail_optimized", true);
  fabric.qps_per_connection = static_cast<int>(f.integer_or("qps_per_connection", 1, 1, 64));
  if (f.has("source")) fabric.source = f.string("source");
  f.allow_text("notes");
  f.finish();
  return fabric;
}

FabricSpec load_fabric_preset(const std::string& name, const NodeSpec& node) {
  std::string path = resolve_data_file(name, "topologies/presets/fabrics", "fabric preset");
  return read_fabric_spec(json::parse_file(path), path, "$", node);
}

ClusterSpec read_cluster_spec(const nlohmann::json& doc, const std::string& file,
                              const std::string& path) {
  json::ObjectReader r(doc, file, path);
  ClusterSpec c;
  c.file = file;
  c.name = r.string("name");
  c.nodes = static_cast<int>(r.integer("nodes", 1, 1 << 20));
  c.gpus_per_node = static_cast<int>(r.integer("gpus_per_node", 1, 1024));
  const nlohmann::json& node = r.raw("node");
  if (node.is_string()) {
    std::string name = node.get<std::string>();
    try {
      c.node = load_node_preset(name);
    } catch (const InputError& e) {
      throw InputError(file, path + ".node",
                       fmt::format("unknown node preset \"{}\" ({})", name, e.message()));
    }
  } else if (node.is_object()) {
    c.node = read_node_spec(node, file, path + ".node");
  } else {
    r.fail("node", "expected a node preset name (a string) or an inline node object, got " +
                       json::describe(node));
  }
  if (c.node.gpus != c.gpus_per_node) {
    r.fail("gpus_per_node", fmt::format("gpus_per_node {} does not match node \"{}\" which has {} GPUs",
                                        c.gpus_per_node, c.node.name, c.node.gpus));
  }

  const bool has_graph = r.has("graph");
  if (r.has("fabric")) {
    const nlohmann::json& fabric = r.raw("fabric");
    if (fabric.is_string()) {
      std::string name = fabric.get<std::string>();
      try {
        c.fabric = load_fabric_preset(name, c.node);
      } catch (const InputError& e) {
        throw InputError(file, path + ".fabric",
                         fmt::format("unknown fabric preset \"{}\" ({})", name, e.message()));
      }
    } else if (fabric.is_object()) {
      c.fabric = read_fabric_spec(fabric, file, path + ".fabric", c.node);
    } else {
      r.fail("fabric", "expected a fabric preset name (a string) or a fabric object, got " +
                           json::describe(fabric));
    }
    if (c.fabric.nics_per_node > c.node.nics && !has_graph) {
      throw InputError(file, path + ".fabric.nics_per_node",
                       fmt::format("{} NICs per node on the fabric, but node \"{}\" has {} NICs",
                                   c.fabric.nics_per_node, c.node.name, c.node.nics));
    }
  } else if (c.nodes > 1 && !has_graph) {
    r.fail("fabric", "a cluster of more than one node needs a fabric");
  } else {
    c.fabric.nics_per_node = c.node.nics;
    c.fabric.nic_gbps = c.node.nic_gbps;
  }
  if (has_graph) {
    c.graph = topo::read_graph_spec(r.raw("graph"), file, path + ".graph", c.nodes, c.gpus_per_node);
  }
  if (c.nodes > 1 && c.fabric.nics_per_node <= 0 && !has_graph) {
    throw InputError(file, path + ".fabric.nics_per_node",
                     "a cluster of more than one node needs NICs (the node preset has none)");
  }
  c.profile = r.string("profile");
  if (r.has("source")) c.source = r.string("source");
  r.allow_text("notes");
  r.finish();
  return c;
}

ClusterSpec load_cluster_spec(const std::string& path_or_name) {
  std::string path = resolve_data_file(path_or_name, "scenarios/clusters", "cluster");
  return read_cluster_spec(json::parse_file(path), path);
}

nlohmann::ordered_json to_json(const NodeSpec& n) {
  nlohmann::ordered_json j;
  j["name"] = n.name;
  j["gpus"] = n.gpus;
  j["gpu"] = n.gpu;
  j["compute_capability"] = n.compute_capability;
  j["sockets"] = n.sockets;
  j["nvlink_kind"] = n.nvlink_kind;
  if (n.nvlink_kind != "none") j["nvlink"] = link_json(n.nvlink);
  j["nvls"] = n.nvls;
  j["nvswitches"] = n.nvswitches;
  j["pcie_generation"] = n.pcie_generation;
  j["pcie"] = link_json(n.pcie);
  j["gpus_per_pcie_switch"] = n.gpus_per_pcie_switch;
  j["nics_per_pcie_switch"] = n.nics_per_pcie_switch;
  j["socket_link_kind"] = n.socket_link_kind;
  if (n.sockets > 1) j["socket_link"] = link_json(n.socket_link);
  j["nics"] = n.nics;
  j["nic_gbps"] = n.nic_gbps;
  return j;
}

nlohmann::ordered_json to_json(const ClusterSpec& c) {
  nlohmann::ordered_json j;
  j["name"] = c.name;
  j["nodes"] = c.nodes;
  j["gpus_per_node"] = c.gpus_per_node;
  j["node"] = to_json(c.node);
  // A node without NICs has no fabric (one node only): none is written, as
  // none was given, so the echo reads back.
  if (c.fabric.nics_per_node > 0) j["fabric"] = to_json(c.fabric);
  if (!c.graph.empty()) j["graph"] = topo::to_json(c.graph);
  j["profile"] = c.profile;
  return j;
}

nlohmann::ordered_json to_json(const FabricSpec& fabric) {
  nlohmann::ordered_json f;
  f["name"] = fabric.name;
  f["kind"] = fabric.kind;
  f["nics_per_node"] = fabric.nics_per_node;
  f["nic_gbps"] = fabric.nic_gbps;
  f["oversubscription"] = fabric.oversubscription;
  // 0 means "derived" (tiers from the radix, efficiency from the kind): left out,
  // so the echoed cluster reads back as it was given.
  if (fabric.tiers > 0) f["tiers"] = fabric.tiers;
  f["switch_radix"] = fabric.switch_radix;
  if (fabric.efficiency > 0.0) f["efficiency"] = fabric.efficiency;
  f["latency_us"] = fabric.latency_ns / 1000.0;
  f["rail_optimized"] = fabric.rail_optimized;
  if (fabric.qps_per_connection != 1) f["qps_per_connection"] = fabric.qps_per_connection;  // 1: NCCL's default
  return f;
}

}  // namespace strata
