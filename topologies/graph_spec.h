// An inline cluster graph (cluster.json "graph"): every vertex and link given
// explicitly, for clusters the presets do not describe. The schema is in
// docs/formats.md ("Inline topology graph").
//
// Reading checks what can be checked per key (kinds, names, ranges, unknown
// vertices) and records each element's JSON path, so that checks needing the
// whole graph (every GPU reaches every other) can still name the place at fault.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "topologies/kinds.h"

namespace strata::topo {

struct GraphVertexSpec {
  std::string name;
  VertexKind kind = VertexKind::kGpu;
  int node = -1;         // node index for GPUs, NVSwitches, PCIe switches, CPUs and NICs; -1 for switches
  std::string json_path; // "$.graph.vertices[3]"
};

struct GraphLinkSpec {
  int from = 0;          // index into GraphSpec::vertices
  int to = 0;
  LinkKind kind = LinkKind::kNvlink;
  double line_rate_bytes_per_s = 0.0;  // per direction
  double efficiency = 1.0;             // achievable share of the line rate
  double latency_ns = 0.0;
  bool bidirectional = true;           // true: the same link in both directions
  std::string source;
  std::string json_path;
};

struct GraphSpec {
  std::vector<GraphVertexSpec> vertices;
  std::vector<GraphLinkSpec> links;
  bool empty() const { return vertices.empty(); }
};

// Reads the "graph" object at json_path of file. GPUs are numbered by node, then by
// their order in the file: node n's k-th GPU is GPU n * gpus_per_node + k.
// Throws InputError naming the element at fault (unknown vertex, zero or negative
// bandwidth, a node without exactly gpus_per_node GPUs, ...).
GraphSpec read_graph_spec(const nlohmann::json& value, const std::string& file,
                          const std::string& json_path, int nodes, int gpus_per_node);

nlohmann::ordered_json to_json(const GraphSpec& graph);

}  // namespace strata::topo
