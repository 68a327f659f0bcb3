// The executor against a single-rank reference: after k training steps, every
// parameter of the whole model, as the plan's shards hold it, equals the
// parameters of the same model trained on one rank (tp = pp = dp = 1, no
// ZeRO, no recompute) on the same data, within fp32 rounding; the losses match
// step by step. A separate test checks that the reference learns.
//
// The plans cover every value of tp, pp, dp in {1, 2}, ZeRO 0-3, recompute
// none/selective/full, sequence parallel on and off and all three schedules,
// each ZeRO stage with dp 2 alongside tp 2 and pp 2, hybrid sharding, and
// context parallelism at cp 2 and 4 (ring and all-gather) with each of those,
// uneven pipeline stages, and MoE layers with their experts over ep 1, 2 and 4
// ranks folded over dp, tp (sequence parallel) and cp (ZeRO 0-2, pp 2,
// capacity dropping, recompute), with the alltoall and allgather dispatchers. A plan runs when the
// world has its rank count: this executable runs alone (1 rank) and under
// mpirun -n 2, 4 and 8 (tests/run/CMakeLists.txt); each rank computes the
// reference itself on a one-rank communicator.
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "run_test_models.h"
#include "runtime/comm/communicator.h"
#include "runtime/executor/executor.h"
#include "runtime/launch/mpi_env.h"
#include "runtime/comm/self_communicator.h"

