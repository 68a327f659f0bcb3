#include "topologies/graph_spec.h"

#include <map>

#include <fmt/format.h>

#include "core/error.h"
#include "core/json_reader.h"

namespace strata::topo {
namespace {

constexpr double kGBytes = 1e9;

std::vector<std::string> vertex_kind_names() {
  return {"gpu", "nvswitch", "pcie_switch", "cpu", "nic", "leaf", "spine", "core"};
}

std::vector<std::string> link_kind_names() {
  return {"nvlink", "pcie", "upi", "xgmi", "socket", "infiniband", "ethernet"};
}

}  // namespace

GraphSpec read_graph_spec(const nlohmann::json& value, const std::string& file,
                          const std::string& json_path, int nodes, int gpus_per_node) {
  json::ObjectReader r(value, file, json_path);
  GraphSpec g;
  std::map<std::string, int> index_of;
  std::vector<int> gpus_in_node(static_cast<std::size_t>(nodes), 0);

  const nlohmann::json& vertices = r.array("vertices");
  if (vertices.empty()) r.fail("vertices", "a graph needs at least one GPU vertex");
  for (std::size_t i = 0; i < vertices.size(); ++i) {
    json::ObjectReader v(vertices[i], file, r.element_path("vertices", i));
    GraphVertexSpec s;
    s.json_path = v.path();
    s.name = v.string("name");
    s.kind = *parse_vertex_kind(v.choice("kind", vertex_kind_names()));
    if (is_node_local(s.kind)) {
      s.node = static_cast<int>(v.integer("node", 0, nodes - 1));
    } else if (v.has("node")) {
      v.fail("node", fmt::format("a {} switch belongs to the fabric, not to a node; remove \"node\"",
                                 to_string(s.kind)));
    }
    v.allow_text("source");
    v.allow_text("notes");
    v.finish();
    if (s.name.empty()) throw InputError(file, s.json_path + ".name", "a vertex name cannot be empty");
    if (!index_of.emplace(s.name, static_cast<int>(g.vertices.size())).second) {
      throw InputError(file, s.json_path + ".name",
                       fmt::format("duplicate vertex name \"{}\"; names must be unique", s.name));
    }
    if (s.kind == VertexKind::kGpu) ++gpus_in_node[static_cast<std::size_t>(s.node)];
    g.vertices.push_back(std::move(s));
  }
  for (int n = 0; n < nodes; ++n) {
    if (gpus_in_node[static_cast<std::size_t>(n)] != gpus_per_node) {
      r.fail("vertices", fmt::format("node {} has {} GPU vertices; every node needs gpus_per_node = {}",
                                     n, gpus_in_node[static_cast<std::size_t>(n)], gpus_per_node));
    }
  }

  const nlohmann::json& links = r.array("links");
  for (std::size_t i = 0; i < links.size(); ++i) {
    json::ObjectReader l(links[i], file, r.element_path("links", i));
    GraphLinkSpec s;
    s.json_path = l.path();
    for (const char* end : {"from", "to"}) {
      std::string name = l.string(end);
      auto it = index_of.find(name);
      if (it == index_of.end()) {
        l.fail(end, fmt::format("unknown vertex \"{}\"; the link must join two vertices listed in "
                                "{}.vertices",
                                name, json_path));
      }
      (std::string(end) == "from" ? s.from : s.to) = it->second;
    }
    if (s.from == s.to) l.fail("to", "a link must join two different vertices");
    s.kind = *parse_link_kind(l.choice("kind", link_kind_names()));
    s.line_rate_bytes_per_s = l.number("bandwidth_gbytes_per_s", 1e-6, 1e6) * kGBytes;
    s.efficiency = l.number_or("efficiency", 1.0, 0.01, 1.0);
    s.latency_ns = l.number_or("latency_us", 0.0, 0.0, 1e6) * 1000.0;
    s.bidirectional = l.boolean_or("bidirectional", true);
    if (l.has("source")) s.source = l.string("source");
    l.allow_text("notes");
    l.finish();
    g.links.push_back(std::move(s));
  }
  r.allow_text("source");
  r.allow_text("notes");
  r.finish();
  return g;
}

nlohmann::ordered_json to_json(const GraphSpec& graph) {
  nlohmann::ordered_json j;
  nlohmann::ordered_json vertices = nlohmann::ordered_json::array();
  for (const GraphVertexSpec& v : graph.vertices) {
    nlohmann::ordered_json x;
    x["name"] = v.name;
    x["kind"] = to_string(v.kind);
    if (v.node >= 0) x["node"] = v.node;
    vertices.push_back(std::move(x));
  }
  nlohmann::ordered_json links = nlohmann::ordered_json::array();
  for (const GraphLinkSpec& l : graph.links) {
    nlohmann::ordered_json x;
    x["from"] = graph.vertices[static_cast<std::size_t>(l.from)].name;
    x["to"] = graph.vertices[static_cast<std::size_t>(l.to)].name;
    x["kind"] = to_string(l.kind);
    x["bandwidth_gbytes_per_s"] = l.line_rate_bytes_per_s / kGBytes;
    x["efficiency"] = l.efficiency;
    x["latency_us"] = l.latency_ns / 1000.0;
    x["bidirectional"] = l.bidirectional;
    if (!l.source.empty()) x["source"] = l.source;
    links.push_back(std::move(x));
  }
  j["vertices"] = std::move(vertices);
  j["links"] = std::move(links);
  return j;
}

}  // namespace strata::topo
