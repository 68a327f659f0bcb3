// The sequence-parallel backward's second all-gather of a column-parallel
// layer's input, and Megatron-LM's asynchronous column-parallel backward (the
// framework profile's tp_async_backward), against counts and times by hand.
#include <gtest/gtest.h>

#include "core/error.h"
#include "fake_costs.h"
#include "sim/engine/engine.h"
#include "sim/workload/segments.h"
#include "sim/workload/tp_overlap.h"
#include "sim/workload/workload.h"
#include "test_models.h"

namespace strata::sim {
namespace {

// The collectives of `segs` in order, and the first op after each.
struct CommAt {
  CollectiveOp op;
  double bytes;
  std::string next;  // the first op of the segment after it ("" at the end)
};
std::vector<CommAt> collectives(const std::vector<Segment>& segs) {
  std::vector<CommAt> out;
  for (std::size_t k = 0; k < segs.size(); ++k) {
    if (!segs[k].is_comm) continue;
    const bool has_next = k + 1 < segs.size() && !segs[k + 1].is_comm && !segs[k + 1].ops.empty();
    out.push_back({segs[k].op, segs[k].comm_bytes, has_next ? segs[k + 1].ops.front().name : ""});
  }
  return out;
}

PlanSpec tp2(bool sequence_parallel) {
  PlanSpec p;
  p.tp = 2;
  p.dp = 1;
  p.sequence_parallel = sequence_parallel;
  p.micro_batch_size = 1;
  p.global_batch_size = 1;
  return p;
}

// Korthikanti et al. 2022 section 4.2.2: with sequence parallelism the layer's
// backward has, besides the conjugates of the forward's two all-gathers and two
// reduce-scatters, an all-gather of QKV's and of fc1's input (the full residual
// stream, s*b*h values) before their data-gradient GEMMs; the head gathers the
// logits' input the same way. Before this was modelled the layer had 4.
TEST(SequenceParallelBackward, GathersEachColumnParallelInputAgainForItsWeightGradient) {
  const ModelSpec m = strata::testing::small_gpt(2);
  const testing::UniformCosts costs(1'000);
  const PlanSpec p = tp2(true);
  const double stream = static_cast<double>(m.seq_length) * m.hidden_size * dtype_bytes(p.dtype);
  const std::vector<CommAt> bwd = collectives(layer_segments(m, p, costs).backward);
  ASSERT_EQ(bwd.size(), 6u);
  const std::vector<std::pair<CollectiveOp, std::string>> expected = {
      {CollectiveOp::kAllGather, "fc2 bias bwd"},     // fc2's output gradient
      {CollectiveOp::kAllGather, "fc1 dgrad"},        // fc1's input, for fc1 wgrad
      {CollectiveOp::kReduceScatter, "post_attn_norm bwd"},
      {CollectiveOp::kAllGather, "proj bias bwd"},
      {CollectiveOp::kAllGather, "qkv dgrad"},
      {CollectiveOp::kReduceScatter, "input_norm bwd"}};
  for (std::size_t i = 0; i < expected.size(); ++i) {
    SCOPED_TRACE(i);
    EXPECT_EQ(bwd[i].op, expected[i].first);
    EXPECT_EQ(bwd[i].bytes, stream);
  }
  EXPECT_EQ(bwd[1].next, "fc1 dgrad");
  EXPECT_EQ(bwd[4].next, "qkv dgrad");
  const std::vector<CommAt> head = collectives(head_segments(m, p, costs).backward);
  ASSERT_EQ(head.size(), 2u);  // the logits' input gathered, the final norm's gradient reduce-scattered
  EXPECT_EQ(head[0].op, CollectiveOp::kAllGather);
  EXPECT_EQ(head[0].next, "logits dgrad");
  EXPECT_EQ(head[1].op, CollectiveOp::kReduceScatter);
  // Without sequence parallelism each rank holds the whole input: only the all-reduces.
  const std::vector<CommAt> plain = collectives(layer_segments(m, tp2(false), costs).backward);
  ASSERT_EQ(plain.size(), 2u);
  EXPECT_EQ(plain[0].op, CollectiveOp::kAllReduce);
  EXPECT_EQ(plain[1].op, CollectiveOp::kAllReduce);
}

// Megatron-LM's column-parallel backward: the gather beside the data-gradient
// GEMM, the input gradient's reduction beside the weight-gradient GEMM. Every
// layer GEMM costs 10 us and every collective 4 us (free bytes): each of a
// layer's column-parallel backward collectives leaves the tp-comm lane and the
// step is shorter by 4 us for each.
TEST(TpAsyncBackward, ColumnParallelCollectivesRunBesideTheirGemms) {
  ModelSpec m = strata::testing::small_gpt(2);
  m.vocab_size = 200;  // the logits GEMMs (n or k = 100) are free: their collectives show whole
  const testing::GemmCountCosts costs(10'000, m.vocab_size / 2);
  const testing::AlphaBetaComm comm(4'000, 1e30);
  WorkloadOptions async;
  async.tp_async_backward = TpAsyncBackward{0, "test"};
  auto layer_collectives = [](const Workload& w) {
    int n = 0;
    for (TaskId t : w.stream(0, StreamKind::kTpComm)) n += w.notes.info(t).layer >= 0 ? 1 : 0;
    return n;
  };
  auto makespan = [](const Workload& w) { return run_task_graph(w.graph, nullptr).makespan_ns; };
  struct Case {
    bool sequence_parallel;
    int plain;   // layer collectives per layer without the overlap
    int hidden;  // of those, the ones beside a GEMM with it
  };
  for (const Case c : {Case{false, 4, 2}, Case{true, 10, 4}}) {
    SCOPED_TRACE(c.sequence_parallel);
    const PlanSpec p = tp2(c.sequence_parallel);
    const Workload plain = build_workload(m, p, costs, comm, Fidelity::kFull);
    const Workload overlapped = build_workload(m, p, costs, comm, Fidelity::kFull, async);
    EXPECT_EQ(layer_collectives(plain), 2 * c.plain);
    EXPECT_EQ(layer_collectives(overlapped), 2 * (c.plain - c.hidden));
    // The logits' collectives are beside free GEMMs: max(0, 4 us) hides nothing.
    EXPECT_NEAR(static_cast<double>(makespan(plain) - makespan(overlapped)), 2 * c.hidden * 4'000.0,
                2 * c.hidden * 2.0);
  }
}

// The overlap table: NCCL's stream beside qkv's, fc1's and the logits' dgrad and
// wgrad. The GEMM's blocks fill the SMs NCCL's kernel leaves while it runs: a
// 10 us GEMM on 132 SMs beside a 4 us collective on 24 channels takes
// 10 + 4 * 24/132 = 10.727 us; a collective longer than the GEMM shows whole.
TEST(TpAsyncBackward, TheGemmLosesTheSmsNcclHoldsWhileItRuns) {
  const TpOverlap t = async_backward_overlap(TpAsyncBackward{0, "s"});
  ASSERT_EQ(t.gemms.size(), 12u);  // qkv, fc1, logits and MLA's q_up, kv_up, q_proj
  for (const char* g : {"qkv_dgrad", "qkv_wgrad", "fc1_dgrad", "fc1_wgrad", "logits_dgrad", "logits_wgrad"}) {
    SCOPED_TRACE(g);
    ASSERT_TRUE(t.gemms.count(g));
    const TpOverlapGemm& e = t.gemms.at(g);
    EXPECT_EQ(e.method, TpOverlapMethod::kNcclBeside);
    EXPECT_EQ(overlapped_ns(e, 10'000, 4'000, 2, 132, 24), 10'727);
    EXPECT_EQ(overlapped_ns(e, 10'000, 40'000, 2, 132, 24), 40'000);
    EXPECT_EQ(overlapped_ns(e, 10'000, 4'000, 2, 132, 0), 10'000);  // no kernel, nothing held
  }
  // A profile's num_sm replaces the channel count: 4 SMs, 10 + 4 * 4/132 = 10.121 us.
  EXPECT_EQ(overlapped_ns(async_backward_overlap(TpAsyncBackward{4, "s"}).gemms.at("qkv_dgrad"), 10'000, 4'000, 2,
                          132, 24),
            10'121);
}

TEST(TpAsyncBackward, ProfilesSayWhichMegatronHasIt) {
  for (const char* f : {"megatron-lm-2022", "megatron-core", "nemo-2024"}) {
    SCOPED_TRACE(f);
    const FrameworkProfile p = load_framework_profile(f);
    ASSERT_TRUE(p.tp_async_backward);
    EXPECT_EQ(p.tp_async_backward->num_sm, 0);  // NCCL's channels
    EXPECT_NE(p.tp_async_backward->source.find("cf7efd4f5a"), std::string::npos);
  }
  // SC'21's runs predate it; Strata's own runtime issues its collectives in turn.
  EXPECT_FALSE(load_framework_profile("megatron-lm-2021").tp_async_backward);
  EXPECT_FALSE(load_framework_profile("strata-runtime").tp_async_backward);
  try {
    read_framework_profile(nlohmann::json::parse(R"({"name": "f", "description": "d", "source": "s",
        "tp_async_backward": {"source": "s", "num_sm": 65}})"),
                           "f.json");
    FAIL() << "num_sm out of range";
  } catch (const InputError& e) {
    EXPECT_EQ(e.json_path(), "$.tp_async_backward.num_sm");
  }
}

// The vocabulary-parallel loss all-reduces its sums over tp at the end of the
// forward; the head's backward starts from the loss, so it waits for it (before,
// the full engine let it start beside that all-reduce).
TEST(TpAsyncBackward, TheHeadsBackwardWaitsForTheLossAllReduce) {
  const ModelSpec m = strata::testing::small_gpt(2);
  const testing::GemmCountCosts costs(10'000, m.vocab_size / 2);
  const testing::AlphaBetaComm comm(4'000, 1e30);
  const Workload w = build_workload(m, tp2(false), costs, comm, Fidelity::kFull);
  const RunResult r = run_task_graph(w.graph, nullptr);
  TaskId loss = -1, head_backward = -1;
  for (TaskId t : w.stream(0, StreamKind::kTpComm)) {
    const TaskLabel& l = w.notes.label_of_task(t);
    if (l.phase == Phase::kForward && w.notes.info(t).layer < 0) loss = t;  // the last forward one
  }
  for (TaskId t : w.stream(0, StreamKind::kCompute)) {
    if (head_backward < 0 && w.notes.label_of_task(t).name.rfind("cross_entropy bwd", 0) == 0) head_backward = t;
  }
  ASSERT_GE(loss, 0);
  ASSERT_GE(head_backward, 0);
  EXPECT_GE(r.start_ns[head_backward], r.end_ns[loss]);
}

}  // namespace
}  // namespace strata::sim
