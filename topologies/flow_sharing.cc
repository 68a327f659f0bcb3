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
    load_[static_cast<std::size_t>(l)] -= f.rate * f.w(i);
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

void FlowSharing::check_new_flow(const std::vector<LinkId>& path, double cap,
                                 const std::vector<double>& weights) const {
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
    if (l < 0 || static_cast<std::size_t>(l) >= capacity_.size()) {
      throw InternalError(fmt::format("FlowSharing::add: link {} out of range", l));
    }
  }
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
  f.path = path;
  f.weight = weights;
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
  if (paths.size() != caps.size() || (!weights.empty() && weights.size() != paths.size())) {
    throw InternalError("FlowSharing::add_all: one rate cap (and one weight list, if any) per path");
  }
  static const std::vector<double> kUnit;
  auto weights_of = [&](std::size_t i) -> const std::vector<double>& { return weights.empty() ? kUnit : weights[i]; };
  for (std::size_t i = 0; i < paths.size(); ++i) check_new_flow(paths[i], caps[i], weights_of(i));
  std::vector<FlowId> ids;
  ids.reserve(paths.size());
  std::vector<LinkId> seeds;
  std::vector<int> pathless;  // capped flows without links: at their cap, nothing to solve
  for (std::size_t i = 0; i < paths.size(); ++i) {
    const int slot = start_flow(paths[i], caps[i], weights_of(i));
    ids.push_back(id_of(slot));
    if (paths[i].empty()) pathless.push_back(slot);
    seeds.insert(seeds.end(), paths[i].begin(), paths[i].end());
  }
  for (int slot : pathless) flows_[static_cast<std::size_t>(slot)].rate = flows_[static_cast<std::size_t>(slot)].cap;
  std::sort(seeds.begin(), seeds.end());
  seeds.erase(std::unique(seeds.begin(), seeds.end()), seeds.end());
  if (seeds.empty()) {
    last_resolved_ = 0;
  } else {
    resolve_from(seeds);
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
    const auto l = static_cast<std::size_t>(path[i]);
    return (capacity_[l] - load_[l]) / f.w(i);
  };
  double residual = cap;
  for (std::size_t i = 0; i < path.size(); ++i) residual = std::min(residual, room(i));
  bool fast = residual > 0.0;
  if (fast && residual < cap) {
    // The flow fills the links where the residual is smallest; it is fair there only
    // if no flow already on them is faster.
    for (std::size_t i = 0; i < path.size(); ++i) {
      const LinkId l = path[i];
      const double res = room(i);
      if (res > residual + kRelTol * capacity_[static_cast<std::size_t>(l)] / f.w(i)) continue;
      for (int other : link_flows_[static_cast<std::size_t>(l)]) {
        if (flows_[static_cast<std::size_t>(other)].rate > residual * (1.0 + kRelTol)) fast = false;
      }
    }
  }
  if (fast) {
    f.rate = residual;
    for (std::size_t i = 0; i < path.size(); ++i) load_[static_cast<std::size_t>(path[i])] += residual * f.w(i);
    last_resolved_ = 0;
  } else {
    resolve_from(path);
  }
  return id_of(slot);
}

bool FlowSharing::end_flow(int slot, std::vector<LinkId>& links_out) {
  Flow& f = flows_[static_cast<std::size_t>(slot)];
  bool any_saturated = false;
  for (LinkId l : f.path) any_saturated = any_saturated || saturated(l);
  links_out.insert(links_out.end(), f.path.begin(), f.path.end());
  detach(slot);
  f.live = false;
  f.path.clear();
  f.position.clear();
  f.changed = false;
  --live_;
  free_slots_.push_back(slot);
  return any_saturated;
}

