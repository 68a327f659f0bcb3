// The event engine alone, on task graphs built by hand: no model, no plan. Times
// are hand-computed from the durations and, for flows, from a network whose links
// are shared equally by the flows on them.
#include <map>
#include <set>

#include <gtest/gtest.h>

#include "core/error.h"
#include "core/progress.h"
#include "sim/engine/engine.h"
#include "sim/engine/task_graph.h"

namespace strata::sim {
namespace {

// Links of fixed capacity, each shared equally by the flows crossing it (which is
// max-min fair when every flow crosses one link); a flow never exceeds its cap.
class EqualShareLinks : public FlowModel {
 public:
  explicit EqualShareLinks(std::vector<double> capacity_bytes_per_s) : capacity_(std::move(capacity_bytes_per_s)) {}

  FlowId add(const std::vector<std::int32_t>& links, double cap, const std::vector<double>& weights) override {
    if (!weights.empty()) throw InternalError("EqualShareLinks: unweighted flows only");
    const FlowId id = next_++;
    flows_[id] = {links, cap, 0.0};
    update();
    return id;
  }
  void remove(FlowId id) override {
    flows_.erase(id);
    update();
  }
  double rate(FlowId id) const override { return flows_.at(id).rate; }
  std::vector<FlowId> take_changed() override {
    std::vector<FlowId> out(changed_.begin(), changed_.end());
    changed_.clear();
    return out;
  }

