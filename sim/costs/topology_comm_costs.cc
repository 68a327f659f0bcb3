#include "sim/costs/topology_comm_costs.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>
#include <map>
#include <string>

#include <fmt/format.h>

namespace strata::sim {
namespace {

// A flow's bytes per message byte, on a grid of 2^-40: the same for
// every message size that builds the shape (the quotient of a flow's bytes, a
// fixed multiple of the message's, by the message's differs in the last bit from
// size to size), so results do not depend on which size a sweep's threads met first.
double snapped_share(double flow_bytes, double message_bytes) {
  return std::ldexp(std::round(std::ldexp(flow_bytes / message_bytes, 40)), -40);
}

// The name a costed collective carries into traces.
std::string spec_name(CollectiveOp op, const std::vector<int>& group, double bytes) {
  return fmt::format("{} x{} {:.0f} B", to_string(op), group.size(), bytes);
}

bool spans_nodes(const topo::Topology& t, const std::vector<int>& group) {
  for (int g : group) {
    if (t.node_of(g) != t.node_of(group.front())) return true;
  }
  return false;
}

}  // namespace

template <typename Map>
bool CommCostCache::copy_out(const Map& map, const typename Map::key_type& key,
                             typename Map::mapped_type& out) const {
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = map.find(key);
  if (it == map.end()) return false;
  out = it->second;
  return true;
}

template <typename Map>
void CommCostCache::put(Map& map, typename Map::key_type key, const typename Map::mapped_type& value) {
  std::lock_guard<std::mutex> lock(mutex_);
  map.emplace(std::move(key), value);
}

bool CommCostCache::find(const Key& key, CommSpec& out) const { return copy_out(specs_, key, out); }
void CommCostCache::insert(Key key, const CommSpec& spec) { put(specs_, std::move(key), spec); }
bool CommCostCache::find_rate(const RateKey& key, double& rate) const { return copy_out(rates_, key, rate); }
void CommCostCache::insert_rate(RateKey key, double rate) { put(rates_, std::move(key), rate); }

const FlowShape* CommCostCache::find_shape(const ShapeKey& key) const {
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = shapes_.find(key);
  return it == shapes_.end() ? nullptr : it->second.get();
}

const FlowShape& CommCostCache::insert_shape(ShapeKey key, FlowShape shape) {
  std::lock_guard<std::mutex> lock(mutex_);
  auto [it, added] = shapes_.emplace(std::move(key), nullptr);
  if (added) it->second = std::make_unique<FlowShape>(std::move(shape));
  return *it->second;  // another thread's equal shape when it came first
}

TopologyCommCosts::TopologyCommCosts(const topo::Topology& topology,
                                     const topo::CollectiveModel& collectives,
                                     const CostModel& cost_model, const PlanSpec& plan,
                                     Fidelity fidelity, CommCostCache& cache)
    : cache_(cache), topology_(topology), collectives_(collectives), cost_model_(cost_model),
      plan_(plan), fidelity_(fidelity) {}

const FlowShape& TopologyCommCosts::flow_shape(CollectiveOp op, const std::vector<int>& group, double bytes,
                                               const topo::CollectiveEstimate& choice) const {
  CommCostCache::ShapeKey key{static_cast<int>(op), group, static_cast<int>(choice.algorithm),
                              static_cast<int>(choice.protocol), choice.channels};
  if (const FlowShape* cached = cache_.find_shape(key)) return *cached;
  const topo::CollectiveFlows flows = collectives_.flows(op, group, bytes);
  FlowShape shape;
  shape.fixed_ns = flows.fixed_latency_ns;
  std::map<std::int32_t, double> share_on;  // per link, in link order
  for (const topo::FlowSpec& f : flows.flows) {
    if (f.bytes <= 0.0) continue;
    const double share = snapped_share(f.bytes, bytes);
    for (std::int32_t l : f.path) share_on[l] += share;
  }
  for (const auto& [link, share] : share_on) {
    shape.links.push_back(link);
    shape.link_share.push_back(share);
  }
  if (flows.part_share.size() > 1) {
    std::vector<std::map<std::int32_t, double>> part_on(flows.part_share.size());  // per part, per link
    for (const topo::FlowSpec& f : flows.flows) {
      if (f.bytes <= 0.0) continue;
      const double share = snapped_share(f.bytes, bytes);
      for (std::int32_t l : f.path) part_on[static_cast<std::size_t>(f.part)][l] += share;
    }
    for (std::size_t p = 0; p < part_on.size(); ++p) {
      if (part_on[p].empty()) continue;  // a rail instance given no channel
      CommPart part;
      part.share = snapped_share(flows.part_share[p], 1.0);
      for (const auto& [link, share] : part_on[p]) {
        part.links.push_back(link);
        part.link_weights.push_back(share / part.share);
      }
      shape.parts.push_back(std::move(part));
    }
    if (shape.parts.size() < 2) shape.parts.clear();
  }
  return cache_.insert_shape(std::move(key), std::move(shape));
}

TopologyCommCosts::Alone TopologyCommCosts::alone(CollectiveOp op, const std::vector<int>& group,
                                                  double bytes) const {
  Alone a;
  if (group.size() < 2 || bytes <= 0.0) return a;
  a.choice = collectives_.estimate(op, group, bytes);
  const FlowShape& shape = flow_shape(op, group, bytes, a.choice);
  a.fixed = Duration::from_seconds(shape.fixed_ns * 1e-9);
  const double bandwidth_s = a.choice.bandwidth_s;
  if (shape.links.empty() || !(bandwidth_s > 0.0)) return a;
  a.shape = &shape;
  a.moves = true;
  // One flow carries the message; each link carries what the collective's flows put
  // on it (its share of the message), so a NIC that carries an eighth of an NVLink
  // edge's bytes is loaded with an eighth. Alone on the wires it runs at the
  // protocol's rate (the choice's bandwidth time) or as fast as its most loaded
  // link allows, whichever is slower.
  double seconds = bandwidth_s;
  for (std::size_t i = 0; i < shape.links.size(); ++i) {
    seconds = std::max(seconds, shape.link_share[i] * bytes / topology_.link(shape.links[i]).bandwidth_bytes_per_s);
  }
  a.rate_cap_bytes_per_s = bytes / seconds;
  // A measured time for this op, group size and placement replaces the model's.
  if (auto measured = cost_model_.collective_seconds(op, static_cast<int>(group.size()),
                                                     spans_nodes(topology_, group), bytes)) {
    const double transfer = *measured - a.fixed.seconds();
    if (transfer > 0.0) {
      a.rate_cap_bytes_per_s = bytes / transfer;
    } else {
      a.fixed = Duration::from_seconds(*measured);
      a.moves = false;
    }
  }
  return a;
}

CommSpec TopologyCommCosts::from_flows(CollectiveOp op, const std::vector<int>& group,
                                       double bytes) const {
  return spec_of(alone(op, group, bytes), bytes);
}

CommSpec TopologyCommCosts::spec_of(const Alone& a, double bytes) {
  CommSpec spec;
  spec.fixed = a.fixed;
  spec.channels = a.choice.channels;
  if (a.shape == nullptr) return spec;
  spec.bytes = a.moves ? bytes : 0.0;
  spec.links = a.shape->links;
  spec.link_weights = a.shape->link_share;
  spec.parts = a.shape->parts;
  spec.rate_cap_bytes_per_s = a.rate_cap_bytes_per_s;
  return spec;
}

std::vector<std::vector<int>> TopologyCommCosts::symmetric_copies(const std::vector<int>& group) const {
  const RankLayout layout(plan_);
  bool varies_tp = false;
  bool varies_cp = false;
  bool varies_dp = false;
  const RankCoord base = layout.coord(group.front());
  for (int g : group) {
    const RankCoord c = layout.coord(g);
    varies_tp = varies_tp || c.tp != base.tp;
    varies_cp = varies_cp || c.cp != base.cp;
    varies_dp = varies_dp || c.dp != base.dp;
  }
  // A context-parallel ring step: every cp rank sends to the next at once, so the
  // ring's other edges are copies too (cp ranks shifted along the ring).
  const bool ring_step = group.size() == 2 && varies_cp && !varies_tp && !varies_dp && plan_.cp > 2;
  // Copies vary the tensor-, context- and data-parallel coordinates the group does
  // not span; the stage stays (other stages run this collective at other times).
  // Only copies on the group's own nodes are kept: they share its NICs, PCIe
  // switches and socket links; on a fabric, copies elsewhere meet it only in the
  // switches, which folded fidelity leaves to full fidelity.
  std::set<int> nodes;
  for (int g : group) nodes.insert(topology_.node_of(g));
  auto shares_a_node = [&](const std::vector<int>& copy) {
    for (int g : copy) {
      if (nodes.count(topology_.node_of(g)) != 0) return true;
    }
    return false;
  };
  std::vector<std::vector<int>> copies;
  const int t_count = varies_tp ? 1 : plan_.tp;
  // Hybrid sharding's groups span part of the dp x cp replicas (index d = cp + cp_size
  // * dp): a shard group a block of consecutive replicas, whose copies are the other
  // blocks; a group across them every block's same replica, whose copies are the
  // other replicas of the block (on the same nodes: they share the NICs).
  const int replicas = plan_.grad_replicas();
  std::vector<int> ds;
  for (int g : group) {
    const RankCoord c = layout.coord(g);
    ds.push_back(c.cp + plan_.cp * c.dp);
  }
  std::sort(ds.begin(), ds.end());
  ds.erase(std::unique(ds.begin(), ds.end()), ds.end());
  const bool cp_block = varies_cp && !varies_dp;  // a context-parallel group: handled below
  if (plan_.zero_shard_size > 0 && varies_dp && !cp_block && !ring_step && static_cast<int>(ds.size()) < replicas) {
    const int n = static_cast<int>(ds.size());
    std::vector<int> shifts;
    if (ds.back() - ds.front() + 1 == n) {
      for (int j = 0; j < replicas / n; ++j) shifts.push_back(j * n - ds.front());
    } else {
      for (int j = 0; j < ds[1] - ds[0]; ++j) shifts.push_back(j - ds.front());
    }
    for (int dt = 0; dt < t_count; ++dt) {
      for (int shift : shifts) {
        std::vector<int> copy;
        for (int g : group) {
          RankCoord c = layout.coord(g);
          if (!varies_tp) c.tp = dt;
          const int d = c.cp + plan_.cp * c.dp + shift;
          c.cp = d % plan_.cp;
          c.dp = d / plan_.cp;
          copy.push_back(layout.rank(c));
        }
        if (shares_a_node(copy)) copies.push_back(std::move(copy));
      }
    }
    return copies;
  }
  const int c_count = varies_cp && !ring_step ? 1 : plan_.cp;
  const int d_count = varies_dp ? 1 : plan_.dp;
  for (int dt = 0; dt < t_count; ++dt) {
    for (int dc = 0; dc < c_count; ++dc) {
      for (int dd = 0; dd < d_count; ++dd) {
        std::vector<int> copy;
        for (int g : group) {
          RankCoord c = layout.coord(g);
          if (!varies_tp) c.tp = dt;
          if (ring_step) {
            c.cp = (c.cp + dc) % plan_.cp;
          } else if (!varies_cp) {
            c.cp = dc;
          }
          if (!varies_dp) c.dp = dd;
          copy.push_back(layout.rank(c));
        }
        if (shares_a_node(copy)) copies.push_back(std::move(copy));
      }
    }
  }
  return copies;
}

CommSpec TopologyCommCosts::folded(CollectiveOp op, const std::vector<int>& group, double bytes,
                                   std::optional<Partner> partner) const {
  const Alone alone_own = alone(op, group, bytes);
  CommSpec own = spec_of(alone_own, bytes);
  if (own.bytes <= 0.0 || own.links.empty()) {
    own.drop_links();
    return own;
  }
  // Solve the sharing with every copy active; the group's collective ends when its
  // slowest flow does. Each copy's rate cap and link loads are per message byte, so
  // the solve gives the same rate for every size that makes the same choices: it
  // is keyed by what it reads and solved once.
  const std::vector<std::vector<int>> copies = symmetric_copies(group);
  std::vector<Alone> flows;  // the copies that move bytes, the group's own among them
  std::size_t own_index = 0;
  CommCostCache::RateKey key{static_cast<int>(op), partner ? static_cast<int>(partner->op) : -1, 0, {}, {}};
  std::vector<int>& gpus = std::get<3>(key);
  std::vector<double>& terms = std::get<4>(key);
  auto add = [&](const Alone& a) {
    if (a.shape == nullptr || !a.moves) {
      terms.push_back(-1.0);
      return;
    }
    terms.insert(terms.end(), {static_cast<double>(a.choice.algorithm), static_cast<double>(a.choice.protocol),
                               static_cast<double>(a.choice.channels), a.rate_cap_bytes_per_s});
    flows.push_back(a);
  };
  for (const std::vector<int>& copy : copies) {
    const bool is_own = copy == group;
    if (is_own) own_index = flows.size();
    gpus.push_back(static_cast<int>(copy.size()));
    gpus.insert(gpus.end(), copy.begin(), copy.end());
    add(is_own ? alone_own : alone(op, copy, bytes));
  }
  std::get<2>(key) = static_cast<int>(own_index);
  if (partner) {
    for (const std::vector<int>& copy : copies) add(alone(partner->op, copy, partner->bytes));
  }
  double rate = 0.0;
  if (!cache_.find_rate(key, rate)) {
    // The solve runs over the copies' links only, renumbered in their global order
    // (a whole-topology FlowSharing per costing cost more than the solve).
    std::vector<std::int32_t> links;
    for (const Alone& f : flows) links.insert(links.end(), f.shape->links.begin(), f.shape->links.end());
    std::sort(links.begin(), links.end());
    links.erase(std::unique(links.begin(), links.end()), links.end());
    std::vector<double> capacities;
    capacities.reserve(links.size());
    for (std::int32_t l : links) capacities.push_back(topology_.link(l).bandwidth_bytes_per_s);
    topo::FlowSharing sharing(std::move(capacities));
    topo::FlowSharing::FlowId mine = -1;
    std::vector<std::int32_t> local;
    for (std::size_t i = 0; i < flows.size(); ++i) {
      local.clear();
      for (std::int32_t l : flows[i].shape->links) {
        local.push_back(static_cast<std::int32_t>(std::lower_bound(links.begin(), links.end(), l) - links.begin()));
      }
      const auto id = sharing.add(local, flows[i].rate_cap_bytes_per_s, flows[i].shape->link_share);
      if (i == own_index) mine = id;
    }
    rate = sharing.rate(mine);
    cache_.insert_rate(std::move(key), rate);
  }
  own.rate_cap_bytes_per_s = std::min(own.rate_cap_bytes_per_s, rate);
  own.drop_links();  // costed without the network: the contention is already in the rate
  return own;
}

CommSpec TopologyCommCosts::collective(CollectiveOp op, const std::vector<int>& group, double bytes) const {
  // Full fidelity costs do not depend on the plan's shape.
  const bool folded_costs = fidelity_ == Fidelity::kFolded;
  CommCostCache::Key key{static_cast<int>(fidelity_), folded_costs ? plan_.tp : 0, folded_costs ? plan_.cp : 0,
                         folded_costs ? plan_.dp : 0, static_cast<int>(op), group, bytes, -1, 0.0};
  CommSpec spec;
  if (cache_.find(key, spec)) return spec;
  spec = folded_costs ? folded(op, group, bytes) : from_flows(op, group, bytes);
  spec.name = spec_name(op, group, bytes);
  cache_.insert(std::move(key), spec);
  return spec;
}

CommSpec TopologyCommCosts::latency_bound(CollectiveOp op, const std::vector<int>& group, double bytes) const {
  CommCostCache::Key key{-1, 0, 0, 0, static_cast<int>(op), group, bytes, -1, 0.0};
  CommSpec spec;
  if (cache_.find(key, spec)) return spec;
  spec.name = spec_name(op, group, bytes);
  if (group.size() >= 2 && bytes > 0.0) {
    const auto measured = cost_model_.collective_seconds(op, static_cast<int>(group.size()),
                                                         spans_nodes(topology_, group), bytes);
    spec.fixed = Duration::from_seconds(measured ? *measured : collectives_.estimate(op, group, bytes).time_s);
  }
  cache_.insert(std::move(key), spec);
  return spec;
}

CommSpec TopologyCommCosts::collective_beside(CollectiveOp op, const std::vector<int>& group, double bytes,
                                              CollectiveOp partner, double partner_bytes) const {
  if (fidelity_ != Fidelity::kFolded) return collective(op, group, bytes);
  CommCostCache::Key key{static_cast<int>(fidelity_), plan_.tp, plan_.cp, plan_.dp, static_cast<int>(op), group,
                         bytes, static_cast<int>(partner), partner_bytes};
  CommSpec spec;
  if (cache_.find(key, spec)) return spec;
  spec = folded(op, group, bytes, Partner{partner, partner_bytes});
  spec.name = spec_name(op, group, bytes);
  cache_.insert(std::move(key), spec);
  return spec;
}

CommSpec TopologyCommCosts::baked(CollectiveOp op, const std::vector<int>& group, double bytes) const {
  if (fidelity_ == Fidelity::kFolded) return collective(op, group, bytes);
  // Keyed as the folded fidelity's cost of the same collective: the same figure.
  CommCostCache::Key key{static_cast<int>(Fidelity::kFolded), plan_.tp, plan_.cp, plan_.dp, static_cast<int>(op),
                         group, bytes, -1, 0.0};
  CommSpec spec;
  if (cache_.find(key, spec)) return spec;
  spec = folded(op, group, bytes);
  spec.name = spec_name(op, group, bytes);
  cache_.insert(std::move(key), spec);
  return spec;
}

CommSpec TopologyCommCosts::p2p(int src_gpu, int dst_gpu, double bytes) const {
  return collective(CollectiveOp::kSendRecv, {src_gpu, dst_gpu}, bytes);
}

}  // namespace strata::sim
