// strata topo show: the cluster as Strata sees it - one node's GPU-to-GPU matrix,
// its NUMA layout, the fabric's bisection bandwidth and the predicted all-reduce
// bus bandwidth for a node and the whole cluster; --dot writes the graph.
#include <sstream>

#include <fmt/format.h>

#include "costmodel/cost_model.h"
#include "costmodel/profile.h"
#include "cli/commands.h"
#include "core/atomic_file.h"
#include "core/error.h"
#include "core/progress.h"
#include "core/units.h"
#include "topologies/collective_model.h"
#include "topologies/report.h"
#include "topologies/topology.h"

namespace strata::cli {
namespace {

struct TopoArgs {
  std::string cluster;
  std::string dot_file;
  std::string json_file;
  std::string nccl_version;
  std::string group;
};

std::string size_label(double bytes) {
  if (bytes >= kGiB) return fmt::format("{:g} GiB", bytes / kGiB);
  if (bytes >= kMiB) return fmt::format("{:g} MiB", bytes / kMiB);
  return fmt::format("{:g} KiB", bytes / kKiB);
}

std::string time_label(double s) {
  if (s >= 1.0) return fmt::format("{:.3f} s", s);
  if (s >= 1e-3) return fmt::format("{:.3f} ms", s * 1e3);
  return fmt::format("{:.1f} us", s * 1e6);
}

std::string list_label(const std::vector<int>& v) {
  std::string out;
  for (std::size_t i = 0; i < v.size();) {
    std::size_t j = i;
    while (j + 1 < v.size() && v[j + 1] == v[j] + 1) ++j;
    out += (out.empty() ? "" : ",") + (j > i ? fmt::format("{}-{}", v[i], v[j]) : fmt::format("{}", v[i]));
    i = j + 1;
  }
  return out.empty() ? "none" : out;
}

// "0,1,8,9" → {0, 1, 8, 9}; InputError on anything else.
std::vector<int> parse_group(const std::string& text) {
  std::vector<int> out;
  std::stringstream in(text);
  std::string item;
  while (std::getline(in, item, ',')) {
    try {
      std::size_t used = 0;
      int g = std::stoi(item, &used);
      if (used != item.size()) throw std::invalid_argument(item);
      out.push_back(g);
    } catch (const std::exception&) {
      throw InputError("", "--group",
                       fmt::format("expected GPU indices separated by commas (\"0,1,8,9\"), got \"{}\"", text));
    }
  }
  return out;
}

// Measured efficiencies from a calibrated profile's collectives section.
topo::CollectiveEfficiency efficiency_from(const Profile& profile) {
  topo::CollectiveEfficiency e;
  CostModel cost(profile);
  for (CollectiveOp op : {CollectiveOp::kAllReduce, CollectiveOp::kAllGather, CollectiveOp::kReduceScatter,
                          CollectiveOp::kBroadcast, CollectiveOp::kAllToAll, CollectiveOp::kSendRecv}) {
    for (bool inter : {false, true}) {
      auto f = cost.collective_efficiency(op, inter);
      if (f && *f > 0.0) {
        e.factor[{op, inter ? topo::Scope::kInterNode : topo::Scope::kIntraNode}] = std::min(*f, 1.0);
      }
    }
  }
  if (!e.empty()) e.source = profile.file;
  return e;
}

void print_report(const topo::TopologyReport& r, const std::vector<topo::BusbwRow>& extra) {
  fmt::print("cluster   {}: {}\n", r.cluster, r.summary);
  fmt::print("fabric    {}\n", r.fabric);
  fmt::print("graph     {} vertices, {} directed links\n\n", r.vertices, r.links);

  fmt::print("node 0    connection type, achievable GB/s per direction, (links on the path)\n");
  fmt::print("{:<6}", "");
  for (const std::string& e : r.endpoints) fmt::print("{:>13}", e);
  fmt::print("\n");
  for (std::size_t a = 0; a < r.endpoints.size(); ++a) {
    fmt::print("{:<6}", r.endpoints[a]);
    for (const topo::MatrixCell& c : r.matrix[a]) {
      if (c.type == "X") {
        fmt::print("{:>13}", "X");
      } else {
        fmt::print("{:>13}", fmt::format("{} {:.0f} ({})", c.type, c.bandwidth_bytes_per_s / 1e9, c.hops));
      }
    }
    fmt::print("\n");
  }
  fmt::print("legend    NV: NVLink, through the NVSwitch; PIX: one PCIe switch; PXB: several PCIe switches;\n"
             "          NODE: through the CPU, same socket; SYS: across the socket link (UPI/xGMI)\n\n");
  for (const topo::NumaDomain& d : r.numa) {
    fmt::print("{:<10}socket {}: GPUs {}, NICs {}\n", &d == &r.numa.front() ? "NUMA" : "", d.socket,
               list_label(d.gpus), list_label(d.nics));
  }
  if (r.bisection_bytes_per_s > 0.0) {
    fmt::print("bisection {:.1f} GB/s per direction between the two halves of the nodes (max flow over the "
               "fabric)\n",
               r.bisection_bytes_per_s / 1e9);
  } else {
    fmt::print("bisection none: a single node\n");
  }
  fmt::print("\nall_reduce as NCCL {} would run it ({})\n", r.nccl_version, r.bandwidth_note);
  fmt::print("{:<8} {:>6} {:>8}  {:<10} {:<7} {:>8} {:>11} {:>14} {:>14}\n", "scope", "GPUs", "size",
             "algorithm", "proto", "channels", "time", "algbw", "busbw");
  std::vector<topo::BusbwRow> rows = r.allreduce;
  rows.insert(rows.end(), extra.begin(), extra.end());
  for (const topo::BusbwRow& row : rows) {
    const topo::CollectiveEstimate& e = row.estimate;
    fmt::print("{:<8} {:>6} {:>8}  {:<10} {:<7} {:>8} {:>11} {:>14} {:>14}\n", row.scope, row.gpus,
               size_label(row.bytes), to_string(e.algorithm), to_string(e.protocol), e.channels,
               time_label(e.time_s), fmt::format("{:.1f} GB/s", e.algbw_bytes_per_s / 1e9),
               fmt::format("{:.1f} GB/s", e.busbw_bytes_per_s / 1e9));
  }
}

void run_topo_show(const TopoArgs& args) {
  ClusterSpec cluster = load_cluster_spec(args.cluster);
  const topo::NcclTuning& tuning =
      args.nccl_version.empty() ? topo::default_nccl_tuning() : topo::nccl_tuning(args.nccl_version);
  Profile profile = load_profile(cluster.profile);
  topo::CollectiveEfficiency efficiency = efficiency_from(profile);

  ProgressLine progress("topo show", 0);
  progress.update(0, "building the graph");
  topo::Topology topology = topo::Topology::build(cluster);
  std::vector<int> group;
  if (!args.group.empty()) {
    group = parse_group(args.group);
    topology.check_group(group, "", "--group");
  }
  topo::CollectiveModel model(topology, tuning, efficiency);
  topo::TopologyReport report = topo::make_report(topology, model, [&](std::int64_t done, std::int64_t total,
                                                                        std::string_view) {
    progress.update(done, fmt::format("{} of {} steps", done, total));
    return true;
  });
  std::vector<topo::BusbwRow> extra;
  for (double bytes : group.empty() ? std::vector<double>{} : topo::report_sizes()) {
    topo::BusbwRow row;
    row.scope = "group";
    row.gpus = static_cast<int>(group.size());
    row.bytes = bytes;
    row.estimate = model.estimate(CollectiveOp::kAllReduce, group, bytes);
    extra.push_back(row);
  }
  progress.finish();

  OutputSet outputs;
  if (!args.json_file.empty()) {
    nlohmann::ordered_json j = topo::to_json(report);
    if (!group.empty()) {
      nlohmann::ordered_json rows = nlohmann::ordered_json::array();
      for (const topo::BusbwRow& row : extra) {
        nlohmann::ordered_json x;
        x["gpus"] = group;
        x["bytes"] = row.bytes;
        x["algorithm"] = to_string(row.estimate.algorithm);
        x["protocol"] = to_string(row.estimate.protocol);
        x["channels"] = row.estimate.channels;
        x["time_us"] = row.estimate.time_s * 1e6;
        x["algbw_gbytes_per_s"] = row.estimate.algbw_bytes_per_s / 1e9;
        x["busbw_gbytes_per_s"] = row.estimate.busbw_bytes_per_s / 1e9;
        rows.push_back(std::move(x));
      }
      j["group_all_reduce"] = std::move(rows);
    }
    outputs.add(args.json_file, j.dump(2) + "\n");
  }
  if (!args.dot_file.empty()) outputs.add(args.dot_file, topo::to_dot(topology));
  outputs.commit();
  print_report(report, extra);
}

}  // namespace

void add_topo_command(CLI::App& app) {
  CLI::App* topo = app.add_subcommand("topo", "The cluster's topology: graph, paths and collective bandwidth");
  topo->require_subcommand(1);
  auto args = std::make_shared<TopoArgs>();
  CLI::App* show = topo->add_subcommand(
      "show", "GPU-to-GPU matrix of a node (like nvidia-smi topo -m), NUMA layout, fabric bisection "
              "bandwidth, and predicted all-reduce busbw at 1 MiB, 64 MiB and 1 GiB");
  show->add_option("--cluster", args->cluster, "cluster file or shipped name (scenarios/clusters/)")->required();
  show->add_option("--dot", args->dot_file, "also write the graph as Graphviz DOT to this file");
  show->add_option("--json", args->json_file, "also write the report as JSON to this file");
  show->add_option("--nccl-version", args->nccl_version,
                   "NCCL version whose tuning table to use (default: the newest known)");
  show->add_option("--group", args->group, "also report all-reduce for these GPUs (\"0,1,8,9\")");
  show->callback([args] { run_topo_show(*args); });
}

}  // namespace strata::cli
