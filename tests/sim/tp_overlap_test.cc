// Tensor-parallel collectives under GEMMs (Transformer Engine's userbuffers, the
// framework profile's tp_overlap), against times computed by hand.
#include "sim/workload/tp_overlap.h"

#include <gtest/gtest.h>

#include "core/error.h"
#include "fake_costs.h"
#include "test_models.h"
#include "sim/engine/engine.h"
#include "sim/workload/workload.h"

namespace strata::sim {
namespace {

TpOverlapGemm method(TpOverlapMethod m, int num_sm, int num_splits = 1) { return {m, num_sm, num_splits}; }

// G = 100 us of GEMM on 132 SMs, C = 40 us of collective, tp 4.
TEST(TpOverlap, EachMethodHidesTheCollectiveAsItsPipelineSays) {
  constexpr TimeNs g = 100'000, c = 40'000;
  // ring exchange, 1 SM: G' = 100 * 132/131 = 100.763 us; 4 chunks: G' + C/4 = 110.763.
  EXPECT_EQ(overlapped_ns(method(TpOverlapMethod::kRingExchange, 1), g, c, 4, 132), 110'763);
  // pipeline, 24 SMs, 4 splits: G' = 100 * 132/108 = 122.222 us; + C/4 = 132.222.
  EXPECT_EQ(overlapped_ns(method(TpOverlapMethod::kPipeline, 24, 4), g, c, 4, 132), 132'222);
  // bulk, 4 SMs: G' = 100 * 132/128 = 103.125 us, the collective beside it.
  EXPECT_EQ(overlapped_ns(method(TpOverlapMethod::kBulk, 4), g, c, 4, 132), 103'125);
  // A collective longer than its GEMM shows: bulk, C = 300 us > G'.
  EXPECT_EQ(overlapped_ns(method(TpOverlapMethod::kBulk, 4), g, 300'000, 4, 132), 300'000);
  // ring exchange with C = 300: 300 + 100.763 / 4 = 325.191.
  EXPECT_EQ(overlapped_ns(method(TpOverlapMethod::kRingExchange, 1), g, 300'000, 4, 132), 325'191);
}

Segment compute(std::vector<DetailOp> ops) {
  Segment s;
  s.ops = std::move(ops);
  for (const DetailOp& op : s.ops) s.duration_ns += op.duration_ns;
  return s;
}

Segment comm(CollectiveOp op) {
  Segment s;
  s.is_comm = true;
  s.op = op;
  s.comm_bytes = 1e6;
  return s;
}

DetailOp gemm(const char* name, TimeNs ns) { return {name, Category::kGemm, ns, 0.0, 0.0}; }
DetailOp norm(const char* name, TimeNs ns) { return {name, Category::kElementwise, ns, 0.0, 0.0}; }

// Only tensor-parallel collectives move into GEMMs: a context-parallel
// all-to-all after qkv (cp_comm_type a2a) and an MoE layer's dispatch before the
// experts stay collectives of their own, though their GEMMs are overlappable.
TEST(TpOverlap, OtherGroupsCollectivesStay) {
  Segment a2a = comm(CollectiveOp::kAllToAll);
  a2a.group = CommGroup::kContext;
  Segment dispatch = comm(CollectiveOp::kAllGather);
  dispatch.group = CommGroup::kExpertTensor;
  std::vector<Segment> segs = {compute({gemm("qkv", 100)}), a2a, compute({gemm("fc1", 100)}), dispatch,
                               compute({gemm("fc1", 100)})};
  TpOverlap o;
  o.gemms["qkv_fprop"] = method(TpOverlapMethod::kBulk, 0);
  o.gemms["fc1_fprop"] = method(TpOverlapMethod::kBulk, 0);
  const TpCommTime c = [](CollectiveOp, double) { return TpComm{40, 0}; };
  overlap_tp_collectives(segs, o, 2, 132, c);
  ASSERT_EQ(segs.size(), 5u);
  EXPECT_TRUE(segs[1].is_comm);
  EXPECT_TRUE(segs[3].is_comm);
  EXPECT_EQ(segs[0].ops[0].duration_ns, 100);
}

// A reduce-scatter folded into the GEMM that ends a run beside an MoE exchange
// (Segment::beside_end) leaves the compute after it a segment of its own, which
// waits for the exchange; folded into a GEMM inside a run, the run grows.
TEST(TpOverlap, ARunBesideAnExchangeEndsWhereItEnded) {
  Segment exchange = comm(CollectiveOp::kAllToAll);
  exchange.group = CommGroup::kExpert;
  exchange.beside_next = true;
  Segment run = compute({gemm("fc2", 100)});
  run.beside_end = true;
  std::vector<Segment> segs = {exchange, run, comm(CollectiveOp::kReduceScatter), compute({norm("unpermute", 5)})};
  TpOverlap o;
  o.gemms["fc2_fprop"] = method(TpOverlapMethod::kBulk, 0);
  const TpCommTime c = [](CollectiveOp, double) { return TpComm{40, 0}; };
  overlap_tp_collectives(segs, o, 2, 132, c);
  ASSERT_EQ(segs.size(), 3u);
  EXPECT_EQ(segs[1].ops.size(), 1u);
  EXPECT_EQ(segs[1].ops[0].name, "fc2 +reduce_scatter");
  EXPECT_TRUE(segs[1].beside_end);
  EXPECT_EQ(segs[2].ops[0].name, "unpermute");
  // The run's first segment joins its last: the run ends where the last ended.
  Segment head = compute({norm("act", 5)});
  std::vector<Segment> inner = {exchange, head, comm(CollectiveOp::kAllGather), run};
  overlap_tp_collectives(inner, o, 2, 132, c);
  ASSERT_EQ(inner.size(), 2u);
  EXPECT_EQ(inner[1].ops.size(), 2u);
  EXPECT_TRUE(inner[1].beside_end);
}

// The forward of a sequence-parallel attention block: norm | AG | qkv, attention,
// proj | RS | residual. With qkv_fprop overlapped (bulk, no SMs: max(G, C)) and
// proj_fprop not, the all-gather goes into qkv and the reduce-scatter stays.
TEST(TpOverlap, CollectivesNamedByTheirGemmMoveIntoIt) {
  std::vector<Segment> segs = {compute({norm("input_norm", 5)}), comm(CollectiveOp::kAllGather),
                               compute({gemm("qkv", 100), norm("attention", 50), gemm("proj", 30)}),
                               comm(CollectiveOp::kReduceScatter), compute({norm("residual_attn", 5)})};
  TpOverlap o;
  o.gemms["qkv_fprop"] = method(TpOverlapMethod::kBulk, 0);
  const TpCommTime c = [](CollectiveOp op, double) { return TpComm{op == CollectiveOp::kAllGather ? 120 : 40, 0}; };
  overlap_tp_collectives(segs, o, 2, 132, c);
  ASSERT_EQ(segs.size(), 3u);
  ASSERT_EQ(segs[0].ops.size(), 4u);  // the norm, then qkv, attention, proj: one segment
  EXPECT_EQ(segs[0].ops[1].name, "qkv +all_gather");
  EXPECT_EQ(segs[0].ops[1].duration_ns, 120);  // max(100, 120)
  EXPECT_EQ(segs[0].duration_ns, 5 + 120 + 50 + 30);
  EXPECT_TRUE(segs[1].is_comm);
  EXPECT_EQ(segs[1].op, CollectiveOp::kReduceScatter);
  // In the backward a reduce-scatter goes under the weight-gradient GEMM before it,
  // an all-gather under the data-gradient GEMM after it; a replayed forward is a forward.
  std::vector<Segment> bwd = {compute({gemm("recompute fc1", 10)}), comm(CollectiveOp::kAllGather),
                              compute({gemm("fc2 dgrad", 100), gemm("fc2 wgrad", 100)}),
                              compute({gemm("fc1 dgrad", 100), gemm("fc1 wgrad", 100)}),
                              comm(CollectiveOp::kReduceScatter)};
  TpOverlap b;
  b.gemms["fc2_dgrad"] = method(TpOverlapMethod::kBulk, 0);
  b.gemms["fc1_wgrad"] = method(TpOverlapMethod::kBulk, 0);
  overlap_tp_collectives(bwd, b, 2, 132, c);
  ASSERT_EQ(bwd.size(), 2u);  // no collective left
  EXPECT_EQ(bwd[0].ops[1].name, "fc2 dgrad +all_gather");
  EXPECT_EQ(bwd[0].ops[1].duration_ns, 120);
  EXPECT_EQ(bwd[1].ops[1].name, "fc1 wgrad +reduce_scatter");
  EXPECT_EQ(bwd[1].ops[1].duration_ns, 100);  // max(100, 40)
}

// Through the workload: with every GEMM of a sequence-parallel tp 2 layer
// overlapped by bulk on no SMs, no collective of the layers is left on the tp-comm
// lane (the embedding's and the head's remain), and the step is shorter than
// without by what the collectives cost less what the max() keeps.
TEST(TpOverlap, AWorkloadWithOverlapRunsItsLayerCollectivesUnderTheGemms) {
  ModelSpec m = strata::testing::small_gpt(2);
  m.vocab_size = 200;  // a logits slice (100) no layer GEMM dimension equals: only it is free
  PlanSpec p;
  p.tp = 2;
  p.dp = 1;
  p.sequence_parallel = true;
  p.micro_batch_size = 1;
  p.global_batch_size = 1;
  const testing::GemmCountCosts costs(10'000, m.vocab_size / p.tp);  // 10 us a layer GEMM
  const testing::AlphaBetaComm comm(4'000, 1e30);                 // 4 us a collective
  WorkloadOptions o;
  o.tp_overlap = TpOverlap{};
  for (const char* g : {"qkv_fprop", "proj_fprop", "fc1_fprop", "fc2_fprop", "proj_dgrad", "fc2_dgrad", "qkv_dgrad",
                        "qkv_wgrad", "fc1_dgrad", "fc1_wgrad"}) {
    o.tp_overlap->gemms[g] = method(TpOverlapMethod::kBulk, 0);
  }
  o.compute_units = 132;
  const Workload plain = build_workload(m, p, costs, comm, Fidelity::kFull);
  const Workload overlapped = build_workload(m, p, costs, comm, Fidelity::kFull, o);
  auto layer_collectives = [](const Workload& w) {
    int n = 0;
    for (TaskId t : w.stream(0, StreamKind::kTpComm)) n += w.notes.info(t).layer >= 0 ? 1 : 0;
    return n;
  };
  // 2 layers, 4 forward and 6 backward each (the input gathered again for qkv and fc1 wgrad).
  EXPECT_EQ(layer_collectives(plain), 2 * 10);
  EXPECT_EQ(layer_collectives(overlapped), 0);
  const TimeNs t_plain = run_task_graph(plain.graph, nullptr).makespan_ns;
  const TimeNs t_over = run_task_graph(overlapped.graph, nullptr).makespan_ns;
  // Each of the 20 collectives (4 us and the bytes' ~0) hides under a 10 us GEMM.
  EXPECT_NEAR(static_cast<double>(t_plain - t_over), 20 * 4'000.0, 20 * 2.0);
}

TEST(TpOverlap, ProfilesReadTheirOverlapStrictly) {
  const FrameworkProfile nemo = load_framework_profile("nemo-2024");
  ASSERT_TRUE(nemo.tp_overlap);
  const TpOverlapGemm& proj = nemo.tp_overlap->gemms.at("proj_fprop");  // NeMo's GPT-3 175B preset
  EXPECT_EQ(proj.method, TpOverlapMethod::kPipeline);
  EXPECT_EQ(proj.num_sm, 24);
  EXPECT_EQ(proj.num_splits, 4);
  EXPECT_EQ(nemo.tp_overlap->gemms.at("qkv_fprop").num_sm, 1);  // ring exchange's default
  EXPECT_FALSE(load_framework_profile("megatron-core").tp_overlap);  // --tp-comm-overlap is off by default
  const auto profile = [](const char* gemms) {
    return nlohmann::json::parse(std::string(R"({"name": "f", "description": "d", "source": "s",
        "tp_overlap": {"source": "s", "gemms": )") + gemms + "}}");
  };
  try {
    read_framework_profile(profile(R"({"attn_fprop": {"method": "bulk", "num_sm": 2}})"), "f.json");
    FAIL() << "an unknown GEMM";
  } catch (const InputError& e) {
    EXPECT_EQ(e.json_path(), "$.tp_overlap.gemms.attn_fprop");
  }
  try {
    read_framework_profile(profile(R"({"proj_fprop": {"method": "pipeline", "num_sm": 24}})"), "f.json");
    FAIL() << "pipeline without splits";
  } catch (const InputError& e) {
    EXPECT_EQ(e.json_path(), "$.tp_overlap.gemms.proj_fprop.num_splits");
  }
}

}  // namespace
}  // namespace strata::sim
