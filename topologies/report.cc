#include "topologies/report.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <map>
#include <set>

#include <boost/graph/push_relabel_max_flow.hpp>
#include <fmt/format.h>

#include "core/units.h"

namespace strata::topo {
namespace {

constexpr double kGBytes = 1e9;

// nvidia-smi topo -m's connection types, from the links a path uses.
std::string connection_type(const Topology& t, const std::vector<LinkId>& path) {
  bool nvlink = false, socket = false, cpu = false;
  int pcie_switches = 0;
  for (LinkId l : path) {
    const Link& link = t.link(l);
    nvlink = nvlink || link.kind == LinkKind::kNvlink;
    socket = socket || link.kind == LinkKind::kSocket;
    if (t.vertex(link.to_vertex).kind == VertexKind::kCpu) cpu = true;
    if (t.vertex(link.to_vertex).kind == VertexKind::kPcieSwitch) ++pcie_switches;
  }
  if (nvlink) return "NV";
  if (socket) return "SYS";
  if (cpu) return "NODE";
  return pcie_switches > 1 ? "PXB" : "PIX";
}

}  // namespace

const std::vector<double>& report_sizes() {
  static const std::vector<double> sizes = {kMiB, 64.0 * kMiB, kGiB};
  return sizes;
}

double bisection_bandwidth(const Topology& t) {
  const int nodes = t.num_nodes();
  if (nodes < 2 || t.rails() == 0) return 0.0;
  // Capacities in whole bytes per second, as integers, so that the flow is exact:
  // Boost's push-relabel checks (in builds with assertions) that its result
  // conserves flow to the last unit, which doubles do not (an "unlimited" source
  // edge of DBL_MAX / 4 absorbed the flow pushed back into it, and the sanitizer
  // build aborted on the inline-graph test). An edge from the source or to the
  // sink carries at most what its NIC's fabric links carry, so no sum overflows.
  using Capacity = std::int64_t;
  using Traits = boost::adjacency_list_traits<boost::vecS, boost::vecS, boost::directedS>;
  using FlowGraph = boost::adjacency_list<
      boost::vecS, boost::vecS, boost::directedS, boost::no_property,
      boost::property<boost::edge_capacity_t, Capacity,
                      boost::property<boost::edge_residual_capacity_t, Capacity,
                                      boost::property<boost::edge_reverse_t, Traits::edge_descriptor>>>>;
  FlowGraph g(static_cast<std::size_t>(t.num_vertices() + 2));
  auto capacity = boost::get(boost::edge_capacity, g);
  auto reverse = boost::get(boost::edge_reverse, g);
  auto add = [&](std::size_t a, std::size_t b, Capacity c) {
    auto e = boost::add_edge(a, b, g).first;
    auto r = boost::add_edge(b, a, g).first;
    capacity[e] = c;
    capacity[r] = 0;
    reverse[e] = r;
    reverse[r] = e;
  };
  std::vector<Capacity> fabric_capacity(static_cast<std::size_t>(t.num_vertices()), 0);
  for (LinkId l = 0; l < t.num_links(); ++l) {
    const Link& link = t.link(l);
    if (!is_network(link.kind)) continue;
    const auto c = static_cast<Capacity>(std::llround(link.bandwidth_bytes_per_s));
    add(static_cast<std::size_t>(link.from_vertex), static_cast<std::size_t>(link.to_vertex), c);
    fabric_capacity[static_cast<std::size_t>(link.from_vertex)] += c;
    fabric_capacity[static_cast<std::size_t>(link.to_vertex)] += c;
  }
  const auto source = static_cast<std::size_t>(t.num_vertices());
  const auto sink = source + 1;
  for (int v = 0; v < t.num_vertices(); ++v) {
    const VertexInfo& info = t.vertex(v);
    const Capacity nic = fabric_capacity[static_cast<std::size_t>(v)];
    if (info.kind != VertexKind::kNic || info.node < 0 || nic == 0) continue;  // not on the fabric
    if (info.node < nodes / 2) add(source, static_cast<std::size_t>(v), nic);
    else if (info.node >= nodes - nodes / 2) add(static_cast<std::size_t>(v), sink, nic);
  }
  return static_cast<double>(boost::push_relabel_max_flow(g, source, sink));
}

TopologyReport make_report(const Topology& t, const CollectiveModel& model,
                           const ProgressFn& progress) {
  TopologyReport r;
  const ClusterSpec& c = t.cluster();
  const int total_steps = 3 + 2 * static_cast<int>(report_sizes().size());
  int step = 0;
  auto tick = [&] {
    report_progress(progress, ++step, total_steps, "steps");
  };
  r.cluster = c.name;
  r.vertices = t.num_vertices();
  r.links = t.num_links();
  r.nccl_version = model.tuning().version;
  r.calibrated = model.calibrated();
  r.fabric = t.fat_tree() ? describe(*t.fat_tree(), c.fabric.oversubscription)
             : c.graph.empty() ? "none"
                               : "inline graph";
  std::string node_desc = c.graph.empty() ? fmt::format("{} ({})", c.node.name, c.node.gpu) : "inline graph";
  std::string fabric_desc = t.num_nodes() > 1 && c.graph.empty()
                                ? fmt::format(", {} {} x {:g} Gb/s per node", c.fabric.kind,
                                              c.fabric.nics_per_node, c.fabric.nic_gbps)
                                : "";
  r.summary = fmt::format("{} nodes x {} GPUs = {} GPUs, node {}{}", t.num_nodes(), t.gpus_per_node(),
                          t.num_gpus(), node_desc, fabric_desc);

  // Node 0: its GPUs and its NICs on the fabric (or all NICs of a single node).
  std::vector<int> gpus;
  for (int g = 0; g < t.gpus_per_node(); ++g) gpus.push_back(g);
  std::vector<int> nic_vertices;
  for (int v = 0; v < t.num_vertices(); ++v) {
    if (t.vertex(v).kind == VertexKind::kNic && t.vertex(v).node == 0) nic_vertices.push_back(v);
  }
  for (int g : gpus) r.endpoints.push_back(fmt::format("GPU{}", g));
  for (std::size_t i = 0; i < nic_vertices.size(); ++i) r.endpoints.push_back(fmt::format("NIC{}", i));
  const std::size_t n = r.endpoints.size();
  r.matrix.assign(n, std::vector<MatrixCell>(n));
  for (std::size_t a = 0; a < n; ++a) {
    for (std::size_t b = 0; b < n; ++b) {
      MatrixCell& cell = r.matrix[a][b];
      if (a == b) {
        cell.type = "X";
        continue;
      }
      std::vector<LinkId> path;
      if (a < gpus.size() && b < gpus.size()) {
        path = t.route(gpus[a], gpus[b]);
      } else {
        auto vertex_of = [&](std::size_t i) {
          return i < gpus.size() ? t.gpu_vertex(gpus[i]) : nic_vertices[i - gpus.size()];
        };
        path = t.path_within_node(vertex_of(a), vertex_of(b));
      }
      cell.type = connection_type(t, path);
      cell.bandwidth_bytes_per_s = t.path_bandwidth_bytes_per_s(path);
      cell.hops = static_cast<int>(path.size());
    }
  }
  std::map<int, NumaDomain> numa;
  for (int g : gpus) {
    int s = t.vertex(t.gpu_vertex(g)).socket;
    numa[s].socket = s;
    numa[s].gpus.push_back(g);
  }
  for (std::size_t i = 0; i < nic_vertices.size(); ++i) {
    int s = t.vertex(nic_vertices[i]).socket;
    numa[s].socket = s;
    numa[s].nics.push_back(static_cast<int>(i));
  }
  for (auto& [s, d] : numa) r.numa.push_back(d);
  tick();

  r.bisection_bytes_per_s = bisection_bandwidth(t);
  tick();

  std::vector<int> all;
  for (int g = 0; g < t.num_gpus(); ++g) all.push_back(g);
  for (const auto& [scope, group] : {std::make_pair(std::string("node"), gpus), std::make_pair(std::string("cluster"), all)}) {
    if (scope == "cluster" && t.num_nodes() == 1) continue;
    for (double bytes : report_sizes()) {
      BusbwRow row;
      row.scope = scope;
      row.gpus = static_cast<int>(group.size());
      row.bytes = bytes;
      row.estimate = model.estimate(CollectiveOp::kAllReduce, group, bytes);
      r.allreduce.push_back(row);
      tick();
    }
  }
  r.bandwidth_note =
      r.calibrated
          ? "calibrated: measured collective efficiencies from the device profile scale the wire bandwidth"
          : "datasheet: line rates x the presets' efficiencies (NCCL's per-link figures); no calibrated "
            "collective efficiency applied";
  return r;
}

nlohmann::ordered_json to_json(const TopologyReport& r) {
  nlohmann::ordered_json j;
  j["cluster"] = r.cluster;
  j["summary"] = r.summary;
  j["fabric"] = r.fabric;
  j["vertices"] = r.vertices;
  j["links"] = r.links;
  j["nccl_version"] = r.nccl_version;
  j["bandwidths"] = r.calibrated ? "calibrated" : "datasheet";
  j["bandwidth_note"] = r.bandwidth_note;
  nlohmann::ordered_json m;
  m["endpoints"] = r.endpoints;
  nlohmann::ordered_json rows = nlohmann::ordered_json::array();
  for (const auto& row : r.matrix) {
    nlohmann::ordered_json cells = nlohmann::ordered_json::array();
    for (const MatrixCell& c : row) {
      nlohmann::ordered_json x;
      x["type"] = c.type;
      x["bandwidth_gbytes_per_s"] = c.bandwidth_bytes_per_s / kGBytes;
      x["hops"] = c.hops;
      cells.push_back(std::move(x));
    }
    rows.push_back(std::move(cells));
  }
  m["rows"] = std::move(rows);
  j["node_matrix"] = std::move(m);
  nlohmann::ordered_json numa = nlohmann::ordered_json::array();
  for (const NumaDomain& d : r.numa) {
    nlohmann::ordered_json x;
    x["socket"] = d.socket;
    x["gpus"] = d.gpus;
    x["nics"] = d.nics;
    numa.push_back(std::move(x));
  }
  j["numa"] = std::move(numa);
  j["bisection_gbytes_per_s"] = r.bisection_bytes_per_s / kGBytes;
  nlohmann::ordered_json ar = nlohmann::ordered_json::array();
  for (const BusbwRow& row : r.allreduce) {
    nlohmann::ordered_json x;
    x["scope"] = row.scope;
    x["gpus"] = row.gpus;
    x["bytes"] = row.bytes;
    x["algorithm"] = to_string(row.estimate.algorithm);
    x["protocol"] = to_string(row.estimate.protocol);
    x["channels"] = row.estimate.channels;
    x["time_us"] = row.estimate.time_s * 1e6;
    x["algbw_gbytes_per_s"] = row.estimate.algbw_bytes_per_s / kGBytes;
    x["busbw_gbytes_per_s"] = row.estimate.busbw_bytes_per_s / kGBytes;
    x["calibrated"] = row.estimate.calibrated;
    ar.push_back(std::move(x));
  }
  j["all_reduce"] = std::move(ar);
  return j;
}

std::string to_dot(const Topology& t) {
  std::string out = "digraph cluster {\n  graph [rankdir=TB, fontname=\"Helvetica\"];\n"
                    "  node [shape=box, fontname=\"Helvetica\", fontsize=10];\n"
                    "  edge [fontname=\"Helvetica\", fontsize=8];\n";
  auto shape_of = [](VertexKind k) {
    switch (k) {
      case VertexKind::kGpu: return "box, style=filled, fillcolor=\"#a6d96a\"";
      case VertexKind::kNvSwitch: return "hexagon, style=filled, fillcolor=\"#fdae61\"";
      case VertexKind::kPcieSwitch: return "diamond";
      case VertexKind::kCpu: return "box3d";
      case VertexKind::kNic: return "ellipse, style=filled, fillcolor=\"#abd9e9\"";
      default: return "octagon, style=filled, fillcolor=\"#e0e0e0\"";
    }
  };
  std::map<int, std::vector<int>> by_node;
  for (int v = 0; v < t.num_vertices(); ++v) by_node[t.vertex(v).node].push_back(v);
  for (const auto& [node, vertices] : by_node) {
    if (node >= 0) out += fmt::format("  subgraph cluster_node{} {{\n    label=\"node {}\";\n", node, node);
    for (int v : vertices) {
      out += fmt::format("{}  v{} [label=\"{}\", shape={}];\n", node >= 0 ? "  " : "", v,
                         t.vertex(v).name, shape_of(t.vertex(v).kind));
    }
    if (node >= 0) out += "  }\n";
  }
  // One edge per wire: a link and its reverse with the same kind and bandwidth.
  std::set<std::pair<int, int>> drawn;
  std::map<std::pair<int, int>, LinkId> forward;
  for (LinkId l = 0; l < t.num_links(); ++l) forward[{t.link(l).from_vertex, t.link(l).to_vertex}] = l;
  for (LinkId l = 0; l < t.num_links(); ++l) {
    const Link& link = t.link(l);
    auto key = std::minmax(link.from_vertex, link.to_vertex);
    if (drawn.count(key)) continue;
    auto back = forward.find({link.to_vertex, link.from_vertex});
    bool both = back != forward.end() && t.link(back->second).kind == link.kind &&
                t.link(back->second).bandwidth_bytes_per_s == link.bandwidth_bytes_per_s;
    if (both) drawn.insert(key);
    out += fmt::format("  v{} -> v{} [label=\"{} {:g} GB/s\"{}];\n", link.from_vertex, link.to_vertex,
                       to_string(link.kind), link.bandwidth_bytes_per_s / kGBytes,
                       both ? ", dir=both" : "");
  }
  out += "}\n";
  return out;
}

}  // namespace strata::topo
