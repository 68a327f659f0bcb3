// MoE layers in the simulator: where each token dispatcher puts its exchanges and
// with how many bytes (by hand), the grouped expert GEMMs, the routed experts'
// gradient buckets, and the expert collectives of a tensor-parallel group's
// task, whose shares make up each expert group's collective exactly once.
#include <gtest/gtest.h>

#include <map>
#include <set>
#include <string>
#include <vector>

#include "fake_costs.h"
#include "plan/bucket_plan.h"
#include "plan/model_spec.h"
#include "plan/params.h"
#include "plan/plan_spec.h"
#include "plan/rank_layout.h"
#include "sim/workload/build.h"
#include "sim/workload/segments.h"
#include "sim/workload/workload.h"

namespace strata {
namespace {

// Mixtral 8x7B on 8 ranks of one stage: tp x dp = 8.
PlanSpec moe_plan(int tp, int ep, int etp, MoeDispatcher dispatcher = MoeDispatcher::kAllToAll) {
  PlanSpec p;
  p.tp = tp;
  p.dp = 8 / tp;
  p.sequence_parallel = tp > 1;
  p.micro_batch_size = 1;
  p.global_batch_size = 64;
  p.flash_attention = true;
  p.moe.active = true;
  p.moe.ep = ep;
  p.moe.etp = etp;
  p.moe.token_dispatcher = dispatcher;
  return p;
}

std::vector<const sim::Segment*> expert_comm(const std::vector<sim::Segment>& segs) {
  std::vector<const sim::Segment*> out;
  for (const sim::Segment& s : segs) {
    if (s.is_comm && sim::is_expert_group(s.group)) out.push_back(&s);
  }
  return out;
}

const sim::DetailOp* find_op(const std::vector<sim::Segment>& segs, const std::string& name) {
  for (const sim::Segment& s : segs) {
    for (const sim::DetailOp& op : s.ops) {
      if (op.name == name) return &op;
    }
  }
  return nullptr;
}

// Mixtral 8x7B (h 4096, seq 4096, top-2, bf16) at tp 1, ep 8: each rank sends its
// 4096 tokens twice (top-2) of 4096 x 2 bytes: 64 MiB in the dispatch all-to-all
// and as much back in the combine; backward the same exchanges on the gradients.
TEST(MoeWorkload, AllToAllDispatchAndCombineAroundTheExperts) {
  const ModelSpec m = load_model_spec("mixtral-8x7b");
  const sim::testing::UniformCosts costs(1'000);
  const sim::BlockSegments b = sim::layer_segments(m, moe_plan(1, 8, 1), costs, {}, MlpKind::kMoe);
  const double routed = 4096.0 * 2 * 4096 * 2;
  for (const auto* segs : {&b.forward, &b.backward}) {
    const auto comm = expert_comm(*segs);
    ASSERT_EQ(comm.size(), 2u);
    for (const sim::Segment* s : comm) {
      EXPECT_EQ(s->op, CollectiveOp::kAllToAll);
      EXPECT_EQ(s->group, sim::CommGroup::kExpert);
      EXPECT_DOUBLE_EQ(s->comm_bytes, routed);
    }
  }
  // Forward order: router and permute, dispatch, the experts, combine, unpermute.
  std::vector<std::string> order;
  for (const sim::Segment& s : b.forward) {
    if (s.is_comm) {
      order.push_back(to_string(s.op));
      continue;
    }
    for (const sim::DetailOp& op : s.ops) {
      if (op.name == "permute" || op.name == "expert_fc1" || op.name == "expert_fc2" || op.name == "unpermute") {
        order.push_back(op.name);
      }
    }
  }
  EXPECT_EQ(order, (std::vector<std::string>{"permute", "all_to_all", "expert_fc1", "expert_fc2", "all_to_all",
                                             "unpermute"}));
}

// tp 2 with sequence parallelism, etp 2, ep 4: a rank routes its 2048 tokens x
// top-2 (2048 x 2 x 4096 x 2 bytes = 32 MiB) over ep, then gathers its expert
// tensor-parallel peer's (x 2) before the experts; the combine reduce-scatters
// over etp first, then sends back. Backward: the conjugates.
TEST(MoeWorkload, ExpertTensorParallelGatherFollowsTheAllToAll) {
  const ModelSpec m = load_model_spec("mixtral-8x7b");
  const sim::testing::UniformCosts costs(1'000);
  const sim::BlockSegments b = sim::layer_segments(m, moe_plan(2, 4, 2), costs, {}, MlpKind::kMoe);
  const double routed = 2048.0 * 2 * 4096 * 2;
  const auto fwd = expert_comm(b.forward);
  ASSERT_EQ(fwd.size(), 4u);
  EXPECT_EQ(fwd[0]->op, CollectiveOp::kAllToAll);
  EXPECT_DOUBLE_EQ(fwd[0]->comm_bytes, routed);
  EXPECT_EQ(fwd[1]->op, CollectiveOp::kAllGather);
  EXPECT_EQ(fwd[1]->group, sim::CommGroup::kExpertTensor);
  EXPECT_DOUBLE_EQ(fwd[1]->comm_bytes, 2 * routed);
  EXPECT_EQ(fwd[2]->op, CollectiveOp::kReduceScatter);
  EXPECT_EQ(fwd[3]->op, CollectiveOp::kAllToAll);
  const auto bwd = expert_comm(b.backward);
  ASSERT_EQ(bwd.size(), 4u);
  // Backward walks the layer in reverse: the combine's conjugates first.
  EXPECT_EQ(bwd[0]->op, CollectiveOp::kAllToAll);
  EXPECT_EQ(bwd[1]->op, CollectiveOp::kAllGather);
  EXPECT_EQ(bwd[2]->op, CollectiveOp::kReduceScatter);
  EXPECT_EQ(bwd[3]->op, CollectiveOp::kAllToAll);
}

// The allgather dispatcher gathers the hidden states (not top-k copies) over
// etp x ep before the experts and reduce-scatters their output after.
TEST(MoeWorkload, AllGatherDispatcherGathersOverExpertModelGroup) {
  const ModelSpec m = load_model_spec("mixtral-8x7b");
  const sim::testing::UniformCosts costs(1'000);
  const sim::BlockSegments b =
      sim::layer_segments(m, moe_plan(1, 8, 1, MoeDispatcher::kAllGather), costs, {}, MlpKind::kMoe);
  const auto fwd = expert_comm(b.forward);
  ASSERT_EQ(fwd.size(), 2u);
  EXPECT_EQ(fwd[0]->op, CollectiveOp::kAllGather);
  EXPECT_EQ(fwd[0]->group, sim::CommGroup::kExpertModel);
  EXPECT_DOUBLE_EQ(fwd[0]->comm_bytes, 4096.0 * 4096 * 2 * 8);
  EXPECT_EQ(fwd[1]->op, CollectiveOp::kReduceScatter);
}

// With two local experts (ep 4 of 8) the all-to-all dispatcher sorts what it
// received expert by expert after the dispatch and back before the combine
// (sort_chunks_by_idxs): each routed row read and written once, 2 x 8192 rows x
// 4096 x 2 bytes; with one local expert (ep 8) there is nothing to sort.
TEST(MoeWorkload, AllToAllSortsTheReceivedTokensWithSeveralLocalExperts) {
  const ModelSpec m = load_model_spec("mixtral-8x7b");
  const sim::testing::UniformCosts costs(1'000);
  const sim::BlockSegments b = sim::layer_segments(m, moe_plan(1, 4, 1), costs, {}, MlpKind::kMoe);
  const sim::DetailOp* sort = find_op(b.forward, "sort_chunks");
  const sim::DetailOp* unsort = find_op(b.forward, "unsort_chunks");
  ASSERT_NE(sort, nullptr);
  ASSERT_NE(unsort, nullptr);
  EXPECT_DOUBLE_EQ(sort->bytes, 2.0 * 4096 * 2 * 4096 * 2);
  // Order: the dispatch all-to-all, sort_chunks, the experts, unsort_chunks, the combine.
  std::vector<std::string> order;
  for (const sim::Segment& seg : b.forward) {
    if (seg.is_comm && sim::is_expert_group(seg.group)) order.push_back("a2a");
    for (const sim::DetailOp& op : seg.ops) {
      if (op.name == "sort_chunks" || op.name == "unsort_chunks" || op.name == "expert_fc1") order.push_back(op.name);
    }
  }
  EXPECT_EQ(order, (std::vector<std::string>{"a2a", "sort_chunks", "expert_fc1", "unsort_chunks", "a2a"}));
  const sim::BlockSegments one = sim::layer_segments(m, moe_plan(1, 8, 1), costs, {}, MlpKind::kMoe);
  EXPECT_EQ(find_op(one.forward, "sort_chunks"), nullptr);
}

// The flex (DeepEP) dispatcher on an expert-parallel group over two nodes of
// four ranks (8 experts, 4 a node): each token crosses the network once per other
// node it has experts on, own x D bytes as the rail's all-to-all (D the expected
// nodes per token, 2 (1 - C(4,2)/C(8,2)) for top-2), then its copies go over the
// node's NVLink, own x k bytes as the node's all-to-all; the combine reverses the
// hops. Node-limited routing (one group of two per token) brings D to 1.
TEST(MoeWorkload, FlexDispatcherCrossesTheNetworkOncePerNode) {
  const ModelSpec m = load_model_spec("mixtral-8x7b");
  const sim::testing::UniformCosts costs(1'000);
  sim::LayerSegmentOptions o;
  o.experts_per_node = {4, 4};
  const double own = 4096.0 * 4096 * 2;
  const sim::BlockSegments b =
      sim::layer_segments(m, moe_plan(1, 8, 1, MoeDispatcher::kFlex), costs, o, MlpKind::kMoe);
  const auto fwd = expert_comm(b.forward);
  ASSERT_EQ(fwd.size(), 4u);
  EXPECT_EQ(fwd[0]->group, sim::CommGroup::kExpertRail);
  EXPECT_NEAR(fwd[0]->comm_bytes, own * 2.0 * (1.0 - 6.0 / 28.0), 1e-3);
  EXPECT_EQ(fwd[1]->group, sim::CommGroup::kExpertNode);
  EXPECT_DOUBLE_EQ(fwd[1]->comm_bytes, own * 2);
  EXPECT_EQ(fwd[2]->group, sim::CommGroup::kExpertNode);
  EXPECT_EQ(fwd[3]->group, sim::CommGroup::kExpertRail);
  for (const sim::Segment* seg : fwd) EXPECT_EQ(seg->op, CollectiveOp::kAllToAll);
  const auto bwd = expert_comm(b.backward);
  ASSERT_EQ(bwd.size(), 4u);
  EXPECT_EQ(bwd[0]->group, sim::CommGroup::kExpertRail);  // the combine's conjugate first
  EXPECT_EQ(bwd[3]->group, sim::CommGroup::kExpertRail);
  ModelSpec limited = m;
  limited.moe.moe_router_num_groups = 2;
  limited.moe.moe_router_group_topk = 1;
  const sim::BlockSegments l =
      sim::layer_segments(limited, moe_plan(1, 8, 1, MoeDispatcher::kFlex), costs, o, MlpKind::kMoe);
  EXPECT_NEAR(expert_comm(l.forward)[0]->comm_bytes, own * 1.0, 1e-3);
  // Within one node the flex dispatcher is the node's all-to-all alone.
  const sim::BlockSegments one =
      sim::layer_segments(m, moe_plan(1, 8, 1, MoeDispatcher::kFlex), costs, {}, MlpKind::kMoe);
  ASSERT_EQ(expert_comm(one.forward).size(), 2u);
  EXPECT_EQ(expert_comm(one.forward)[0]->group, sim::CommGroup::kExpertNode);
}

// The flex dispatcher's two groups split the expert-parallel group by node: on
// 2 nodes of 4 GPUs with ep 8, rank 5's node group is ranks 4-7 and its rail 1, 5.
TEST(MoeWorkload, FlexGroupsSplitTheExpertGroupByNode) {
  const ModelSpec m = load_model_spec("mixtral-8x7b");
  const sim::testing::UniformCosts ops(1'000);
  const sim::testing::LinkCountComm comm;
  sim::WorkloadOptions o;
  o.gpus_per_node = 4;
  const sim::WorkloadBuild b(m, moe_plan(1, 8, 1, MoeDispatcher::kFlex), ops, comm, sim::Fidelity::kFull, o);
  EXPECT_EQ(b.expert_group(sim::CommGroup::kExpertNode, 5), (std::vector<int>{4, 5, 6, 7}));
  EXPECT_EQ(b.expert_group(sim::CommGroup::kExpertRail, 5), (std::vector<int>{1, 5}));
  EXPECT_EQ(b.expert_group(sim::CommGroup::kExpertRail, 0), (std::vector<int>{0, 4}));
}

// A capacity factor of 1.25 pads every expert's buffer to 1.25 of its share: the
// exchanges and the experts' GEMMs carry 1.25 times the balanced tokens.
TEST(MoeWorkload, CapacityFactorScalesTheExchangesAndTheExperts) {
  const ModelSpec m = load_model_spec("mixtral-8x7b");
  const sim::testing::UniformCosts costs(1'000);
  PlanSpec p = moe_plan(1, 8, 1);
  p.moe.expert_capacity_factor = 1.25;
  const sim::BlockSegments b = sim::layer_segments(m, p, costs, {}, MlpKind::kMoe);
  EXPECT_DOUBLE_EQ(expert_comm(b.forward)[0]->comm_bytes, 1.25 * 4096 * 2 * 4096 * 2);
  const sim::DetailOp* fc1 = find_op(b.forward, "expert_fc1");
  ASSERT_NE(fc1, nullptr);
  // 4096 tokens x 2 x 1.25 = 10240 rows through fc1 (2 x 14336 wide, SwiGLU) of h 4096.
  EXPECT_DOUBLE_EQ(fc1->flops, 2.0 * 10240 * 2 * 14336 * 4096);
}

// ep 1: no all-to-all, etp 1: no gather; the layer's exchanges are tp's only.
TEST(MoeWorkload, NoExpertParallelismNoExchanges) {
  const ModelSpec m = load_model_spec("mixtral-8x7b");
  const sim::testing::UniformCosts costs(1'000);
  const sim::BlockSegments b = sim::layer_segments(m, moe_plan(1, 1, 1), costs, {}, MlpKind::kMoe);
  EXPECT_TRUE(expert_comm(b.forward).empty());
  EXPECT_TRUE(expert_comm(b.backward).empty());
}

// The experts run as one grouped GEMM per rank: num_experts / ep GEMMs (batch),
// each over its share of the routed tokens; at ep 2, 4 local experts of 2048 rows.
TEST(MoeWorkload, GroupedExpertGemmHasOneGemmPerLocalExpert) {
  const ModelSpec m = load_model_spec("mixtral-8x7b");
  LayerOpContext c = layer_op_context(moe_plan(1, 2, 1));
  int found = 0;
  for (const LayerOp& op : layer_forward_ops(m, c, MlpKind::kMoe)) {
    if (op.role != OpRole::kExpertFc1) continue;
    ++found;
    EXPECT_EQ(op.gemm.batch, 4);
    EXPECT_EQ(op.gemm.m, 4096 * 2 / 4);
    EXPECT_EQ(op.gemm.n, 2 * 14336);
    EXPECT_DOUBLE_EQ(op.flops, op.gemm.flops());
  }
  EXPECT_EQ(found, 1);
}

// A stage's buckets hold its routed experts' parameters apart from the rest: their
// sum is the stage's expert parameters on a GPU, and the rest its other ones.
TEST(MoeWorkload, BucketsHoldTheExpertParametersApart) {
  const ModelSpec m = load_model_spec("mixtral-8x7b");
  PlanSpec p = moe_plan(1, 8, 1);
  p.pp = 2;
  p.dp = 4;
  std::int64_t experts = 0, other = 0;
  for (const GradBucket& b : grad_buckets(m, p, 1)) {
    experts += b.expert_params;
    other += b.params;
  }
  EXPECT_EQ(experts, stage_expert_params_per_gpu(m, p, 1));
  EXPECT_GT(experts, 0);
  EXPECT_EQ(experts + other, stage_params_per_gpu(m, p, 1));
}

// tp 2, etp 1, ep 8 on one stage of 8 ranks: each tensor-parallel group's two
// ranks are in the one expert group of 8, so each of the 4 groups' tasks carries
// 2/8 of its all-to-all: together they load every link exactly as the collective
// does, and each alone runs at the collective's rate.
TEST(MoeWorkload, TensorGroupTasksCarryTheirShareOfTheExpertAllToAll) {
  const ModelSpec m = load_model_spec("mixtral-8x7b");
  PlanSpec p = moe_plan(2, 8, 1);
  const sim::testing::UniformCosts ops(1'000);
  const sim::testing::LinkCountComm comm;
  sim::WorkloadOptions options;
  sim::WorkloadBuild b(m, p, ops, comm, sim::Fidelity::kFull, options);
  const sim::CommSpec whole = comm.collective(CollectiveOp::kAllToAll, {0, 1, 2, 3, 4, 5, 6, 7}, 1e6);
  std::map<std::int32_t, double> load;
  for (int d = 0; d < 4; ++d) {
    const std::vector<int> group = b.tp_group_gpus(d, 0);
    const sim::CommSpec& s = b.w.graph.comm(b.expert_collective(CollectiveOp::kAllToAll, sim::CommGroup::kExpert, group, 1e6));
    EXPECT_DOUBLE_EQ(s.rate_cap_bytes_per_s, whole.rate_cap_bytes_per_s);
    for (std::size_t i = 0; i < s.links.size(); ++i) load[s.links[i]] += s.link_weight(i);
  }
  ASSERT_EQ(load.size(), whole.links.size());
  for (std::size_t i = 0; i < whole.links.size(); ++i) EXPECT_DOUBLE_EQ(load[whole.links[i]], whole.link_weight(i));
}

// tp 1, ep 4 on 8 ranks of one stage, ZeRO-1: the dense gradients reduce-scatter
// over all 8 data-parallel ranks, the routed experts' over the expert data-parallel
// group of 8 / 4 = 2 ranks that hold the same experts, one bucket's worth each;
// the optimizer updates the dense shard of 1/8 and the expert shard of 1/2.
TEST(MoeWorkload, ExpertGradientsReduceOverTheExpertDataParallelGroup) {
  const ModelSpec m = load_model_spec("mixtral-8x7b");
  PlanSpec p = moe_plan(1, 4, 1);
  p.zero_stage = 1;
  const sim::testing::UniformCosts ops(1'000);
  const sim::testing::LinkCountComm comm;
  const sim::Workload w = sim::build_workload(m, p, ops, comm, sim::Fidelity::kFull);
  std::map<std::string, std::set<std::size_t>> group_sizes;  // task name -> sizes of its groups
  std::map<std::string, double> bytes;
  for (sim::TaskId t : w.stream(0, sim::StreamKind::kDpComm)) {
    const std::string& name = w.notes.label_of_task(t).name;
    group_sizes[name].insert(w.graph.comm(w.graph.comm_of(t)).links.size());
    bytes[name] += w.notes.info(t).bytes;
  }
  EXPECT_EQ(group_sizes["grad reduce_scatter"], (std::set<std::size_t>{8}));
  EXPECT_EQ(group_sizes["expert grad reduce_scatter"], (std::set<std::size_t>{2}));
  // Every routed expert parameter of the rank, in fp32 (accumulate_allreduce_grads_in_fp32 default).
  EXPECT_DOUBLE_EQ(bytes["expert grad reduce_scatter"],
                   static_cast<double>(stage_expert_params_per_gpu(m, p, 0)) * p.grad_bytes());
}

// tp 8, dp 1, etp 1, ep 2: the dense layers have no data-parallel peer, but each
// rank's experts are held by 8 / 2 = 4 ranks, which all-reduce their gradients.
TEST(MoeWorkload, ExpertGradientsReduceWithoutDenseDataParallelism) {
  const ModelSpec m = load_model_spec("mixtral-8x7b");
  PlanSpec p = moe_plan(8, 2, 1);
  ASSERT_EQ(p.dp, 1);
  const sim::testing::UniformCosts ops(1'000);
  const sim::testing::LinkCountComm comm;
  const sim::Workload w = sim::build_workload(m, p, ops, comm, sim::Fidelity::kFull);
  std::set<std::size_t> sizes;
  for (sim::TaskId t : w.stream(0, sim::StreamKind::kDpComm)) {
    if (w.notes.label_of_task(t).name == "expert grad all_reduce") sizes.insert(w.graph.comm(w.graph.comm_of(t)).links.size());
  }
  EXPECT_EQ(sizes, (std::set<std::size_t>{4}));
}

}  // namespace
}  // namespace strata
