// The workload builder's data-parallel side, op by op: which tasks ZeRO-2,
// ZeRO-3, optimizer offload and the tied embedding's sum add, with their bytes,
// ranks and dependencies, against hand counts.
//
// The model: GPT-style, 2 layers, h 64, ffn 256, vocabulary 128, 32 learned
// positions, LayerNorm and biases, tied embeddings. A layer holds 49,984
// parameters (QKV 64x192 + 192, projection 64x64 + 64, fc1 64x256 + 256, fc2
// 256x64 + 64, two norms of 2x64), the word embedding 8,192, the positions 2,048,
// the final norm 128: 110,336 in all, one bucket at Megatron's 40M. bf16 weights,
// bf16 gradients (no fp32 accumulation): 2 bytes each.
#include <algorithm>
#include <map>
#include <set>

#include <gtest/gtest.h>

#include "fake_costs.h"
#include "plan/params.h"
#include "test_models.h"
#include "sim/workload/workload.h"

namespace strata::sim {
namespace {

using testing::FreeComm;
using testing::GemmCountCosts;

constexpr double kLayer = 49984;
constexpr double kModel = 2 * kLayer + 8192 + 2048 + 128;

ModelSpec model() { return strata::testing::small_gpt(2); }

PlanSpec plan(int pp, int dp, int zero) {
  PlanSpec p;
  p.pp = pp;
  p.dp = dp;
  p.zero_stage = zero;
  p.micro_batch_size = 1;
  p.global_batch_size = 2 * dp;  // two micro-batches
  p.schedule = Schedule::kOneFOneB;
  p.accumulate_allreduce_grads_in_fp32 = false;
  return p;
}

Workload build(const PlanSpec& p, const ModelSpec& m = model()) {
  const GemmCountCosts costs(1000, m.vocab_size);
  const FreeComm comm;
  return build_workload(m, p, costs, comm, Fidelity::kFull);
}

std::vector<TaskId> named(const Workload& w, const std::string& name, Phase phase) {
  std::vector<TaskId> out;
  for (TaskId t = 0; t < w.graph.num_tasks(); ++t) {
    const TaskLabel& l = w.notes.label_of_task(t);
    if (l.name == name && l.phase == phase) out.push_back(t);
  }
  return out;
}

std::set<int> ranks_of(const Workload& w, TaskId t) {
  std::set<int> ranks;
  for (const std::int32_t* s = w.graph.slots_begin(t); s != w.graph.slots_end(t); ++s) ranks.insert(w.graph.rank_of_slot(*s));
  return ranks;
}

std::map<TaskId, std::set<TaskId>> predecessors(const Workload& w) {
  std::map<TaskId, std::set<TaskId>> pred;
  for (TaskId t = 0; t < w.graph.num_tasks(); ++t) {
    for (const TaskId* s = w.graph.successors_begin(t); s != w.graph.successors_end(t); ++s) pred[*s].insert(t);
  }
  return pred;
}

// The last compute task of rank r's backward of micro-batch mb (program order).
TaskId last_backward_task(const Workload& w, int r, int mb) {
  TaskId last = -1;
  for (TaskId t : w.stream(r, StreamKind::kCompute)) {
    const TaskLabel& l = w.notes.label_of_task(t);
    if (l.phase == Phase::kBackward && w.notes.info(t).microbatch == mb) last = t;
  }
  return last;
}

TEST(Workload, ZeroTwoReduceScattersEveryMicroBatchAndGathersBeforeTheForward) {
  const Workload w = build(plan(1, 2, 2));
  const auto pred = predecessors(w);
  const std::vector<TaskId> rs = named(w, "grad reduce_scatter", Phase::kBackward);
  ASSERT_EQ(rs.size(), 2u);  // one bucket, two micro-batches
  for (int mb = 0; mb < 2; ++mb) {
    EXPECT_EQ(ranks_of(w, rs[mb]), (std::set<int>{0, 1}));
    EXPECT_EQ(w.notes.info(rs[mb]).bytes, kModel * 2);
    EXPECT_EQ(w.notes.info(rs[mb]).microbatch, mb);
    // Ready when the backward of that micro-batch ends (the bucket ends with the embedding).
    for (int r : {0, 1}) EXPECT_TRUE(pred.at(rs[mb]).count(last_backward_task(w, r, mb))) << "mb " << mb;
  }
  // The weights updated last step, gathered before the first forward uses them.
  const std::vector<TaskId> ag = named(w, "param all_gather", Phase::kForward);
  ASSERT_EQ(ag.size(), 1u);
  EXPECT_EQ(w.notes.info(ag[0]).bytes, kModel * 2);
  const TaskId first = w.stream(0, StreamKind::kCompute).front();
  EXPECT_TRUE(pred.at(first).count(ag[0]));
  EXPECT_TRUE(named(w, "grad all_reduce", Phase::kBackward).empty());
  // Each rank updates its half: 28 bytes of Adam traffic per parameter with the
  // 2-byte gradient read in its own dtype.
  const std::vector<TaskId> opt = named(w, "optimizer step", Phase::kStep);
  ASSERT_EQ(opt.size(), 2u);
  EXPECT_EQ(w.notes.info(opt[0]).bytes, kModel / 2 * 28);
}

TEST(Workload, ZeroThreeGathersEachLayerTwiceAndReduceScattersItOnce) {
  const Workload w = build(plan(1, 2, 3));
  const auto pred = predecessors(w);
  const std::vector<TaskId> fwd = named(w, "param all_gather", Phase::kForward);
  const std::vector<TaskId> bwd = named(w, "param all_gather", Phase::kBackward);
  const std::vector<TaskId> rs = named(w, "grad reduce_scatter", Phase::kBackward);
  // 2 layers x 2 micro-batches each.
  ASSERT_EQ(fwd.size(), 4u);
  ASSERT_EQ(bwd.size(), 4u);
  ASSERT_EQ(rs.size(), 4u);
  for (TaskId t : fwd) EXPECT_EQ(w.notes.info(t).bytes, kLayer * 2);
  for (TaskId t : rs) EXPECT_EQ(w.notes.info(t).bytes, kLayer * 2);
  // A layer's gather precedes its first task; its reduce-scatter follows its last.
  for (TaskId g : fwd) {
    const TaskInfo& gi = w.notes.info(g);
    bool feeds_layer = false;
    for (const TaskId* s = w.graph.successors_begin(g); s != w.graph.successors_end(g); ++s) {
      const TaskInfo& si = w.notes.info(*s);
      feeds_layer = feeds_layer || (si.layer == gi.layer && si.microbatch == gi.microbatch);
    }
    EXPECT_TRUE(feeds_layer) << "layer " << gi.layer;
  }
  for (TaskId t : rs) {
    bool after_layer = false;
    for (TaskId p : pred.at(t)) after_layer = after_layer || w.notes.info(p).layer == w.notes.info(t).layer;
    EXPECT_TRUE(after_layer);
  }
  // No bucket-wise reduction or step-time gather besides.
  EXPECT_TRUE(named(w, "param all_gather", Phase::kStep).empty());
  EXPECT_TRUE(named(w, "grad all_reduce", Phase::kBackward).empty());
}

TEST(Workload, OffloadRunsTheUpdateOnTheHostAfterTheGradientNorm) {
  PlanSpec p = plan(1, 2, 1);
  p.offload_optimizer = true;
  const Workload w = build(p);
  const auto pred = predecessors(w);
  EXPECT_TRUE(named(w, "optimizer step", Phase::kStep).empty());
  const std::vector<TaskId> norm = named(w, "grad norm all_reduce", Phase::kStep);
  ASSERT_EQ(norm.size(), 1u);
  for (int r : {0, 1}) {
    std::vector<std::string> copy_stream;
    for (TaskId t : w.stream(r, StreamKind::kCopy)) copy_stream.push_back(w.notes.label_of_task(t).name);
    EXPECT_EQ(copy_stream, (std::vector<std::string>{"gradients to host", "host optimizer step", "weights to device"}));
    const TaskId d2h = w.stream(r, StreamKind::kCopy).front();
    EXPECT_EQ(w.notes.info(d2h).bytes, kModel / 2 * 2);  // this rank's shard, in bf16
    EXPECT_TRUE(pred.at(d2h).count(norm[0]));
  }
}

TEST(Workload, TiedEmbeddingIsSummedBetweenFirstAndLastStage) {
  const Workload w = build(plan(2, 1, 0));
  const auto pred = predecessors(w);
  const std::vector<TaskId> sync = named(w, "embedding grad all_reduce", Phase::kBackward);
  ASSERT_EQ(sync.size(), 1u);
  EXPECT_EQ(ranks_of(w, sync[0]), (std::set<int>{0, 1}));
  EXPECT_EQ(w.notes.info(sync[0]).bytes, 8192 * 2);
  // After each stage's last backward (micro-batch 1 is last on both).
  for (int r : {0, 1}) EXPECT_TRUE(pred.at(sync[0]).count(last_backward_task(w, r, 1)));
  // Each stage's gradient-norm pass waits for the sum; the global norm for both passes.
  const std::vector<TaskId> pass = named(w, "gradient norm", Phase::kStep);
  ASSERT_EQ(pass.size(), 2u);
  const std::vector<TaskId> norm = named(w, "grad norm all_reduce", Phase::kStep);
  ASSERT_EQ(norm.size(), 1u);
  for (TaskId t : pass) {
    EXPECT_TRUE(pred.at(t).count(sync[0]));
    EXPECT_TRUE(pred.at(norm[0]).count(t));
  }
  // Untied, or on one stage, there is nothing to sum.
  ModelSpec untied = model();
  untied.untie_embeddings_and_output_weights = true;
  EXPECT_TRUE(named(build(plan(2, 1, 0), untied), "embedding grad all_reduce", Phase::kBackward).empty());
  EXPECT_TRUE(named(build(plan(1, 2, 0)), "embedding grad all_reduce", Phase::kBackward).empty());
}

// Sequence parallelism at tp 2: the parameters both tensor-parallel ranks hold
// whole (per layer two LayerNorms of 2 x 64 and the projection's and fc2's biases
// of 64: 384; the final norm's 128 on the last stage) have partial gradients,
// all-reduced over tp once the data-parallel reduction is done, before the norm
// pass. pp 2: stage 0 holds 384 x 1, stage 1 384 + 128; bf16 gradients.
TEST(Workload, SequenceParallelSumsTheReplicatedGradientsOverTp) {
  PlanSpec p = plan(2, 1, 0);
  p.tp = 2;
  p.sequence_parallel = true;
  EXPECT_EQ(sequence_parallel_replicated_params(model(), p, 0), 384);
  EXPECT_EQ(sequence_parallel_replicated_params(model(), p, 1), 384 + 128);
  const Workload w = build(p);
  const auto pred = predecessors(w);
  const std::vector<TaskId> sums = named(w, "replicated grad all_reduce", Phase::kStep);
  ASSERT_EQ(sums.size(), 2u);
  std::multiset<double> bytes;
  for (TaskId t : sums) {
    bytes.insert(w.notes.info(t).bytes);
    EXPECT_EQ(ranks_of(w, t).size(), 2u);  // the stage's tensor-parallel pair
  }
  EXPECT_EQ(bytes, (std::multiset<double>{384 * 2, 512 * 2}));
  // The tied embedding's sums (one per tensor-parallel rank, over the first and
  // last stage) wait for both stages' sums; each norm pass for one of them.
  const std::vector<TaskId> tied = named(w, "embedding grad all_reduce", Phase::kBackward);
  ASSERT_EQ(tied.size(), 2u);
  for (TaskId t : tied) {
    for (TaskId sum : sums) EXPECT_TRUE(pred.at(t).count(sum));
  }
  for (TaskId pass : named(w, "gradient norm", Phase::kStep)) {
    EXPECT_TRUE(pred.at(pass).count(tied[0]) || pred.at(pass).count(tied[1]));
  }
  // Untied, nothing between: each norm pass waits for its stage's sum itself.
  ModelSpec untied = model();
  untied.untie_embeddings_and_output_weights = true;
  const Workload u = build(p, untied);
  const auto upred = predecessors(u);
  const std::vector<TaskId> usums = named(u, "replicated grad all_reduce", Phase::kStep);
  ASSERT_EQ(usums.size(), 2u);
  for (TaskId pass : named(u, "gradient norm", Phase::kStep)) {
    EXPECT_TRUE(upred.at(pass).count(usums[0]) || upred.at(pass).count(usums[1]));
  }
  p.sequence_parallel = false;
  EXPECT_TRUE(named(build(p), "replicated grad all_reduce", Phase::kStep).empty());
}

// A multi-token-prediction layer on the last stage holds its transformer
// layer's 384 whole and three more norms of 128 (enorm, hnorm, its final norm),
// all sequence-parallel in Megatron-Core: their gradients join the last stage's
// sum; the first stage's does not change.
TEST(Workload, SequenceParallelSumsTheMultiTokenPredictionLayersNormsToo) {
  ModelSpec m = model();
  m.mtp_num_layers = 1;
  PlanSpec p = plan(2, 1, 0);
  p.tp = 2;
  p.sequence_parallel = true;
  EXPECT_EQ(sequence_parallel_replicated_params(m, p, 0), 384);
  EXPECT_EQ(sequence_parallel_replicated_params(m, p, 1), 384 + 128 + 384 + 3 * 128);
}

TEST(Workload, DistributedOptimizerReducesTheSharedEmbeddingAsItsOwnBucket) {
  // pp 2, dp 2, ZeRO-1: stage 1's buckets are the output layer alone (8,192) and
  // the final norm with its layer; stage 0's its layer with the positions, then
  // the word embedding alone (plan/bucket_plan.h).
  const Workload w = build(plan(2, 2, 1));
  std::multiset<double> bytes;
  for (TaskId t : named(w, "grad reduce_scatter", Phase::kBackward)) bytes.insert(w.notes.info(t).bytes);
  EXPECT_EQ(bytes, (std::multiset<double>{8192 * 2, 8192 * 2, (128 + kLayer) * 2, (kLayer + 2048) * 2}));
}

// The step's passes over each rank's gradient shard (ZeRO-1 over dp 2: half the
// model): the norm for clipping reads it once; with fp16 the loss scaler's unscale
// and inf check reads and writes it first. Gradients in their accumulation dtype.
TEST(Workload, StepPassesReadTheRanksGradientShard) {
  PlanSpec p = plan(1, 2, 1);
  Workload w = build(p);
  std::vector<TaskId> norm = named(w, "gradient norm", Phase::kStep);
  ASSERT_EQ(norm.size(), 2u);
  for (TaskId t : norm) EXPECT_DOUBLE_EQ(w.notes.info(t).bytes, kModel / 2 * 2);  // bf16 gradients
  EXPECT_TRUE(named(w, "unscale and inf check", Phase::kStep).empty());          // no loss scaling in bf16
  p.dtype = DType::kFp16;
  p.accumulate_allreduce_grads_in_fp32 = true;
  w = build(p);
  norm = named(w, "gradient norm", Phase::kStep);
  const std::vector<TaskId> unscale = named(w, "unscale and inf check", Phase::kStep);
  ASSERT_EQ(unscale.size(), 2u);
  const auto pred = predecessors(w);
  for (std::size_t i = 0; i < 2; ++i) {
    EXPECT_DOUBLE_EQ(w.notes.info(norm[i]).bytes, kModel / 2 * 4);  // fp32 main gradients
    EXPECT_DOUBLE_EQ(w.notes.info(unscale[i]).bytes, kModel / 2 * 4);
    // On the compute stream, the unscale first.
    const auto stream = w.stream(static_cast<int>(i), StreamKind::kCompute);
    const auto at = [&](TaskId t) { return std::find(stream.begin(), stream.end(), t) - stream.begin(); };
    EXPECT_LT(at(unscale[i]), at(norm[i]));
  }
}

}  // namespace
}  // namespace strata::sim
