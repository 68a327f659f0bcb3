// DeepSpeed ZeRO-3's per-module gathers (sim/workload/module_gathers.h) against
// traces worked through by hand with stage3.py's rules (v0.3.13).
#include <gtest/gtest.h>

#include <map>

#include "core/error.h"
#include "sim/workload/module_gathers.h"

namespace strata::sim {
namespace {

constexpr std::int64_t kM = 1'000'000;

ModuleGather deepspeed_defaults() {
  ModuleGather g;  // the v0.3.13 defaults
  g.prefetch_bucket_elements = 50 * kM;
  g.max_live_elements = 1000 * kM;
  g.max_reuse_distance_elements = 1000 * kM;
  return g;
}

// Module ids and sizes (M elements) in order; every parameter partitioned.
std::vector<ModuleUse> trace_of(const std::vector<std::pair<int, std::int64_t>>& uses) {
  std::vector<ModuleUse> t;
  for (const auto& [id, millions] : uses) t.push_back({id, millions * kM, millions * kM});
  return t;
}

// How often each module is gathered over the trace (fetched or prefetched).
std::map<int, int> gathers_per_module(const std::vector<HookGathers>& plan) {
  std::map<int, int> n;
  for (const HookGathers& h : plan) {
    for (int m : h.fetched) ++n[m];
    for (int m : h.prefetched) ++n[m];
  }
  return n;
}

// GPT-3 175B's weights at tp 1, one layer forward: QKV 453M, proj 151M, fc1 and
// fc2 604M each. The first is fetched; every later one was prefetched at the hook
// before it (one module: each is above the 50M bucket), so each hook waits for it
// and prefetches the next; each is freed after use (no reuse within 1e9).
TEST(ModuleGathers, EachHookPrefetchesTheNextModuleAndFreesItsOwn) {
  const auto plan = plan_module_gathers(trace_of({{0, 453}, {1, 151}, {2, 604}, {3, 604}}), deepspeed_defaults());
  ASSERT_EQ(plan.size(), 4u);
  EXPECT_EQ(plan[0].fetched, std::vector<int>({0}));
  for (std::size_t i = 1; i < 4; ++i) EXPECT_TRUE(plan[i].fetched.empty()) << i;
  EXPECT_EQ(plan[0].prefetched, std::vector<int>({1}));
  EXPECT_EQ(plan[1].prefetched, std::vector<int>({2}));
  EXPECT_EQ(plan[2].prefetched, std::vector<int>({3}));
  EXPECT_TRUE(plan[3].prefetched.empty());
  for (const HookGathers& h : plan) {
    EXPECT_TRUE(h.waits);
    EXPECT_TRUE(h.releases);
  }
}

// Small modules: the bucket takes modules until it holds at least 25 elements
// (10 + 10 + 10 after the fetched first); the next hook waits for all three, and
// nothing is left to prefetch.
TEST(ModuleGathers, ThePrefetchBucketTakesModulesUntilItIsFull) {
  ModuleGather g = deepspeed_defaults();
  g.prefetch_bucket_elements = 25;
  const auto plan = plan_module_gathers({{0, 10, 10}, {1, 10, 10}, {2, 10, 10}, {3, 10, 10}}, g);
  EXPECT_EQ(plan[0].fetched, std::vector<int>({0}));
  EXPECT_EQ(plan[0].prefetched, std::vector<int>({1, 2, 3}));
  EXPECT_TRUE(plan[1].waits);
  EXPECT_TRUE(plan[1].prefetched.empty());
  EXPECT_FALSE(plan[2].waits);  // its parameters arrived with the wait at hook 1
  EXPECT_FALSE(plan[3].waits);
}

// With 600M-element modules and at most 500M live, nothing is ever prefetched:
// every hook fetches its own module and waits for it.
TEST(ModuleGathers, MaxLiveParametersStopPrefetching) {
  ModuleGather g = deepspeed_defaults();
  g.max_live_elements = 500 * kM;
  const auto plan = plan_module_gathers(trace_of({{0, 600}, {1, 600}, {2, 600}}), g);
  for (std::size_t i = 0; i < plan.size(); ++i) {
    EXPECT_EQ(plan[i].fetched, std::vector<int>({static_cast<int>(i)})) << i;
    EXPECT_TRUE(plan[i].prefetched.empty()) << i;
    EXPECT_TRUE(plan[i].waits) << i;
  }
}

// A layer with full recompute: forward a b c d, its replay a b c d, backward
// d c b a (GPT-3 175B sizes). Between the replay of d and its backward no other
// module runs: distance 0, so d stays gathered and its backward gathers nothing.
// a, b and c are used again only after more than 1e9 elements (c: d + d = 1208M)
// and are gathered three times; d twice.
TEST(ModuleGathers, AModuleUsedAgainSoonStaysGathered) {
  const auto plan = plan_module_gathers(trace_of({{0, 453}, {1, 151}, {2, 604}, {3, 604},  // forward
                                                  {0, 453}, {1, 151}, {2, 604}, {3, 604},  // recompute
                                                  {3, 604}, {2, 604}, {1, 151}, {0, 453}}),  // backward
                                        deepspeed_defaults());
  EXPECT_FALSE(plan[7].releases);  // d's replay
  EXPECT_TRUE(plan[6].releases);   // c's replay
  EXPECT_FALSE(plan[8].waits);     // d's backward: nothing to wait for
  EXPECT_TRUE(plan[8].fetched.empty());
  const std::map<int, int> n = gathers_per_module(plan);
  EXPECT_EQ(n.at(0), 3);
  EXPECT_EQ(n.at(1), 3);
  EXPECT_EQ(n.at(2), 3);
  EXPECT_EQ(n.at(3), 2);
}

// Modules whose parameters are all below the persistence threshold (norms,
// biases) stay gathered: never fetched or prefetched, their hooks never wait.
TEST(ModuleGathers, PersistentModulesAreNeverGathered) {
  std::vector<ModuleUse> t = {{0, 0, 12288}, {1, 453 * kM, 453 * kM}, {2, 0, 12288}, {3, 604 * kM, 604 * kM}};
  const auto plan = plan_module_gathers(t, deepspeed_defaults());
  EXPECT_EQ(plan[0].prefetched, std::vector<int>({1}));  // the norm's hook prefetches the QKV
  EXPECT_FALSE(plan[0].waits);
  EXPECT_TRUE(plan[1].waits);
  EXPECT_EQ(plan[1].prefetched, std::vector<int>({3}));  // the next partitioned module
  EXPECT_FALSE(plan[2].waits);
  EXPECT_FALSE(plan[2].releases);
  const std::map<int, int> n = gathers_per_module(plan);
  EXPECT_EQ(n.count(0), 0u);
  EXPECT_EQ(n.count(2), 0u);
}

}  // namespace
}  // namespace strata::sim
