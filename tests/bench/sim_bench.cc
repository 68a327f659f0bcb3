// The simulator's speed (Google Benchmark): one GPT-3 175B step on 1,024 A100
// (tp 8, pp 8, dp 16, micro-batch 1, global batch 1536) at both fidelities, and a
// sweep's per-plan cost. Numbers go to docs/performance.md with the command and
// the machine.
//
//   cmake --build build/release --target strata_sim_bench
//   STRATA_DATA_DIR=$PWD build/release/tests/bench/strata_sim_bench
#include <cstdlib>
#include <memory>

#include <benchmark/benchmark.h>

#include "costmodel/profile.h"
#include "sim/scenario.h"
#include "sim/simulate.h"
#include "topologies/cluster_spec.h"

namespace strata {
using namespace strata::sim;
namespace {

struct Gpt3 {
  Scenario s;
  Gpt3() {
    if (std::getenv("STRATA_DATA_DIR") == nullptr) setenv("STRATA_DATA_DIR", STRATA_SOURCE_DIR, 1);
    ScenarioArgs a;
    a.model = "gpt3-175b";
    a.plan = "gpt3-175b-1024";
    a.cluster = "dgx-a100-128node";
    s = load_scenario(a);
  }
};

const Gpt3& gpt3() {
  static const Gpt3 g;
  return g;
}

// A fresh Simulator each time: topology, collective model and costs from cold,
// as `strata simulate` pays them.
void BM_Gpt3SimulateCold(benchmark::State& state) {
  const Scenario& s = gpt3().s;
  SimulationOptions o;
  o.fidelity = state.range(0) ? Fidelity::kFull : Fidelity::kFolded;
  o.keep_timeline = false;
  std::int64_t events = 0;
  for (auto _ : state) {
    Simulator simulator(s.cluster, s.profile);
    SimulationResult r = simulator.run(s.model, s.plan, o);
    events = r.events;
    benchmark::DoNotOptimize(r.metrics.step_time_s);
  }
  state.counters["events"] = static_cast<double>(events);
  state.counters["events_per_s"] = benchmark::Counter(static_cast<double>(events), benchmark::Counter::kIsIterationInvariantRate);
  state.SetLabel(state.range(0) ? "full" : "folded");
}
BENCHMARK(BM_Gpt3SimulateCold)->Arg(0)->Arg(1)->Unit(benchmark::kMillisecond);

// The Simulator kept (a sweep's situation): the plan's own work only.
void BM_Gpt3FoldedWarm(benchmark::State& state) {
  const Scenario& s = gpt3().s;
  Simulator simulator(s.cluster, s.profile);
  SimulationOptions o;
  o.fidelity = Fidelity::kFolded;
  o.keep_timeline = false;
  simulator.run(s.model, s.plan, o);  // warms the collective cache
  for (auto _ : state) {
    SimulationResult r = simulator.run(s.model, s.plan, o);
    benchmark::DoNotOptimize(r.metrics.step_time_s);
  }
}
BENCHMARK(BM_Gpt3FoldedWarm)->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace strata

BENCHMARK_MAIN();
