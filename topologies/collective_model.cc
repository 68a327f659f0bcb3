#include "topologies/collective_model.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <tuple>
#include <unordered_map>

#include <fmt/format.h>

#include "core/error.h"
#include "topologies/nccl_cost.h"
#include "topologies/router.h"

namespace strata::topo {
namespace {

constexpr double kUsPerSecond = 1e6;

int table_index(CollectiveAlgorithm a) {
  switch (a) {
    case CollectiveAlgorithm::kTree: return NcclTuning::kTree;
    case CollectiveAlgorithm::kRing: return NcclTuning::kRing;
    case CollectiveAlgorithm::kNvls: return NcclTuning::kNvls;
    case CollectiveAlgorithm::kNvlsTree: return NcclTuning::kNvlsTree;
    default: return -1;
  }
}

const CollectiveAlgorithm kNcclOrder[] = {CollectiveAlgorithm::kTree, CollectiveAlgorithm::kRing,
                                          CollectiveAlgorithm::kNvls, CollectiveAlgorithm::kNvlsTree};
const Protocol kProtocols[] = {Protocol::kLL, Protocol::kLL128, Protocol::kSimple};

bool is_direct(CollectiveOp op) {
  return op == CollectiveOp::kAllToAll || op == CollectiveOp::kSendRecv;
}

// Bytes one ring edge carries for the whole collective, per byte of `bytes`.
double ring_edge_share(CollectiveOp op, int n) {
  switch (op) {
    case CollectiveOp::kAllReduce: return 2.0 * (n - 1) / n;
    case CollectiveOp::kAllGather:
    case CollectiveOp::kReduceScatter: return static_cast<double>(n - 1) / n;
    default: return 1.0;
  }
}

// Flows keyed by (src, dst, path) so that identical ones from several channels merge;
// they come out in the order first added. Hashed: a costing adds thousands.
class FlowAccumulator {
 public:
  void add(int src, int dst, const std::vector<LinkId>& path, double bytes, int part = 0) {
    if (bytes <= 0.0) return;
    auto it = index_.find(KeyView{src, dst, part, &path});
    if (it != index_.end()) {
      flows_[it->second].bytes += bytes;
      return;
    }
    index_.emplace(Key{src, dst, part, path}, flows_.size());
    FlowSpec f;
    f.src_gpu = src;
    f.dst_gpu = dst;
    f.part = part;
    f.path = path;
    f.bytes = bytes;
    flows_.push_back(std::move(f));
  }
  std::vector<FlowSpec> take() { return std::move(flows_); }

