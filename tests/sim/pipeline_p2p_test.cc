// Blocking pipeline sends (the framework profile's pipeline_p2p): Megatron waits
// on its p2p requests before the schedule's next op; Strata's runtime does not.
#include <gtest/gtest.h>

#include "core/error.h"
#include "fake_costs.h"
#include "sim/engine/engine.h"
#include "sim/workload/workload.h"
#include "test_models.h"

namespace strata::sim {
namespace {

PlanSpec two_stages() {
  PlanSpec p;
  p.pp = 2;
  p.dp = 1;
  p.micro_batch_size = 1;
  p.global_batch_size = 4;  // four micro-batches
  p.schedule = Schedule::kOneFOneB;
  return p;
}

// Two stages of one layer, a 10 us GEMM each, sends of 50 us (fixed): with
// blocking sends each op after a send starts no earlier than the send ends;
// without, the first stage runs its next forward while its send is in flight.
TEST(PipelineP2p, ABlockingSendHoldsTheStagesNextOp) {
  const ModelSpec m = strata::testing::small_gpt(2);
  const testing::GemmCountCosts costs(10'000, m.vocab_size);
  const testing::AlphaBetaComm comm(50'000, 1e30);
  WorkloadOptions blocking;
  blocking.blocking_pipeline_sends = true;
  const PlanSpec p = two_stages();
  const Workload async_w = build_workload(m, p, costs, comm, Fidelity::kFull);
  const Workload block_w = build_workload(m, p, costs, comm, Fidelity::kFull, blocking);
  const RunResult async_r = run_task_graph(async_w.graph, nullptr);
  const RunResult block_r = run_task_graph(block_w.graph, nullptr);
  // Stage 0's sends and its compute, in program order.
  auto overlapped = [](const Workload& w, const RunResult& r) {
    int n = 0;
    const auto sends = w.stream(0, StreamKind::kPpSend);
    const auto compute = w.stream(0, StreamKind::kCompute);
    for (TaskId s : sends) {
      for (TaskId c : compute) n += (r.start_ns[c] >= r.start_ns[s] && r.start_ns[c] < r.end_ns[s]) ? 1 : 0;
    }
    return n;
  };
  ASSERT_EQ(async_w.stream(0, StreamKind::kPpSend).size(), 4u);  // 4 forwards' activations
  EXPECT_GT(overlapped(async_w, async_r), 0);
  EXPECT_EQ(overlapped(block_w, block_r), 0);
  EXPECT_GT(block_r.makespan_ns, async_r.makespan_ns);
}

// What a stage sends per tensor-parallel rank: with sequence parallelism its
// 1/tp of the activation (s*b*h/tp values); without, the whole tensor (Megatron-
// Core, strata run), or 1/tp with Megatron-LM's scatter/gather.
TEST(PipelineP2p, EachTensorParallelRankSendsWhatItHolds) {
  const ModelSpec m = strata::testing::small_gpt(2);
  const testing::GemmCountCosts costs(10'000, m.vocab_size / 2);
  const testing::AlphaBetaComm comm(1'000, 1e9);
  PlanSpec p = two_stages();
  p.tp = 2;
  const double whole = static_cast<double>(m.seq_length) * m.hidden_size * dtype_bytes(p.dtype);
  auto sent = [&](const PlanSpec& plan, bool scatter_gather) {
    WorkloadOptions o;
    o.pipeline_scatter_gather = scatter_gather;
    const Workload w = build_workload(m, plan, costs, comm, Fidelity::kFull, o);
    const auto sends = w.stream(0, StreamKind::kPpSend);
    return sends.empty() ? -1.0 : w.notes.info(sends.front()).bytes;
  };
  EXPECT_EQ(sent(p, false), whole);
  EXPECT_EQ(sent(p, true), whole / 2);
  p.sequence_parallel = true;
  EXPECT_EQ(sent(p, false), whole / 2);
  EXPECT_TRUE(load_framework_profile("megatron-lm-2021").pipeline_p2p->scatter_gather);
  EXPECT_FALSE(load_framework_profile("megatron-core").pipeline_p2p->scatter_gather);
}

TEST(PipelineP2p, ProfilesSayWhenMegatronWaits) {
  const FrameworkProfile sc21 = load_framework_profile("megatron-lm-2021");
  ASSERT_TRUE(sc21.pipeline_p2p);
  EXPECT_TRUE(sc21.pipeline_p2p->blocks(1));
  EXPECT_TRUE(sc21.pipeline_p2p->blocks(4));  // no p2p overlap before 2023
  for (const char* f : {"megatron-core", "nemo-2024"}) {
    SCOPED_TRACE(f);
    const FrameworkProfile mc = load_framework_profile(f);
    ASSERT_TRUE(mc.pipeline_p2p);
    EXPECT_TRUE(mc.pipeline_p2p->blocks(1));
    EXPECT_FALSE(mc.pipeline_p2p->blocks(2));  // the interleaved schedule overlaps p2p
  }
  EXPECT_FALSE(load_framework_profile("strata-runtime").pipeline_p2p);
  try {
    read_framework_profile(nlohmann::json::parse(R"({"name": "f", "description": "d", "source": "s",
        "pipeline_p2p": {"source": "s", "blocking": "sometimes"}})"),
                           "f.json");
    FAIL() << "an unknown blocking mode";
  } catch (const InputError& e) {
    EXPECT_EQ(e.json_path(), "$.pipeline_p2p.blocking");
  }
}

}  // namespace
}  // namespace strata::sim
