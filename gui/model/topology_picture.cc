#include "gui/model/topology_picture.h"

#include <algorithm>
#include <cctype>
#include <map>
#include <set>
#include <utility>

namespace strata::gui {
namespace {

int fabric_tier(const std::string& type) {
  if (type == "core") return 0;
  if (type == "spine") return 1;
  if (type == "leaf") return 2;
  return 3;
}

// Inside a node, top to bottom: NICs face the fabric above; GPUs sit between the
// PCIe tree and the NVSwitches so both link sets stay short.
int node_tier(const std::string& type) {
  if (type == "nic") return 1;
  if (type == "cpu" || type == "socket") return 2;
  if (type.rfind("pcie", 0) == 0) return 3;
  if (type == "gpu") return 4;
  if (type == "nvswitch") return 5;
  return 6;
}

// Places items tier by tier, each tier centred on the widest one.
void place(std::vector<PictureItem>* items, const std::vector<int>& tier_of_item) {
  std::map<int, std::vector<int>> tiers;
  for (std::size_t i = 0; i < items->size(); ++i)
    tiers[tier_of_item[i]].push_back(static_cast<int>(i));
  std::size_t widest = 1;
  for (const auto& [t, members] : tiers) widest = std::max(widest, members.size());
  const double width = static_cast<double>(widest) * kItemGap;
  int row = 0;
  for (const auto& [t, members] : tiers) {
    const double gap = width / static_cast<double>(members.size());
    for (std::size_t k = 0; k < members.size(); ++k) {
      (*items)[members[k]].x = (static_cast<double>(k) + 0.5) * gap;
      (*items)[members[k]].y = row * kTierGap;
    }
    ++row;
  }
}

// Orders vertices by (type, index) so a tier reads gpu0, gpu1, ... left to right.
bool vertex_less(const TopoVertex& a, const TopoVertex& b) {
  if (a.node != b.node) return a.node < b.node;
  if (a.type != b.type) return a.type < b.type;
  if (a.index != b.index) return a.index < b.index;
  return a.label < b.label;
}

void merge_into(PictureLink* link, const TopoEdge& e) {
  link->bandwidth_bytes_per_s += e.bandwidth_bytes_per_s;
  link->bytes += e.bytes_ab + e.bytes_ba;
  link->utilization = std::max(link->utilization, e.utilization());
}

}  // namespace

TopoVertex parse_vertex_label(const std::string& label) {
  TopoVertex v;
  v.label = label;
  v.local = label;
  // "node3/gpu5" (docs) or "n3.gpu5" (the simulator's vertex names).
  for (const auto& [prefix, separator] : {std::pair{"node", '/'}, std::pair{"n", '.'}}) {
    const std::string p = prefix;
    const auto sep = label.find(separator);
    if (label.rfind(p, 0) != 0 || sep == std::string::npos || sep <= p.size()) continue;
    const std::string head = label.substr(p.size(), sep - p.size());
    if (head.size() > 8 || !std::all_of(head.begin(), head.end(), ::isdigit)) continue;
    v.node = std::stoi(head);
    v.local = label.substr(sep + 1);
    break;
  }
  std::size_t digits = v.local.size();
  while (digits > 0 && std::isdigit(static_cast<unsigned char>(v.local[digits - 1]))) --digits;
  v.type = v.local.substr(0, digits);
  if (digits < v.local.size() && v.local.size() - digits < 9) {
    v.index = std::stoi(v.local.substr(digits));
  }
  return v;
}

TopologyGraph TopologyGraph::from_links(const std::vector<LinkUse>& links) {
  TopologyGraph g;
  std::map<std::string, int> index;
  auto vertex_of = [&](const std::string& label) {
    auto [it, inserted] = index.try_emplace(label, static_cast<int>(g.vertices_.size()));
    if (inserted) g.vertices_.push_back(parse_vertex_label(label));
    return it->second;
  };
  std::map<std::pair<int, int>, int> edge_of;
  for (const LinkUse& l : links) {
    int a = vertex_of(l.from);
    int b = vertex_of(l.to);
    const bool forward = l.from <= l.to;
    if (!forward) std::swap(a, b);
    auto [it, inserted] = edge_of.try_emplace({a, b}, static_cast<int>(g.edges_.size()));
    if (inserted) {
      TopoEdge e;
      e.a = a;
      e.b = b;
      e.kind = l.kind;
      e.bandwidth_bytes_per_s = l.bandwidth_bytes_per_s;
      g.edges_.push_back(e);
    }
    TopoEdge& e = g.edges_[it->second];
    (forward ? e.bytes_ab : e.bytes_ba) += l.bytes;
    double& u = forward ? e.utilization_ab : e.utilization_ba;
    u = std::max(u, l.utilization);
    e.bandwidth_bytes_per_s = std::max(e.bandwidth_bytes_per_s, l.bandwidth_bytes_per_s);
  }
  return g;
}

std::vector<int> TopologyGraph::nodes() const {
  std::set<int> nodes;
  for (const TopoVertex& v : vertices_) {
    if (v.node >= 0) nodes.insert(v.node);
  }
  return {nodes.begin(), nodes.end()};
}

TopologyPicture fabric_picture(const TopologyGraph& g) {
  TopologyPicture p;
  std::vector<int> tier_of_item;
  std::map<int, int> item_of_vertex;  // fabric vertices
  std::map<int, int> item_of_node;
  std::vector<int> order(g.vertices().size());
  for (std::size_t i = 0; i < order.size(); ++i) order[i] = static_cast<int>(i);
  std::sort(order.begin(), order.end(),
            [&](int a, int b) { return vertex_less(g.vertices()[a], g.vertices()[b]); });
  int node_tier_index = 0;
  for (int v : order) {
    const TopoVertex& tv = g.vertices()[v];
    if (tv.node < 0) node_tier_index = std::max(node_tier_index, fabric_tier(tv.type) + 1);
  }
  for (int v : order) {
    const TopoVertex& tv = g.vertices()[v];
    if (tv.node >= 0) {
      if (item_of_node.count(tv.node) == 0) {
        item_of_node[tv.node] = static_cast<int>(p.items.size());
        PictureItem box;
        box.label = "node " + std::to_string(tv.node);
        box.node = tv.node;
        box.node_box = true;
        p.items.push_back(box);
        tier_of_item.push_back(node_tier_index);
      }
      continue;
    }
    item_of_vertex[v] = static_cast<int>(p.items.size());
    PictureItem item;
    item.label = tv.label;
    p.items.push_back(item);
    tier_of_item.push_back(fabric_tier(tv.type));
  }
  std::map<std::pair<int, int>, int> link_of;
  auto item_of = [&](int v) {
    const TopoVertex& tv = g.vertices()[v];
    return tv.node >= 0 ? item_of_node[tv.node] : item_of_vertex[v];
  };
  for (const TopoEdge& e : g.edges()) {
    int a = item_of(e.a);
    int b = item_of(e.b);
    if (a == b) continue;  // inside one node: the node picture shows it
    if (a > b) std::swap(a, b);
    auto [it, inserted] = link_of.try_emplace({a, b}, static_cast<int>(p.links.size()));
    if (inserted) {
      PictureLink link;
      link.from = a;
      link.to = b;
      link.kind = e.kind;
      link.merged = 0;
      p.links.push_back(link);
    }
    PictureLink& link = p.links[it->second];
    merge_into(&link, e);
    ++link.merged;
    for (int item : {a, b}) {
      if (p.items[item].node_box) {
        p.items[item].utilization = std::max(p.items[item].utilization, e.utilization());
      }
    }
  }
  place(&p.items, tier_of_item);
  return p;
}

TopologyPicture node_picture(const TopologyGraph& g, int node) {
  TopologyPicture p;
  std::vector<int> tier_of_item;
  std::map<int, int> item_of_vertex;
  std::set<int> neighbours;  // fabric vertices linked to this node
  for (const TopoEdge& e : g.edges()) {
    const TopoVertex& a = g.vertices()[e.a];
    const TopoVertex& b = g.vertices()[e.b];
    if (a.node == node && b.node != node) neighbours.insert(e.b);
    if (b.node == node && a.node != node) neighbours.insert(e.a);
  }
  std::vector<int> order;
  for (std::size_t v = 0; v < g.vertices().size(); ++v) {
    if (g.vertices()[v].node == node || neighbours.count(static_cast<int>(v))) {
      order.push_back(static_cast<int>(v));
    }
  }
  std::sort(order.begin(), order.end(),
            [&](int a, int b) { return vertex_less(g.vertices()[a], g.vertices()[b]); });
  for (int v : order) {
    const TopoVertex& tv = g.vertices()[v];
    item_of_vertex[v] = static_cast<int>(p.items.size());
    PictureItem item;
    item.label = tv.node == node ? tv.local : tv.label;
    item.node = tv.node;
    p.items.push_back(item);
    tier_of_item.push_back(tv.node == node ? node_tier(tv.type) : 0);
  }
  for (const TopoEdge& e : g.edges()) {
    auto a = item_of_vertex.find(e.a);
    auto b = item_of_vertex.find(e.b);
    if (a == item_of_vertex.end() || b == item_of_vertex.end()) continue;
    if (g.vertices()[e.a].node != node && g.vertices()[e.b].node != node) continue;
    PictureLink link;
    link.from = a->second;
    link.to = b->second;
    link.kind = e.kind;
    merge_into(&link, e);
    p.links.push_back(link);
  }
  place(&p.items, tier_of_item);
  return p;
}

}  // namespace strata::gui