 private:
  struct Key {
    int src;
    int dst;
    int part;
    std::vector<LinkId> path;
  };
  // Looks a flow up without copying its path.
  struct KeyView {
    int src;
    int dst;
    int part;
    const std::vector<LinkId>* path;
  };
  static KeyView view(const Key& k) { return {k.src, k.dst, k.part, &k.path}; }
  static KeyView view(const KeyView& k) { return k; }
  struct KeyHash {
    using is_transparent = void;
    template <class K>
    std::size_t operator()(const K& key) const {
      const KeyView k = view(key);
      std::uint64_t h = flow_hash(static_cast<std::uint64_t>(k.src), static_cast<std::uint64_t>(k.dst),
                                  k.path->size() * 1024 + static_cast<std::uint64_t>(k.part));
      for (LinkId l : *k.path) h = flow_hash(h, static_cast<std::uint64_t>(l), 0);
      return static_cast<std::size_t>(h);
    }
  };
  struct KeyEqual {
    using is_transparent = void;
    template <class A, class B>
    bool operator()(const A& a, const B& b) const {
      const KeyView x = view(a), y = view(b);
      return x.src == y.src && x.dst == y.dst && x.part == y.part && *x.path == *y.path;
    }
  };
  std::unordered_map<Key, std::size_t, KeyHash, KeyEqual> index_;
  std::vector<FlowSpec> flows_;
};

// Bytes between two GPUs of different nodes over the fabric: NCCL opens a
// connection per channel, each with NCCL_IB_QPS_PER_CONNECTION queue pairs, and
// the fabric's ECMP hashes each queue pair to a path of its own; the bytes spread
// evenly over them (the first keeps `path`). Within a node, or over one queue
// pair, the path.
void add_connection(FlowAccumulator& acc, const Topology& t, int a, int b, int rail, const std::vector<LinkId>& path,
                    double bytes, int part, int channels = 1) {
  const int qps = std::max(1, channels) * t.cluster().fabric.qps_per_connection;
  if (qps <= 1 || t.node_of(a) == t.node_of(b)) {
    acc.add(a, b, path, bytes, part);
    return;
  }
  acc.add(a, b, path, bytes / qps, part);
  for (int q = 1; q < qps; ++q) {
    const std::uint64_t key = flow_hash(static_cast<std::uint64_t>(q) + 0x9e37, static_cast<std::uint64_t>(a),
                                        static_cast<std::uint64_t>(b));
    acc.add(a, b, rail >= 0 ? t.route_via_rail(a, b, rail, key) : t.route(a, b, key), bytes / qps, part);
  }
}

// Double binary tree over n nodes: tree 0 is the heap-ordered binary tree on node
// positions, tree 1 the same on the mirrored positions, so that most interior
// nodes of one tree are leaves of the other (NCCL's double binary tree, Sanders,
// Speck & Träff 2009). Returns (parent, child) position pairs.
std::vector<std::pair<int, int>> binary_tree_edges(int n, bool mirrored) {
  std::vector<std::pair<int, int>> edges;
  for (int i = 1; i < n; ++i) {
    int parent = (i - 1) / 2;
    if (mirrored) edges.emplace_back(n - 1 - parent, n - 1 - i);
    else edges.emplace_back(parent, i);
  }
  return edges;
}

}  // namespace

std::optional<double> CollectiveEfficiency::get(CollectiveOp op, Scope scope) const {
  auto it = factor.find({op, scope});
  if (it == factor.end()) return std::nullopt;
  return it->second;
}

// Everything about a group that does not depend on the size.
struct CollectiveModel::Plan {
  CollectiveOp op = CollectiveOp::kAllReduce;
  NcclGraphs graphs;
  bool calibrated = false;
  // Direct transfers (all_to_all, send_recv): flows per byte of the collective's
  // size, and the busiest link's seconds per byte.
  std::vector<FlowSpec> unit_flows;
  double direct_seconds_per_byte = 0.0;
  double direct_latency_us = 0.0;
};

struct CollectiveModel::Choice {
  CollectiveAlgorithm algorithm = CollectiveAlgorithm::kRing;
  Protocol protocol = Protocol::kSimple;
  int channels = 0;
  double latency_s = 0.0;
  double bandwidth_s = 0.0;
};

CollectiveModel::CollectiveModel(const Topology& topology, const NcclTuning& tuning,
                                 CollectiveEfficiency efficiency)
    : topology_(topology), tuning_(tuning), efficiency_(std::move(efficiency)) {
  for (const auto& [key, f] : efficiency_.factor) {
    if (!(f > 0.0 && f <= 1.0)) {
      throw InputError(efficiency_.source, "collectives",
                       fmt::format("efficiency for {} must be in (0, 1], got {}", to_string(key.first), f));
    }
  }
}

CollectiveModel::~CollectiveModel() = default;

double CollectiveModel::capacity(CollectiveOp op, LinkId id) const {
  const Link& l = topology_.link(id);
  auto f = efficiency_.get(op, is_network(l.kind) ? Scope::kInterNode : Scope::kIntraNode);
  return f ? l.line_rate_bytes_per_s * *f : l.bandwidth_bytes_per_s;
}

const CollectiveModel::Plan& CollectiveModel::plan(CollectiveOp op, const std::vector<int>& group) const {
  // Capacities differ per op only when a calibrated efficiency names the op.
  const bool op_specific = efficiency_.get(op, Scope::kIntraNode) || efficiency_.get(op, Scope::kInterNode);
  auto key = std::make_pair(op_specific || is_direct(op) ? static_cast<int>(op) : -1, group);
  {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = plans_.find(key);
    if (it != plans_.end()) return *it->second;
  }
  topology_.check_group(group, "", "group");  // a group found above was checked when it was planned
  auto p = std::make_unique<Plan>();
  p->op = op;
  p->calibrated = op_specific;
  CapacityFn cap = [this, op](LinkId l) { return capacity(op, l); };
  p->graphs.shape = make_group_shape(topology_, group);
  if (group.size() > 1) {
    p->graphs.ring = search_ring(topology_, tuning_, p->graphs.shape, cap);
    p->graphs.nvls = search_nvls(topology_, tuning_, p->graphs.shape, cap);
  }


  if (is_direct(op) && group.size() > 1) {
    const GroupShape& s = p->graphs.shape;
    const int n = s.ranks();
    FlowAccumulator acc;
    // Bytes per link, as (link, bytes) in the order loaded: summed per link below
    // (in this order, as a map would) after a stable sort.
    std::vector<std::pair<LinkId, double>> load;
    auto add_path = [&](int a, int b, const std::vector<LinkId>& path, double bytes) {
      acc.add(a, b, path, bytes);
      for (LinkId l : path) load.emplace_back(l, bytes);
    };
    auto add_fluid = [&](int a, int b, int rail, double bytes) {
      std::vector<LinkId> path = rail >= 0 ? topology_.route_via_rail(a, b, rail, flow_hash(0, a, b))
                                           : topology_.route(a, b, flow_hash(0, a, b));
      add_connection(acc, topology_, a, b, rail, path, bytes, 0);
      topology_.for_each_ecmp_share(a, b, rail, [&](LinkId l, double share) { load.emplace_back(l, share * bytes); });
    };
    const int intra_hw = p->graphs.ring.nvlink_intra ? NcclTuning::kHwNvlink : NcclTuning::kHwPci;
    const double base = tuning_.base_latency_us[NcclTuning::kRing][NcclTuning::kSimple];
    const double intra_lat = tuning_.hw_latency_us[intra_hw][NcclTuning::kRing][NcclTuning::kSimple];
    const double inter_lat = tuning_.hw_latency_us[NcclTuning::kHwNet][NcclTuning::kRing][NcclTuning::kSimple];
    if (op == CollectiveOp::kSendRecv) {
      // group[i] sends `bytes` to group[i + 1]; all pairs at once.
      double lat = 0.0;
      for (int i = 0; i + 1 < n; ++i) {
        const int a = group[static_cast<std::size_t>(i)], b = group[static_cast<std::size_t>(i + 1)];
        const bool inter = topology_.node_of(a) != topology_.node_of(b);
        if (inter) {
          add_fluid(a, b, -1, 1.0);
        } else {
          add_path(a, b, topology_.route(a, b, flow_hash(0, a, b)), 1.0);
        }
        lat = std::max(lat, inter ? inter_lat : intra_lat);
      }
      p->direct_latency_us = base + lat;
    } else {
      // all_to_all: every rank sends bytes/n to every other. Between nodes, data for
      // a GPU first crosses NVLink to the local GPU on that GPU's rail (NCCL's PXN),
      // then the network, rail-aligned.
      const int rails = s.node_count() > 1 ? topology_.rails() : 0;
      // A GPU's own rail: the nearest NIC; GPUs sharing several equally near NICs
      // take them in turn (NCCL's local NIC per GPU).
      auto rail_of = [&](int gpu) {
        std::vector<int> nearest;
        std::int64_t best_cost = std::numeric_limits<std::int64_t>::max();
        for (int r = 0; r < rails; ++r) {
          std::int64_t c = topology_.nic_to_gpu_cost(r, gpu);
          if (c < best_cost) {
            best_cost = c;
            nearest.clear();
          }
          if (c == best_cost) nearest.push_back(r);
        }
        if (nearest.empty()) return -1;
        return nearest[static_cast<std::size_t>(topology_.local_index(gpu)) % nearest.size()];
      };
      auto nvlink_only = [&](int a, int b) {
        std::vector<LinkId> hop = topology_.route(a, b, 0);
        return std::all_of(hop.begin(), hop.end(),
                           [&](LinkId l) { return topology_.link(l).kind == LinkKind::kNvlink; });
      };
      std::map<std::tuple<int, int, int>, double> network;  // (proxy, dst, rail) → bytes
      std::map<std::pair<int, int>, double> to_proxy;        // (src, proxy) → bytes
      const double share = 1.0 / n;
      for (std::size_t k = 0; k < s.members.size(); ++k) {
        for (int src : s.members[k]) {
          for (std::size_t k2 = 0; k2 < s.members.size(); ++k2) {
            for (int dst : s.members[k2]) {
              if (dst == src) continue;
              if (k2 == k) {
                add_path(src, dst, topology_.route(src, dst, flow_hash(0, src, dst)), share);
                continue;
              }
              // PXN: the local GPU whose own rail is the destination's, over NVLink.
              const int rail = rail_of(dst);
              int proxy = src;
              if (rail >= 0 && rail_of(src) != rail) {
                for (int cand : s.members[k]) {
                  if (cand != src && rail_of(cand) == rail && nvlink_only(src, cand)) {
                    proxy = cand;
                    break;
                  }
                }
              }
              if (rail >= 0 && rail_of(src) == rail) {
                network[{src, dst, rail}] += share;  // already on the destination's rail
              } else if (proxy != src) {
                to_proxy[{src, proxy}] += share;
                network[{proxy, dst, rail}] += share;
              } else {
                network[{src, dst, -1}] += share;  // no NVLink proxy: the shortest path
              }
            }
          }
        }
      }
      for (const auto& [sp, bytes] : to_proxy) {
        add_path(sp.first, sp.second, topology_.route(sp.first, sp.second, 0), bytes);
      }
      for (const auto& [pdr, bytes] : network) add_fluid(std::get<0>(pdr), std::get<1>(pdr), std::get<2>(pdr), bytes);
      std::size_t max_local = 0;
      for (const auto& m : s.members) max_local = std::max(max_local, m.size());
      p->direct_latency_us = base + (static_cast<double>(max_local) - 1.0) * intra_lat +
                             (s.node_count() - 1) * inter_lat;
    }
    // Per link, the bytes summed in the order loaded (the same sums, bit for bit, as
    // a stable sort by link would give), then the busiest link's time.
    // Scratch per thread, as long as the topology's link list, left all zero.
    thread_local std::vector<double> bytes_on;
    thread_local std::vector<char> seen;
    bytes_on.resize(static_cast<std::size_t>(topology_.num_links()), 0.0);
    seen.resize(bytes_on.size(), 0);
    std::vector<LinkId> loaded;
    for (const auto& [l, bytes] : load) {
      if (!seen[static_cast<std::size_t>(l)]) {
        seen[static_cast<std::size_t>(l)] = 1;
        loaded.push_back(l);
      }
      bytes_on[static_cast<std::size_t>(l)] += bytes;
    }
    for (LinkId l : loaded) {
      p->direct_seconds_per_byte = std::max(p->direct_seconds_per_byte, bytes_on[static_cast<std::size_t>(l)] / capacity(op, l));
      bytes_on[static_cast<std::size_t>(l)] = 0.0;
      seen[static_cast<std::size_t>(l)] = 0;
    }
    p->unit_flows = acc.take();
  }

  std::lock_guard<std::mutex> lock(mutex_);
  auto [it, inserted] = plans_.emplace(std::move(key), std::move(p));
  return *it->second;
}

std::vector<CollectiveAlgorithm> CollectiveModel::algorithms(CollectiveOp op,
                                                             const std::vector<int>& group) const {
  const Plan& p = plan(op, group);
  std::vector<CollectiveAlgorithm> out;
  if (is_direct(op)) return {CollectiveAlgorithm::kDirect};
  if (group.size() < 2) return {CollectiveAlgorithm::kRing};
  for (CollectiveAlgorithm a : kNcclOrder) {
    for (Protocol pr : kProtocols) {
      if (nccl_cost(tuning_, op, table_index(a), static_cast<int>(pr), p.graphs).available) {
        out.push_back(a);
        break;
      }
    }
  }
  const GroupShape& s = p.graphs.shape;
  bool even = s.node_count() > 1 && op == CollectiveOp::kAllReduce;
  for (const auto& m : s.members) even = even && m.size() == s.members[0].size();
  if (even) out.push_back(CollectiveAlgorithm::kHierarchical);
  return out;
}

CollectiveModel::Choice CollectiveModel::choose(CollectiveOp op, const Plan& p, double bytes,
                                                std::optional<CollectiveAlgorithm> forced) const {
  Choice best;
  const GroupShape& s = p.graphs.shape;
  if (s.ranks() < 2 || bytes <= 0.0) {
    best.algorithm = is_direct(op) ? CollectiveAlgorithm::kDirect : CollectiveAlgorithm::kRing;
    return best;
  }
  if (is_direct(op) || (forced && *forced == CollectiveAlgorithm::kDirect)) {
    if (!is_direct(op)) {
      throw InputError("", "algorithm", fmt::format("direct applies to all_to_all and send_recv, not {}",
                                                    to_string(op)));
    }
    best.algorithm = CollectiveAlgorithm::kDirect;
    best.protocol = Protocol::kSimple;
    best.channels = p.graphs.ring.channels;
    best.latency_s = p.direct_latency_us / kUsPerSecond;
    best.bandwidth_s = bytes * p.direct_seconds_per_byte;
    return best;
  }
  if (forced && *forced == CollectiveAlgorithm::kHierarchical) {
    auto algos = algorithms(op, s.gpus);
    if (std::find(algos.begin(), algos.end(), CollectiveAlgorithm::kHierarchical) == algos.end()) {
      throw InputError("", "algorithm",
                       "hierarchical applies to all_reduce over several nodes with the same number "
                       "of GPUs on each");
    }
    // Intra-node reduce-scatter and all-gather (NCCL's choice for one node's GPUs),
    // and between them an all-reduce of 1/m of the data over the nodes, all
    // local ranks at once.
    const std::size_t m = s.members[0].size();
    Choice rs = m > 1 ? choose(CollectiveOp::kReduceScatter, plan(CollectiveOp::kReduceScatter, s.members[0]),
                               bytes, std::nullopt)
                      : Choice{};
    Choice ag = m > 1 ? choose(CollectiveOp::kAllGather, plan(CollectiveOp::kAllGather, s.members[0]), bytes,
                               std::nullopt)
                      : Choice{};
    std::vector<int> column;
    for (const auto& members : s.members) column.push_back(members[0]);
    const Plan& inter_plan = plan(CollectiveOp::kAllReduce, column);
    NcclCost ring = nccl_cost(tuning_, CollectiveOp::kAllReduce, NcclTuning::kRing, NcclTuning::kSimple,
                              inter_plan.graphs);
    auto [lat_us, unused] = nccl_time_us(tuning_, CollectiveOp::kAllReduce, NcclTuning::kRing,
                                         NcclTuning::kSimple, ring, inter_plan.graphs, bytes / m);
    // Bandwidth of the inter-node phase from the links all m rings load together.
    std::map<LinkId, double> load;
    const double per_edge = ring_edge_share(CollectiveOp::kAllReduce, s.node_count()) * bytes / m;
    for (std::size_t j = 0; j < m; ++j) {
      std::vector<int> col;
      for (const auto& members : s.members) col.push_back(members[j]);
      const Plan& cp = plan(CollectiveOp::kAllReduce, col);
      const RingGraph& rg = cp.graphs.ring;
      for (std::size_t i = 0; i < rg.instances.size(); ++i) {
        for (const auto& path : rg.instances[i].edge_paths) {
          for (LinkId l : path) load[l] += per_edge * rg.share(i);
        }
      }
    }
    double inter_bw_s = 0.0;
    for (const auto& [l, b] : load) inter_bw_s = std::max(inter_bw_s, b / capacity(op, l));
    best.algorithm = CollectiveAlgorithm::kHierarchical;
    best.protocol = Protocol::kSimple;
    best.channels = inter_plan.graphs.ring.channels;
    best.latency_s = rs.latency_s + ag.latency_s + lat_us / kUsPerSecond;
    best.bandwidth_s = rs.bandwidth_s + ag.bandwidth_s + inter_bw_s;
    return best;
  }

  double best_time = std::numeric_limits<double>::infinity();
  bool found = false;
  for (CollectiveAlgorithm a : kNcclOrder) {
    if (forced && *forced != a) continue;
    for (Protocol pr : kProtocols) {
      const int ai = table_index(a), pi = static_cast<int>(pr);
      NcclCost cost = nccl_cost(tuning_, op, ai, pi, p.graphs);
      if (!cost.available) continue;
      auto [lat_us, bw_us] = nccl_time_us(tuning_, op, ai, pi, cost, p.graphs, bytes);
      const double time = lat_us + bw_us;
      if (time < best_time) {
        best_time = time;
        found = true;
        best.algorithm = a;
        best.protocol = pr;
        best.channels = cost.channels;
        best.latency_s = lat_us / kUsPerSecond;
        best.bandwidth_s = bw_us / kUsPerSecond;
      }
    }
  }
  if (!found) {
    throw InputError("", "algorithm",
                     fmt::format("{} does not apply to {} over these {} GPUs with NCCL {}",
                                 forced ? to_string(*forced) : "no algorithm", to_string(op),
                                 s.ranks(), tuning_.version));
  }
  return best;
}

CollectiveEstimate CollectiveModel::to_estimate(CollectiveOp op, const Plan& p, const Choice& c,
                                                double bytes) const {
  CollectiveEstimate e;
  e.algorithm = c.algorithm;
  e.protocol = c.protocol;
  e.channels = c.channels;
  e.latency_s = c.latency_s;
  e.bandwidth_s = c.bandwidth_s;
  e.time_s = c.latency_s + c.bandwidth_s;
  e.calibrated = p.calibrated;
  if (e.time_s > 0.0) {
    e.algbw_bytes_per_s = bytes / e.time_s;
    e.busbw_bytes_per_s = e.algbw_bytes_per_s * busbw_factor(op, p.graphs.shape.ranks());
  }
  return e;
}

CollectiveEstimate CollectiveModel::estimate(CollectiveOp op, const std::vector<int>& group,
                                             double bytes) const {
  const Plan& p = plan(op, group);
  return to_estimate(op, p, choose(op, p, bytes, std::nullopt), bytes);
}

CollectiveEstimate CollectiveModel::estimate(CollectiveOp op, const std::vector<int>& group,
                                             double bytes, CollectiveAlgorithm forced) const {
  const Plan& p = plan(op, group);
  return to_estimate(op, p, choose(op, p, bytes, forced), bytes);
}

CollectiveFlows CollectiveModel::flows(CollectiveOp op, const std::vector<int>& group,
                                       double bytes) const {
  const Plan& p = plan(op, group);
  return build_flows(op, p, choose(op, p, bytes, std::nullopt), bytes);
}

CollectiveFlows CollectiveModel::flows(CollectiveOp op, const std::vector<int>& group, double bytes,
                                       CollectiveAlgorithm forced) const {
  const Plan& p = plan(op, group);
  return build_flows(op, p, choose(op, p, bytes, forced), bytes);
}

CollectiveFlows CollectiveModel::build_flows(CollectiveOp op, const Plan& p, const Choice& c,
                                             double bytes) const {
  CollectiveFlows out;
  out.algorithm = c.algorithm;
  out.protocol = c.protocol;
  out.fixed_latency_ns = c.latency_s * 1e9;
  const GroupShape& s = p.graphs.shape;
  const int n = s.ranks();
  if (n < 2 || bytes <= 0.0 || c.bandwidth_s <= 0.0) return out;
  FlowAccumulator acc;
  const RingGraph& rg = p.graphs.ring;
  // A ring or tree runs one part per rail instance of the group's ring graph; the
  // other algorithms (and the rings inside hierarchical and NVLS trees) one part.
  const bool parted = c.algorithm == CollectiveAlgorithm::kRing || c.algorithm == CollectiveAlgorithm::kTree;
  auto part_of = [&](std::size_t instance) { return parted ? static_cast<int>(instance) : 0; };

  // A tree over the nodes for every rail instance, and chains inside the nodes.
  auto add_trees = [&](const RingGraph& ring, double bytes_per_tree_edge, double chain_bytes) {
    for (std::size_t i = 0; i < ring.instances.size(); ++i) {
      const RingInstance& inst = ring.instances[i];
      const double w = ring.share(i);
      std::vector<std::vector<int>> segments;  // per node, in the instance's order
      for (std::size_t k = 0; k < inst.order.size(); ++k) {
        if (k == 0 || topology_.node_of(inst.order[k]) != topology_.node_of(inst.order[k - 1])) {
          segments.emplace_back();
        }
        segments.back().push_back(inst.order[k]);
      }
      for (const auto& seg : segments) {
        for (std::size_t k = 0; k + 1 < seg.size(); ++k) {
          acc.add(seg[k + 1], seg[k], topology_.route(seg[k + 1], seg[k], 0), chain_bytes * w, part_of(i));
          acc.add(seg[k], seg[k + 1], topology_.route(seg[k], seg[k + 1], 0), chain_bytes * w, part_of(i));
        }
      }
      const int nodes = static_cast<int>(segments.size());
      for (bool mirrored : {false, true}) {
        for (auto [parent, child] : binary_tree_edges(nodes, mirrored)) {
          const int a = segments[static_cast<std::size_t>(parent)].front();
          const int b = segments[static_cast<std::size_t>(child)].front();
          add_connection(acc, topology_, b, a, inst.rail, topology_.route_via_rail(b, a, inst.rail, flow_hash(1, b, a)),
                         bytes_per_tree_edge * w, part_of(i), ring.channels_on(i));
          add_connection(acc, topology_, a, b, inst.rail, topology_.route_via_rail(a, b, inst.rail, flow_hash(1, a, b)),
                         bytes_per_tree_edge * w, part_of(i), ring.channels_on(i));
        }
      }
    }
  };
  // NVLS: each GPU to and from its node's NVSwitch.
  auto add_nvls = [&](double up_bytes, double down_bytes) {
    for (int g : s.gpus) {
      auto [up, down] = topology_.nvswitch_links(g);
      acc.add(g, g, {up}, up_bytes);
      acc.add(g, g, {down}, down_bytes);
    }
  };
  // One ring per rail instance; every edge carries share × bytes.
  auto add_rings = [&](const RingGraph& ring, double per_edge, int root) {
    for (std::size_t i = 0; i < ring.instances.size(); ++i) {
      const RingInstance& inst = ring.instances[i];
      const std::size_t m = inst.order.size();
      for (std::size_t e = 0; e < m; ++e) {
        const int a = inst.order[e], b = inst.order[(e + 1) % m];
        if (b == root) continue;  // a broadcast's ring ends before its root
        add_connection(acc, topology_, a, b, inst.rail, inst.edge_paths[e], per_edge * ring.share(i), part_of(i),
                       ring.channels_on(i));
      }
    }
  };

  switch (c.algorithm) {
    case CollectiveAlgorithm::kDirect:
      for (const FlowSpec& f : p.unit_flows) acc.add(f.src_gpu, f.dst_gpu, f.path, f.bytes * bytes);
      break;
    case CollectiveAlgorithm::kRing:
      add_rings(rg, ring_edge_share(op, n) * bytes, op == CollectiveOp::kBroadcast ? s.gpus[0] : -1);
      break;
    case CollectiveAlgorithm::kTree:
      // Two trees, each half the data, reduced up and broadcast down.
      add_trees(rg, bytes / 2.0, bytes);
      break;
    case CollectiveAlgorithm::kNvls: {
      const double m = static_cast<double>(n);
      if (op == CollectiveOp::kAllReduce) add_nvls(bytes * (m + 1) / m, bytes * (m + 1) / m);
      if (op == CollectiveOp::kAllGather) add_nvls(bytes / m, bytes);
      if (op == CollectiveOp::kReduceScatter) add_nvls(bytes, bytes / m);
      break;
    }
    case CollectiveAlgorithm::kNvlsTree: {
      const double m = static_cast<double>(s.members[0].size());
      add_nvls(bytes * (m + 1) / m, bytes * (m + 1) / m);
      add_trees(rg, bytes / (2.0 * m) * m, 0.0);
      break;
    }
    case CollectiveAlgorithm::kHierarchical: {
      const std::size_t m = s.members[0].size();
      for (const auto& members : s.members) {
        if (m < 2) break;
        const Plan& local = plan(CollectiveOp::kReduceScatter, members);
        add_rings(local.graphs.ring, 2.0 * ring_edge_share(CollectiveOp::kReduceScatter, static_cast<int>(m)) * bytes, -1);
      }
      for (std::size_t j = 0; j < m; ++j) {
        std::vector<int> col;
        for (const auto& members : s.members) col.push_back(members[j]);
        const Plan& cp = plan(CollectiveOp::kAllReduce, col);
        add_rings(cp.graphs.ring, ring_edge_share(CollectiveOp::kAllReduce, s.node_count()) * bytes / m, -1);
      }
      break;
    }
  }
  out.flows = acc.take();
  if (parted && rg.instances.size() > 1) {
    out.part_share.clear();
    for (std::size_t i = 0; i < rg.instances.size(); ++i) out.part_share.push_back(rg.share(i));
  }
  // Every flow runs for the bandwidth part of the estimate.
  for (FlowSpec& f : out.flows) f.rate_cap_bytes_per_s = f.bytes / c.bandwidth_s;
  return out;
}

}  // namespace strata::topo