void FlowSharing::remove(FlowId id) {
  const int slot = slot_of(id);
  std::vector<LinkId> links;
  if (end_flow(slot, links)) {
    resolve_from(links);
  } else {
    last_resolved_ = 0;
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
  std::vector<LinkId> links;
  bool any_saturated = false;
  for (int slot : slots) any_saturated = end_flow(slot, links) || any_saturated;
  std::sort(links.begin(), links.end());
  links.erase(std::unique(links.begin(), links.end()), links.end());
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
  flow_local_.resize(flows_.size(), -1);

  // The affected set S. Rates can only move through links that are full (a flow's
  // bottleneck), so from the seed links S grows through full links only. Flows left
  // out keep their rates as fixed load. After solving S, a link that was not full
  // but is now, and carries flows outside S, pulls them in (they may now be unfair);
  // then S is solved again. The result is the unique max-min allocation, found while
  // touching only the flows a change can move.
  std::vector<int>& flows = scratch_flows_;
  std::vector<LinkId>& links = scratch_links_;  // every link of S's flows
  flows.clear();
  links.clear();
  std::vector<LinkId> frontier;
  auto add_link = [&](LinkId l) {
    if (link_epoch_[static_cast<std::size_t>(l)] == epoch_) return;
    link_epoch_[static_cast<std::size_t>(l)] = epoch_;
    link_local_[static_cast<std::size_t>(l)] = static_cast<int>(links.size());
    links.push_back(l);
  };
  auto add_flow = [&](int slot) {
    if (flow_epoch_[static_cast<std::size_t>(slot)] == epoch_) return;
    flow_epoch_[static_cast<std::size_t>(slot)] = epoch_;
    flow_local_[static_cast<std::size_t>(slot)] = static_cast<int>(flows.size());
    flows.push_back(slot);
    for (LinkId m : flows_[static_cast<std::size_t>(slot)].path) {
      const bool fresh = link_epoch_[static_cast<std::size_t>(m)] != epoch_;
      add_link(m);
      if (fresh && saturated(m)) frontier.push_back(m);
    }
  };
  auto grow = [&]() {
    while (!frontier.empty()) {
      LinkId l = frontier.back();
      frontier.pop_back();
      for (int slot : link_flows_[static_cast<std::size_t>(l)]) add_flow(slot);
    }
  };
  for (LinkId l : seed_links) {
    if (link_epoch_[static_cast<std::size_t>(l)] != epoch_) {
      add_link(l);
      frontier.push_back(l);  // seed links are always crossed
    }
  }
  grow();

  std::vector<double>& new_rate = scratch_rate_;
  std::vector<double>& avail = scratch_avail_;
  std::vector<double>& in_s_old = scratch_old_;
  std::vector<double>& in_s_new = scratch_new_;
  last_rounds_ = 0;
  while (true) {
    ++last_rounds_;
    const std::size_t nl = links.size();
    // Capacity left to S on each link: the capacity less the rates of flows outside S.
    avail.assign(nl, 0.0);
    in_s_old.assign(nl, 0.0);
    for (int slot : flows) {
      const Flow& f = flows_[static_cast<std::size_t>(slot)];
      for (std::size_t j = 0; j < f.path.size(); ++j) {
        in_s_old[static_cast<std::size_t>(link_local_[static_cast<std::size_t>(f.path[j])])] += f.rate * f.w(j);
      }
    }
    for (std::size_t k = 0; k < nl; ++k) {
      const double outside = std::max(0.0, load_[static_cast<std::size_t>(links[k])] - in_s_old[k]);
      avail[k] = std::max(0.0, capacity_[static_cast<std::size_t>(links[k])] - outside);
    }
    fill(avail, new_rate);

    // Links newly full that carry flows outside S: widen S and solve again.
    bool widened = false;
    in_s_new.assign(nl, 0.0);
    for (std::size_t i = 0; i < flows.size(); ++i) {
      const Flow& f = flows_[static_cast<std::size_t>(flows[i])];
      for (std::size_t j = 0; j < f.path.size(); ++j) {
        in_s_new[static_cast<std::size_t>(link_local_[static_cast<std::size_t>(f.path[j])])] += new_rate[i] * f.w(j);
      }
    }
    const std::size_t nl_now = links.size();
    for (std::size_t k = 0; k < nl_now; ++k) {
      const LinkId l = links[k];
      if (saturated(l) || in_s_new[k] < avail[k] * (1.0 - kRelTol)) continue;
      for (int slot : link_flows_[static_cast<std::size_t>(l)]) {
        if (flow_epoch_[static_cast<std::size_t>(slot)] != epoch_) {
          add_flow(slot);
          widened = true;
        }
      }
    }
    grow();
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

void FlowSharing::fill(const std::vector<double>& avail, std::vector<double>& new_rate) {
  // Progressive filling over S. Unfrozen flows share one level x; link k fills when
  // frozen_k + unfrozen_weight_k · x = avail_k (frozen_k: the frozen flows' weighted
  // rates; the weight sum is the unfrozen count for plain flows). Events sit in a heap with lazy deletion (a
  // link's entry is current when its version matches).
  const std::vector<int>& flows = scratch_flows_;
  const std::vector<LinkId>& links = scratch_links_;
  const std::size_t nl = links.size();
  std::vector<double>& frozen = scratch_frozen_;
  std::vector<int>& unfrozen = scratch_unfrozen_;
  std::vector<double>& unfrozen_weight = scratch_unfrozen_weight_;
  std::vector<std::uint32_t>& version = scratch_version_;
  std::vector<char>& done = scratch_done_;
  frozen.assign(nl, 0.0);
  unfrozen.assign(nl, 0);
  unfrozen_weight.assign(nl, 0.0);
  version.assign(nl, 0);
  done.assign(flows.size(), 0);
  new_rate.assign(flows.size(), 0.0);

  // A min-heap of events on a reused vector.
  std::vector<FillEvent>& heap = scratch_heap_;
  heap.clear();
  auto push = [&](const FillEvent& e) {
    heap.push_back(e);
    std::push_heap(heap.begin(), heap.end(), std::greater<FillEvent>());
  };
  for (std::size_t i = 0; i < flows.size(); ++i) {
    const Flow& f = flows_[static_cast<std::size_t>(flows[i])];
    for (std::size_t j = 0; j < f.path.size(); ++j) {
      const auto k = static_cast<std::size_t>(link_local_[static_cast<std::size_t>(f.path[j])]);
      ++unfrozen[k];
      unfrozen_weight[k] += f.w(j);
    }
    if (!std::isinf(f.cap)) push(FillEvent{f.cap, 1, static_cast<int>(i), 0});
  }
  // S's flows per link (compressed rows), so a filling link visits only them.
  std::vector<int>& offset = scratch_offset_;
  std::vector<int>& members = scratch_members_;
  offset.assign(nl + 1, 0);
  for (std::size_t k = 0; k < nl; ++k) offset[k + 1] = offset[k] + unfrozen[k];
  members.resize(static_cast<std::size_t>(offset[nl]));
  {
    std::vector<int>& cursor = scratch_cursor_;
    cursor.assign(offset.begin(), offset.end() - 1);
    for (std::size_t i = 0; i < flows.size(); ++i) {
      for (LinkId l : flows_[static_cast<std::size_t>(flows[i])].path) {
        members[static_cast<std::size_t>(cursor[static_cast<std::size_t>(link_local_[static_cast<std::size_t>(l)])]++)] =
            static_cast<int>(i);
      }
    }
  }
  for (std::size_t k = 0; k < nl; ++k) {
    if (unfrozen[k] > 0) push(FillEvent{avail[k] / unfrozen_weight[k], 0, static_cast<int>(k), 0});
  }
  auto freeze = [&](int i, double level) {
    done[static_cast<std::size_t>(i)] = 1;
    new_rate[static_cast<std::size_t>(i)] = level;
    const Flow& f = flows_[static_cast<std::size_t>(flows[static_cast<std::size_t>(i)])];
    for (std::size_t j = 0; j < f.path.size(); ++j) {
      const auto k = static_cast<std::size_t>(link_local_[static_cast<std::size_t>(f.path[j])]);
      frozen[k] += level * f.w(j);
      --unfrozen[k];
      unfrozen_weight[k] -= f.w(j);
      ++version[k];
      if (unfrozen[k] > 0) {
        const double x = (avail[k] - frozen[k]) / unfrozen_weight[k];
        push(FillEvent{std::max(x, level), 0, static_cast<int>(k), version[k]});
      }
    }
  };
  while (!heap.empty()) {
    std::pop_heap(heap.begin(), heap.end(), std::greater<FillEvent>());
    const FillEvent e = heap.back();
    heap.pop_back();
    if (e.kind == 1) {
      if (!done[static_cast<std::size_t>(e.index)]) freeze(e.index, e.level);
      continue;
    }
    const auto k = static_cast<std::size_t>(e.index);
    if (e.version != version[k] || unfrozen[k] == 0) continue;
    // Freeze every unfrozen S flow on this link at the level.
    for (int m = offset[k]; m < offset[k + 1]; ++m) {
      const int i = members[static_cast<std::size_t>(m)];
      if (!done[static_cast<std::size_t>(i)]) freeze(i, e.level);
    }
  }
}

}  // namespace strata::topo