namespace strata::rt {
namespace {

using testing::gpt_moe_small;
using testing::gpt_small;
using testing::llama_moe_small;
using testing::llama_small;
using testing::test_config;

constexpr int kSteps = 3;

struct Case {
  const char* name;
  bool llama;
  int tp, pp, dp, vpp;
  int micro_batch_size, microbatches;
  Schedule schedule;
  int zero_stage;
  Recompute recompute;
  bool sequence_parallel;
  bool overlap = true;
  std::int64_t bucket = 40000000;  // small buckets exercise several reductions
  int zero_shard_size = 0;         // hybrid sharding: ZeRO within groups of this many dp ranks
  int cp = 1;                      // context parallelism: each sequence's two chunks per rank
  CpCommType cp_comm_type = CpCommType::kP2p;
  int first_stage_layers = 0;  // uneven stages (plan/pipeline_split.h)
  int last_stage_layers = 0;
  int ep = 0;                     // > 0: the model's MoE variant, its experts over ep ranks
  double capacity_factor = 0.0;   // MoE: dropless (0) or each expert's capacity
  MoeDispatcher dispatcher = MoeDispatcher::kAllToAll;
};

constexpr auto kNone = Recompute::kNone;
constexpr auto kSel = Recompute::kSelective;
constexpr auto kFull = Recompute::kFull;
constexpr auto k1F1B = Schedule::kOneFOneB;
constexpr auto kGpipe = Schedule::kGpipe;
constexpr auto kInter = Schedule::kInterleaved;
constexpr auto kZbH1 = Schedule::kZbH1;
constexpr auto kZbH2 = Schedule::kZbH2;
constexpr auto kZbV = Schedule::kZbV;
constexpr auto kP2p = CpCommType::kP2p;
constexpr auto kAllGather = CpCommType::kAllGather;
constexpr auto kGatherTokens = MoeDispatcher::kAllGather;  // the MoE allgather dispatcher

const Case kCases[] = {
    // 1 rank
    {"gpt_full_recompute", false, 1, 1, 1, 1, 2, 2, k1F1B, 0, kFull, false},
    {"llama_selective_recompute", true, 1, 1, 1, 1, 2, 2, k1F1B, 0, kSel, false},
    // 2 ranks
    {"gpt_tp2", false, 2, 1, 1, 1, 2, 2, k1F1B, 0, kNone, false},
    {"llama_tp2_sp_selective", true, 2, 1, 1, 1, 2, 2, k1F1B, 0, kSel, true},
    {"gpt_pp2_1f1b_tied", false, 1, 2, 1, 1, 1, 4, k1F1B, 0, kNone, false},
    {"llama_pp2_gpipe_full", true, 1, 2, 1, 1, 2, 2, kGpipe, 0, kFull, false},
    {"gpt_pp2_interleaved", false, 1, 2, 1, 2, 1, 4, kInter, 0, kNone, false},
    {"gpt_dp2_zero0_no_overlap", false, 1, 1, 2, 1, 1, 2, k1F1B, 0, kNone, false, false},
    {"llama_dp2_zero1_buckets", true, 1, 1, 2, 1, 1, 2, k1F1B, 1, kNone, false, true, 6000},
    {"gpt_dp2_zero2_buckets", false, 1, 1, 2, 1, 2, 2, k1F1B, 2, kNone, false, true, 15000},
    {"llama_dp2_zero3_full", true, 1, 1, 2, 1, 1, 2, k1F1B, 3, kFull, false},
    // context parallelism: the K/V ring and the all-gather, alone and with tp,
    // sequence parallelism, dp with ZeRO, pp and every recompute
    {"gpt_cp2_ring", false, 1, 1, 1, 1, 2, 2, k1F1B, 0, kNone, false, true, 40000000, 0, 2, kP2p},
    {"llama_cp2_allgather_selective", true, 1, 1, 1, 1, 2, 2, k1F1B, 0, kSel, false, true, 40000000, 0, 2,
     kAllGather},
    {"llama_cp4_ring_full", true, 1, 1, 1, 1, 2, 2, k1F1B, 0, kFull, false, true, 40000000, 0, 4, kP2p},
    {"gpt_cp4_allgather", false, 1, 1, 1, 1, 1, 2, k1F1B, 0, kSel, false, true, 40000000, 0, 4, kAllGather},
    {"llama_tp2_cp2_sp_ring", true, 2, 1, 1, 1, 2, 2, k1F1B, 0, kNone, true, true, 40000000, 0, 2, kP2p},
    {"gpt_cp2_dp2_zero2_buckets", false, 1, 1, 2, 1, 1, 2, k1F1B, 2, kNone, false, true, 15000, 0, 2, kP2p},
    {"gpt_cp2_pp2_1f1b_tied", false, 1, 2, 1, 1, 1, 4, k1F1B, 0, kNone, false, true, 40000000, 0, 2, kAllGather},
    {"llama_tp2_cp2_pp2_zero1_sp", true, 2, 2, 1, 1, 1, 2, k1F1B, 1, kSel, true, true, 40000000, 0, 2, kP2p},
    {"llama_cp2_dp4_zero3_hybrid2", true, 1, 1, 4, 1, 1, 2, k1F1B, 3, kNone, false, true, 40000000, 4, 2, kP2p},
    // uneven pipeline stages: 1 and 3 of the 4 layers (tied embeddings), 3 and 1 with dp 2
    {"gpt_pp2_uneven_1_3_tied", false, 1, 2, 1, 1, 1, 4, k1F1B, 0, kNone, false, true, 40000000, 0, 1, kP2p, 1, 0},
    {"llama_pp2_dp2_uneven_3_1_zero1", true, 1, 2, 2, 1, 1, 2, k1F1B, 1, kSel, false, true, 6000, 0, 1, kP2p, 0, 1},
    // zero-bubble schedules: B and W apart, W's GEMMs deferred with their inputs
    {"gpt_pp2_zbh1_tied", false, 1, 2, 1, 1, 1, 4, kZbH1, 0, kNone, false},
    {"llama_pp2_zbh2_selective", true, 1, 2, 1, 1, 2, 4, kZbH2, 0, kSel, false},
    // zb-v: two chunks per rank on a V (rank 0 holds layers 0 and 3, the embedding
    // and the loss; rank 1 hands chunk 0's output to its own chunk 1), tied on
    // one rank, and fewer micro-batches (2) than its 2pp - 1 warm-up
    {"gpt_pp2_zbv_tied", false, 1, 2, 1, 2, 1, 4, kZbV, 0, kNone, false},
    {"llama_pp2_zbv_selective_m2", true, 1, 2, 1, 2, 2, 2, kZbV, 0, kSel, false},
    // mixture of experts (top-2 of 4 experts in layers 0 and 2, load-balancing
    // loss on): every expert on one rank, experts over ep 2 (dispatch and combine
    // all-to-alls) with and without the distributed optimizer, with a capacity
    // that drops tokens, replicated experts (ep 1, dp 2)
    {"llama_moe_ep1", true, 1, 1, 1, 1, 2, 2, k1F1B, 0, kNone, false, true, 40000000, 0, 1, kP2p, 0, 0, 1},
    {"gpt_moe_capacity_full", false, 1, 1, 1, 1, 2, 2, k1F1B, 0, kFull, false, true, 40000000, 0, 1, kP2p, 0, 0, 1,
     1.0},
    {"llama_moe_dp2_ep2", true, 1, 1, 2, 1, 2, 2, k1F1B, 0, kNone, false, true, 40000000, 0, 1, kP2p, 0, 0, 2},
    {"gpt_moe_dp2_ep2_zero1_capacity", false, 1, 1, 2, 1, 1, 2, k1F1B, 1, kSel, false, true, 6000, 0, 1, kP2p, 0, 0, 2,
     1.25},
    {"llama_moe_dp2_ep1_zero2", true, 1, 1, 2, 1, 1, 2, k1F1B, 2, kNone, false, true, 6000, 0, 1, kP2p, 0, 0, 1},
    // experts folded over tensor- and context-parallel ranks (MoE Parallel
    // Folding): each rank routes its own part of the sequence, the load-balancing
    // counts summed over the sequence's ranks
    {"llama_moe_tp2_sp_ep2_selective", true, 2, 1, 1, 1, 2, 2, k1F1B, 0, kSel, true, true, 40000000, 0, 1, kP2p, 0, 0,
     2},
    {"gpt_moe_cp2_ep2_ring", false, 1, 1, 1, 1, 2, 2, k1F1B, 0, kNone, false, true, 40000000, 0, 2, kP2p, 0, 0, 2},
    // the allgather dispatcher (Megatron-Core's default): every rank gathers the
    // group's tokens and runs its experts' copies; reduce-scatters sum them back
    {"llama_moe_allgather_ep1", true, 1, 1, 1, 1, 2, 2, k1F1B, 0, kNone, false, true, 40000000, 0, 1, kP2p, 0, 0, 1,
     0.0, kGatherTokens},
    {"gpt_moe_dp2_ep2_allgather_capacity", false, 1, 1, 2, 1, 1, 2, k1F1B, 1, kFull, false, true, 6000, 0, 1, kP2p, 0,
     0, 2, 1.25, kGatherTokens},
    // 4 ranks
    {"llama_moe_dp4_ep4_full", true, 1, 1, 4, 1, 1, 2, k1F1B, 1, kFull, false, true, 40000000, 0, 1, kP2p, 0, 0, 4},
    {"gpt_moe_pp2_dp2_ep2_zero1", false, 1, 2, 2, 1, 1, 4, k1F1B, 1, kNone, false, true, 6000, 0, 1, kP2p, 0, 0, 2},
    {"llama_moe_dp4_ep2_zero2_buckets", true, 1, 1, 4, 1, 1, 2, k1F1B, 2, kSel, false, true, 6000, 0, 1, kP2p, 0, 0,
     2},
    {"llama_moe_tp2_dp2_ep4_sp_zero1", true, 2, 1, 2, 1, 2, 2, k1F1B, 1, kNone, true, true, 6000, 0, 1, kP2p, 0, 0, 4},
    {"gpt_moe_tp2_cp2_ep2_sp_full", false, 2, 1, 1, 1, 2, 2, k1F1B, 0, kFull, true, true, 40000000, 0, 2, kAllGather, 0,
     0, 2},
    {"llama_moe_tp2_dp2_ep4_sp_allgather", true, 2, 1, 2, 1, 1, 2, k1F1B, 2, kSel, true, true, 6000, 0, 1, kP2p, 0, 0, 4,
     0.0, kGatherTokens},
    {"gpt_pp4_zbh1_full", false, 1, 4, 1, 1, 1, 8, kZbH1, 0, kFull, false},
    {"llama_tp2_pp2_sp_zbh2", true, 2, 2, 1, 1, 1, 4, kZbH2, 0, kNone, true},
    {"gpt_pp2_dp2_zero2_zbh1_buckets", false, 1, 2, 2, 1, 1, 4, kZbH1, 2, kNone, false, true, 15000},
    {"gpt_cp2_pp2_zbh1_ring", false, 1, 2, 1, 1, 1, 4, kZbH1, 0, kNone, false, true, 40000000, 0, 2, kP2p},
    {"gpt_pp2_dp2_zero2_zbv_buckets_tied", false, 1, 2, 2, 2, 1, 4, kZbV, 2, kNone, false, true, 15000},
    {"llama_tp2_pp2_sp_zbv_full", true, 2, 2, 1, 2, 1, 4, kZbV, 0, kFull, true},
    {"gpt_tp2_pp2_sp_interleaved", false, 2, 2, 1, 2, 1, 4, kInter, 0, kNone, true},
    {"llama_tp2_dp2_zero2_sp", true, 2, 1, 2, 1, 1, 2, k1F1B, 2, kNone, true},
    {"gpt_pp2_dp2_zero1_gpipe", false, 1, 2, 2, 1, 1, 2, kGpipe, 1, kSel, false},
    // hybrid sharding: two shard groups of two ranks
    {"llama_dp4_zero1_hybrid2_buckets", true, 1, 1, 4, 1, 1, 2, k1F1B, 1, kNone, false, true, 6000, 2},
    {"gpt_dp4_zero2_hybrid2", false, 1, 1, 4, 1, 2, 2, k1F1B, 2, kNone, false, true, 15000, 2},
    {"llama_dp4_zero3_hybrid2_full", true, 1, 1, 4, 1, 1, 2, k1F1B, 3, kFull, false, true, 40000000, 2},
    // 8 ranks: every ZeRO stage with tp 2, pp 2, dp 2
    {"llama_tp2_pp2_dp2_zero1_sp_zbh1", true, 2, 2, 2, 1, 1, 4, kZbH1, 1, kSel, true},
    {"gpt_tp2_pp2_dp2_zero1_zbv", false, 2, 2, 2, 2, 1, 4, kZbV, 1, kSel, false, true, 6000},
    {"gpt_tp2_pp2_dp2_zero0", false, 2, 2, 2, 1, 1, 2, k1F1B, 0, kNone, false, true, 15000},
    {"llama_tp2_pp2_dp2_zero1_sp_selective", true, 2, 2, 2, 1, 1, 2, k1F1B, 1, kSel, true},
    {"gpt_tp2_pp2_dp2_zero2_interleaved", false, 2, 2, 2, 2, 1, 2, kInter, 2, kNone, false, false},
    {"llama_tp2_pp2_dp2_zero3_gpipe_full", true, 2, 2, 2, 1, 1, 2, kGpipe, 3, kFull, false},
    {"llama_moe_pp2_dp4_ep4_interleaved_zero1", true, 1, 2, 4, 2, 1, 4, kInter, 1, kSel, false, true, 6000, 0, 1, kP2p,
     0, 0, 4},
    {"gpt_moe_tp2_pp2_dp2_ep4_sp_zero2", false, 2, 2, 2, 1, 1, 2, k1F1B, 2, kNone, true, true, 15000, 0, 1, kP2p, 0, 0,
     4},
    {"llama_moe_pp2_dp4_ep2_allgather_zero1", true, 1, 2, 4, 1, 1, 4, k1F1B, 1, kNone, false, true, 6000, 0, 1, kP2p, 0,
     0, 2, 0.0, kGatherTokens},
};

RunConfig config_of(const Case& c, bool reference) {
  const ModelSpec model = c.ep > 0 ? (c.llama ? llama_moe_small() : gpt_moe_small()) : c.llama ? llama_small() : gpt_small();
  PlanSpec plan;
  plan.micro_batch_size = c.micro_batch_size;
  plan.global_batch_size = c.micro_batch_size * c.microbatches * c.dp;
  if (c.ep > 0) {
    // The reference routes alike (the same capacity per micro-batch) with every expert on its one rank.
    plan.moe.active = true;
    plan.moe.ep = reference ? 1 : c.ep;
    plan.moe.etp = 1;
    plan.moe.token_dispatcher = c.dispatcher;
    plan.moe.expert_capacity_factor = c.capacity_factor;
  }
  if (!reference) {
    plan.tp = c.tp;
    plan.pp = c.pp;
    plan.dp = c.dp;
    plan.vpp = c.vpp;
    plan.schedule = c.schedule;
    plan.zero_stage = c.zero_stage;
    plan.zero_shard_size = c.zero_shard_size;
    plan.cp = c.cp;
    plan.cp_comm_type = c.cp_comm_type;
    plan.first_stage_layers = c.first_stage_layers;
    plan.last_stage_layers = c.last_stage_layers;
    plan.recompute = c.recompute;
    plan.sequence_parallel = c.sequence_parallel;
    plan.overlap_grad_reduce = c.overlap;
    plan.overlap_param_gather = c.overlap;
  } else {
    plan.dp = 1;
  }
  RunConfig config = test_config(model, plan, kSteps);
  if (!reference) config.plan.ddp_bucket_size = c.bucket;
  return config;
}

struct Trained {
  std::vector<StepResult> steps;
  std::map<std::string, std::vector<float>> params;
};

Trained train(const RunConfig& config, Device& device, Communicator& world) {
  Executor executor(config, device, world);
  Trained t;
  for (int s = 0; s < config.training.steps; ++s) t.steps.push_back(executor.step());
  executor.finish();
  t.params = executor.full_parameters();
  return t;
}

class Correctness : public ::testing::TestWithParam<Case> {
 protected:
  static void SetUpTestSuite() {
    DeviceOptions options;
    options.cpu_threads = 1;  // ranks share the cores
    device_ = make_device(Backend::kCpu, 0, options).release();
    CommOptions comm;
    comm.timeout = std::chrono::seconds(60);
    world_ = make_world_communicator(*device_, comm).release();
    self_ = make_self_communicator(*device_, comm).release();
  }
  static void TearDownTestSuite() {
    delete self_;
    delete world_;
    delete device_;
  }
  static Device* device_;
  static Communicator* world_;
  static Communicator* self_;
};

Device* Correctness::device_ = nullptr;
Communicator* Correctness::world_ = nullptr;
Communicator* Correctness::self_ = nullptr;

TEST_P(Correctness, ParametersMatchSingleRankReference) {
  const Case& c = GetParam();
  const int ranks = c.tp * c.cp * c.pp * c.dp;
  if (world_->size() != ranks) {
    GTEST_SKIP() << c.name << " runs on " << ranks << " ranks; this world has " << world_->size();
  }
  const Trained ref = train(config_of(c, true), *device_, *self_);
  const Trained got = train(config_of(c, false), *device_, *world_);

  ASSERT_EQ(ref.steps.size(), static_cast<std::size_t>(kSteps));
  ASSERT_EQ(got.steps.size(), static_cast<std::size_t>(kSteps));
  // Same losses and gradient norms, step by step (fp32 sums in other orders).
  for (int s = 0; s < kSteps; ++s) {
    EXPECT_NEAR(got.steps[s].loss, ref.steps[s].loss, 1e-5 * ref.steps[s].loss) << "step " << s;
    EXPECT_NEAR(got.steps[s].grad_norm, ref.steps[s].grad_norm, 1e-4 * ref.steps[s].grad_norm) << "step " << s;
  }
  // Every parameter. The update of k Adam steps is at most k * lr per element;
  // the tolerance is a thousandth of it.
  ASSERT_EQ(got.params.size(), ref.params.size());
  const double tolerance = 1e-3 * kSteps * 1e-2;
  for (const auto& [name, want] : ref.params) {
    const auto it = got.params.find(name);
    ASSERT_NE(it, got.params.end()) << name;
    ASSERT_EQ(it->second.size(), want.size()) << name;
    double worst = 0.0;
    std::size_t at = 0;
    for (std::size_t i = 0; i < want.size(); ++i) {
      const double d = std::abs(static_cast<double>(it->second[i]) - want[i]);
      if (d > worst) {
        worst = d;
        at = i;
      }
    }
    EXPECT_LE(worst, tolerance) << c.name << ": " << name << " element " << at << " is " << it->second[at]
                                << ", reference " << want[at];
  }
}

// The tests do change parameters: the reference after k steps differs from its
// start by far more than the tolerance (so matching it is not matching the init).
TEST(CorrectnessReference, StepsMoveTheParameters) {
  DeviceOptions options;
  options.cpu_threads = 1;
  auto device = make_device(Backend::kCpu, 0, options);
  auto self = make_self_communicator(*device, {});
  const RunConfig one = config_of(kCases[0], true);
  RunConfig zero_steps = one;
  Executor start(zero_steps, *device, *self);
  const auto init = start.full_parameters();
  const Trained after = train(one, *device, *self);
  double moved = 0.0;
  for (const auto& [name, v] : after.params) {
    for (std::size_t i = 0; i < v.size(); ++i) moved = std::max(moved, std::abs(double(v[i]) - init.at(name)[i]));
  }
  EXPECT_GT(moved, 100 * 1e-3 * kSteps * 1e-2);
}

// The reference learns: each step trains on new sequences of the synthetic
// data (three next tokens in four follow a fixed rule), so single steps' losses
// are noisy; over 8 steps the mean loss of the last three is well below that of
// the first three (by about 0.15 nats for gpt-small at lr 1e-2; ln 64 = 4.16 is
// the loss of a uniform guess).
TEST(CorrectnessReference, LossFalls) {
  DeviceOptions options;
  options.cpu_threads = 1;
  auto device = make_device(Backend::kCpu, 0, options);
  auto self = make_self_communicator(*device, {});
  for (const bool llama : {false, true}) {
    PlanSpec plan;
    plan.micro_batch_size = 2;
    plan.global_batch_size = 4;
    plan.dp = 1;
    const RunConfig config = test_config(llama ? llama_small() : gpt_small(), plan, 8);
    const Trained t = train(config, *device, *self);
    const double first = (t.steps[0].loss + t.steps[1].loss + t.steps[2].loss) / 3;
    const double last = (t.steps[5].loss + t.steps[6].loss + t.steps[7].loss) / 3;
    EXPECT_LT(first, std::log(64.0) + 0.1) << config.model.name << ": the untrained model is near a uniform guess";
    EXPECT_LT(last, first - 0.08) << config.model.name << " did not learn";
  }
}

INSTANTIATE_TEST_SUITE_P(Plans, Correctness, ::testing::ValuesIn(kCases),
                         [](const ::testing::TestParamInfo<Case>& param) { return std::string(param.param.name); });

// Hybrid sharding's all-reduce across the shard groups starts as soon as its
// reduce-scatter is done, as the simulator has it (data_parallel.cc,
// reduce_gradients): with ZeRO-2 the first micro-batch's shards are all-reduced
// while the second micro-batch's backward still runs, not after the backward.
TEST_F(Correctness, HybridShardingAllReducesAcrossGroupsDuringTheBackward) {
  const Case c{"gpt_dp4_zero2_hybrid2_overlap", false, 1, 1, 4, 1, 1, 2, k1F1B, 2, kNone, false, true, 15000, 2};
  if (world_->size() != 4) GTEST_SKIP() << c.name << " runs on 4 ranks; this world has " << world_->size();
  Executor executor(config_of(c, false), *device_, *world_);
  executor.step();
  executor.step();
  executor.finish();
  const Recorder& recorder = executor.recorder();
  TimeNs first_across = -1, backward_end = 0;
  int across = 0;
  for (const MeasuredEvent& e : recorder.last_step_events()) {
    const std::string& name = recorder.names()[static_cast<std::size_t>(e.name)];
    if (name == "grad all_reduce across shard groups") {
      ++across;
      if (first_across < 0 || e.start_ns < first_across) first_across = e.start_ns;
    }
    if (e.lane == Lane::kCompute && e.phase == EventPhase::kBackward) {
      backward_end = std::max(backward_end, e.start_ns + e.duration_ns);
    }
  }
  // One per bucket and micro-batch (ZeRO-2 reduce-scatters every micro-batch).
  EXPECT_GT(across, 2);
  ASSERT_GE(first_across, 0);
  EXPECT_LT(first_across, backward_end) << "the first all-reduce across shard groups waited for the backward's end";
}

// A zero-bubble schedule computes 1F1B's gradients in another order of ops but
// not of sums: W runs a stage's micro-batches oldest first, as 1F1B's backwards
// do, so every gradient element adds the same terms in the same order, and the
// data-parallel reductions (ZeRO 0 and 1: once per step) see the same values.
// The runs are then equal bit for bit: losses, gradient norms, parameters.
const Case kZeroBubbleRuns[] = {
    {"gpt_pp2_zbh1", false, 1, 2, 1, 1, 1, 4, kZbH1, 0, kNone, false},
    {"llama_pp2_zbh2_selective", true, 1, 2, 1, 1, 2, 4, kZbH2, 0, kSel, false},
    {"llama_pp4_zbh1", true, 1, 4, 1, 1, 1, 8, kZbH1, 0, kNone, false},
    {"gpt_tp2_pp2_sp_zbh2_full", false, 2, 2, 1, 1, 1, 4, kZbH2, 0, kFull, true},
    {"llama_pp2_dp2_zero1_zbh1", true, 1, 2, 2, 1, 1, 4, kZbH1, 1, kNone, false, true, 6000},
};

class ZeroBubble : public Correctness {};

TEST_P(ZeroBubble, EqualsIts1F1BTwinBitForBit) {
  const Case& c = GetParam();
  const int ranks = c.tp * c.cp * c.pp * c.dp;
  if (world_->size() != ranks) {
    GTEST_SKIP() << c.name << " runs on " << ranks << " ranks; this world has " << world_->size();
  }
  Case twin = c;
  twin.schedule = k1F1B;
  const Trained one_f_one_b = train(config_of(twin, false), *device_, *world_);
  const Trained zero_bubble = train(config_of(c, false), *device_, *world_);
  for (int s = 0; s < kSteps; ++s) {
    EXPECT_EQ(zero_bubble.steps[s].loss, one_f_one_b.steps[s].loss) << "step " << s;
    EXPECT_EQ(zero_bubble.steps[s].grad_norm, one_f_one_b.steps[s].grad_norm) << "step " << s;
  }
  for (const auto& [name, want] : one_f_one_b.params) {
    const std::vector<float>& got = zero_bubble.params.at(name);
    ASSERT_EQ(got.size(), want.size()) << name;
    std::size_t differ = 0;
    for (std::size_t i = 0; i < want.size(); ++i) differ += got[i] != want[i];
    EXPECT_EQ(differ, 0u) << c.name << ": " << name << " differs from 1F1B's in " << differ << " of " << want.size()
                          << " elements";
  }
}

INSTANTIATE_TEST_SUITE_P(Plans, ZeroBubble, ::testing::ValuesIn(kZeroBubbleRuns),
                         [](const ::testing::TestParamInfo<Case>& param) { return std::string(param.param.name); });

}  // namespace
}  // namespace strata::rt

int main(int argc, char** argv) {
  strata::rt::MpiSession mpi;  // MPI only under a launcher
  ::testing::InitGoogleTest(&argc, argv);
  // Only rank 0 prints the progress; every rank runs and checks every test.
  if (mpi.launch().rank != 0) {
    ::testing::TestEventListeners& listeners = ::testing::UnitTest::GetInstance()->listeners();
    delete listeners.Release(listeners.default_result_printer());
  }
  return RUN_ALL_TESTS();
}

