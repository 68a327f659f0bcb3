#include "topologies/nccl_channels.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>

#include "core/error.h"
#include "topologies/router.h"

namespace strata::topo {
namespace {

constexpr double kGBytes = 1e9;
// NCCL does its bandwidth arithmetic in floats rounded to 0.001 GB/s (search.cc
// SUB_ROUND); a relative 1e-4 lets 24.003 GB/s of PCIe carry a 24 GB/s channel.
constexpr double kFitTolerance = 1e-4;

// GPUs of one node in an order that follows the cheapest links: start at the first
// and go to the cheapest unvisited GPU (ties: rank order).
std::vector<int> greedy_order(const Topology& t, const std::vector<int>& members) {
  std::vector<int> order{members.front()};
  std::vector<char> used(members.size(), 0);
  used[0] = 1;
  for (std::size_t step = 1; step < members.size(); ++step) {
    int best = -1;
    std::int64_t best_cost = std::numeric_limits<std::int64_t>::max();
    for (std::size_t i = 0; i < members.size(); ++i) {
      if (used[i]) continue;
      std::int64_t c = t.path_cost(order.back(), members[i]);
      if (c < best_cost) {
        best_cost = c;
        best = static_cast<int>(i);
      }
    }
    used[static_cast<std::size_t>(best)] = 1;
    order.push_back(members[static_cast<std::size_t>(best)]);
  }
  return order;
}

// The entry and exit cost of a node ordering for NIC `rail`.
std::int64_t rail_cost(const Topology& t, const std::vector<int>& order, int rail) {
  return t.nic_to_gpu_cost(rail, order.front()) + t.gpu_to_nic_cost(order.back(), rail);
}

// Orderings of a node's GPUs that keep its cyclic order: every rotation, forwards
// and backwards (NCCL runs rings in both directions).
std::vector<std::vector<int>> node_orderings(const std::vector<int>& cyclic) {
  std::vector<std::vector<int>> out;
  const std::size_t m = cyclic.size();
  for (int dir = 0; dir < (m > 2 ? 2 : 1); ++dir) {
    for (std::size_t r = 0; r < m; ++r) {
      std::vector<int> o;
      for (std::size_t i = 0; i < m; ++i) {
        o.push_back(dir == 0 ? cyclic[(r + i) % m] : cyclic[(r + m - i) % m]);
      }
      out.push_back(std::move(o));
    }
  }
  return out;
}

// The cheapest of a node's orderings for NIC `rail`; among equally cheap ones, the
// one whose entry and exit GPUs earlier rails used least (so that two rails on one
// PCIe switch enter and leave through different GPUs, as NCCL's rings do).
// entries and exits count, per GPU, the rails that entered or left through it.
const std::vector<int>& order_for_rail(const Topology& t, const std::vector<std::vector<int>>& options,
                                       int rail, std::vector<int>& entries, std::vector<int>& exits) {
  std::vector<std::int64_t> cost(options.size());
  for (std::size_t i = 0; i < options.size(); ++i) cost[i] = rail_cost(t, options[i], rail);
  const std::int64_t best_cost = *std::min_element(cost.begin(), cost.end());
  const std::vector<int>* best = nullptr;
  int best_penalty = std::numeric_limits<int>::max();
  for (std::size_t i = 0; i < options.size(); ++i) {
    if (cost[i] != best_cost) continue;
    const std::vector<int>& o = options[i];
    int penalty = entries[static_cast<std::size_t>(o.front())] + exits[static_cast<std::size_t>(o.back())];
    if (penalty < best_penalty) {
      best_penalty = penalty;
      best = &o;
    }
  }
  ++entries[static_cast<std::size_t>(best->front())];
  ++exits[static_cast<std::size_t>(best->back())];
  return *best;
}

bool path_is_nvlink_only(const Topology& t, const std::vector<LinkId>& path) {
  return std::all_of(path.begin(), path.end(), [&](LinkId l) { return t.link(l).kind == LinkKind::kNvlink; });
}

bool path_touches_cpu(const Topology& t, const std::vector<LinkId>& path) {
  return std::any_of(path.begin(), path.end(), [&](LinkId l) {
    return t.vertex(t.link(l).from_vertex).kind == VertexKind::kCpu ||
           t.vertex(t.link(l).to_vertex).kind == VertexKind::kCpu;
  });
}

void finish_instance(RingInstance& inst) {
  std::vector<LinkId> all;
  for (const auto& p : inst.edge_paths) all.insert(all.end(), p.begin(), p.end());
  std::sort(all.begin(), all.end());
  for (std::size_t i = 0; i < all.size();) {
    std::size_t j = i;
    while (j < all.size() && all[j] == all[i]) ++j;
    inst.link_uses.emplace_back(all[i], static_cast<int>(j - i));
    i = j;
  }
}

}  // namespace

double largest_speed_at_most(const std::vector<double>& speeds, double limit) {
  for (double s : speeds) {
    if (s <= limit * (1.0 + kFitTolerance)) return s;
  }
  return 0.0;
}

GroupShape make_group_shape(const Topology& t, const std::vector<int>& group) {
  GroupShape s;
  s.gpus = group;
  std::map<int, std::size_t> slot;
  for (int g : group) {
    int node = t.node_of(g);
    auto it = slot.find(node);
    if (it == slot.end()) {
      it = slot.emplace(node, s.nodes.size()).first;
      s.nodes.push_back(node);
      s.members.emplace_back();
    }
    s.members[it->second].push_back(g);
  }
  s.min_compute_capability = s.max_compute_capability = t.cluster().node.compute_capability;
  s.amd_cpu = t.cluster().node.socket_link_kind == "xgmi";
  return s;
}

double RingGraph::share(std::size_t i) const {
  if (instances.empty()) return 0.0;
  const int n = static_cast<int>(instances.size());
  return channels > 0 ? static_cast<double>(channels_on(i)) / channels : 1.0 / n;
}

int RingGraph::channels_on(std::size_t i) const {
  if (instances.empty() || channels <= 0) return 0;
  const int n = static_cast<int>(instances.size());
  return channels / n + (static_cast<int>(i) < channels % n ? 1 : 0);
}

RingGraph search_ring(const Topology& t, const NcclTuning& tuning, const GroupShape& shape,
                      const CapacityFn& capacity) {
  RingGraph g;
  std::vector<std::vector<int>> cyclic;
  for (const auto& m : shape.members) cyclic.push_back(greedy_order(t, m));
  const int rails = shape.node_count() > 1 ? t.rails() : 0;
  // Each node's candidate orderings, built once for all rails.
  std::vector<std::vector<std::vector<int>>> options;
  if (rails > 0) {
    for (const auto& c : cyclic) options.push_back(node_orderings(c));
  }

  // Rails: those whose best entry/exit on the first node is as cheap as the best rail's.
  std::vector<int> chosen;
  if (rails == 0) {
    chosen.push_back(-1);
  } else {
    std::vector<std::int64_t> cost(static_cast<std::size_t>(rails), std::numeric_limits<std::int64_t>::max());
    for (int r = 0; r < rails; ++r) {
      for (const auto& o : options[0]) {
        cost[static_cast<std::size_t>(r)] = std::min(cost[static_cast<std::size_t>(r)], rail_cost(t, o, r));
      }
    }
    std::int64_t best = *std::min_element(cost.begin(), cost.end());
    for (int r = 0; r < rails; ++r) {
      if (cost[static_cast<std::size_t>(r)] == best) chosen.push_back(r);
    }
    // GPUs sharing NICs start on different ones (NCCL offsets the local NIC by the
    // GPU), so that one-GPU-per-node groups of neighbouring GPUs use different NICs.
    const std::size_t offset = static_cast<std::size_t>(t.local_index(shape.members[0][0])) % chosen.size();
    std::rotate(chosen.begin(), chosen.begin() + static_cast<std::ptrdiff_t>(offset), chosen.end());
  }

  g.nvlink_intra = true;
  g.nic_near_gpu = true;
  std::vector<int> entries(static_cast<std::size_t>(t.num_gpus()), 0);
  std::vector<int> exits(entries.size(), 0);
  for (int rail : chosen) {
    RingInstance inst;
    inst.rail = rail;
    for (std::size_t k = 0; k < cyclic.size(); ++k) {
      const std::vector<int>& part = rail < 0 ? cyclic[k] : order_for_rail(t, options[k], rail, entries, exits);
      inst.order.insert(inst.order.end(), part.begin(), part.end());
    }
    const std::size_t n = inst.order.size();
    for (std::size_t i = 0; i < n && n > 1; ++i) {
      int a = inst.order[i], b = inst.order[(i + 1) % n];
      std::uint64_t key = flow_hash(static_cast<std::uint64_t>(rail + 1), i, n);
      bool inter = t.node_of(a) != t.node_of(b);
      std::vector<LinkId> path = inter && rail >= 0 ? t.route_via_rail(a, b, rail, key) : t.route(a, b, key);
      if (!inter && !path_is_nvlink_only(t, path)) g.nvlink_intra = false;
      if (inter && path_touches_cpu(t, path)) g.nic_near_gpu = false;
      inst.edge_paths.push_back(std::move(path));
    }
    finish_instance(inst);
    g.instances.push_back(std::move(inst));
  }
  if (shape.ranks() < 2) return g;

  // Channel search over the links the instances use, numbered by their rank in
  // the sorted union. Each instance's link_uses is sorted, so the union is a merge
  // and each instance finds its links by walking it (a ring over 1,024 GPUs has
  // 20,000 link uses).
  std::vector<LinkId> local;
  for (const auto& inst : g.instances) {
    const std::size_t middle = local.size();
    for (const auto& [l, uses] : inst.link_uses) local.push_back(l);
    std::inplace_merge(local.begin(), local.begin() + static_cast<std::ptrdiff_t>(middle), local.end());
    local.erase(std::unique(local.begin(), local.end()), local.end());
  }
  std::vector<double> cap_gb(local.size());
  for (std::size_t k = 0; k < local.size(); ++k) cap_gb[k] = capacity(local[k]) / kGBytes;
  std::vector<std::vector<std::pair<int, int>>> uses(g.instances.size());
  double max_single = 0.0;
  for (std::size_t i = 0; i < g.instances.size(); ++i) {
    double single = std::numeric_limits<double>::infinity();
    std::size_t k = 0;
    for (const auto& [l, n] : g.instances[i].link_uses) {
      while (local[k] < l) ++k;
      uses[i].emplace_back(static_cast<int>(k), n);
      single = std::min(single, cap_gb[static_cast<std::size_t>(k)] / n);
    }
    max_single = std::max(max_single, single);
  }
  const bool sm90 = shape.min_compute_capability >= 90;
  const bool one_node = shape.node_count() == 1;
  const std::vector<double>& speeds = one_node ? (sm90 ? tuning.speeds_intra_sm90 : tuning.speeds_intra)
                                               : (sm90 ? tuning.speeds_inter_sm90 : tuning.speeds_inter);
  std::vector<double> load(local.size());
  auto channels_at = [&](double speed) {
    std::fill(load.begin(), load.end(), 0.0);
    int c = 0;
    for (; c < tuning.max_search_channels; ++c) {
      const auto& u = uses[static_cast<std::size_t>(c) % uses.size()];
      bool fits = true;
      for (const auto& [k, n] : u) {
        if (load[static_cast<std::size_t>(k)] + n * speed > cap_gb[static_cast<std::size_t>(k)] * (1.0 + kFitTolerance)) {
          fits = false;
          break;
        }
      }
      if (!fits) break;
      for (const auto& [k, n] : u) load[static_cast<std::size_t>(k)] += n * speed;
    }
    return c;
  };

  std::size_t idx = 0;
  while (idx < speeds.size() && speeds[idx] > max_single * (1.0 + kFitTolerance)) ++idx;
  int best_channels = 0;
  double best_speed = 0.0;
  for (; idx < speeds.size(); ++idx) {
    if (best_channels > 0 && speeds[idx] / best_speed <= 0.49) break;
    int c = channels_at(speeds[idx]);
    if (c > 0 && c * speeds[idx] > best_channels * best_speed * (1.0 + kFitTolerance)) {
      best_channels = c;
      best_speed = speeds[idx];
    }
  }
  if (best_channels == 0) {  // slower than NCCL's slowest entry: one channel at what fits
    best_channels = 1;
    best_speed = max_single;
  }
  // ncclTopoDupChannels.
  const bool skip_dup = tuning.dup_sm90_rule && shape.min_compute_capability > 80 &&
                        best_speed < 50.0 && best_channels > 4;
  if (best_speed >= tuning.dup_channels_min_speed && !skip_dup) {
    int dup = std::min(best_channels * 2, tuning.max_channels);
    best_speed /= static_cast<double>((dup + best_channels - 1) / best_channels);
    best_channels = dup;
  }
  g.channels = best_channels;
  g.speed_gbytes_per_s = best_speed;
  g.max_single_channel_gbytes_per_s = max_single;
  return g;
}

NvlsGraph search_nvls(const Topology& t, const NcclTuning& tuning, const GroupShape& shape,
                      const CapacityFn& capacity) {
  NvlsGraph g;
  if (!tuning.has_nvls || shape.min_compute_capability < 90 || shape.ranks() < 2) return g;
  const std::size_t per_node = shape.members[0].size();
  double cap = std::numeric_limits<double>::infinity();
  for (std::size_t k = 0; k < shape.nodes.size(); ++k) {
    if (!t.node_has_nvls(shape.nodes[k]) || shape.members[k].size() != per_node) return g;
    for (int gpu : shape.members[k]) {
      auto [up, down] = t.nvswitch_links(gpu);
      if (up < 0 || down < 0) return g;
      cap = std::min({cap, capacity(up) / kGBytes, capacity(down) / kGBytes});
    }
  }
  if (per_node < 2) return g;
  g.channels = static_cast<int>(per_node);
  g.speed_intra_gbytes_per_s = largest_speed_at_most(tuning.speeds_intra_sm90, cap / (g.channels + 1));
  g.available = g.speed_intra_gbytes_per_s > 0.0;
  return g;
}

}  // namespace strata::topo
