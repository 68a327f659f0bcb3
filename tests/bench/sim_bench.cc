// The simulator's speed (Google Benchmark): one GPT-3 175B step on 1,024 A100
// (tp 8, pp 8, dp 16, micro-batch 1, global batch 1536) at both fidelities, a
// sweep's per-plan cost, and a ZeRO-2 step at full fidelity where the link
// sharing (re-solves and link-group upkeep) costs as much as the event loop. Numbers go to
// docs/performance.md with the command and the machine.
//
//   cmake --build build/release --target strata_sim_bench
//   STRATA_DATA_DIR=$PWD build/release/tests/bench/strata_sim_bench
#include <cstdlib>
#include <memory>

#include <benchmark/benchmark.h>
#include <nlohmann/json.hpp>

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

// Llama-3 70B in the default 1,024-GPU sweep's ZeRO-2 family (tp 2, cp 2, pp 4,
// vpp 5, ZeRO-2 after every micro-batch) on 32 of dgx-h100-128node's nodes (dp 16,
// global batch 256): the data-parallel rings reach the other GPUs' NICs through
// NVLink, so the tensor-parallel collectives and context-parallel transfers on
// those ports keep reshaping the rings' link groups and re-solving around them
// (FlowSharing) all step long.
struct ZeroTwo {
  Scenario s;
  ZeroTwo() {
    if (std::getenv("STRATA_DATA_DIR") == nullptr) setenv("STRATA_DATA_DIR", STRATA_SOURCE_DIR, 1);
    s = load_scenario_inputs("llama3-70b", "dgx-h100-128node", "");
    s.cluster.nodes = 32;
    const nlohmann::json plan = {
        {"tp", 2}, {"cp", 2}, {"pp", 4}, {"dp", 16}, {"vpp", 5}, {"micro_batch_size", 1},
        {"global_batch_size", 256}, {"schedule", "interleaved-1f1b"}, {"zero_stage", 2},
        {"recompute", "none"}, {"sequence_parallel", true}, {"flash_attention", true},
        {"rank_order", "tp-cp-ep-dp-pp"}};
    read_scenario_plan(s, plan, "sim_bench.cc", "$", false);
  }
};

// Full fidelity, from cold, like BM_Gpt3SimulateCold/1.
void BM_ZeroTwoFullFidelity(benchmark::State& state) {
  static const ZeroTwo z;
  SimulationOptions o;
  o.fidelity = Fidelity::kFull;
  o.keep_timeline = false;
  std::int64_t events = 0;
  double step = 0.0;
  for (auto _ : state) {
    Simulator simulator(z.s.cluster, z.s.profile);
    SimulationResult r = simulator.run(z.s.model, z.s.plan, o);
    events = r.events;
    step = r.metrics.step_time_s;  // read after the loop: nothing to keep from the optimizer
  }
  state.counters["events"] = static_cast<double>(events);
  state.counters["events_per_s"] = benchmark::Counter(static_cast<double>(events), benchmark::Counter::kIsIterationInvariantRate);
  state.counters["step_s"] = step;
}
BENCHMARK(BM_ZeroTwoFullFidelity)->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace strata

BENCHMARK_MAIN();
