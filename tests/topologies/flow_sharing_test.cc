// Max-min fair sharing: textbook cases asserted exactly, and the incremental update
// against a from-scratch progressive filling on random workloads.
#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <random>

#include <gtest/gtest.h>

#include "core/error.h"
#include "test_clusters.h"
#include "topologies/flow_sharing.h"

namespace strata::topo {
namespace {

using FlowId = FlowSharing::FlowId;

// Two flows on one link of 10 share it equally (Bertsekas & Gallager, Data Networks,
// 2nd ed., section 6.5.2).
TEST(FlowSharing, TwoFlowsShareOneLink) {
  FlowSharing s(std::vector<double>{10.0});
  FlowId a = s.add({0}, FlowSharing::kNoCap);
  EXPECT_EQ(s.rate(a), 10.0);
  FlowId b = s.add({0}, FlowSharing::kNoCap);
  EXPECT_EQ(s.rate(a), 5.0);
  EXPECT_EQ(s.rate(b), 5.0);
  EXPECT_EQ(s.take_changed(), (std::vector<FlowId>{a, b}));
  EXPECT_TRUE(s.take_changed().empty());
}

// A flow crossing two bottlenecks: link 0 (10) carries flows 1 and 2, link 1 (6)
// flows 2 and 3. Link 1 fills first at 3 each; flow 1 then takes the rest of link 0.
TEST(FlowSharing, FlowCrossingTwoBottlenecks) {
  FlowSharing s(std::vector<double>{10.0, 6.0});
  FlowId f1 = s.add({0}, FlowSharing::kNoCap);
  FlowId f2 = s.add({0, 1}, FlowSharing::kNoCap);
  FlowId f3 = s.add({1}, FlowSharing::kNoCap);
  EXPECT_EQ(s.rate(f1), 7.0);
  EXPECT_EQ(s.rate(f2), 3.0);
  EXPECT_EQ(s.rate(f3), 3.0);
}

// A flow leaving frees bandwidth for the others: without flow 3, link 1 (6) no longer
// binds flow 2, and link 0 (10) is shared 5 / 5.
TEST(FlowSharing, FlowLeavingFreesBandwidth) {
  FlowSharing s(std::vector<double>{10.0, 6.0});
  FlowId f1 = s.add({0}, FlowSharing::kNoCap);
  FlowId f2 = s.add({0, 1}, FlowSharing::kNoCap);
  FlowId f3 = s.add({1}, FlowSharing::kNoCap);
  s.take_changed();
  s.remove(f3);
  EXPECT_EQ(s.rate(f1), 5.0);
  EXPECT_EQ(s.rate(f2), 5.0);
  EXPECT_EQ(s.take_changed(), (std::vector<FlowId>{f1, f2}));
  EXPECT_EQ(s.live_flows(), 2);
  EXPECT_THROW(s.rate(f3), InternalError);
  EXPECT_THROW(s.remove(f3), InternalError);
}

// The parking lot: a long flow over three links of 1, a short flow on each link.
TEST(FlowSharing, ParkingLot) {
  FlowSharing s(std::vector<double>{1.0, 1.0, 1.0});
  FlowId lng = s.add({0, 1, 2}, FlowSharing::kNoCap);
  std::vector<FlowId> shorts = {s.add({0}, FlowSharing::kNoCap), s.add({1}, FlowSharing::kNoCap),
                                s.add({2}, FlowSharing::kNoCap)};
  EXPECT_EQ(s.rate(lng), 0.5);
  for (FlowId f : shorts) EXPECT_EQ(s.rate(f), 0.5);
}

// A rate cap binds before the link: the capped flow keeps its cap, the other takes the rest.
TEST(FlowSharing, RateCapBinds) {
  FlowSharing s(std::vector<double>{10.0});
  FlowId capped = s.add({0}, 2.0);
  FlowId free = s.add({0}, FlowSharing::kNoCap);
  EXPECT_EQ(s.rate(capped), 2.0);
  EXPECT_EQ(s.rate(free), 8.0);
}

TEST(FlowSharing, UnaffectedFlowsAreNotResolved) {
  FlowSharing s(std::vector<double>{10.0, 10.0});
  s.add({0}, FlowSharing::kNoCap);
  s.add({0}, FlowSharing::kNoCap);
  // A capped flow below the residual of an untouched link: nobody else moves.
  FlowId c = s.add({1}, 4.0);
  EXPECT_EQ(s.last_resolved_flows(), 0);
  EXPECT_EQ(s.rate(c), 4.0);
  // A flow joining the full link re-solves that link's three flows, not the capped one.
  s.add({0}, FlowSharing::kNoCap);
  EXPECT_EQ(s.last_resolved_flows(), 3);
}

// A long flow over 8 links of 10, held to 2 on a link of 4 it shares with B; a
// short flow on each of the 8 took the rest (8). When B leaves, the long flow
// could run at 4, so every short flow must give way: each is faster than it on a
// full link of its path. The re-solve takes them all in its second round, not one
// per round (a data-parallel part meeting one saturated NVLink port per round).
// Then the long flow is at 4 (the small link), the short flows at 6.
TEST(FlowSharing, AFlowHeldOnManyFullLinksTakesAllTheirFasterFlowsAtOnce) {
  constexpr int kHops = 8;
  std::vector<double> capacity(kHops, 10.0);
  capacity.push_back(4.0);  // link kHops
  FlowSharing s(capacity);
  std::vector<LinkId> long_path;
  for (int k = 0; k <= kHops; ++k) long_path.push_back(k);
  const FlowId lng = s.add(long_path, FlowSharing::kNoCap);
  const FlowId b = s.add({kHops}, FlowSharing::kNoCap);
  std::vector<FlowId> shorts;
  for (int k = 0; k < kHops; ++k) shorts.push_back(s.add({k}, FlowSharing::kNoCap));
  ASSERT_EQ(s.rate(lng), 2.0);
  for (FlowId f : shorts) ASSERT_EQ(s.rate(f), 8.0);

  s.remove(b);
  EXPECT_EQ(s.rate(lng), 4.0);
  for (FlowId f : shorts) EXPECT_EQ(s.rate(f), 6.0);
  EXPECT_EQ(s.last_resolved_flows(), kHops + 1);
  EXPECT_EQ(s.last_resolve_rounds(), 2);  // one short flow per round would take kHops + 1
}

// D (a data-parallel part) runs alone on link 0 of 2, its NIC, and crosses link 1
// of 4, a GPU's NVLink port, beside T, held at 2 on its own link 2 of 2. Link 1 is
// full and D ties T as the fastest there, so both links certify D's rate. When T
// ends, link 0 still does (full, D alone, and T never crossed it): D keeps its 2
// without a re-solve.
TEST(FlowSharing, AFlowHeldOnALinkTheChangeLeavesAloneIsNotResolved) {
  FlowSharing s(std::vector<double>{2.0, 4.0, 2.0});
  const FlowId d = s.add({0, 1}, FlowSharing::kNoCap);
  const FlowId t = s.add({1, 2}, FlowSharing::kNoCap);
  ASSERT_EQ(s.rate(d), 2.0);
  ASSERT_EQ(s.rate(t), 2.0);
  s.take_changed();
  s.remove(t);
  EXPECT_EQ(s.last_resolved_flows(), 0);
  EXPECT_EQ(s.rate(d), 2.0);
  EXPECT_TRUE(s.take_changed().empty());
}

// A full link of 10: D1 and D2 cross it at 1 each, held on their own links of 1;
// F took the rest, 8. T joins and first gets nothing: every flow there is faster
// than T. Only F must give way: the level where T and the faster flows meet, with
// the slower ones kept, is 4 (4 + 1 + 1 + 4 = 10), above D1 and D2. The re-solve
// takes T and F (not four flows), and T = F = 4.
TEST(FlowSharing, ANewFlowTakesItsShareOnlyFromTheFlowsAboveItsLevel) {
  FlowSharing s(std::vector<double>{10.0, 1.0, 1.0});
  const FlowId d1 = s.add({0, 1}, FlowSharing::kNoCap);
  const FlowId d2 = s.add({0, 2}, FlowSharing::kNoCap);
  const FlowId f = s.add({0}, FlowSharing::kNoCap);
  ASSERT_EQ(s.rate(f), 8.0);
  const FlowId t = s.add({0}, FlowSharing::kNoCap);
  EXPECT_EQ(s.last_resolved_flows(), 2);
  EXPECT_EQ(s.rate(t), 4.0);
  EXPECT_EQ(s.rate(f), 4.0);
  EXPECT_EQ(s.rate(d1), 1.0);
  EXPECT_EQ(s.rate(d2), 1.0);
}

TEST(FlowSharing, BadArgumentsAreInternalErrors) {
  FlowSharing s(std::vector<double>{10.0});
  EXPECT_THROW(s.add({1}, FlowSharing::kNoCap), InternalError);
  EXPECT_THROW(s.add({0}, 0.0), InternalError);
  EXPECT_THROW(s.add({}, FlowSharing::kNoCap), InternalError);
  EXPECT_THROW(s.rate(12345), InternalError);
  // A link twice in one path, refused before anything changes.
  EXPECT_THROW(s.add({0, 0}, FlowSharing::kNoCap), InternalError);
  EXPECT_THROW(s.add_all({{0}, {0, 0}}, {FlowSharing::kNoCap, FlowSharing::kNoCap}), InternalError);
  EXPECT_EQ(s.live_flows(), 0);
  EXPECT_EQ(s.rate(s.add({0}, FlowSharing::kNoCap)), 10.0);
}

// Links that carry the same flows with the same weights and have the same capacity
// form one group; groups split as flows start on some of their links and merge
// back as those end, whether or not the group they split from still lives.
TEST(FlowSharing, LinkGroupsSplitAndMerge) {
  FlowSharing s(std::vector<double>{10.0, 10.0, 10.0, 4.0});
  const FlowId a = s.add({0, 1, 2}, FlowSharing::kNoCap);
  EXPECT_EQ(s.live_groups(), 1);
  const FlowId b = s.add({1}, FlowSharing::kNoCap);  // {a} on 0 and 2, {a, b} on 1
  EXPECT_EQ(s.live_groups(), 2);
  EXPECT_EQ(s.rate(a), 5.0);
  const FlowId c = s.add({2}, FlowSharing::kNoCap);  // {a}, {a, b}, {a, c}
  EXPECT_EQ(s.live_groups(), 3);
  s.remove(b);  // link 1 back with link 0, its group's parent
  EXPECT_EQ(s.live_groups(), 2);
  EXPECT_EQ(s.rate(a), 5.0);
  EXPECT_EQ(s.rate(c), 5.0);
  s.remove(c);
  EXPECT_EQ(s.live_groups(), 1);
  EXPECT_EQ(s.rate(a), 10.0);
  s.remove(a);
  EXPECT_EQ(s.live_groups(), 0);

  // The parent gone: d's group on 0 and 1 splits wholly into {d, e} and {d, f};
  // e's end makes {d} afresh for link 0, f's end finds it for link 1.
  const FlowId d = s.add({0, 1}, FlowSharing::kNoCap);
  const FlowId e = s.add({0}, FlowSharing::kNoCap);
  const FlowId f = s.add({1}, FlowSharing::kNoCap);
  EXPECT_EQ(s.live_groups(), 2);
  s.remove(e);
  EXPECT_EQ(s.live_groups(), 2);
  s.remove(f);
  EXPECT_EQ(s.live_groups(), 1);
  EXPECT_EQ(s.rate(d), 10.0);
  s.remove(d);

  // Another capacity or another weight: another group.
  const FlowId g = s.add({0, 1, 2, 3}, FlowSharing::kNoCap, {1.0, 1.0, 2.0, 1.0});
  EXPECT_EQ(s.live_groups(), 3);
  EXPECT_EQ(s.rate(g), 4.0);  // link 3 (4.0) binds, below link 2's 10 / 2
}

// A flow as the from-scratch reference sees it: its links, a weight per link, its cap.
struct RefFlow {
  std::vector<LinkId> path;
  std::vector<double> weight;
  double cap;
};

// A from-scratch progressive filling, the textbook way: raise every unfrozen flow by
// the smallest increment that fills a link (where sum of weight x rate reaches the
// capacity) or reaches a cap, freeze, repeat.
std::map<FlowId, double> weighted_reference_rates(const std::vector<double>& capacity,
                                                  const std::map<FlowId, RefFlow>& flows) {
  std::map<FlowId, double> rate;
  std::map<FlowId, bool> frozen;
  for (const auto& [id, f] : flows) {
    rate[id] = 0.0;
    frozen[id] = false;
  }
  while (true) {
    std::vector<double> used(capacity.size(), 0.0), active(capacity.size(), 0.0);
    for (const auto& [id, f] : flows) {
      for (std::size_t i = 0; i < f.path.size(); ++i) {
        used[static_cast<std::size_t>(f.path[i])] += f.weight[i] * rate[id];
        if (!frozen[id]) active[static_cast<std::size_t>(f.path[i])] += f.weight[i];
      }
    }
    double step = std::numeric_limits<double>::infinity();
    bool any = false;
    for (const auto& [id, f] : flows) {
      if (frozen[id]) continue;
      any = true;
      step = std::min(step, f.cap - rate[id]);
    }
    if (!any) break;
    for (std::size_t l = 0; l < capacity.size(); ++l) {
      if (active[l] > 0) step = std::min(step, (capacity[l] - used[l]) / active[l]);
    }
    for (auto& [id, r] : rate) {
      if (!frozen[id]) r += step;
    }
    std::fill(used.begin(), used.end(), 0.0);
    for (const auto& [id, f] : flows) {
      for (std::size_t i = 0; i < f.path.size(); ++i) used[static_cast<std::size_t>(f.path[i])] += f.weight[i] * rate[id];
    }
    for (const auto& [id, f] : flows) {
      if (frozen[id]) continue;
      bool stop = rate[id] >= f.cap * (1 - 1e-12);
      for (LinkId l : f.path) {
        stop = stop || used[static_cast<std::size_t>(l)] >= capacity[static_cast<std::size_t>(l)] * (1 - 1e-12);
      }
      if (stop) frozen[id] = true;
    }
  }
  return rate;
}

// The same for plain flows (weight 1 on every link).
std::map<FlowId, double> reference_rates(const std::vector<double>& capacity,
                                         const std::map<FlowId, std::pair<std::vector<LinkId>, double>>& flows) {
  std::map<FlowId, RefFlow> plain;
  for (const auto& [id, f] : flows) plain[id] = {f.first, std::vector<double>(f.first.size(), 1.0), f.second};
  return weighted_reference_rates(capacity, plain);
}

TEST(FlowSharing, IncrementalMatchesFromScratch) {
  std::mt19937_64 rng(20240611);
  std::vector<double> capacity;
  for (int l = 0; l < 24; ++l) capacity.push_back(1.0 + static_cast<double>(rng() % 9));
  FlowSharing s(capacity);
  std::map<FlowId, std::pair<std::vector<LinkId>, double>> live;
  for (int op = 0; op < 400; ++op) {
    if (live.empty() || rng() % 3 != 0) {
      std::vector<LinkId> path;
      int len = 1 + static_cast<int>(rng() % 4);
      for (int i = 0; i < len; ++i) {
        LinkId l = static_cast<LinkId>(rng() % capacity.size());
        if (std::find(path.begin(), path.end(), l) == path.end()) path.push_back(l);
      }
      double cap = rng() % 2 ? FlowSharing::kNoCap : 0.25 + static_cast<double>(rng() % 8) / 2.0;
      live[s.add(path, cap)] = {path, cap};
    } else {
      auto it = live.begin();
      std::advance(it, static_cast<long>(rng() % live.size()));
      s.remove(it->first);
      live.erase(it);
    }
    if (op % 20 == 19) {
      std::map<FlowId, double> expect = reference_rates(capacity, live);
      for (const auto& [id, r] : expect) {
        EXPECT_NEAR(s.rate(id), r, 1e-9 * std::max(1.0, r)) << "after op " << op;
      }
    }
  }
}

// Weighted flows (a collective as one flow whose links carry different shares of
// its bytes): rates rise together, link l fills when the sum of w x rate reaches
// its capacity.
TEST(FlowSharing, WeightedFlowsShareByTheirWeights) {
  // Alone: min(10 / 1, 4 / 0.25) = 10; the light link is not the bottleneck.
  FlowSharing alone(std::vector<double>{10.0, 4.0});
  const FlowId solo = alone.add({0, 1}, FlowSharing::kNoCap, {1.0, 0.25});
  EXPECT_EQ(alone.rate(solo), 10.0);

  // A puts twice its rate on link 0 (12): alone it runs at 6. B joins with weight
  // 1: equal rates x with 2x + x = 12, so 4 each.
  FlowSharing s(std::vector<double>{12.0, 2.0, 100.0});
  const FlowId a = s.add({0, 2}, FlowSharing::kNoCap, {2.0, 1.0});
  EXPECT_EQ(s.rate(a), 6.0);
  const FlowId b = s.add({0}, FlowSharing::kNoCap);
  EXPECT_DOUBLE_EQ(s.rate(a), 4.0);
  EXPECT_DOUBLE_EQ(s.rate(b), 4.0);
  // C crosses link 1 (2) and link 0 with weight 0.5: link 1 holds it at 2, so it
  // puts 1 on link 0; A and B share the 11 left: 3x = 11.
  const FlowId c = s.add({1, 0}, FlowSharing::kNoCap, {1.0, 0.5});
  EXPECT_DOUBLE_EQ(s.rate(c), 2.0);
  EXPECT_DOUBLE_EQ(s.rate(a), 11.0 / 3.0);
  EXPECT_DOUBLE_EQ(s.rate(b), 11.0 / 3.0);
  // B leaves: A takes link 0's 11 at weight 2.
  s.remove(b);
  EXPECT_DOUBLE_EQ(s.rate(a), 5.5);
  EXPECT_DOUBLE_EQ(s.rate(c), 2.0);

  EXPECT_THROW(s.add({0, 1}, FlowSharing::kNoCap, {1.0}), InternalError);
  EXPECT_THROW(s.add({0}, FlowSharing::kNoCap, {0.0}), InternalError);
  EXPECT_THROW(s.add({0}, FlowSharing::kNoCap, {std::numeric_limits<double>::infinity()}), InternalError);
}

// Weight 1 on every link is a plain flow, bit for bit.
TEST(FlowSharing, UnitWeightsAreThePlainFlow) {
  std::mt19937_64 rng(7);
  std::vector<double> capacity;
  for (int l = 0; l < 12; ++l) capacity.push_back(1.0 + static_cast<double>(rng() % 7));
  FlowSharing plain(capacity), weighted(capacity);
  std::vector<std::pair<FlowId, FlowId>> ids;
  for (int i = 0; i < 60; ++i) {
    std::vector<LinkId> path;
    for (int k = 0; k < 1 + static_cast<int>(rng() % 3); ++k) {
      const auto l = static_cast<LinkId>(rng() % capacity.size());
      if (std::find(path.begin(), path.end(), l) == path.end()) path.push_back(l);
    }
    const double cap = rng() % 2 ? FlowSharing::kNoCap : 0.5 + static_cast<double>(rng() % 6) / 2.0;
    ids.emplace_back(plain.add(path, cap), weighted.add(path, cap, std::vector<double>(path.size(), 1.0)));
    if (i % 4 == 3) {
      plain.remove(ids.front().first);
      weighted.remove(ids.front().second);
      ids.erase(ids.begin());
    }
    for (const auto& [p, w] : ids) ASSERT_EQ(plain.rate(p), weighted.rate(w)) << "after flow " << i;
  }
}

// Weighted flows added and removed at random against a from-scratch weighted
// progressive filling.
TEST(FlowSharing, WeightedIncrementalMatchesFromScratch) {
  std::mt19937_64 rng(20261202);
  std::vector<double> capacity;
  for (int l = 0; l < 16; ++l) capacity.push_back(1.0 + static_cast<double>(rng() % 9));
  FlowSharing s(capacity);
  std::map<FlowId, RefFlow> live;
  for (int op = 0; op < 300; ++op) {
    if (live.empty() || rng() % 3 != 0) {
      RefFlow f;
      for (int i = 0; i < 1 + static_cast<int>(rng() % 4); ++i) {
        const auto l = static_cast<LinkId>(rng() % capacity.size());
        if (std::find(f.path.begin(), f.path.end(), l) != f.path.end()) continue;
        f.path.push_back(l);
        f.weight.push_back(0.125 * static_cast<double>(1 + rng() % 16));  // 1/8 .. 2
      }
      f.cap = rng() % 2 ? FlowSharing::kNoCap : 0.25 + static_cast<double>(rng() % 8) / 2.0;
      live[s.add(f.path, f.cap, f.weight)] = f;
    } else {
      auto it = live.begin();
      std::advance(it, static_cast<long>(rng() % live.size()));
      s.remove(it->first);
      live.erase(it);
    }
    if (op % 15 == 14) {
      for (const auto& [id, r] : weighted_reference_rates(capacity, live)) {
        EXPECT_NEAR(s.rate(id), r, 1e-9 * std::max(1.0, r)) << "after op " << op;
      }
    }
  }
}

// Flows starting and ending together: the same allocation as one by one. The
// crossing-bottlenecks case added at once gives 7 / 3 / 3; removing flows 2 and 3
// together leaves flow 1 the whole of link 0.
TEST(FlowSharing, BatchOfFlows) {
  FlowSharing s(std::vector<double>{10.0, 6.0});
  std::vector<FlowId> ids = s.add_all({{0}, {0, 1}, {1}, {}}, {FlowSharing::kNoCap, FlowSharing::kNoCap,
                                                              FlowSharing::kNoCap, 2.5});
  ASSERT_EQ(ids.size(), 4u);
  EXPECT_EQ(s.rate(ids[0]), 7.0);
  EXPECT_EQ(s.rate(ids[1]), 3.0);
  EXPECT_EQ(s.rate(ids[2]), 3.0);
  EXPECT_EQ(s.rate(ids[3]), 2.5);  // no links: at its cap
  EXPECT_EQ(s.take_changed(), ids);
  s.remove_all({ids[1], ids[2]});
  EXPECT_EQ(s.rate(ids[0]), 10.0);
  EXPECT_EQ(s.take_changed(), (std::vector<FlowId>{ids[0]}));
  EXPECT_EQ(s.live_flows(), 2);
  EXPECT_THROW(s.remove_all({ids[0], ids[0]}), InternalError);
  EXPECT_THROW(s.add_all({{0}}, {}), InternalError);
  EXPECT_EQ(s.live_flows(), 2);  // a rejected batch changes nothing
}

// A weighted batch, hand-solved: link 0 (10) carries r0 + 2 r1, link 1 (6) carries
// r1 / 2 + r2. Filling together, link 0 fills first at r = 10/3 (3r = 10; link 1
// would allow 4), freezing flows 0 and 1; flow 2 takes what link 1 has left,
// 6 - 5/3 = 13/3. Added one by one, the same.
TEST(FlowSharing, WeightedBatchOfFlows) {
  const std::vector<std::vector<LinkId>> paths = {{0}, {0, 1}, {1}};
  const std::vector<double> caps(3, FlowSharing::kNoCap);
  const std::vector<std::vector<double>> weights = {{1.0}, {2.0, 0.5}, {}};
  FlowSharing batch(std::vector<double>{10.0, 6.0});
  const std::vector<FlowId> ids = batch.add_all(paths, caps, weights);
  EXPECT_NEAR(batch.rate(ids[0]), 10.0 / 3, 1e-12);
  EXPECT_NEAR(batch.rate(ids[1]), 10.0 / 3, 1e-12);
  EXPECT_NEAR(batch.rate(ids[2]), 13.0 / 3, 1e-12);
  FlowSharing one_by_one(std::vector<double>{10.0, 6.0});
  for (std::size_t i = 0; i < paths.size(); ++i) {
    const FlowId id = one_by_one.add(paths[i], caps[i], weights[i]);
    if (i + 1 == paths.size()) {
      EXPECT_NEAR(one_by_one.rate(id), 13.0 / 3, 1e-12);
    }
  }
  EXPECT_THROW(batch.add_all({{0}}, {1.0}, {{1.0}, {1.0}}), InternalError);  // one weight list per path
  EXPECT_THROW(batch.add_all({{0}}, {1.0}, {{0.0}}), InternalError);         // weights > 0
}

TEST(FlowSharing, BatchesMatchFromScratch) {
  std::mt19937_64 rng(20261129);
  std::vector<double> capacity;
  for (int l = 0; l < 24; ++l) capacity.push_back(1.0 + static_cast<double>(rng() % 9));
  FlowSharing s(capacity);
  std::map<FlowId, std::pair<std::vector<LinkId>, double>> live;
  for (int op = 0; op < 200; ++op) {
    if (live.size() < 4 || rng() % 3 != 0) {
      std::vector<std::vector<LinkId>> paths;
      std::vector<double> caps;
      const int n = 1 + static_cast<int>(rng() % 6);
      for (int k = 0; k < n; ++k) {
        std::vector<LinkId> path;
        const int len = 1 + static_cast<int>(rng() % 4);
        for (int i = 0; i < len; ++i) {
          LinkId l = static_cast<LinkId>(rng() % capacity.size());
          if (std::find(path.begin(), path.end(), l) == path.end()) path.push_back(l);
        }
        paths.push_back(path);
        caps.push_back(rng() % 2 ? FlowSharing::kNoCap : 0.25 + static_cast<double>(rng() % 8) / 2.0);
      }
      std::vector<FlowId> ids = s.add_all(paths, caps);
      for (std::size_t k = 0; k < ids.size(); ++k) live[ids[k]] = {paths[k], caps[k]};
    } else {
      std::vector<FlowId> gone;
      const int n = 1 + static_cast<int>(rng() % 3);
      for (int k = 0; k < n && !live.empty(); ++k) {
        auto it = live.begin();
        std::advance(it, static_cast<long>(rng() % live.size()));
        gone.push_back(it->first);
        live.erase(it);
      }
      s.remove_all(gone);
    }
    std::map<FlowId, double> expect = reference_rates(capacity, live);
    for (const auto& [id, r] : expect) {
      ASSERT_NEAR(s.rate(id), r, 1e-9 * std::max(1.0, r)) << "after op " << op;
    }
  }
}

// The local re-solve against a from-scratch solve after every change, over many
// seeds: weighted flows, caps, batches, and the shape that makes components large
// on a cluster (long flows, as data-parallel rings, crossing many short ones'
// links, as tensor-parallel collectives on each node's NVLink).
TEST(FlowSharing, LocalResolvesMatchFromScratchOverManySeeds) {
  for (std::uint64_t seed = 1; seed <= 40; ++seed) {
    std::mt19937_64 rng(seed);
    std::vector<double> capacity;
    for (int l = 0; l < 20; ++l) capacity.push_back(1.0 + static_cast<double>(rng() % 9));
    FlowSharing s(capacity);
    std::map<FlowId, RefFlow> live;
    auto random_flow = [&] {
      RefFlow f;
      const bool long_flow = rng() % 4 == 0;
      const int len = long_flow ? 5 + static_cast<int>(rng() % 8) : 1 + static_cast<int>(rng() % 3);
      for (int i = 0; i < len; ++i) {
        const auto l = static_cast<LinkId>(rng() % capacity.size());
        if (std::find(f.path.begin(), f.path.end(), l) != f.path.end()) continue;
        f.path.push_back(l);
        f.weight.push_back(rng() % 2 ? 1.0 : 0.125 * static_cast<double>(1 + rng() % 16));
      }
      f.cap = rng() % 3 ? FlowSharing::kNoCap : 0.25 + static_cast<double>(rng() % 8) / 2.0;
      return f;
    };
    for (int op = 0; op < 120; ++op) {
      if (live.size() < 3 || rng() % 3 != 0) {
        std::vector<RefFlow> batch;
        for (int k = 0, n = 1 + static_cast<int>(rng() % 3); k < n; ++k) batch.push_back(random_flow());
        std::vector<std::vector<LinkId>> paths;
        std::vector<double> caps;
        std::vector<std::vector<double>> weights;
        for (const RefFlow& f : batch) {
          paths.push_back(f.path);
          caps.push_back(f.cap);
          weights.push_back(f.weight);
        }
        const std::vector<FlowId> ids = s.add_all(paths, caps, weights);
        for (std::size_t k = 0; k < ids.size(); ++k) live[ids[k]] = batch[k];
      } else {
        std::vector<FlowId> gone;
        for (int k = 0, n = 1 + static_cast<int>(rng() % 2); k < n && !live.empty(); ++k) {
          auto it = live.begin();
          std::advance(it, static_cast<long>(rng() % live.size()));
          gone.push_back(it->first);
          live.erase(it);
        }
        s.remove_all(gone);
      }
      for (const auto& [id, r] : weighted_reference_rates(capacity, live)) {
        ASSERT_NEAR(s.rate(id), r, 1e-9 * std::max(1.0, r)) << "seed " << seed << ", after op " << op;
      }
    }
  }
}

// Progressive filling finds its next event by a heap or, for a few flows, by a
// scan of the links: the two must meet the same events in the same order, so
// every rate is bit-identical (integer capacities make many ties, which the
// order must break the same way). Checked after each of 150 random adds, removes
// and batches per seed, with one FlowSharing always scanning and one never.
TEST(FlowSharing, ScanAndHeapFillGiveBitIdenticalRates) {
  for (std::uint64_t seed = 1; seed <= 30; ++seed) {
    std::mt19937_64 rng(seed);
    std::vector<double> capacity;
    for (int l = 0; l < 24; ++l) capacity.push_back(1.0 + static_cast<double>(rng() % 6));
    FlowSharing scanning(capacity);
    FlowSharing heap(capacity);
    scanning.set_scan_fill_max_flows(1 << 30);
    heap.set_scan_fill_max_flows(0);
    std::vector<std::pair<FlowId, FlowId>> live;  // the same flow in each
    for (int op = 0; op < 150; ++op) {
      if (live.size() < 4 || rng() % 3 != 0) {
        std::vector<std::vector<LinkId>> paths;
        std::vector<double> caps;
        std::vector<std::vector<double>> weights;
        for (int k = 0, n = 1 + static_cast<int>(rng() % 3); k < n; ++k) {
          const int len = rng() % 4 == 0 ? 6 + static_cast<int>(rng() % 10) : 1 + static_cast<int>(rng() % 3);
          std::vector<LinkId> path;
          std::vector<double> weight;
          for (int i = 0; i < len; ++i) {
            const auto l = static_cast<LinkId>(rng() % capacity.size());
            if (std::find(path.begin(), path.end(), l) != path.end()) continue;
            path.push_back(l);
            weight.push_back(rng() % 2 ? 1.0 : 0.25 * static_cast<double>(1 + rng() % 8));
          }
          paths.push_back(path);
          caps.push_back(rng() % 3 ? FlowSharing::kNoCap : 0.5 * static_cast<double>(1 + rng() % 6));
          weights.push_back(weight);
        }
        const std::vector<FlowId> a = scanning.add_all(paths, caps, weights);
        const std::vector<FlowId> b = heap.add_all(paths, caps, weights);
        for (std::size_t k = 0; k < a.size(); ++k) live.emplace_back(a[k], b[k]);
      } else {
        const std::size_t at = rng() % live.size();
        scanning.remove(live[at].first);
        heap.remove(live[at].second);
        live.erase(live.begin() + static_cast<long>(at));
      }
      for (const auto& [a, b] : live) {
        ASSERT_EQ(scanning.rate(a), heap.rate(b)) << "seed " << seed << ", after op " << op;
      }
    }
  }
}

// On a DGX A100: GPUs 0 and 2 both send to GPU 1; the NVSwitch-to-GPU 1 link (240 GB/s
// achievable) is shared, each gets half.
TEST(FlowSharing, OnTheTopology) {
  Topology t = Topology::build(testing::shipped("dgx-a100-1node"));
  FlowSharing s(t);
  FlowId a = s.add(t.route(0, 1), FlowSharing::kNoCap);
  FlowId b = s.add(t.route(2, 1), FlowSharing::kNoCap);
  EXPECT_DOUBLE_EQ(s.rate(a), 120e9);
  EXPECT_DOUBLE_EQ(s.rate(b), 120e9);
  s.remove(b);
  EXPECT_DOUBLE_EQ(s.rate(a), 240e9);
}

}  // namespace
}  // namespace strata::topo
