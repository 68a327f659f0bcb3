// Routing and link sharing at scale (Google Benchmark). Numbers go to
// docs/performance.md with the command and the machine.
//
//   cmake --build build/<dir> --target strata_topo_bench
//   STRATA_DATA_DIR=$PWD build/<dir>/tests/bench/strata_topo_bench
#include <chrono>
#include <cstdlib>
#include <ctime>
#include <memory>
#include <random>

#include <benchmark/benchmark.h>

#include "core/collective.h"
#include "core/units.h"
#include "topologies/cluster_spec.h"
#include "topologies/collective_model.h"
#include "topologies/flow_sharing.h"
#include "topologies/topology.h"

namespace strata::topo {
namespace {

// DGX H100 nodes on NDR InfiniBand (64-port switches, rail-optimized, non-blocking).
ClusterSpec h100_cluster(int nodes) {
  if (std::getenv("STRATA_DATA_DIR") == nullptr) setenv("STRATA_DATA_DIR", STRATA_SOURCE_DIR, 1);
  ClusterSpec c = load_cluster_spec("dgx-h100-128node");
  c.nodes = nodes;
  return c;
}

// 16,384 GPUs: 2,048 nodes, a 3-tier fat-tree (512 leaves, 512 spines, 1,024 cores).
const Topology& topology_16k() {
  static const Topology t = Topology::build(h100_cluster(2048));
  return t;
}

// 1,024 GPUs: 128 nodes, the scale the simulator's full-fidelity runs target.
const Topology& topology_1k() {
  static const Topology t = Topology::build(h100_cluster(128));
  return t;
}

void BM_Build16k(benchmark::State& state) {
  ClusterSpec c = h100_cluster(2048);
  for (auto _ : state) {
    Topology t = Topology::build(c);
    benchmark::DoNotOptimize(t.num_links());
  }
  state.counters["links"] = topology_16k().num_links();
  state.counters["vertices"] = topology_16k().num_vertices();
}
BENCHMARK(BM_Build16k)->Unit(benchmark::kMillisecond)->Iterations(3);

// Random GPU pairs anywhere in the 16,384-GPU cluster (most cross pods: 9-hop paths).
void BM_Route16kRandomPairs(benchmark::State& state) {
  const Topology& t = topology_16k();
  std::mt19937_64 rng(1);
  std::vector<std::pair<int, int>> pairs;
  for (int i = 0; i < 4096; ++i) {
    int a = static_cast<int>(rng() % 16384), b = static_cast<int>(rng() % 16384);
    pairs.emplace_back(a, a == b ? (b + 1) % 16384 : b);
  }
  std::size_t i = 0;
  for (auto _ : state) {
    const auto& [a, b] = pairs[i++ % pairs.size()];
    benchmark::DoNotOptimize(t.route(a, b, i));
  }
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_Route16kRandomPairs);

// Rail-aligned routes, as NCCL's rings use them.
void BM_Route16kViaRail(benchmark::State& state) {
  const Topology& t = topology_16k();
  std::mt19937_64 rng(2);
  std::vector<std::pair<int, int>> pairs;
  for (int i = 0; i < 4096; ++i) {
    int a = static_cast<int>(rng() % 16384);
    int node_b = static_cast<int>(rng() % 2048);
    pairs.emplace_back(a, node_b * 8 + a % 8);
  }
  std::size_t i = 0;
  for (auto _ : state) {
    const auto& [a, b] = pairs[i++ % pairs.size()];
    if (a != b) benchmark::DoNotOptimize(t.route_via_rail(a, b, a % 8, i));
  }
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_Route16kViaRail);

// Background traffic of a training step on the cluster: in every node an NVLS
// tensor-parallel all-reduce (16 flows to and from the NVSwitch, capped), and
// data-parallel rings between the nodes on every rail (one capped flow per edge).
// Each collective's flows start together (FlowSharing::add_all, one re-solve per
// collective), as the engine starts them.
void add_collective(FlowSharing& s, const std::vector<FlowSpec>& flows) {
  std::vector<std::vector<LinkId>> paths;
  std::vector<double> caps;
  for (const FlowSpec& f : flows) {
    paths.push_back(f.path);
    caps.push_back(f.rate_cap_bytes_per_s);
  }
  s.add_all(paths, caps);
}

void add_background(const Topology& t, const CollectiveModel& m, FlowSharing& s) {
  const int nodes = t.num_nodes();
  for (int n = 0; n < nodes; ++n) {
    std::vector<int> tp;
    for (int l = 0; l < 8; ++l) tp.push_back(n * 8 + l);
    add_collective(s, m.flows(CollectiveOp::kAllReduce, tp, 64 * kMiB).flows);
  }
  for (int l = 0; l < 8; ++l) {
    std::vector<int> dp;
    for (int n = 0; n < nodes; ++n) dp.push_back(n * 8 + l);
    add_collective(s, m.flows(CollectiveOp::kAllReduce, dp, 256 * kMiB).flows);
  }
}

// A topology with its background traffic, built once per process: Google Benchmark
// calls each benchmark function several times (to size the iteration count and per
// repetition), and the 16k background takes far longer to build than the updates
// measured on it. Every benchmark below leaves the flows as it found them.
struct Loaded {
  const Topology& t;
  CollectiveModel m;
  FlowSharing s;
  double build_wall_s = 0.0;  // building the background once (wall clock)
  double build_cpu_s = 0.0;   // and in process CPU time
  explicit Loaded(const Topology& topology) : t(topology), m(topology, default_nccl_tuning()), s(topology) {
    const auto wall0 = std::chrono::steady_clock::now();
    const std::clock_t cpu0 = std::clock();
    add_background(t, m, s);
    build_cpu_s = static_cast<double>(std::clock() - cpu0) / CLOCKS_PER_SEC;
    build_wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - wall0).count();
    s.take_changed();
  }
};

Loaded& loaded_16k() {
  static Loaded l(topology_16k());
  return l;
}

Loaded& loaded_1k() {
  static Loaded l(topology_1k());
  return l;
}

// Building the background itself: every node's NVLS all-reduce and the 8 rails' DP
// rings added flow by flow (each add an incremental update).
void BM_Background1k(benchmark::State& state) {
  const Topology& t = topology_1k();
  for (auto _ : state) {
    CollectiveModel m(t, default_nccl_tuning());
    FlowSharing s(t);
    add_background(t, m, s);
    benchmark::DoNotOptimize(s.live_flows());
    state.counters["flows"] = s.live_flows();
  }
}
BENCHMARK(BM_Background1k)->Unit(benchmark::kMillisecond)->Iterations(1);

// One add and one remove of an uncapped inter-node flow (a pipeline send between
// random GPUs) on top of the background; reports the flows re-solved per update.
void flow_sharing_add_remove(benchmark::State& state, Loaded& l) {
  const Topology& t = l.t;
  FlowSharing& s = l.s;
  std::mt19937_64 rng(3);
  std::vector<std::vector<LinkId>> paths;
  for (int i = 0; i < 1024; ++i) {
    int a = static_cast<int>(rng() % t.num_gpus()), b = static_cast<int>(rng() % t.num_gpus());
    if (t.node_of(a) == t.node_of(b)) b = (b + 8) % t.num_gpus();
    paths.push_back(t.route(a, b, i));
  }
  double resolved = 0.0;
  std::size_t i = 0;
  for (auto _ : state) {
    FlowSharing::FlowId f = s.add(paths[i++ % paths.size()], FlowSharing::kNoCap);
    resolved += s.last_resolved_flows();
    s.remove(f);
    resolved += s.last_resolved_flows();
    benchmark::DoNotOptimize(s.take_changed());
  }
  state.SetItemsProcessed(2 * state.iterations());
  state.counters["live_flows"] = s.live_flows();
  state.counters["background_cpu_s"] = l.build_cpu_s;
  state.counters["background_wall_s"] = l.build_wall_s;
  state.counters["resolved_per_update"] = resolved / (2.0 * static_cast<double>(state.iterations()));
}

void BM_FlowSharing16kAddRemove(benchmark::State& state) { flow_sharing_add_remove(state, loaded_16k()); }
BENCHMARK(BM_FlowSharing16kAddRemove)->Unit(benchmark::kMicrosecond);

void BM_FlowSharing1kAddRemove(benchmark::State& state) { flow_sharing_add_remove(state, loaded_1k()); }
BENCHMARK(BM_FlowSharing1kAddRemove)->Unit(benchmark::kMicrosecond);

// The common case in a step: one node's tensor-parallel all-reduce starts and ends
// (16 capped NVLS flows, added and removed together) while everything else runs.
void BM_FlowSharing1kTensorParallelCollective(benchmark::State& state) {
  Loaded& loaded = loaded_1k();
  const Topology& t = loaded.t;
  const CollectiveModel& m = loaded.m;
  FlowSharing& s = loaded.s;
  std::vector<std::vector<FlowSpec>> collectives;
  for (int n = 0; n < t.num_nodes(); ++n) {
    std::vector<int> tp;
    for (int l = 0; l < 8; ++l) tp.push_back(n * 8 + l);
    collectives.push_back(m.flows(CollectiveOp::kAllReduce, tp, 16 * kMiB).flows);
  }
  std::vector<std::vector<std::vector<LinkId>>> paths(collectives.size());
  std::vector<std::vector<double>> caps(collectives.size());
  for (std::size_t c = 0; c < collectives.size(); ++c) {
    for (const FlowSpec& f : collectives[c]) {
      paths[c].push_back(f.path);
      caps[c].push_back(f.rate_cap_bytes_per_s);
    }
  }
  std::size_t i = 0;
  for (auto _ : state) {
    const std::size_t c = i++ % collectives.size();
    s.remove_all(s.add_all(paths[c], caps[c]));
    benchmark::DoNotOptimize(s.take_changed());
  }
  state.SetItemsProcessed(static_cast<std::int64_t>(2 * 16) * state.iterations());
}
BENCHMARK(BM_FlowSharing1kTensorParallelCollective)->Unit(benchmark::kMicrosecond);

// NCCL's model for an all-reduce over all 16,384 GPUs, from a cold cache (the ring
// and channel search included).
void BM_AllReduceEstimate16kCold(benchmark::State& state) {
  const Topology& t = topology_16k();
  std::vector<int> all;
  for (int g = 0; g < t.num_gpus(); ++g) all.push_back(g);
  for (auto _ : state) {
    CollectiveModel m(t, default_nccl_tuning());
    benchmark::DoNotOptimize(m.estimate(CollectiveOp::kAllReduce, all, kGiB));
  }
}
BENCHMARK(BM_AllReduceEstimate16kCold)->Unit(benchmark::kMillisecond)->Iterations(3);

}  // namespace
}  // namespace strata::topo

BENCHMARK_MAIN();