 private:
  struct Flow {
    std::vector<std::int32_t> links;
    double cap;
    double rate;
  };
  void update() {
    std::map<std::int32_t, int> users;
    for (const auto& [id, f] : flows_) {
      for (std::int32_t l : f.links) ++users[l];
    }
    for (auto& [id, f] : flows_) {
      double r = f.cap;
      for (std::int32_t l : f.links) r = std::min(r, capacity_[l] / users[l]);
      if (r != f.rate) changed_.insert(id);
      f.rate = r;
    }
  }
  std::vector<double> capacity_;
  std::map<FlowId, Flow> flows_;
  std::set<FlowId> changed_;
  FlowId next_ = 0;
};

constexpr TimeNs kMs = 1'000'000;

CommSpec transfer(double bytes, std::int32_t link, TimeNs latency_ns = 0) {
  CommSpec c;
  c.bytes = bytes;
  c.rate_cap_bytes_per_s = 1e12;  // the link, not the cap, is the limit
  c.links = {link};
  c.fixed = Duration::from_ns(latency_ns);
  return c;
}

// Two flows start together on one 1 GB/s link: 1 MB and 2 MB. Each gets 0.5 GB/s
// until the first ends at 2 ms (the second has sent 1 MB by then); the second then
// has the link alone and sends its last MB in 1 ms: ends at 3 ms, plus its 10 us latency.
TEST(EngineGraph, TwoFlowsShareOneLink) {
  TaskGraph g(2, 1);
  const std::int32_t small = g.add_comm(transfer(1e6, 0));
  const std::int32_t large = g.add_comm(transfer(2e6, 0, 10'000));
  const TaskId a = g.add_comm_task({{0, 0}}, small);
  const TaskId b = g.add_comm_task({{1, 0}}, large);
  g.finalize();
  EqualShareLinks net({1e9});
  const RunResult r = run_task_graph(g, &net);
  EXPECT_EQ(r.start_ns[a], 0);
  EXPECT_EQ(r.end_ns[a], 2 * kMs);
  EXPECT_EQ(r.end_ns[b], 3 * kMs + 10'000);
  EXPECT_EQ(r.makespan_ns, 3 * kMs + 10'000);
  // Without a network the same transfers run at their caps, independently.
  const RunResult alone = run_task_graph(g, nullptr);
  EXPECT_EQ(alone.end_ns[a], 1'000);  // 1 MB at 1 TB/s
  EXPECT_EQ(alone.end_ns[b], 2'000 + 10'000);
}

// A transfer in two parts (a ring's channels on two rails): 2 MB, each part 1 MB
// on its own 1 GB/s link at most at half the 2 GB/s cap; a 0.5 MB flow shares part
// A's link. Both on link 0 get 0.5 GB/s until the flow ends at 1 ms; part A has sent
// 0.5 MB and sends the rest at 1 GB/s: done at 1.5 ms. Part B, alone on link 1 at
// its cap, ended at 1 ms. The transfer ends with part A, plus its 10 us latency.
// As one flow over both links it would move at 0.5 GB/s until the flow ends (0.5 MB
// sent), then at 1 GB/s (its links' rate): done at 2.5 ms.
TEST(EngineGraph, ATransferInPartsEndsWithItsSlowestPart) {
  CommSpec parted;
  parted.bytes = 2e6;
  parted.rate_cap_bytes_per_s = 2e9;
  parted.fixed = Duration::from_ns(10'000);
  parted.links = {0, 1};
  for (std::int32_t link : {0, 1}) {
    CommPart part;
    part.share = 0.5;
    part.links = {link};
    parted.parts.push_back(part);
  }
  CommSpec whole = parted;
  whole.parts.clear();
  for (const CommSpec& x : {parted, whole}) {
    TaskGraph g(2, 1);
    const TaskId t = g.add_comm_task({{0, 0}}, g.add_comm(x));
    const TaskId y = g.add_comm_task({{1, 0}}, g.add_comm(transfer(0.5e6, 0)));
    g.finalize();
    EqualShareLinks net({1e9, 1e9});
    const RunResult r = run_task_graph(g, &net);
    EXPECT_EQ(r.end_ns[y], 1 * kMs);
    EXPECT_EQ(r.end_ns[t], (x.parts.empty() ? 2 * kMs + kMs / 2 : kMs + kMs / 2) + 10'000);
  }
}

// A stream runs its tasks in order; a dependency across ranks waits for its task.
TEST(EngineGraph, AChainOnAStreamAndAcrossRanks) {
  TaskGraph g(2, 2);
  const TaskId t0 = g.add_compute(0, 0, Duration::from_ns(3));
  const TaskId t1 = g.add_compute(0, 0, Duration::from_ns(5));
  const TaskId t2 = g.add_compute(0, 0, Duration::from_ns(7));
  const TaskId other = g.add_compute(1, 1, Duration::from_ns(4));  // rank 1, its second stream
  g.add_dependency(t1, other);
  g.finalize();
  const RunResult r = run_task_graph(g, nullptr);
  EXPECT_EQ(r.end_ns[t0], 3);
  EXPECT_EQ(r.start_ns[t1], 3);
  EXPECT_EQ(r.end_ns[t2], 15);
  EXPECT_EQ(r.start_ns[other], 8);
  EXPECT_EQ(r.end_ns[other], 12);
  EXPECT_EQ(r.blocker[other], t1);
  EXPECT_EQ(r.blocker[t1], t0);  // its stream predecessor
  EXPECT_EQ(r.blocker[t0], -1);
  EXPECT_EQ(r.makespan_ns, 15);
}

// A -> (B, C) -> D on four ranks: D starts when the longer branch ends.
TEST(EngineGraph, ADiamondWaitsForItsLongerBranch) {
  TaskGraph g(4, 1);
  const TaskId a = g.add_compute(0, 0, Duration::from_ns(2));
  const TaskId b = g.add_compute(1, 0, Duration::from_ns(3));
  const TaskId c = g.add_compute(2, 0, Duration::from_ns(5));
  const TaskId d = g.add_compute(3, 0, Duration::from_ns(1));
  g.add_dependency(a, b);
  g.add_dependency(a, c);
  g.add_dependency(b, d);
  g.add_dependency(c, d);
  g.finalize();
  const RunResult r = run_task_graph(g, nullptr);
  EXPECT_EQ(r.start_ns[b], 2);
  EXPECT_EQ(r.start_ns[c], 2);
  EXPECT_EQ(r.start_ns[d], 7);
  EXPECT_EQ(r.blocker[d], c);
  EXPECT_EQ(r.makespan_ns, 8);
}

// A long run reports how far it is every kEngineProgressEvents events: tasks done
// (never more than the graph's, never going back) and the events so far; a
// progress function that throws stops the run.
TEST(EngineGraph, ALongRunReportsItsProgress) {
  const int n = 3 * static_cast<int>(kEngineProgressEvents) + 5;
  TaskGraph g(1, 1);
  for (int i = 0; i < n; ++i) g.add_compute(0, 0, Duration::from_ns(1));
  g.finalize();
  std::vector<std::int64_t> done;
  const RunResult r = run_task_graph(g, nullptr, [&](std::int64_t tasks_done, std::int64_t tasks, std::int64_t events) {
    EXPECT_EQ(tasks, n);
    EXPECT_EQ(events % kEngineProgressEvents, 0);
    done.push_back(tasks_done);
  });
  EXPECT_EQ(r.events, n);
  // One event per task here: reports after 2^16, 2^17 and 3 * 2^16 tasks, the
  // report made before the event it counts is handled.
  ASSERT_EQ(done.size(), 3u);
  EXPECT_EQ(done[0], kEngineProgressEvents - 1);
  EXPECT_EQ(done[2], 3 * kEngineProgressEvents - 1);
  EXPECT_THROW(run_task_graph(g, nullptr, [](std::int64_t, std::int64_t, std::int64_t) { throw Cancelled(); }),
               Cancelled);
}

// A shared task holds every stream it runs on: the next task of either waits.
TEST(EngineGraph, ASharedTaskHoldsAllItsStreams) {
  TaskGraph g(2, 1);
  const TaskId solo = g.add_compute(1, 0, Duration::from_ns(4));
  const TaskId shared = g.add_shared_compute({0, 1}, 0, Duration::from_ns(6));
  const TaskId after = g.add_compute(0, 0, Duration::from_ns(1));
  g.finalize();
  const RunResult r = run_task_graph(g, nullptr);
  EXPECT_EQ(r.start_ns[shared], 4);  // waits for rank 1's stream
  EXPECT_EQ(r.start_ns[after], 10);
  EXPECT_EQ(r.end_ns[solo], 4);
}

// Beside each of a task's slots, the next task on that stream (what the engine
// releases when the task ends), by hand: rank 0 stream 0 runs a, shared, c; rank 1
// stream 0 runs b, shared; rank 1 stream 1 runs d alone.
TEST(EngineGraph, EachSlotKnowsTheNextTaskOnItsStream) {
  TaskGraph g(2, 2);
  const TaskId a = g.add_compute(0, 0, Duration::from_ns(1));
  const TaskId b = g.add_compute(1, 0, Duration::from_ns(1));
  const TaskId shared = g.add_shared_compute({0, 1}, 0, Duration::from_ns(1));
  const TaskId c = g.add_compute(0, 0, Duration::from_ns(1));
  const TaskId d = g.add_compute(1, 1, Duration::from_ns(1));
  g.finalize();
  auto next = [&](TaskId t) {
    std::map<std::int32_t, TaskId> out;  // slot -> next task there
    for (std::int32_t i = 0; g.slots_begin(t) + i != g.slots_end(t); ++i) {
      out[g.slots_begin(t)[i]] = g.next_on_streams_begin(t)[i];
    }
    return out;
  };
  EXPECT_EQ(next(a), (std::map<std::int32_t, TaskId>{{0, shared}}));
  EXPECT_EQ(next(b), (std::map<std::int32_t, TaskId>{{2, shared}}));
  EXPECT_EQ(next(shared), (std::map<std::int32_t, TaskId>{{0, c}, {2, -1}}));
  EXPECT_EQ(next(c), (std::map<std::int32_t, TaskId>{{0, -1}}));
  EXPECT_EQ(next(d), (std::map<std::int32_t, TaskId>{{3, -1}}));
  const RunResult r = run_task_graph(g, nullptr);
  EXPECT_EQ(r.start_ns[shared], 1);
  EXPECT_EQ(r.start_ns[c], 2);
  EXPECT_EQ(r.start_ns[d], 0);
}

TEST(EngineGraph, ACycleIsADeadlock) {
  TaskGraph g(1, 2);
  const TaskId x = g.add_compute(0, 0, Duration::from_ns(1));
  const TaskId y = g.add_compute(0, 1, Duration::from_ns(1));
  g.add_dependency(x, y);
  g.add_dependency(y, x);
  g.finalize();
  EXPECT_THROW(run_task_graph(g, nullptr), InternalError);
}

}  // namespace
}  // namespace strata::sim
