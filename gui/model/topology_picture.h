// The cluster graph as the topology view draws it, built from result.json's
// link_utilization (vertex labels "n0.gpu3", "n0.nvswitch", "leaf2", "spine0";
// "node0/gpu3" is read the same way). Two pictures: the fabric (each node one box, its links to the
// fabric merged) and one node in detail (its GPUs, switches and NICs, and the
// fabric switches they reach). Positions are in abstract scene units; Qt-free.
#pragma once

#include <string>
#include <vector>

#include "gui/model/result_data.h"

namespace strata::gui {

struct TopoVertex {
  std::string label;  // as written: "n0.gpu3", "leaf2"
  std::string local;  // the label inside its node: "gpu3" ("leaf2" for fabric switches)
  int node = -1;      // the node a vertex belongs to; -1 for fabric switches
  std::string type;   // the label's last part without its number: "gpu", "nvswitch", "leaf"
  int index = 0;      // that number
};

// An undirected link; the two directions of a full-duplex link are kept apart.
struct TopoEdge {
  int a = 0, b = 0;  // vertex indices, a's label sorts before b's
  std::string kind;
  double bandwidth_bytes_per_s = 0.0;  // per direction
  double bytes_ab = 0.0, bytes_ba = 0.0;
  double utilization_ab = 0.0, utilization_ba = 0.0;
  double utilization() const {
    return utilization_ab > utilization_ba ? utilization_ab : utilization_ba;
  }
};

class TopologyGraph {
 public:
  // Builds the graph of the links; throws nothing (labels of any form are kept).
  static TopologyGraph from_links(const std::vector<LinkUse>& links);

  const std::vector<TopoVertex>& vertices() const { return vertices_; }
  const std::vector<TopoEdge>& edges() const { return edges_; }
  // Node numbers present, ascending.
  std::vector<int> nodes() const;

 private:
  std::vector<TopoVertex> vertices_;
  std::vector<TopoEdge> edges_;
};

// Splits a vertex label into node, type and index ("n2.gpu5" or "node2/gpu5" ->
// 2, "gpu", 5).
TopoVertex parse_vertex_label(const std::string& label);

struct PictureItem {
  std::string label;  // shown on the item
  int node = -1;      // for node boxes and node vertices
  bool node_box = false;
  double x = 0.0, y = 0.0;   // centre
  double utilization = 0.0;  // node boxes: the hottest merged link
};

struct PictureLink {
  int from = 0, to = 0;  // item indices
  std::string kind;
  int merged = 1;                      // links (both directions each) merged into this line
  double bandwidth_bytes_per_s = 0.0;  // per direction, summed over merged links
  double bytes = 0.0;                  // both directions, summed
  double utilization = 0.0;            // the hottest merged direction
};

struct TopologyPicture {
  std::vector<PictureItem> items;
  std::vector<PictureLink> links;
};

// Scene spacing: tiers are kTierGap apart, items in a tier kItemGap apart.
inline constexpr double kTierGap = 140.0;
inline constexpr double kItemGap = 90.0;

// Fabric switches in tiers (core, spine, leaf, then other fabric types) above a
// row of node boxes; a node's links to one switch merge into one line.
TopologyPicture fabric_picture(const TopologyGraph& g);

// One node's vertices in tiers (NICs, CPUs, PCIe switches, GPUs, NVSwitches),
// with the fabric switches its NICs reach above them.
TopologyPicture node_picture(const TopologyGraph& g, int node);

}  // namespace strata::gui
