#include "topologies/graph_builder.h"

#include <fmt/format.h>

#include "core/error.h"
#include "core/memory_budget.h"
#include "core/units.h"

namespace strata::topo {
namespace {

class Builder {
 public:
  explicit Builder(BuiltGraph& out) : out_(out) {}

  int vertex(VertexKind kind, int node, int socket, int index, std::string name) {
    VertexInfo info{kind, node, socket, index, std::move(name)};
    return static_cast<int>(boost::add_vertex(std::move(info), out_.graph));
  }

  // Adds a → b and b → a with the same figures; returns the id of a → b (b → a is id + 1).
  LinkId wire(int a, int b, LinkKind kind, double line_rate, double efficiency, double latency_ab,
              double latency_ba) {
    LinkId first = add(a, b, kind, line_rate, efficiency, latency_ab);
    add(b, a, kind, line_rate, efficiency, latency_ba);
    return first;
  }

  LinkId add(int a, int b, LinkKind kind, double line_rate, double efficiency, double latency) {
    LinkId id = static_cast<LinkId>(out_.links.size());
    Link l;
    l.kind = kind;
    l.line_rate_bytes_per_s = line_rate;
    l.bandwidth_bytes_per_s = line_rate * efficiency;
    l.latency_ns = latency;
    l.from_vertex = a;
    l.to_vertex = b;
    out_.links.push_back(l);
    boost::add_edge(static_cast<std::size_t>(a), static_cast<std::size_t>(b), EdgeInfo{id},
                    out_.graph);
    return id;
  }

