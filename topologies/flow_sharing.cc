#include "topologies/flow_sharing.h"

#include <algorithm>
#include <cmath>
#include <queue>

#include <fmt/format.h>

#include "core/error.h"

namespace strata::topo {
namespace {

// Relative tolerance for "this link is full" and "this rate changed": far below any
// modelled effect, far above the rounding of a few additions.
constexpr double kRelTol = 1e-9;

std::vector<double> capacities_of(const Topology& t) {
  std::vector<double> c;
  c.reserve(static_cast<std::size_t>(t.num_links()));
  for (LinkId l = 0; l < t.num_links(); ++l) c.push_back(t.link(l).bandwidth_bytes_per_s);
  return c;
}

}  // namespace

FlowSharing::FlowSharing(const Topology& topology) : FlowSharing(capacities_of(topology)) {}

FlowSharing::FlowSharing(std::vector<double> capacities) : capacity_(std::move(capacities)) {
  for (double c : capacity_) {
    if (!(c > 0.0)) throw InternalError("FlowSharing: link capacities must be > 0");
  }
  load_.assign(capacity_.size(), 0.0);
  link_flows_.resize(capacity_.size());
  link_epoch_.assign(capacity_.size(), 0);
  link_local_.assign(capacity_.size(), -1);
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

void FlowSharing::attach(int slot) {
  Flow& f = flows_[static_cast<std::size_t>(slot)];
  f.position.resize(f.path.size());
  for (std::size_t i = 0; i < f.path.size(); ++i) {
    auto& list = link_flows_[static_cast<std::size_t>(f.path[i])];
    f.position[i] = static_cast<int>(list.size());
    list.push_back(slot);
  }
}

void FlowSharing::detach(int slot) {
  Flow& f = flows_[static_cast<std::size_t>(slot)];
  for (std::size_t i = 0; i < f.path.size(); ++i) {
    const LinkId l = f.path[i];
    auto& list = link_flows_[static_cast<std::size_t>(l)];
    const int pos = f.position[i];
    const int moved = list.back();
    list[static_cast<std::size_t>(pos)] = moved;
    list.pop_back();
    if (moved != slot || static_cast<std::size_t>(pos) != list.size()) {
      // Update the moved flow's record of where it sits in this link's list.
      Flow& m = flows_[static_cast<std::size_t>(moved)];
      for (std::size_t j = 0; j < m.path.size(); ++j) {
        if (m.path[j] == l && m.position[j] == static_cast<int>(list.size())) {
          m.position[j] = pos;
          break;
        }
      }
    }
    load_[static_cast<std::size_t>(l)] -= f.rate;
    if (list.empty()) load_[static_cast<std::size_t>(l)] = 0.0;
  }
}

bool FlowSharing::saturated(LinkId l) const {
  const double c = capacity_[static_cast<std::size_t>(l)];
  return load_[static_cast<std::size_t>(l)] >= c * (1.0 - kRelTol);
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

FlowSharing::FlowId FlowSharing::add(const std::vector<LinkId>& path, double cap) {
  if (!(cap > 0.0)) throw InternalError("FlowSharing::add: the rate cap must be > 0");
  if (path.empty() && std::isinf(cap)) {
    throw InternalError("FlowSharing::add: a flow needs links or a finite rate cap");
  }
  for (LinkId l : path) {
    if (l < 0 || static_cast<std::size_t>(l) >= capacity_.size()) {
      throw InternalError(fmt::format("FlowSharing::add: link {} out of range", l));
    }
  }
  int slot;
  if (!free_slots_.empty()) {
    slot = free_slots_.back();
    free_slots_.pop_back();
  } else {
    slot = static_cast<int>(flows_.size());
    flows_.emplace_back();
  }
  Flow& f = flows_[static_cast<std::size_t>(slot)];
  f.path = path;
  f.cap = cap;
  f.rate = 0.0;
  f.live = true;
  f.changed = true;
  ++f.generation;
  changed_.push_back(slot);
  ++live_;

  // Fast path: the flow's fair rate needs nobody else to move.
  double residual = cap;
  for (LinkId l : path) {
    residual = std::min(residual, capacity_[static_cast<std::size_t>(l)] - load_[static_cast<std::size_t>(l)]);
  }
  bool fast = residual > 0.0;
  if (fast && residual < cap) {
    // The flow fills the links where the residual is smallest; it is fair there only
    // if no flow already on them is faster.
    for (LinkId l : path) {
      const double res = capacity_[static_cast<std::size_t>(l)] - load_[static_cast<std::size_t>(l)];
      if (res > residual + kRelTol * capacity_[static_cast<std::size_t>(l)]) continue;
      for (int other : link_flows_[static_cast<std::size_t>(l)]) {
        if (flows_[static_cast<std::size_t>(other)].rate > residual * (1.0 + kRelTol)) fast = false;
      }
    }
  }
  attach(slot);
  if (fast) {
    f.rate = residual;
    for (LinkId l : path) load_[static_cast<std::size_t>(l)] += residual;
    last_resolved_ = 0;
  } else {
    resolve_from(path);
  }
  return id_of(slot);
}

void FlowSharing::remove(FlowId id) {
  const int slot = slot_of(id);
  Flow& f = flows_[static_cast<std::size_t>(slot)];
  bool any_saturated = false;
  for (LinkId l : f.path) any_saturated = any_saturated || saturated(l);
  std::vector<LinkId> links = f.path;
  detach(slot);
  f.live = false;
  f.path.clear();
  f.position.clear();
  f.changed = false;
  --live_;
  free_slots_.push_back(slot);
  if (any_saturated) {
    resolve_from(links);
  } else {
    last_resolved_ = 0;
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

void FlowSharing::resolve_from(const std::vector<LinkId>& seed_links) {
  if (++epoch_ == 0) {  // wrapped: reset the stamps
    std::fill(link_epoch_.begin(), link_epoch_.end(), 0);
    std::fill(flow_epoch_.begin(), flow_epoch_.end(), 0);
    epoch_ = 1;
  }
  flow_epoch_.resize(flows_.size(), 0);

  // The component: flows and links reachable through shared links.
  std::vector<LinkId> links;
  std::vector<int> flows;
  std::vector<LinkId> stack;
  for (LinkId l : seed_links) {
    if (link_epoch_[static_cast<std::size_t>(l)] != epoch_) {
      link_epoch_[static_cast<std::size_t>(l)] = epoch_;
      stack.push_back(l);
    }
  }
  while (!stack.empty()) {
    LinkId l = stack.back();
    stack.pop_back();
    link_local_[static_cast<std::size_t>(l)] = static_cast<int>(links.size());
    links.push_back(l);
    for (int s : link_flows_[static_cast<std::size_t>(l)]) {
      if (flow_epoch_[static_cast<std::size_t>(s)] == epoch_) continue;
      flow_epoch_[static_cast<std::size_t>(s)] = epoch_;
      flows.push_back(s);
      for (LinkId m : flows_[static_cast<std::size_t>(s)].path) {
        if (link_epoch_[static_cast<std::size_t>(m)] != epoch_) {
          link_epoch_[static_cast<std::size_t>(m)] = epoch_;
          stack.push_back(m);
        }
      }
    }
  }
  last_resolved_ = static_cast<int>(flows.size());

  // Progressive filling. Unfrozen flows share one level x; link l fills when
  // frozen_l + unfrozen_l * x = capacity_l. Events are kept in a heap with lazy
  // deletion (a link's entry is current when its version matches).
  const std::size_t nl = links.size();
  std::vector<double> frozen(nl, 0.0);
  std::vector<int> unfrozen(nl, 0);
  std::vector<std::uint32_t> version(nl, 0);
  std::vector<char> done(flows.size(), 0);
  std::vector<double> new_rate(flows.size(), 0.0);
  // Component-local flow index, through a slot → index map built on the fly.
  std::vector<std::pair<int, int>> by_slot;  // (slot, local index), sorted
  by_slot.reserve(flows.size());
  for (std::size_t i = 0; i < flows.size(); ++i) by_slot.emplace_back(flows[i], static_cast<int>(i));
  std::sort(by_slot.begin(), by_slot.end());
  auto local_of = [&](int slot) {
    auto it = std::lower_bound(by_slot.begin(), by_slot.end(), std::make_pair(slot, -1));
    return it->second;
  };

  struct Event {
    double level;
    int kind;   // 0: a link fills, 1: a flow reaches its cap
    int index;  // local link or local flow
    std::uint32_t version;
    bool operator>(const Event& o) const {
      if (level != o.level) return level > o.level;
      if (kind != o.kind) return kind > o.kind;
      return index > o.index;
    }
  };
  std::priority_queue<Event, std::vector<Event>, std::greater<Event>> heap;
  for (std::size_t i = 0; i < flows.size(); ++i) {
    const Flow& f = flows_[static_cast<std::size_t>(flows[i])];
    for (LinkId l : f.path) ++unfrozen[static_cast<std::size_t>(link_local_[static_cast<std::size_t>(l)])];
    if (!std::isinf(f.cap)) heap.push(Event{f.cap, 1, static_cast<int>(i), 0});
  }
  for (std::size_t k = 0; k < nl; ++k) {
    if (unfrozen[k] > 0) {
      heap.push(Event{capacity_[static_cast<std::size_t>(links[k])] / unfrozen[k], 0, static_cast<int>(k), 0});
    }
  }
  auto freeze = [&](int i, double level) {
    done[static_cast<std::size_t>(i)] = 1;
    new_rate[static_cast<std::size_t>(i)] = level;
    for (LinkId l : flows_[static_cast<std::size_t>(flows[static_cast<std::size_t>(i)])].path) {
      const auto k = static_cast<std::size_t>(link_local_[static_cast<std::size_t>(l)]);
      frozen[k] += level;
      --unfrozen[k];
      ++version[k];
      if (unfrozen[k] > 0) {
        double x = (capacity_[static_cast<std::size_t>(l)] - frozen[k]) / unfrozen[k];
        heap.push(Event{std::max(x, level), 0, static_cast<int>(k), version[k]});
      }
    }
  };
  while (!heap.empty()) {
    Event e = heap.top();
    heap.pop();
    if (e.kind == 1) {
      if (!done[static_cast<std::size_t>(e.index)]) freeze(e.index, e.level);
      continue;
    }
    const auto k = static_cast<std::size_t>(e.index);
    if (e.version != version[k] || unfrozen[k] == 0) continue;
    // Freeze every unfrozen flow on this link at the level (copy: freeze edits state).
    std::vector<int> on_link;
    for (int s : link_flows_[static_cast<std::size_t>(links[k])]) {
      int i = local_of(s);
      if (!done[static_cast<std::size_t>(i)]) on_link.push_back(i);
    }
    std::sort(on_link.begin(), on_link.end());
    on_link.erase(std::unique(on_link.begin(), on_link.end()), on_link.end());
    for (int i : on_link) {
      if (!done[static_cast<std::size_t>(i)]) freeze(i, e.level);
    }
  }

  for (std::size_t k = 0; k < nl; ++k) load_[static_cast<std::size_t>(links[k])] = 0.0;
  for (std::size_t i = 0; i < flows.size(); ++i) {
    set_rate(flows[i], new_rate[i]);
    for (LinkId l : flows_[static_cast<std::size_t>(flows[i])].path) load_[static_cast<std::size_t>(l)] += new_rate[i];
  }
}

}  // namespace strata::topo
