#include "topologies/flow_sharing.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <queue>
#include <utility>

#include <fmt/format.h>

#include "core/error.h"

namespace strata::topo {
namespace {

// Relative tolerance for "this link is full" and "this rate changed": far below any
// modelled effect, far above the rounding of a few additions.
constexpr double kRelTol = 1e-9;

// Group signatures: a sum of hashed (flow, weight) pairs over a hashed capacity,
// so that adding or removing a flow is one addition or subtraction.
std::uint64_t mix(std::uint64_t x) {  // splitmix64's finaliser
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}
std::uint64_t bits_of(double v) {
  std::uint64_t b;
  std::memcpy(&b, &v, sizeof b);
  return b;
}
std::uint64_t capacity_sig(double capacity) { return mix(bits_of(capacity) ^ 0x5bd1e9955bd1e995ULL); }
std::uint64_t member_sig(std::int64_t flow_id, double weight) {
  return mix(static_cast<std::uint64_t>(flow_id) ^ mix(bits_of(weight)));
}

// The next stamp for marks compared against it; at wrap-around the marks reset,
// so that no old mark equals a new stamp.
std::uint32_t next_stamp(std::uint32_t& stamp, std::vector<std::uint32_t>& marks) {
  if (++stamp == 0) {
    std::fill(marks.begin(), marks.end(), 0);
    stamp = 1;
  }
  return stamp;
}

std::vector<double> capacities_of(const Topology& t) {
  std::vector<double> c;
  c.reserve(static_cast<std::size_t>(t.num_links()));
  for (LinkId l = 0; l < t.num_links(); ++l) c.push_back(t.link(l).bandwidth_bytes_per_s);
  return c;
}

}  // namespace

FlowSharing::FlowSharing(const Topology& topology) : FlowSharing(capacities_of(topology)) {}

FlowSharing::FlowSharing(std::vector<double> capacities) : link_capacity_(std::move(capacities)) {
  for (double c : link_capacity_) {
    if (!(c > 0.0)) throw InternalError("FlowSharing: link capacities must be > 0");
  }
  group_of_link_.assign(link_capacity_.size(), -1);
}

int FlowSharing::slot_of(FlowId id) const {
  const auto slot = static_cast<std::int64_t>(id & 0xffffffffLL);
  const auto generation = static_cast<std::uint32_t>(static_cast<std::uint64_t>(id) >> 32);
  if (id < 0 || slot >= static_cast<std::int64_t>(flows_.size()) ||
      !flows_[static_cast<std::size_t>(slot)].live ||
      flows_[static_cast<std::size_t>(slot)].generation != generation) {
    throw InternalError(fmt::format("FlowSharing: unknown or removed flow id {}", id));
  }
  return static_cast<int>(slot);
}

FlowSharing::FlowId FlowSharing::id_of(int slot) const {
  return static_cast<FlowId>(static_cast<std::uint64_t>(flows_[static_cast<std::size_t>(slot)].generation) << 32 |
                             static_cast<std::uint64_t>(slot));
}

int FlowSharing::new_group(double capacity, std::uint64_t sig, double load) {
  int g;
  if (!free_groups_.empty()) {
    g = free_groups_.back();
    free_groups_.pop_back();
  } else {
    g = static_cast<int>(capacity_.size());
    capacity_.push_back(0.0);
    load_.push_back(0.0);
    link_flows_.emplace_back();
    group_links_.push_back(0);
    group_sig_.push_back(0);
    group_next_same_sig_.push_back(-1);
    split_epoch_.push_back(0);
    split_head_.push_back(-1);
    link_epoch_.push_back(0);
    link_local_.push_back(-1);
    group_made_by_.push_back(-1);
    group_parent_.push_back(-1);
    group_serial_.push_back(0);
    group_parent_serial_.push_back(0);
    cover_epoch_.push_back(0);
    cover_links_.push_back(0);
    cover_weight_.push_back(0.0);
    cover_hop_.push_back(-1);
  }
  group_made_by_[static_cast<std::size_t>(g)] = -1;
  group_serial_[static_cast<std::size_t>(g)] = ++next_serial_;
  const auto gg = static_cast<std::size_t>(g);
  capacity_[gg] = capacity;
  load_[gg] = load;
  group_links_[gg] = 0;
  group_sig_[gg] = sig;
  link_sig(g);
  return g;
}

void FlowSharing::link_sig(int group) {
  const auto gg = static_cast<std::size_t>(group);
  if (int* first = group_by_sig_.find(group_sig_[gg])) {
    group_next_same_sig_[gg] = std::exchange(*first, group);
  } else {
    group_next_same_sig_[gg] = -1;
    group_by_sig_.insert(group_sig_[gg], group);
  }
}

void FlowSharing::unlink_sig(int group) {
  const auto gg = static_cast<std::size_t>(group);
  int* first = group_by_sig_.find(group_sig_[gg]);
  if (*first == group) {
    if (group_next_same_sig_[gg] < 0) {
      group_by_sig_.erase(group_sig_[gg]);
    } else {
      *first = group_next_same_sig_[gg];
    }
  } else {
    int g = *first;
    while (group_next_same_sig_[static_cast<std::size_t>(g)] != group) g = group_next_same_sig_[static_cast<std::size_t>(g)];
    group_next_same_sig_[static_cast<std::size_t>(g)] = group_next_same_sig_[gg];
  }
}

void FlowSharing::count_cover(int slot, bool with_hops) {
  const Flow& f = flows_[static_cast<std::size_t>(slot)];
  next_stamp(cover_stamp_, cover_epoch_);
  for (std::size_t j = 0; j < f.links.size(); ++j) {
    const int g = group_of_link_[static_cast<std::size_t>(f.links[j])];
    if (g < 0) continue;
    const auto gg = static_cast<std::size_t>(g);
    const double w = f.link_weight.empty() ? 1.0 : f.link_weight[j];
    if (cover_epoch_[gg] != cover_stamp_) {
      cover_epoch_[gg] = cover_stamp_;
      cover_links_[gg] = 0;
      cover_weight_[gg] = w;
    } else if (cover_weight_[gg] != w) {
      cover_weight_[gg] = -1.0;  // several weights: no one group can take them all
    }
    ++cover_links_[gg];
  }
  if (with_hops) {
    for (std::size_t i = 0; i < f.path.size(); ++i) cover_hop_[static_cast<std::size_t>(f.path[i])] = static_cast<int>(i);
  }
}

bool FlowSharing::covers(int group, double weight) const {
  const auto gg = static_cast<std::size_t>(group);
  return cover_epoch_[gg] == cover_stamp_ && cover_links_[gg] == group_links_[gg] && cover_weight_[gg] == weight;
}

void FlowSharing::renew(int group, std::uint64_t sig) {
  // Its flows changed in place: another signature, and no parent link to or from
  // it holds (a group made from it, or it from its parent, differed by one flow
  // from the old set, not from this one).
  const auto gg = static_cast<std::size_t>(group);
  unlink_sig(group);
  group_sig_[gg] = sig;
  link_sig(group);
  group_serial_[gg] = ++next_serial_;
  group_made_by_[gg] = -1;
}

void FlowSharing::leave_in_place(int group, int slot, double weight) {
  Flow& f = flows_[static_cast<std::size_t>(slot)];
  const auto gg = static_cast<std::size_t>(group);
  const auto hop = static_cast<std::size_t>(cover_hop_[gg]);
  // Out of the group's flows: the last entry takes its place.
  auto& on = link_flows_[gg];
  const auto at = static_cast<std::size_t>(f.position[hop]);
  on[at] = on.back();
  on.pop_back();
  if (at < on.size()) flows_[static_cast<std::size_t>(on[at].slot)].position[static_cast<std::size_t>(on[at].hop)] = static_cast<int>(at);
  // Out of the flow's path: its last entry takes the place.
  const std::size_t last = f.path.size() - 1;
  if (hop != last) {
    f.path[hop] = f.path[last];
    f.weight[hop] = f.weight[last];
    f.position[hop] = f.position[last];
    link_flows_[static_cast<std::size_t>(f.path[hop])][static_cast<std::size_t>(f.position[hop])].hop = static_cast<int>(hop);
    cover_hop_[static_cast<std::size_t>(f.path[hop])] = static_cast<int>(hop);
  }
  f.path.pop_back();
  f.weight.pop_back();
  f.position.pop_back();
  load_[gg] -= f.rate * weight;
  renew(group, group_sig_[gg] - member_sig(id_of(slot), weight));
}

void FlowSharing::join(int group, int slot, double weight) {
  Flow& f = flows_[static_cast<std::size_t>(slot)];
  auto& on = link_flows_[static_cast<std::size_t>(group)];
  f.path.push_back(group);
  f.weight.push_back(weight);
  f.position.push_back(static_cast<int>(on.size()));
  on.push_back({slot, static_cast<int>(f.path.size()) - 1});
}

void FlowSharing::destroy_group(int group) {
  const auto gg = static_cast<std::size_t>(group);
  for (const OnLink& e : link_flows_[gg]) {
    // The flow's last path entry takes this group's place; its group learns where.
    Flow& f = flows_[static_cast<std::size_t>(e.slot)];
    const auto hop = static_cast<std::size_t>(e.hop);
    const std::size_t last = f.path.size() - 1;
    if (hop != last) {
      f.path[hop] = f.path[last];
      f.weight[hop] = f.weight[last];
      f.position[hop] = f.position[last];
      link_flows_[static_cast<std::size_t>(f.path[hop])][static_cast<std::size_t>(f.position[hop])].hop =
          static_cast<int>(hop);
    }
    f.path.pop_back();
    f.weight.pop_back();
    f.position.pop_back();
  }
  link_flows_[gg].clear();
  unlink_sig(group);
  group_serial_[gg] = 0;  // no parent link to it holds any more
  free_groups_.push_back(group);
}

int FlowSharing::find_group(std::uint64_t sig, double capacity, int group, int slot) {
  const int* first = group_by_sig_.find(sig);
  if (first == nullptr) return -1;
  const auto& want = link_flows_[static_cast<std::size_t>(group)];
  next_stamp(member_stamp_, member_mark_);
  member_mark_.resize(flows_.size(), 0);
  member_weight_.resize(flows_.size(), 0.0);
  for (const OnLink& e : want) {
    if (e.slot == slot) continue;
    member_mark_[static_cast<std::size_t>(e.slot)] = member_stamp_;
    member_weight_[static_cast<std::size_t>(e.slot)] = flows_[static_cast<std::size_t>(e.slot)].weight[static_cast<std::size_t>(e.hop)];
  }
  for (int g = *first; g >= 0; g = group_next_same_sig_[static_cast<std::size_t>(g)]) {
    const auto& on = link_flows_[static_cast<std::size_t>(g)];
    if (capacity_[static_cast<std::size_t>(g)] != capacity || on.size() + 1 != want.size()) continue;
    bool same = true;
    for (const OnLink& e : on) {
      const auto x = static_cast<std::size_t>(e.slot);
      same = same && member_mark_[x] == member_stamp_ &&
             member_weight_[x] == flows_[x].weight[static_cast<std::size_t>(e.hop)];
    }
    if (same) return g;
  }
  return -1;
}

void FlowSharing::attach(int slot) {
  // Each link moves from its group G to G plus this flow: a new group (no live one
  // holds this flow yet), one per (G, weight) and, for links without flows, per
  // (capacity, weight). Groups left without links go at the end, so that no id is
  // reused while this call still looks them up. A group whose every link the flow
  // crosses, with one weight, takes the flow in place instead of handing its flows
  // to a copy: a data-parallel part's switch links, each a group of its own, would
  // otherwise copy every flow on them at each part's start.
  const FlowId id = id_of(slot);
  next_stamp(split_stamp_, split_epoch_);
  count_cover(slot, false);
  splits_.clear();
  emptied_groups_.clear();
  int none_head = -1;  // the splits of links without flows
  int last = -1;       // a path's links mostly come in runs of one group
  const std::size_t n = flows_[static_cast<std::size_t>(slot)].links.size();
  for (std::size_t j = 0; j < n; ++j) {
    const Flow& f = flows_[static_cast<std::size_t>(slot)];
    const auto l = static_cast<std::size_t>(f.links[j]);
    const double w = f.link_weight.empty() ? 1.0 : f.link_weight[j];
    const double cap = link_capacity_[l];
    const int from = group_of_link_[l];
    int to = -1;
    if (last >= 0 && splits_[static_cast<std::size_t>(last)].from == from &&
        splits_[static_cast<std::size_t>(last)].weight == w && splits_[static_cast<std::size_t>(last)].capacity == cap) {
      to = splits_[static_cast<std::size_t>(last)].to;
    } else {
      int head = from < 0 ? none_head
                          : (split_epoch_[static_cast<std::size_t>(from)] == split_stamp_ ? split_head_[static_cast<std::size_t>(from)] : -1);
      for (int k = head; k >= 0; k = splits_[static_cast<std::size_t>(k)].next) {
        const Split& sp = splits_[static_cast<std::size_t>(k)];
        if (sp.weight == w && sp.capacity == cap) {
          to = sp.to;
          last = k;
          break;
        }
      }
      if (to < 0) {
        if (from >= 0 && covers(from, w)) {
          to = from;
          renew(from, group_sig_[static_cast<std::size_t>(from)] + member_sig(id, w));
        } else {
          const std::uint64_t base = from < 0 ? capacity_sig(cap) : group_sig_[static_cast<std::size_t>(from)];
          to = new_group(cap, base + member_sig(id, w), from < 0 ? 0.0 : load_[static_cast<std::size_t>(from)]);
          if (from >= 0) {
            group_made_by_[static_cast<std::size_t>(to)] = id;
            group_parent_[static_cast<std::size_t>(to)] = from;
            group_parent_serial_[static_cast<std::size_t>(to)] = group_serial_[static_cast<std::size_t>(from)];
            for (std::size_t m = 0; m < link_flows_[static_cast<std::size_t>(from)].size(); ++m) {
              const OnLink e = link_flows_[static_cast<std::size_t>(from)][m];
              join(to, e.slot, flows_[static_cast<std::size_t>(e.slot)].weight[static_cast<std::size_t>(e.hop)]);
            }
          }
        }
        join(to, slot, w);
        last = static_cast<int>(splits_.size());
        if (from < 0) {
          splits_.push_back({from, w, cap, to, none_head});
          none_head = last;
        } else {
          splits_.push_back({from, w, cap, to, head});
          split_epoch_[static_cast<std::size_t>(from)] = split_stamp_;
          split_head_[static_cast<std::size_t>(from)] = last;
        }
      }
    }
    if (to == from) continue;  // the group took the flow in place
    if (from >= 0 && --group_links_[static_cast<std::size_t>(from)] == 0) emptied_groups_.push_back(from);
    ++group_links_[static_cast<std::size_t>(to)];
    group_of_link_[l] = to;
  }
  for (int g : emptied_groups_) destroy_group(g);
}

void FlowSharing::detach(int slot) {
  // Each link moves from its group G to G less this flow: the live group with
  // those flows if there is one, else a new one carrying G's load less this
  // flow's; a link left without flows joins no group. The flow's groups all end
  // without links and go, but one whose every link the flow crosses, when no live
  // group has its other flows: that one lets the flow go in place.
  const Flow& f = flows_[static_cast<std::size_t>(slot)];
  const FlowId id = id_of(slot);
  next_stamp(split_stamp_, split_epoch_);
  count_cover(slot, true);
  emptied_groups_.clear();
  for (std::size_t j = 0; j < f.links.size(); ++j) {
    const auto l = static_cast<std::size_t>(f.links[j]);
    const int from = group_of_link_[l];
    const auto ff = static_cast<std::size_t>(from);
    int to;
    if (split_epoch_[ff] == split_stamp_) {
      to = split_head_[ff];
    } else {
      to = -1;
      const int parent = group_parent_[ff];
      if (group_made_by_[ff] == id && group_serial_[static_cast<std::size_t>(parent)] == group_parent_serial_[ff] &&
          group_links_[static_cast<std::size_t>(parent)] > 0) {
        to = parent;  // the group this flow's attach split it from
      } else if (link_flows_[ff].size() > 1) {
        const double w = f.link_weight.empty() ? 1.0 : f.link_weight[j];
        const std::uint64_t sig = group_sig_[ff] - member_sig(id, w);
        to = find_group(sig, capacity_[ff], from, slot);
        if (to < 0 && covers(from, w)) {
          leave_in_place(from, slot, w);
          to = from;
        } else if (to < 0) {
          to = new_group(capacity_[ff], sig, load_[ff] - f.rate * w);
          for (std::size_t m = 0; m < link_flows_[ff].size(); ++m) {
            const OnLink e = link_flows_[ff][m];
            if (e.slot != slot) join(to, e.slot, flows_[static_cast<std::size_t>(e.slot)].weight[static_cast<std::size_t>(e.hop)]);
          }
        }
      }
      split_epoch_[ff] = split_stamp_;
      split_head_[ff] = to;
    }
    if (to == from) continue;  // the flow left the group in place
    if (--group_links_[ff] == 0) emptied_groups_.push_back(from);
    if (to >= 0) ++group_links_[static_cast<std::size_t>(to)];
    group_of_link_[l] = to;
  }
  for (int g : emptied_groups_) destroy_group(g);
}

bool FlowSharing::saturated(int group) const {
  const double c = capacity_[static_cast<std::size_t>(group)];
  return load_[static_cast<std::size_t>(group)] >= c * (1.0 - kRelTol);
}

void FlowSharing::set_rate(int slot, double rate) {
  Flow& f = flows_[static_cast<std::size_t>(slot)];
  const double old = f.rate;
  f.rate = rate;
  if (!f.changed && std::fabs(rate - old) > kRelTol * std::max(std::fabs(old), 1e-300)) {
    f.changed = true;
    changed_.push_back(slot);
  }
}

void FlowSharing::check_new_flow(const std::vector<LinkId>& path, double cap, const std::vector<double>& weights) {
  // Every flow of a step passes here: one branch-free pass first, the messages only
  // when it finds something wrong.
  bool bad = !(cap > 0.0) || (!weights.empty() && weights.size() != path.size()) || (path.empty() && std::isinf(cap));
  const auto links = static_cast<std::uint64_t>(link_capacity_.size());
  bool ascending = true;  // then no link repeats (a collective's links come sorted)
  std::int64_t previous = -1;
  for (LinkId l : path) {
    bad |= static_cast<std::uint64_t>(static_cast<std::int64_t>(l)) >= links;
    ascending &= previous < l;
    previous = l;
  }
  for (double w : weights) bad |= !(w > 0.0) | (w == std::numeric_limits<double>::infinity());
  bool repeats = false;  // a link twice (the groups hold each flow once)
  if (!bad && !ascending) {
    next_stamp(seen_stamp_, link_seen_);
    link_seen_.resize(link_capacity_.size(), 0);
    for (LinkId l : path) {
      repeats |= link_seen_[static_cast<std::size_t>(l)] == seen_stamp_;
      link_seen_[static_cast<std::size_t>(l)] = seen_stamp_;
    }
  }
  if (!bad && !repeats) return;
  if (!(cap > 0.0)) throw InternalError("FlowSharing::add: the rate cap must be > 0");
  if (!weights.empty() && weights.size() != path.size()) {
    throw InternalError(fmt::format("FlowSharing::add: {} weights for a path of {} links", weights.size(),
                                    path.size()));
  }
  for (double w : weights) {
    if (!(w > 0.0) || std::isinf(w)) throw InternalError(fmt::format("FlowSharing::add: weight {} is not > 0", w));
  }
  if (path.empty() && std::isinf(cap)) {
    throw InternalError("FlowSharing::add: a flow needs links or a finite rate cap");
  }
  for (LinkId l : path) {
    if (l < 0 || static_cast<std::size_t>(l) >= link_capacity_.size()) {
      throw InternalError(fmt::format("FlowSharing::add: link {} out of range", l));
    }
  }
  throw InternalError("FlowSharing::add: a link repeats in the path");
}

int FlowSharing::start_flow(const std::vector<LinkId>& path, double cap, const std::vector<double>& weights) {
  int slot;
  if (!free_slots_.empty()) {
    slot = free_slots_.back();
    free_slots_.pop_back();
  } else {
    slot = static_cast<int>(flows_.size());
    flows_.emplace_back();
  }
  Flow& f = flows_[static_cast<std::size_t>(slot)];
  f.links = path;
  f.link_weight = weights;
  f.path.clear();
  f.weight.clear();
  f.position.clear();
  f.cap = cap;
  f.rate = 0.0;
  f.live = true;
  f.changed = true;
  ++f.generation;
  changed_.push_back(slot);
  ++live_;
  attach(slot);
  return slot;
}

std::vector<FlowSharing::FlowId> FlowSharing::add_all(const std::vector<std::vector<LinkId>>& paths,
                                                     const std::vector<double>& caps,
                                                     const std::vector<std::vector<double>>& weights) {
  if (!weights.empty() && weights.size() != paths.size()) {
    throw InternalError("FlowSharing::add_all: one rate cap (and one weight list, if any) per path");
  }
  static const std::vector<double> kUnit;
  std::vector<const std::vector<LinkId>*> path_of;
  std::vector<const std::vector<double>*> weights_of;
  for (std::size_t i = 0; i < paths.size(); ++i) {
    path_of.push_back(&paths[i]);
    weights_of.push_back(weights.empty() ? &kUnit : &weights[i]);
  }
  return add_all_by_pointer(path_of, caps, weights_of);
}

std::vector<FlowSharing::FlowId> FlowSharing::add_all_by_pointer(const std::vector<const std::vector<LinkId>*>& paths,
                                                                const std::vector<double>& caps,
                                                                const std::vector<const std::vector<double>*>& weights) {
  if (paths.size() != caps.size() || weights.size() != paths.size()) {
    throw InternalError("FlowSharing::add_all: one rate cap (and one weight list, if any) per path");
  }
  // One flow (most of an engine's instants): add() and its fast paths.
  if (paths.size() == 1) return {add(*paths[0], caps[0], *weights[0])};
  for (std::size_t i = 0; i < paths.size(); ++i) check_new_flow(*paths[i], caps[i], *weights[i]);
  std::vector<FlowId> ids;
  ids.reserve(paths.size());
  std::vector<int> seeds;
  for (std::size_t i = 0; i < paths.size(); ++i) {
    const int slot = start_flow(*paths[i], caps[i], *weights[i]);
    ids.push_back(id_of(slot));
    if (paths[i]->empty()) {
      // A capped flow without links runs at its cap: nothing to solve.
      flows_[static_cast<std::size_t>(slot)].rate = caps[i];
    } else {
      seeds.push_back(slot);
    }
  }
  if (seeds.empty()) {
    last_resolved_ = 0;
  } else {
    resolve(seeds);
  }
  return ids;
}

FlowSharing::FlowId FlowSharing::add(const std::vector<LinkId>& path, double cap) { return add(path, cap, {}); }

FlowSharing::FlowId FlowSharing::add(const std::vector<LinkId>& path, double cap, const std::vector<double>& weights) {
  check_new_flow(path, cap, weights);
  const int slot = start_flow(path, cap, weights);  // at rate 0 until solved below
  Flow& f = flows_[static_cast<std::size_t>(slot)];

  // Fast path: the flow's fair rate needs nobody else to move. On each link it
  // may take the residual over its weight there.
  auto room = [&](std::size_t i) {
    const auto g = static_cast<std::size_t>(f.path[i]);
    return (capacity_[g] - load_[g]) / f.w(i);
  };
  double residual = cap;
  for (std::size_t i = 0; i < f.path.size(); ++i) residual = std::min(residual, room(i));
  bool fast = residual > 0.0;
  if (fast && residual < cap) {
    // The flow fills the groups where the residual is smallest; it is fair there
    // only if no flow already on them is faster.
    for (std::size_t i = 0; i < f.path.size(); ++i) {
      const int l = f.path[i];
      const double res = room(i);
      if (res > residual + kRelTol * capacity_[static_cast<std::size_t>(l)] / f.w(i)) continue;
      for (const OnLink& other : link_flows_[static_cast<std::size_t>(l)]) {
        if (flows_[static_cast<std::size_t>(other.slot)].rate > residual * (1.0 + kRelTol)) fast = false;
      }
    }
  }
  if (fast) {
    f.rate = residual;
    for (std::size_t i = 0; i < f.path.size(); ++i) load_[static_cast<std::size_t>(f.path[i])] += residual * f.w(i);
    last_resolved_ = 0;
  } else {
    resolve({slot});
  }
  return id_of(slot);
}

void FlowSharing::end_flow(int slot) {
  Flow& f = flows_[static_cast<std::size_t>(slot)];
  detach(slot);
  f.live = false;
  f.links.clear();
  f.link_weight.clear();
  f.path.clear();
  f.weight.clear();
  f.position.clear();
  f.changed = false;
  --live_;
  free_slots_.push_back(slot);
}

void FlowSharing::remove(FlowId id) {
  const int slot = slot_of(id);
  const std::vector<int> seeds = bottlenecked_beside({slot});
  end_flow(slot);
  if (seeds.empty()) {
    last_resolved_ = 0;
  } else {
    resolve(seeds);
  }
}

void FlowSharing::remove_all(const std::vector<FlowId>& ids) {
  std::vector<int> slots;
  slots.reserve(ids.size());
  for (FlowId id : ids) slots.push_back(slot_of(id));  // all checked before any is removed
  std::vector<int> sorted = slots;
  std::sort(sorted.begin(), sorted.end());
  if (std::adjacent_find(sorted.begin(), sorted.end()) != sorted.end()) {
    throw InternalError("FlowSharing::remove_all: a flow id repeats");
  }
  const std::vector<int> seeds = bottlenecked_beside(slots);
  for (int slot : slots) end_flow(slot);
  if (seeds.empty()) {
    last_resolved_ = 0;
  } else {
    resolve(seeds);
  }
}

double FlowSharing::rate(FlowId id) const { return flows_[static_cast<std::size_t>(slot_of(id))].rate; }

std::vector<FlowSharing::FlowId> FlowSharing::take_changed() {
  std::vector<FlowId> out;
  out.reserve(changed_.size());
  for (int slot : changed_) {
    Flow& f = flows_[static_cast<std::size_t>(slot)];
    if (f.live && f.changed) out.push_back(id_of(slot));
    f.changed = false;
  }
  changed_.clear();
  std::sort(out.begin(), out.end());
  return out;
}

std::vector<int> FlowSharing::bottlenecked_beside(const std::vector<int>& leaving) {
  // A leaving flow frees capacity on its links; on a full one, the flows it can
  // speed up are those bottlenecked there: the fastest on the link (the leaving
  // flows included), and no others (a slower flow's bottleneck is elsewhere),
  // nor those held on a full link that no leaving flow crosses (held_elsewhere).
  next_epoch();
  for (int slot : leaving) flow_epoch_[static_cast<std::size_t>(slot)] = epoch_;
  // The leaving flows' links are marked (held_elsewhere looks past them);
  // link_local_ says, for the full ones, whether they were looked at yet.
  for (int slot : leaving) {
    for (LinkId l : flows_[static_cast<std::size_t>(slot)].path) {
      link_epoch_[static_cast<std::size_t>(l)] = epoch_;
      link_local_[static_cast<std::size_t>(l)] = 0;
    }
  }
  std::vector<int> out;
  for (int slot : leaving) {
    for (LinkId l : flows_[static_cast<std::size_t>(slot)].path) {
      if (link_local_[static_cast<std::size_t>(l)] != 0 || !saturated(l)) continue;
      link_local_[static_cast<std::size_t>(l)] = 1;
      const auto& on_link = link_flows_[static_cast<std::size_t>(l)];
      double fastest = 0.0;
      for (const OnLink& e : on_link) fastest = std::max(fastest, flows_[static_cast<std::size_t>(e.slot)].rate);
      for (const OnLink& e : on_link) {
        const int other = e.slot;
        if (flow_epoch_[static_cast<std::size_t>(other)] == epoch_) continue;
        if (flows_[static_cast<std::size_t>(other)].rate >= fastest * (1.0 - kRelTol) && !held_elsewhere(other)) {
          flow_epoch_[static_cast<std::size_t>(other)] = epoch_;
          out.push_back(other);
        }
      }
    }
  }
  std::sort(out.begin(), out.end());
  return out;
}

bool FlowSharing::held_elsewhere(int slot) const {
  // A flow's rate is max-min fair while it has one certificate: a full link where
  // no flow is faster. One on a link the change leaves alone (no S flow, no
  // leaving flow crosses it: the same load and the same rates there after the
  // re-solve) stays valid whatever the change does on its other links. A
  // data-parallel part held at its NIC is also the fastest on a GPU's NVLink port
  // that a tensor-parallel collective filled; that collective's end need not
  // re-solve the part's hundred links.
  const Flow& f = flows_[static_cast<std::size_t>(slot)];
  for (const int g : f.path) {
    if (link_epoch_[static_cast<std::size_t>(g)] == epoch_ || !saturated(g)) continue;
    const auto& on_link = link_flows_[static_cast<std::size_t>(g)];
    if (std::all_of(on_link.begin(), on_link.end(), [&](const OnLink& e) {
          return flows_[static_cast<std::size_t>(e.slot)].rate <= f.rate * (1.0 + kRelTol);
        })) {
      return true;
    }
  }
  return false;
}

double FlowSharing::level_where_faster_give_way(int group, int local, const std::vector<double>& new_rate,
                                               const std::vector<int>& bottleneck) {
  // The S flows held here rise, and the outside flows faster than them fall, to
  // one level L; every other flow keeps its rate (the S flows' new ones, the
  // outside flows' old ones):
  //   held_weight * L + fixed + sum over outside flows of w * min(r, L) = capacity.
  // Outside flows are taken from the slowest: while the next one is slower than
  // the level the rest would reach, it keeps its rate.
  double held_weight = 0.0;
  double fixed = 0.0;
  std::vector<std::pair<double, double>>& outside = scratch_outside_;  // (rate, weight)
  outside.clear();
  for (const OnLink& e : link_flows_[static_cast<std::size_t>(group)]) {
    const Flow& f = flows_[static_cast<std::size_t>(e.slot)];
    const double w = f.w(static_cast<std::size_t>(e.hop));
    const auto i = static_cast<std::size_t>(flow_local_[static_cast<std::size_t>(e.slot)]);
    // S's flows of this round (those added in it were outside when it was solved).
    if (flow_epoch_[static_cast<std::size_t>(e.slot)] == epoch_ && i < bottleneck.size()) {
      if (bottleneck[i] == local) {
        held_weight += w;
      } else {
        fixed += w * new_rate[i];
      }
    } else {
      outside.emplace_back(f.rate, w);
    }
  }
  std::sort(outside.begin(), outside.end());
  double room = capacity_[static_cast<std::size_t>(group)] - fixed;
  double weight = held_weight;
  for (const auto& o : outside) weight += o.second;
  for (const auto& [rate, w] : outside) {
    if (room / weight <= rate) return room / weight;
    room -= rate * w;
    weight -= w;
  }
  return room / weight;
}

void FlowSharing::next_epoch() {
  if (++epoch_ == 0) {  // wrapped: reset the stamps
    std::fill(link_epoch_.begin(), link_epoch_.end(), 0);
    std::fill(flow_epoch_.begin(), flow_epoch_.end(), 0);
    epoch_ = 1;
  }
  flow_epoch_.resize(flows_.size(), 0);
  flow_local_.resize(flows_.size(), -1);
}

void FlowSharing::resolve(const std::vector<int>& seed_flows) {
  next_epoch();
  // The affected set S starts with the flows whose rate the change can move
  // directly (new flows; those bottlenecked beside a leaving one). Flows outside S
  // keep their rates as fixed load. After S is solved, the allocation is max-min
  // fair unless an outside flow lost its certificate (each flow at its cap, or
  // the fastest on a full link, its bottleneck), which can happen only on S's
  // links in two ways:
  //  (a) a link is full and an S flow bottlenecked there is slower than an
  //      outside flow on it (the outside flow must give way), or
  //  (b) on a link that was full, an outside flow was bottlenecked (the fastest
  //      there) and S now carries less on it (the flow may speed up) or an S
  //      flow on it is faster than the outside flow (which must then speed up).
  // Those outside flows join S and S is solved again. S grows until neither
  // holds, touching only flows the change can move: a tensor-parallel
  // collective starting on one node does not re-solve the data-parallel rings
  // that cross the node, bottlenecked at their NICs.
  //
  // Each round works on classes of S's links (refine_classes): links that carry
  // the same S flows with the same weights have the same S load before and after,
  // so sums over S flows are taken once per class, not once per link.
  std::vector<int>& flows = scratch_flows_;
  std::vector<LinkId>& links = scratch_links_;  // every link of S's flows
  // Per link of S, its capacity and load (fixed until the commit) and whether it
  // is full, gathered once so that each round reads them in order.
  std::vector<double>& capacity = scratch_capacity_;
  std::vector<double>& load = scratch_load_;
  std::vector<char>& full = scratch_full_;
  flows.clear();
  links.clear();
  capacity.clear();
  load.clear();
  full.clear();
  auto add_flow = [&](int slot) {
    if (flow_epoch_[static_cast<std::size_t>(slot)] == epoch_) return;
    flow_epoch_[static_cast<std::size_t>(slot)] = epoch_;
    flow_local_[static_cast<std::size_t>(slot)] = static_cast<int>(flows.size());
    flows.push_back(slot);
    for (LinkId m : flows_[static_cast<std::size_t>(slot)].path) {
      if (link_epoch_[static_cast<std::size_t>(m)] == epoch_) continue;
      link_epoch_[static_cast<std::size_t>(m)] = epoch_;
      link_local_[static_cast<std::size_t>(m)] = static_cast<int>(links.size());
      links.push_back(m);
      capacity.push_back(capacity_[static_cast<std::size_t>(m)]);
      load.push_back(load_[static_cast<std::size_t>(m)]);
      full.push_back(saturated(m) ? 1 : 0);
    }
  };
  for (int slot : seed_flows) add_flow(slot);
  classified_flows_ = 0;  // refine_classes starts afresh

  std::vector<double>& new_rate = scratch_rate_;
  std::vector<double>& avail = scratch_avail_;  // per link: the capacity left to S (refine_classes)
  std::vector<double>& in_s_new = scratch_new_;  // per class
  std::vector<int>& bottleneck = scratch_bottleneck_;
  std::vector<double>& fastest_bound = scratch_fastest_bound_;  // per link, -1 where no S flow is bound
  std::vector<double>& fastest_new = scratch_fastest_new_;      // per class
  std::vector<int>& candidates = scratch_candidates_;
  last_rounds_ = 0;
  while (true) {
    ++last_rounds_;
    refine_classes();
    const std::size_t nl = links.size();
    const std::size_t nc = class_offset_.size() - 1;
    fill(avail, new_rate, bottleneck);

    in_s_new.assign(nc, 0.0);
    fastest_new.assign(nc, 0.0);
    for (std::size_t c = 0; c < nc; ++c) {
      for (int m = class_offset_[c]; m < class_offset_[c + 1]; ++m) {
        const double r = new_rate[static_cast<std::size_t>(class_member_[static_cast<std::size_t>(m)])];
        in_s_new[c] += r * class_member_weight_[static_cast<std::size_t>(m)];
        fastest_new[c] = std::max(fastest_new[c], r);
      }
    }
    // The links a rule below can act on, in link order: those where an S flow is
    // bottlenecked (a), and the full links of classes whose S load fell or whose
    // fastest S flow got faster (b; the fastest flow on a link is at least S's
    // fastest before, so S not outrunning that needs no look at the others).
    fastest_bound.resize(nl, -1.0);
    candidates.clear();
    for (std::size_t i = 0; i < flows.size(); ++i) {
      if (bottleneck[i] >= 0) {
        double& b = fastest_bound[static_cast<std::size_t>(bottleneck[i])];
        if (b < 0.0) candidates.push_back(bottleneck[i]);
        b = std::max(b, new_rate[i]);
      }
    }
    for (std::size_t c = 0; c < nc; ++c) {
      const bool less = in_s_new[c] < class_in_s_old_[c] - kRelTol * class_min_capacity_[c];
      if (!less && !(fastest_new[c] > class_fastest_old_[c] * (1.0 + kRelTol))) continue;
      for (int k = classes_[static_cast<std::size_t>(class_raw_[c])].head; k >= 0; k = link_next_[static_cast<std::size_t>(k)]) {
        if (full[static_cast<std::size_t>(k)]) candidates.push_back(k);
      }
    }
    std::sort(candidates.begin(), candidates.end());
    candidates.erase(std::unique(candidates.begin(), candidates.end()), candidates.end());
    bool widened = false;
    std::vector<int>& fired = scratch_fired_;
    std::vector<double>& give_way_level = scratch_level_;  // per link where (a) fired
    give_way_level.resize(nl);
    for (const int kk : candidates) {
      const auto k = static_cast<std::size_t>(kk);
      const LinkId l = links[k];
      const auto c = static_cast<std::size_t>(compact_of_raw_[static_cast<std::size_t>(raw_class_of_link_[k])]);
      const auto& on_link = link_flows_[static_cast<std::size_t>(l)];
      if (fastest_bound[k] >= 0.0 && in_s_new[c] >= avail[k] * (1.0 - kRelTol)) {
        // (a) full with S flows bottlenecked here: no outside flow may be faster.
        // Those that must give way are the ones faster than the level the held S
        // flows reach once they do (a tensor-parallel collective starting on a
        // GPU's NVLink port takes its share from the faster collectives there, not
        // from the data-parallel parts that cross the port slower, held at their
        // NICs). Any of the faster flows would do, as S is solved again until no
        // rule fires; the level only spares the others. (Some outside flow is
        // always above it: below, the held flows would have reached it.)
        // The outside flows above `bound` join S; whether any did.
        auto take_faster_than = [&](double bound) {
          bool took = false;
          for (const OnLink& e : on_link) {
            if (flow_epoch_[static_cast<std::size_t>(e.slot)] == epoch_) continue;
            if (flows_[static_cast<std::size_t>(e.slot)].rate > bound * (1.0 + kRelTol)) {
              add_flow(e.slot);
              took = true;
            }
          }
          return took;
        };
        const double level = level_where_faster_give_way(l, kk, new_rate, bottleneck);
        give_way_level[k] = std::max(level, fastest_bound[k]);
        bool took = take_faster_than(give_way_level[k]);
        if (!took && give_way_level[k] > fastest_bound[k]) {  // none above the level, by rounding
          give_way_level[k] = fastest_bound[k];
          took = take_faster_than(fastest_bound[k]);
        }
        if (took) {
          widened = true;
          fired.push_back(kk);  // see (a, ahead) below
        }
      }
      if (full[k]) {
        // (b) on a link that was full, the outside flows bottlenecked there (the
        // fastest) lose their certificate if S left room on it or an S flow on it
        // is now faster than they are.
        const bool less = in_s_new[c] < class_in_s_old_[c] - kRelTol * capacity[k];
        if (!less && !(fastest_new[c] > class_fastest_old_[c] * (1.0 + kRelTol))) continue;
        double fastest = 0.0;
        for (const OnLink& e : on_link) fastest = std::max(fastest, flows_[static_cast<std::size_t>(e.slot)].rate);
        if (less || fastest_new[c] > fastest * (1.0 + kRelTol)) {
          for (const OnLink& e : on_link) {
            const int slot = e.slot;
            if (flow_epoch_[static_cast<std::size_t>(slot)] == epoch_) continue;
            if (flows_[static_cast<std::size_t>(slot)].rate >= fastest * (1.0 - kRelTol) && !held_elsewhere(slot)) {
              add_flow(slot);
              widened = true;
            }
          }
        }
      }
    }
    // (a, ahead) An S flow held at a full link where an outside flow was faster
    // will, once that flow gives way, run into its next full link where another
    // outside flow is faster, and so on: a data-parallel part crossing many nodes'
    // NVLink ports, each saturated by a tensor-parallel collective, met one port
    // per round. Those outside flows on its other full links that are faster than
    // the level it may rise to (where the flows at its link give way, as in (a))
    // join S at once. Any superset of S gives the same allocation (the rules above
    // still decide when S is complete); this one only saves rounds (7.3 to 2.8 for
    // re-solves of 17-32 flows in a ZeRO-2 plan on 1,024 GPUs).
    if (!fired.empty()) {
      std::sort(fired.begin(), fired.end());
      const std::size_t solved = bottleneck.size();  // S's flows of this round
      for (std::size_t i = 0; i < solved; ++i) {
        if (bottleneck[i] < 0 || !std::binary_search(fired.begin(), fired.end(), bottleneck[i])) continue;
        const double rises_to = std::max(new_rate[i], give_way_level[static_cast<std::size_t>(bottleneck[i])]);
        for (const int g : flows_[static_cast<std::size_t>(flows[i])].path) {
          if (!full[static_cast<std::size_t>(link_local_[static_cast<std::size_t>(g)])]) continue;
          for (const OnLink& e : link_flows_[static_cast<std::size_t>(g)]) {
            if (flow_epoch_[static_cast<std::size_t>(e.slot)] == epoch_) continue;
            if (flows_[static_cast<std::size_t>(e.slot)].rate > rises_to * (1.0 + kRelTol)) add_flow(e.slot);
          }
        }
      }
    }
    fired.clear();
    for (std::size_t i = 0; i < bottleneck.size(); ++i) {
      if (bottleneck[i] >= 0) fastest_bound[static_cast<std::size_t>(bottleneck[i])] = -1.0;
    }
    if (!widened) break;
  }
  last_resolved_ = static_cast<int>(flows.size());

  // Commit: loads change by the S flows' rate differences.
  for (std::size_t i = 0; i < flows.size(); ++i) {
    const Flow& f = flows_[static_cast<std::size_t>(flows[i])];
    const double delta = new_rate[i] - f.rate;
    for (std::size_t j = 0; j < f.path.size(); ++j) load_[static_cast<std::size_t>(f.path[j])] += delta * f.w(j);
    set_rate(flows[i], new_rate[i]);
  }
}

void FlowSharing::refine_classes() {
  // Partition refinement: every link of S starts in the class of no flows, and
  // each S flow in turn moves each of its links from its class C to the child of
  // C for (this flow, its weight there). Links end in one class exactly when they
  // carry the same S flows with the same weights. S only grows during a re-solve
  // and new flows come last, so a round refines with the flows added since the
  // last (classified_flows_) and gets the partition a fresh start would; only
  // the links those flows cross change class, and only theirs are looked at.
  //
  // A class's S load before the re-solve (its flows' rates times their weights,
  // summed in flow order) is its parent's plus its own flow's: the same sum, bit
  // for bit, as summing its flows afresh. A link's room (avail) depends only on
  // its class's S load, so it changes only when the link moves; a class's
  // tightest link changes only when it is new or its tightest moved out.
  const std::vector<int>& flows = scratch_flows_;
  const std::vector<double>& capacity = scratch_capacity_;
  const std::vector<double>& load = scratch_load_;
  std::vector<double>& avail = scratch_avail_;
  const std::size_t nl = scratch_links_.size();
  if (classified_flows_ == 0) {
    classes_.assign(1, LinkClass{});  // the root: no flows, holds no listed links
    class_pool_flow_.clear();
    class_pool_weight_.clear();
    raw_class_of_link_.clear();
    link_next_.clear();
    link_prev_.clear();
    avail.clear();
  }
  raw_class_of_link_.resize(nl, 0);  // links new to S start in the root
  link_next_.resize(nl, -1);
  link_prev_.resize(nl, -1);
  avail.resize(nl, 0.0);
  std::vector<int>& rescan = scratch_rescan_;  // classes whose tightest link left
  rescan.clear();
  auto unlink = [&](int k) {
    LinkClass& c = classes_[static_cast<std::size_t>(raw_class_of_link_[static_cast<std::size_t>(k)])];
    const int prev = link_prev_[static_cast<std::size_t>(k)], next = link_next_[static_cast<std::size_t>(k)];
    if (prev >= 0) link_next_[static_cast<std::size_t>(prev)] = next; else c.head = next;
    if (next >= 0) link_prev_[static_cast<std::size_t>(next)] = prev;
    --c.links;
    if (c.tightest == k) {
      c.tightest = -1;
      rescan.push_back(raw_class_of_link_[static_cast<std::size_t>(k)]);
    }
  };
  // Keeps the class's tightest link: the least room, at a tie the lower index.
  auto offer = [&](LinkClass& cl, int k) {
    const auto kk = static_cast<std::size_t>(k);
    if (cl.tightest < 0 || avail[kk] < avail[static_cast<std::size_t>(cl.tightest)] ||
        (avail[kk] == avail[static_cast<std::size_t>(cl.tightest)] && k < cl.tightest)) {
      cl.tightest = k;
    }
  };
  for (std::size_t i = classified_flows_; i < flows.size(); ++i) {
    const Flow& f = flows_[static_cast<std::size_t>(flows[i])];
    int last_parent = -1, last_child = -1;  // a path's links mostly come in runs of one class
    double last_w = 0.0;
    for (std::size_t j = 0; j < f.path.size(); ++j) {
      const int k = link_local_[static_cast<std::size_t>(f.path[j])];
      const int c = raw_class_of_link_[static_cast<std::size_t>(k)];
      const double w = f.w(j);
      int child;
      if (c == last_parent && w == last_w) {
        child = last_child;
      } else {
        if (classes_[static_cast<std::size_t>(c)].split_flow != static_cast<int>(i)) {
          classes_[static_cast<std::size_t>(c)].split_flow = static_cast<int>(i);
          classes_[static_cast<std::size_t>(c)].first_child = -1;
        }
        child = classes_[static_cast<std::size_t>(c)].first_child;
        while (child >= 0 && classes_[static_cast<std::size_t>(child)].weight != w) {
          child = classes_[static_cast<std::size_t>(child)].next_sibling;
        }
        if (child < 0) {
          child = static_cast<int>(classes_.size());
          const LinkClass& parent = classes_[static_cast<std::size_t>(c)];
          LinkClass n;
          n.parent = c;
          n.flow = static_cast<int>(i);
          n.weight = w;
          n.next_sibling = parent.first_child;
          n.in_s_old = parent.in_s_old + f.rate * w;
          n.fastest_old = std::max(parent.fastest_old, f.rate);
          n.members_begin = static_cast<int>(class_pool_flow_.size());
          n.members = parent.members + 1;
          for (int m = 0; m < parent.members; ++m) {  // the parent's flows, then this one
            class_pool_flow_.push_back(class_pool_flow_[static_cast<std::size_t>(parent.members_begin + m)]);
            class_pool_weight_.push_back(class_pool_weight_[static_cast<std::size_t>(parent.members_begin + m)]);
          }
          class_pool_flow_.push_back(static_cast<int>(i));
          class_pool_weight_.push_back(w);
          classes_[static_cast<std::size_t>(c)].first_child = child;
          classes_.push_back(n);
        }
        last_parent = c;
        last_w = w;
        last_child = child;
      }
      if (c != 0) unlink(k);
      LinkClass& to = classes_[static_cast<std::size_t>(child)];
      link_prev_[static_cast<std::size_t>(k)] = -1;
      link_next_[static_cast<std::size_t>(k)] = to.head;
      if (to.head >= 0) link_prev_[static_cast<std::size_t>(to.head)] = k;
      to.head = k;
      ++to.links;
      raw_class_of_link_[static_cast<std::size_t>(k)] = child;
      // Its room in the new class: the capacity less the rates of flows outside S.
      const auto kk = static_cast<std::size_t>(k);
      avail[kk] = std::max(0.0, capacity[kk] - std::max(0.0, load[kk] - to.in_s_old));
      to.min_capacity = to.links == 1 ? capacity[kk] : std::min(to.min_capacity, capacity[kk]);
      offer(to, k);
    }
  }
  classified_flows_ = flows.size();
  // A class whose tightest link left finds its new one among those it kept.
  for (int c : rescan) {
    LinkClass& cl = classes_[static_cast<std::size_t>(c)];
    if (cl.links == 0 || cl.tightest >= 0) continue;
    for (int k = cl.head; k >= 0; k = link_next_[static_cast<std::size_t>(k)]) offer(cl, k);
  }

  // The classes that hold links, numbered afresh each round (the numbering does
  // not enter the solve: events order by their tightest links), each with its
  // flows in flow order.
  compact_of_raw_.assign(classes_.size(), -1);
  class_raw_.clear();
  class_offset_.assign(1, 0);
  class_member_.clear();
  class_member_weight_.clear();
  class_tightest_.clear();
  class_in_s_old_.clear();
  class_fastest_old_.clear();
  class_min_capacity_.clear();
  for (std::size_t c = 1; c < classes_.size(); ++c) {
    const LinkClass& cl = classes_[c];
    if (cl.links == 0) continue;
    compact_of_raw_[c] = static_cast<int>(class_raw_.size());
    class_raw_.push_back(static_cast<int>(c));
    class_member_.insert(class_member_.end(), class_pool_flow_.begin() + cl.members_begin,
                         class_pool_flow_.begin() + cl.members_begin + cl.members);
    class_member_weight_.insert(class_member_weight_.end(), class_pool_weight_.begin() + cl.members_begin,
                                class_pool_weight_.begin() + cl.members_begin + cl.members);
    class_offset_.push_back(static_cast<int>(class_member_.size()));
    class_tightest_.push_back(cl.tightest);
    class_in_s_old_.push_back(cl.in_s_old);
    class_fastest_old_.push_back(cl.fastest_old);
    class_min_capacity_.push_back(cl.min_capacity);
  }
  // Each flow's classes, with its weight there.
  const std::size_t nc = class_raw_.size();
  std::vector<int>& cursor = scratch_cursor_;
  flow_class_offset_.assign(flows.size() + 1, 0);
  for (int i : class_member_) ++flow_class_offset_[static_cast<std::size_t>(i) + 1];
  for (std::size_t i = 0; i < flows.size(); ++i) flow_class_offset_[i + 1] += flow_class_offset_[i];
  flow_class_.resize(class_member_.size());
  flow_class_weight_.resize(class_member_.size());
  cursor.assign(flow_class_offset_.begin(), flow_class_offset_.end() - 1);
  for (std::size_t c = 0; c < nc; ++c) {
    for (int m = class_offset_[c]; m < class_offset_[c + 1]; ++m) {
      const auto i = static_cast<std::size_t>(class_member_[static_cast<std::size_t>(m)]);
      const auto at = static_cast<std::size_t>(cursor[i]++);
      flow_class_[at] = static_cast<int>(c);
      flow_class_weight_[at] = class_member_weight_[static_cast<std::size_t>(m)];
    }
  }
}

void FlowSharing::fill(const std::vector<double>& avail, std::vector<double>& new_rate, std::vector<int>& bottleneck) {
  // Progressive filling over S. Unfrozen flows share one level x; link k fills when
  // frozen_k + unfrozen_weight_k · x = avail_k (frozen_k: the frozen flows' weighted
  // rates; the weight sum is the unfrozen count for plain flows).
  const std::vector<int>& flows = scratch_flows_;
  if (flows.size() == 1) {
    // One flow (most re-solves): its cap, or the tightest of its links' room.
    const Flow& f = flows_[static_cast<std::size_t>(flows.front())];
    double level = f.cap;
    int at = -1;
    for (std::size_t j = 0; j < f.path.size(); ++j) {
      const int k = link_local_[static_cast<std::size_t>(f.path[j])];
      const double x = avail[static_cast<std::size_t>(k)] / f.w(j);
      if (x < level) {
        level = x;
        at = k;
      }
    }
    new_rate.assign(1, level);
    bottleneck.assign(1, at);
    return;
  }
  // The links of a class share frozen and the unfrozen weight, so the one with
  // the least room (at a tie, the lower index, as events break ties) fills first
  // and freezes all the class's flows; the others never fill while one of those
  // is unfrozen. Only that tightest link of each class takes part: a
  // data-parallel ring's part has hundreds of links, but S forms a few dozen
  // classes (a part's own NIC, leaf and spine hops are one).
  const std::size_t nc = class_offset_.size() - 1;
  const std::vector<int>& tightest = class_tightest_;
  std::vector<double>& frozen = scratch_frozen_;
  std::vector<int>& unfrozen = scratch_unfrozen_;
  std::vector<double>& unfrozen_weight = scratch_unfrozen_weight_;
  std::vector<std::uint32_t>& version = scratch_version_;
  std::vector<char>& done = scratch_done_;
  frozen.assign(nc, 0.0);
  unfrozen.assign(nc, 0);
  unfrozen_weight.assign(nc, 0.0);
  version.assign(nc, 0);
  done.assign(flows.size(), 0);
  new_rate.assign(flows.size(), 0.0);
  bottleneck.assign(flows.size(), -1);
  for (std::size_t i = 0; i < flows.size(); ++i) {
    for (int m = flow_class_offset_[i]; m < flow_class_offset_[i + 1]; ++m) {
      const auto c = static_cast<std::size_t>(flow_class_[static_cast<std::size_t>(m)]);
      ++unfrozen[c];
      unfrozen_weight[c] += flow_class_weight_[static_cast<std::size_t>(m)];
    }
  }
  auto level_of = [&](std::size_t c) {
    return (avail[static_cast<std::size_t>(tightest[c])] - frozen[c]) / unfrozen_weight[c];
  };

  // The events in the order progressive filling meets them: the lowest level
  // first; at one level a link filling before a flow reaching its cap, then the
  // lower link index (a class's event carries its tightest link's). A class's
  // level is where it fills given the flows frozen so far, never below the level
  // reached. Two ways find the next event and meet the same sequence, so the
  // rates are bit-identical: a heap with lazy deletion (a class's entry is
  // current while its version matches), or, for a few flows, a scan of the
  // classes that still carry an unfrozen flow (a few flows fill in a few
  // rounds, where the heap would push and pop every class).
  const bool scan = flows.size() <= static_cast<std::size_t>(scan_fill_max_flows_);
  std::vector<FillEvent>& heap = scratch_heap_;
  std::vector<int>& active = scratch_active_;  // scan: the classes with an unfrozen flow
  heap.clear();
  active.clear();
  if (scan) {
    for (std::size_t c = 0; c < nc; ++c) {
      if (unfrozen[c] > 0) active.push_back(static_cast<int>(c));
    }
  } else {
    for (std::size_t i = 0; i < flows.size(); ++i) {
      const double cap = flows_[static_cast<std::size_t>(flows[i])].cap;
      if (!std::isinf(cap)) heap.push_back(FillEvent{cap, 1, static_cast<int>(i), 0});
    }
    for (std::size_t c = 0; c < nc; ++c) {
      if (unfrozen[c] > 0) heap.push_back(FillEvent{level_of(c), 0, tightest[c], 0});
    }
    std::make_heap(heap.begin(), heap.end(), std::greater<FillEvent>());
  }
  // link: the local link whose filling froze the flow (-1: its cap).
  auto freeze = [&](int i, double level, int link) {
    done[static_cast<std::size_t>(i)] = 1;
    new_rate[static_cast<std::size_t>(i)] = level;
    bottleneck[static_cast<std::size_t>(i)] = link;
    for (int m = flow_class_offset_[static_cast<std::size_t>(i)]; m < flow_class_offset_[static_cast<std::size_t>(i) + 1];
         ++m) {
      const auto c = static_cast<std::size_t>(flow_class_[static_cast<std::size_t>(m)]);
      const double w = flow_class_weight_[static_cast<std::size_t>(m)];
      frozen[c] += level * w;
      --unfrozen[c];
      unfrozen_weight[c] -= w;
      ++version[c];
      if (!scan && unfrozen[c] > 0) {
        heap.push_back(FillEvent{std::max(level_of(c), level), 0, tightest[c], version[c]});
        std::push_heap(heap.begin(), heap.end(), std::greater<FillEvent>());
      }
    }
  };
  // The next event by scanning; false when every flow is frozen.
  double level = 0.0;
  auto next_by_scan = [&](FillEvent& next) {
    bool any = false;
    std::size_t kept = 0;
    for (const int c : active) {
      const auto cc = static_cast<std::size_t>(c);
      if (unfrozen[cc] == 0) continue;
      active[kept++] = c;
      // Bit-equal to the class's current heap entry: frozen and the weight are as
      // at its last update, and a level below the one reached pops at once.
      const FillEvent candidate{std::max(level_of(cc), level), 0, tightest[cc], version[cc]};
      if (!any || next > candidate) next = candidate;
      any = true;
    }
    active.resize(kept);
    for (std::size_t i = 0; i < flows.size(); ++i) {
      const double cap = flows_[static_cast<std::size_t>(flows[i])].cap;
      if (done[i] || std::isinf(cap)) continue;
      const FillEvent candidate{cap, 1, static_cast<int>(i), 0};
      if (!any || next > candidate) next = candidate;
      any = true;
    }
    return any;
  };
  while (true) {
    FillEvent e{};
    if (scan) {
      if (!next_by_scan(e)) break;
    } else {
      if (heap.empty()) break;
      std::pop_heap(heap.begin(), heap.end(), std::greater<FillEvent>());
      e = heap.back();
      heap.pop_back();
    }
    level = e.level;
    if (e.kind == 1) {
      if (!done[static_cast<std::size_t>(e.index)]) freeze(e.index, e.level, -1);
      continue;
    }
    const auto c = static_cast<std::size_t>(
        compact_of_raw_[static_cast<std::size_t>(raw_class_of_link_[static_cast<std::size_t>(e.index)])]);
    if (e.version != version[c] || unfrozen[c] == 0) continue;
    // Freeze every unfrozen S flow of this class at the level.
    for (int m = class_offset_[c]; m < class_offset_[c + 1]; ++m) {
      const int i = class_member_[static_cast<std::size_t>(m)];
      if (!done[static_cast<std::size_t>(i)]) freeze(i, e.level, e.index);
    }
  }
}

}  // namespace strata::topo