 private:
  BuiltGraph& out_;
};

LinkId wire(Builder& b, int a, int c, LinkKind kind, const LinkParams& p) {
  return b.wire(a, c, kind, p.bandwidth_bytes_per_s, p.efficiency, p.latency_ns, p.latency_ns);
}

// Adds one node's vertices and links; returns the offsets relative to the node's first
// vertex and link (identical for every node).
NodeTemplate add_node(Builder& b, BuiltGraph& out, const NodeSpec& n, int node) {
  NodeTemplate t;
  const int v0 = static_cast<int>(boost::num_vertices(out.graph));
  const LinkId l0 = static_cast<LinkId>(out.links.size());
  const int gpus_per_socket = n.gpus / n.sockets;
  const int switches = n.gpus / n.gpus_per_pcie_switch;
  const int switches_per_socket = switches / n.sockets;
  auto socket_of_switch = [&](int s) { return s / switches_per_socket; };

  for (int l = 0; l < n.gpus; ++l) {
    int socket = l / gpus_per_socket;
    t.gpu_socket.push_back(socket);
    t.gpu_vertex.push_back(b.vertex(VertexKind::kGpu, node, socket, node * n.gpus + l,
                                    fmt::format("n{}.gpu{}", node, l)) - v0);
  }
  if (n.nvlink_kind == "nvswitch") {
    // All NVSwitch chips of a node as one vertex: NCCL stripes every transfer over
    // all of a GPU's NVLinks, so a per-chip model would only add false choices.
    t.nvswitch_vertex = b.vertex(VertexKind::kNvSwitch, node, -1, 0, fmt::format("n{}.nvswitch", node)) - v0;
  }
  for (int s = 0; s < switches; ++s) {
    t.pcie_vertex.push_back(b.vertex(VertexKind::kPcieSwitch, node, socket_of_switch(s), s,
                                     fmt::format("n{}.pcie{}", node, s)) - v0);
  }
  for (int c = 0; c < n.sockets; ++c) {
    t.cpu_vertex.push_back(b.vertex(VertexKind::kCpu, node, c, c, fmt::format("n{}.cpu{}", node, c)) - v0);
  }
  for (int r = 0; r < n.nics; ++r) {
    int sw = r / n.nics_per_pcie_switch;
    t.nic_socket.push_back(socket_of_switch(sw));
    t.nic_vertex.push_back(b.vertex(VertexKind::kNic, node, socket_of_switch(sw), r,
                                    fmt::format("n{}.nic{}", node, r)) - v0);
  }
  t.vertices = static_cast<int>(boost::num_vertices(out.graph)) - v0;

  for (int l = 0; l < n.gpus; ++l) {
    if (t.nvswitch_vertex >= 0) {
      LinkId up = wire(b, v0 + t.gpu_vertex[l], v0 + t.nvswitch_vertex, LinkKind::kNvlink, n.nvlink);
      t.gpu_nvlink.emplace_back(up - l0, up + 1 - l0);
    } else {
      t.gpu_nvlink.emplace_back(-1, -1);
    }
  }
  for (int l = 0; l < n.gpus; ++l) {
    wire(b, v0 + t.gpu_vertex[l], v0 + t.pcie_vertex[l / n.gpus_per_pcie_switch], LinkKind::kPcie,
         n.pcie);
  }
  for (int r = 0; r < n.nics; ++r) {
    wire(b, v0 + t.nic_vertex[r], v0 + t.pcie_vertex[r / n.nics_per_pcie_switch], LinkKind::kPcie,
         n.pcie);
  }
  for (int s = 0; s < switches; ++s) {
    wire(b, v0 + t.pcie_vertex[s], v0 + t.cpu_vertex[socket_of_switch(s)], LinkKind::kPcie, n.pcie);
  }
  // Sockets: one link between every pair (two-socket boxes have exactly one).
  for (int c = 0; c < n.sockets; ++c) {
    for (int d = c + 1; d < n.sockets; ++d) {
      wire(b, v0 + t.cpu_vertex[c], v0 + t.cpu_vertex[d], LinkKind::kSocket, n.socket_link);
    }
  }
  t.links = static_cast<LinkId>(out.links.size()) - l0;
  return t;
}

FabricLayout add_fabric(Builder& b, BuiltGraph& out, const ClusterSpec& c, const NodeTemplate& t,
                        const FatTreeShape& shape) {
  FabricLayout f;
  f.shape = shape;
  const FatTreeShape& s = f.shape;
  const LinkKind kind = c.fabric.kind == "roce" ? LinkKind::kEthernet : LinkKind::kInfiniband;
  const double rate = gbps_to_bytes_per_s(c.fabric.nic_gbps);
  const double eff = fabric_efficiency(c.fabric);
  const double hop_ns = fabric_hop_latency_ns(c.fabric);

  f.first_vertex = static_cast<int>(boost::num_vertices(out.graph));
  for (int i = 0; i < s.leaves; ++i) b.vertex(VertexKind::kLeaf, -1, -1, i, fmt::format("leaf{}", i));
  const int first_spine = f.first_vertex + s.leaves;
  for (int p = 0; p < s.pods && s.tiers >= 2; ++p) {
    for (int j = 0; j < s.up; ++j) {
      b.vertex(VertexKind::kSpine, -1, -1, p * s.up + j, fmt::format("spine{}.{}", p, j));
    }
  }
  const int first_core = first_spine + s.spines();
  for (int j = 0; j < s.up && s.tiers == 3; ++j) {
    for (int k = 0; k < s.cores_per_group; ++k) {
      b.vertex(VertexKind::kCore, -1, -1, j * s.cores_per_group + k, fmt::format("core{}.{}", j, k));
    }
  }

  // A switch traversal's latency sits on the link leaving the switch.
  for (int node = 0; node < c.nodes; ++node) {
    for (int r = 0; r < s.rails; ++r) {
      int nic = node * t.vertices + t.nic_vertex[r];
      int leaf = f.first_vertex + s.leaf_of(node, r);
      LinkId up = b.wire(nic, leaf, kind, rate, eff, 0.0, hop_ns);
      f.nic_up.push_back(up);
      f.nic_down.push_back(up + 1);
    }
  }
  if (s.tiers >= 2) {
    for (int leaf = 0; leaf < s.leaves; ++leaf) {
      int pod = s.pod_of_leaf(leaf);
      for (int j = 0; j < s.up; ++j) {
        LinkId up = b.wire(f.first_vertex + leaf, first_spine + pod * s.up + j, kind, rate, eff,
                           hop_ns, hop_ns);
        f.leaf_up.push_back(up);
        f.leaf_down.push_back(up + 1);
      }
    }
  }
  if (s.tiers == 3) {
    for (int spine = 0; spine < s.spines(); ++spine) {
      int j = spine % s.up;
      for (int k = 0; k < s.cores_per_group; ++k) {
        LinkId up = b.wire(first_spine + spine, first_core + j * s.cores_per_group + k, kind, rate,
                           eff, hop_ns, hop_ns);
        f.spine_up.push_back(up);
        f.spine_down.push_back(up + 1);
      }
    }
  }
  return f;
}

// Memory the graph, its routes and the collective model take per node, measured
// with /usr/bin/time on `strata topo show` over DGX H100 clusters (the shipped
// node with the most vertices): 1,024 -> 8,192 nodes grew the peak RSS from 36
// to 257 MB, 31.6 KB a node.
constexpr double kTopologyBytesPerNode = 32.0 * 1024;

void build_generated(const ClusterSpec& c, BuiltGraph& out) {
  // The cheap checks first: the fabric's shape (a switch radix too small for the
  // nodes) and the memory the graph needs fail in microseconds; building a
  // million nodes' graph first took minutes and 9 GB.
  const bool has_fabric = c.nodes > 1 && c.fabric.nics_per_node > 0;
  const FatTreeShape shape = has_fabric ? plan_fat_tree(c) : FatTreeShape{};
  const double bytes = kTopologyBytesPerNode * c.nodes;
  if (bytes > memory_budget_bytes()) {
    throw InputError(c.file, "$.nodes",
                     fmt::format("{} nodes need about {:.1f} GiB for the topology alone ({:.0f} KiB a node), more "
                                 "than this machine allows: {}; use fewer nodes",
                                 c.nodes, bytes / double(1ull << 30), kTopologyBytesPerNode / 1024,
                                 memory_budget_words()));
  }
  Builder b(out);
  NodeTemplate t;
  for (int node = 0; node < c.nodes; ++node) t = add_node(b, out, c.node, node);
  if (has_fabric) out.fabric = add_fabric(b, out, c, t, shape);
  for (int node = 0; node < c.nodes; ++node) {
    for (int l = 0; l < c.gpus_per_node; ++l) out.gpu_vertex.push_back(node * t.vertices + t.gpu_vertex[l]);
    std::vector<int> nics;
    for (int r = 0; r < (has_fabric ? c.fabric.nics_per_node : 0); ++r) {
      nics.push_back(node * t.vertices + t.nic_vertex[r]);
    }
    out.node_nics.push_back(std::move(nics));
    out.node_nvswitch.push_back(t.nvswitch_vertex >= 0 ? node * t.vertices + t.nvswitch_vertex : -1);
  }
  out.node_template = std::move(t);
}

void build_inline(const ClusterSpec& c, BuiltGraph& out) {
  Builder b(out);
  const GraphSpec& g = c.graph;
  std::vector<int> next_local(static_cast<std::size_t>(c.nodes), 0);
  std::vector<int> vertex_of(g.vertices.size());
  out.gpu_vertex.assign(static_cast<std::size_t>(c.num_gpus()), -1);
  out.node_nics.assign(static_cast<std::size_t>(c.nodes), {});
  out.node_nvswitch.assign(static_cast<std::size_t>(c.nodes), -1);
  for (std::size_t i = 0; i < g.vertices.size(); ++i) {
    const GraphVertexSpec& v = g.vertices[i];
    int index = 0;
    if (v.kind == VertexKind::kGpu) index = v.node * c.gpus_per_node + next_local[static_cast<std::size_t>(v.node)]++;
    vertex_of[i] = b.vertex(v.kind, v.node, -1, index, v.name);
    if (v.kind == VertexKind::kGpu) out.gpu_vertex[static_cast<std::size_t>(index)] = vertex_of[i];
    if (v.kind == VertexKind::kNvSwitch && out.node_nvswitch[static_cast<std::size_t>(v.node)] < 0) {
      out.node_nvswitch[static_cast<std::size_t>(v.node)] = vertex_of[i];
    }
  }
  for (const GraphLinkSpec& l : g.links) {
    int a = vertex_of[static_cast<std::size_t>(l.from)];
    int z = vertex_of[static_cast<std::size_t>(l.to)];
    if (l.bidirectional) {
      b.wire(a, z, l.kind, l.line_rate_bytes_per_s, l.efficiency, l.latency_ns, l.latency_ns);
    } else {
      b.add(a, z, l.kind, l.line_rate_bytes_per_s, l.efficiency, l.latency_ns);
    }
  }
  // A node's NICs on the fabric are the NIC vertices with a network link; their
  // order in the file is the rail order.
  for (std::size_t i = 0; i < g.vertices.size(); ++i) {
    const GraphVertexSpec& v = g.vertices[i];
    if (v.kind != VertexKind::kNic) continue;
    bool on_fabric = false;
    for (auto [e, end] = boost::out_edges(static_cast<std::size_t>(vertex_of[i]), out.graph); e != end; ++e) {
      if (is_network(out.links[static_cast<std::size_t>(out.graph[*e].link)].kind)) on_fabric = true;
    }
    if (on_fabric) out.node_nics[static_cast<std::size_t>(v.node)].push_back(vertex_of[i]);
  }
}

}  // namespace

std::int64_t link_cost(const Link& link) {
  return static_cast<std::int64_t>(1e15 / link.bandwidth_bytes_per_s + 0.5);
}

void build_graph(const ClusterSpec& cluster, BuiltGraph& out) {
  out.nodes = cluster.nodes;
  out.gpus_per_node = cluster.gpus_per_node;
  out.num_gpus = cluster.num_gpus();
  if (cluster.graph.empty()) {
    build_generated(cluster, out);
  } else {
    build_inline(cluster, out);
  }
}

}  // namespace strata::topo
