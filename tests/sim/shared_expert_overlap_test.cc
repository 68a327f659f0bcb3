// Megatron-Core's --moe-shared-expert-overlap: the shared experts run beside the
// token all-to-alls (SharedExpertMLP on its side stream). The segments' order
// and flags by hand, the time a step saves by hand with every op and exchange of
// known length (both fidelities), and what the plan refuses.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "fake_costs.h"
#include "plan/model_spec.h"
#include "plan/plan_spec.h"
#include "sim/metrics.h"
#include "sim/workload/folding.h"
#include "sim/workload/segments.h"
#include "sim/workload/workload.h"

namespace strata {
namespace {

using nlohmann::json;

// tiny-moe with a shared expert of the routed experts' width.
ModelSpec shared_moe(int layers = 4) {
  ModelSpec m = load_model_spec("tiny-moe");
  m.num_layers = layers;
  m.moe.moe_shared_expert_intermediate_size = 344;
  return m;
}

PlanSpec plan(int tp, int dp, int ep, bool overlap) {
  PlanSpec p;
  p.tp = tp;
  p.dp = dp;
  p.sequence_parallel = tp > 1;
  p.micro_batch_size = 1;
  p.global_batch_size = dp;  // one micro-batch per rank
  p.flash_attention = true;
  p.accumulate_allreduce_grads_in_fp32 = false;
  p.moe.active = true;
  p.moe.ep = ep;
  p.moe.etp = 1;
  p.moe.token_dispatcher = MoeDispatcher::kAllToAll;
  p.moe.shared_expert_overlap = overlap;
  return p;
}

// A segment as text: a collective's op (its group, ">" when the compute after
// it runs beside it), or a compute segment's op names ("|" after the last of a
// run beside an exchange).
std::vector<std::string> describe(const std::vector<sim::Segment>& segs) {
  std::vector<std::string> out;
  for (const sim::Segment& s : segs) {
    if (s.is_comm) {
      out.push_back(std::string(to_string(s.op)) + (sim::is_expert_group(s.group) ? "(ep)" : "(tp)") +
                    (s.beside_next ? ">" : ""));
      continue;
    }
    std::string names;
    for (const sim::DetailOp& op : s.ops) {
      const std::string n = op.name.str();
      if (n.rfind("shared", 0) == 0 || n.rfind("permute", 0) == 0 || n.rfind("unpermute", 0) == 0 ||
          n.rfind("expert_fc1", 0) == 0) {
        names += (names.empty() ? "" : " ") + n;
      }
    }
    if (!names.empty() || s.beside_end) out.push_back(names + (s.beside_end ? " |" : ""));
  }
  return out;
}

// tp 2 (sequence parallelism), ep 2: forward, the shared experts' input gathered
// before the dispatch, fc1 and the activation beside it, fc2 beside the combine,
// then their reduce-scatter before the unpermutation. Backward: the reduce-
// scatter's conjugate, the combine's gradient beside fc2's backward, the routed
// experts, fc1's input gathered again (for its weight gradient) before the
// dispatch's gradient, which runs beside the activation's and fc1's backward.
TEST(SharedExpertOverlap, SegmentsRunTheSharedExpertsBesideTheExchanges) {
  const sim::testing::UniformCosts costs(1'000);
  const ModelSpec m = shared_moe();
  const sim::BlockSegments b = sim::layer_segments(m, plan(2, 2, 2, true), costs, {}, MlpKind::kMoe);
  // (The attention's own collectives first in forward, last in backward.)
  EXPECT_EQ(describe(b.forward),
            (std::vector<std::string>{"all_gather(tp)", "reduce_scatter(tp)", "permute", "all_gather(tp)",
                                      "all_to_all(ep)>", "shared_fc1 shared_swiglu |", "expert_fc1", "all_to_all(ep)>",
                                      "shared_fc2 |", "reduce_scatter(tp)", "unpermute"}));
  EXPECT_EQ(describe(b.backward),
            (std::vector<std::string>{"unpermute bwd", "all_gather(tp)", "all_to_all(ep)>",
                                      "shared_fc2 dgrad shared_fc2 wgrad |", "expert_fc1 dgrad expert_fc1 wgrad",
                                      "all_gather(tp)", "all_to_all(ep)>",
                                      "shared_swiglu bwd shared_fc1 dgrad shared_fc1 wgrad |", "reduce_scatter(tp)",
                                      "permute bwd", "all_gather(tp)", "all_gather(tp)", "reduce_scatter(tp)"}));
  // Without the key: the shared experts after the unpermutation, nothing beside.
  const sim::BlockSegments plain = sim::layer_segments(m, plan(2, 2, 2, false), costs, {}, MlpKind::kMoe);
  EXPECT_EQ(describe(plain.forward),
            (std::vector<std::string>{"all_gather(tp)", "reduce_scatter(tp)", "permute", "all_to_all(ep)", "expert_fc1",
                                      "all_to_all(ep)", "unpermute", "all_gather(tp)",
                                      "shared_fc1 shared_swiglu shared_fc2", "reduce_scatter(tp)"}));
}

// The flex (DeepEP) dispatcher on 2 nodes: the shared experts beside each
// exchange's last hop, the node's all-to-all after the rail's in the dispatch, the
// rail's after the node's in the combine.
TEST(SharedExpertOverlap, FlexRunsThemBesideTheLastHop) {
  const sim::testing::UniformCosts costs(1'000);
  PlanSpec p = plan(1, 4, 4, true);  // tiny-moe's 4 experts, one per rank, two ranks a node
  p.moe.token_dispatcher = MoeDispatcher::kFlex;
  sim::LayerSegmentOptions o;
  o.experts_per_node = {2, 2};
  const sim::BlockSegments b = sim::layer_segments(shared_moe(), p, costs, o, MlpKind::kMoe);
  std::vector<std::string> exchanges;
  for (std::size_t k = 0; k < b.forward.size(); ++k) {
    const sim::Segment& s = b.forward[k];
    if (!s.is_comm) continue;
    std::string e = s.group == sim::CommGroup::kExpertRail ? "rail" : "node";
    if (s.beside_next) e += "> " + b.forward[k + 1].ops.front().name.str();
    exchanges.push_back(e);
  }
  EXPECT_EQ(exchanges, (std::vector<std::string>{"rail", "node> shared_fc1", "node", "rail> shared_fc2"}));
}

// A collapsed stretch counts what an exchange outlasts the run beside it by.
TEST(SharedExpertOverlap, CollapsedExchangeCostsWhatItOutlastsTheRunBy) {
  std::vector<sim::Segment> segs(4);
  segs[0].is_comm = true;
  segs[0].beside_next = true;
  segs[1].duration_ns = 700;
  segs[2].is_comm = true;  // queued behind the exchange: not part of the run
  segs[3].duration_ns = 500;
  segs[3].beside_end = true;
  EXPECT_EQ(sim::beside_exposed_ns(segs, 0, 1'000), 0);
  EXPECT_EQ(sim::beside_exposed_ns(segs, 0, 1'500), 300);
  EXPECT_EQ(sim::beside_exposed_ns(segs, 2, 1'500), 1'500);  // not beside anything
}

// tp 1, ep = dp = 2, one micro-batch, every op 1 us and every collective x =
// 1.5 us (alpha; the bandwidth term rounds up to 1 ns). Per layer the overlap
// hides min(x, run): forward min(x, 2 us) beside fc1 + activation and min(x, 1 us)
// beside fc2; backward min(x, 2 us) beside fc2's dgrad + wgrad and min(x, 3 us)
// beside the activation's backward and fc1's dgrad + wgrad: 3x + 1 us a layer.
TEST(SharedExpertOverlap, StepSavesWhatTheRunsHideByHand) {
  const ModelSpec m = shared_moe(4);
  const sim::testing::UniformCosts costs(1'000);
  const sim::testing::AlphaBetaComm comm(1'500, 1e30);
  const double routed = 128.0 * 2 * 256 * 2;  // a rank's 128 tokens x top-2, h 256, bf16
  const TimeNs x = sim::collapsed_comm_ns(comm.collective(CollectiveOp::kAllToAll, {0, 1}, routed));
  ASSERT_GE(x, 1'500);
  ASSERT_LT(x, 2'000);
  for (sim::Fidelity f : {sim::Fidelity::kFull, sim::Fidelity::kFolded}) {
    SCOPED_TRACE(f == sim::Fidelity::kFull ? "full" : "folded");
    TimeNs step[2] = {0, 0};
    for (bool overlap : {false, true}) {
      sim::Workload w = sim::build_workload(m, plan(1, 2, 2, overlap), costs, comm, f);
      step[overlap ? 1 : 0] = sim::run_task_graph(w.graph, nullptr).makespan_ns;
    }
    EXPECT_EQ(step[0] - step[1], 4 * (3 * x + 1'000));
  }
}

TEST(SharedExpertOverlap, PlanKeyNeedsAnExchangingDispatcher) {
  const ModelSpec m = shared_moe();
  const PlanContext limits{8, 8, false};
  PlanSpec p = read_plan_spec(json::parse(R"({"tp": 1, "pp": 1, "ep": 4, "moe_token_dispatcher_type": "alltoall",
      "moe_shared_expert_overlap": true, "micro_batch_size": 1, "global_batch_size": 8})"),
                              "plan.json");
  resolve_and_check_plan(p, m, limits, "plan.json");
  EXPECT_TRUE(p.moe.shared_expert_overlap);
  EXPECT_EQ(to_json(p)["moe_shared_expert_overlap"], true);
  PlanSpec bad = read_plan_spec(json::parse(R"({"tp": 1, "pp": 1, "ep": 4, "moe_token_dispatcher_type": "allgather",
      "moe_shared_expert_overlap": true, "micro_batch_size": 1, "global_batch_size": 8})"),
                                "plan.json");
  try {
    resolve_and_check_plan(bad, m, limits, "plan.json");
    FAIL() << "allgather dispatcher accepted";
  } catch (const InputError& e) {
    EXPECT_EQ(e.json_path(), "$.moe_shared_expert_overlap");
  }
}

}  // namespace
}  // namespace strata
