// The cluster graph: a Boost.Graph adjacency list whose vertices are the parts of
// the cluster (GPUs, switches, CPUs, NICs) and whose edges are directed links, one
// per direction of a wire. Each edge carries the id of its Link; Topology keeps the
// Links in a flat vector indexed by that id for fast queries.
#pragma once

#include <cstdint>
#include <string>

#include <boost/graph/adjacency_list.hpp>

#include "topologies/kinds.h"

namespace strata::topo {

using LinkId = std::int32_t;

// One direction of a wire.
struct Link {
  LinkKind kind = LinkKind::kNvlink;
  // Achievable bandwidth of this direction: the line rate times the link's
  // efficiency (NCCL's per-link figures, or the fabric's header overhead). This is
  // what routing, link sharing and the collective model use.
  double bandwidth_bytes_per_s = 0.0;
  double latency_ns = 0.0;
  int from_vertex = 0;
  int to_vertex = 0;
  double line_rate_bytes_per_s = 0.0;  // the datasheet figure
};

struct VertexInfo {
  VertexKind kind = VertexKind::kGpu;
  int node = -1;     // owning node, -1 for fabric switches
  int socket = -1;   // NUMA domain within the node, -1 when unknown
  int index = 0;     // GPU: global GPU index; NIC: rail; others: index among its kind in the node/fabric
  std::string name;  // "n0.gpu3", "leaf12", ...
};

struct EdgeInfo {
  LinkId link = 0;
};

// Edges in a vector (EdgeList vecS, not the default list): the graph is built
// once and never loses an edge, and a list node per edge made building and
// destroying a 16,384-GPU graph allocation-bound.
using Graph = boost::adjacency_list<boost::vecS, boost::vecS, boost::bidirectionalS, VertexInfo,
                                    EdgeInfo, boost::no_property, boost::vecS>;

// The routing cost of a link: femtoseconds per byte at its achievable bandwidth
// (1e15 / bytes per second), an integer so that equal-cost paths compare exactly.
// Shortest paths are the ones a bulk transfer would prefer: NVLink before PCIe,
// one fabric hop before three.
std::int64_t link_cost(const Link& link);

}  // namespace strata::topo
