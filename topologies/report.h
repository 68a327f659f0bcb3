// What `strata topo show` reports about a cluster: the GPU-to-GPU matrix of one
// node (like `nvidia-smi topo -m`), its NUMA layout, the fabric's bisection
// bandwidth and the predicted all-reduce bus bandwidth for a node and for the whole
// cluster; as JSON, and the graph as Graphviz DOT.
#pragma once

#include "core/progress.h"

#include <functional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "topologies/collective_model.h"
#include "topologies/topology.h"

namespace strata::topo {

// One cell of the node matrix: how `from` reaches `to`.
struct MatrixCell {
  std::string type;              // "X", "NV", "PIX", "PXB", "NODE", "SYS" (nvidia-smi's legend)
  double bandwidth_bytes_per_s = 0.0;  // achievable, the path's bottleneck
  int hops = 0;
};

struct NumaDomain {
  int socket = 0;
  std::vector<int> gpus;  // local indices
  std::vector<int> nics;
};

struct BusbwRow {
  std::string scope;     // "node" or "cluster"
  int gpus = 0;
  double bytes = 0.0;
  CollectiveEstimate estimate;
};

struct TopologyReport {
  std::string cluster;
  std::string summary;            // one line: nodes, GPUs, node preset, fabric
  std::string fabric;             // the fat-tree's description, or "none"
  int vertices = 0;
  int links = 0;
  std::vector<std::string> endpoints;           // matrix rows/columns: "GPU0".., "NIC0"..
  std::vector<std::vector<MatrixCell>> matrix;  // [from][to] over endpoints
  std::vector<NumaDomain> numa;
  double bisection_bytes_per_s = 0.0;           // 0 for a single node
  std::vector<BusbwRow> allreduce;
  std::string nccl_version;
  bool calibrated = false;
  std::string bandwidth_note;     // where the bandwidths come from
};

// Sizes the busbw table reports: 1 MiB, 64 MiB, 1 GiB.
const std::vector<double>& report_sizes();

// Builds the report. `progress(done, total)` is called as the slow parts advance.
TopologyReport make_report(const Topology& topology, const CollectiveModel& model,
                           const ProgressFn& progress = {});

// The fabric's bisection bandwidth: the max flow (Boost push-relabel) from the NICs
// of the first half of the nodes to those of the second half, over achievable
// network link bandwidths. 0 for fewer than two nodes.
double bisection_bandwidth(const Topology& topology);

nlohmann::ordered_json to_json(const TopologyReport& report);
// The whole graph in Graphviz DOT: one cluster box per node, one edge per wire
// (both directions), labelled with kind and achievable bandwidth.
std::string to_dot(const Topology& topology);

}  // namespace strata::topo
