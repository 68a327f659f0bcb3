// ZeRO-3's collectives in the order each framework issues them (issue 23, bug 2),
// against schedules computed by hand.
//
// 4 layers of the small GPT, dp 2, one micro-batch, bf16 gradients. Costs: every
// GEMM 1 us, everything else free (GemmCountCosts), so a layer's forward takes F
// and its backward B = 2F; every collective takes g = B (AlphaBetaComm, no links:
// two collectives on different streams do not slow each other). Time in units of
// B from the first forward gather, s the backward step (step 0 is layer 3).
//
// Forward (every framework here keeps two layers' gathers in flight): G_f(0..3) at
// 0, 1, 2, 3, each layer right after its gather, the last done at 4.5. The
// backward gathers follow on the same stream: G_b(0) runs 4..5.
//
// pytorch-fsdp1 (BACKWARD_PRE, two layers, reduce-scatters on their own stream):
//   G_b(1) 5..6 (prefetched), B(0) 5..6, G_b(2) waits for B(0): 6..7, B(1) 6..7,
//   B(2) 7..8, B(3) 8..9; R(s) right after B(s) on its own stream: last ends at 10.
// strata-runtime (BACKWARD_PRE, one stream, issue order G0 G1 R0 G2 R1 G3 R2 R3):
//   R0 6..7, G2 7..8, B1 6..7, R1 8..9, B2 8..9, G3 9..10, B3 10..11, R2 10..11,
//   R3 11..12.
// composer-fsdp1 (BACKWARD_POST: the next gather after the layer's gradients, its
//   own reduce stream): B(s) at 5, 7, 9, 11; the last R ends at 13.
// The old order (one stream, G(s) R(s) G(s+1): a layer's gather, compute and
// reduce-scatter in series) ends at 16: B(s) at 5, 8, 11, 14, R(3) 15..16.
#include <gtest/gtest.h>

#include "fake_costs.h"
#include "test_models.h"
#include "sim/engine/engine.h"
#include "sim/workload/workload.h"

namespace strata::sim {
namespace {

using testing::AlphaBetaComm;
using testing::GemmCountCosts;

constexpr int kLayers = 4;
constexpr double kLayerBytes = 49984 * 2;  // tests/sim/workload_test.cc: one layer's parameters, bf16

struct Timeline {
  TimeNs backward_unit = 0;            // B, measured
  TimeNs last_reduce_end = 0;          // the last reduce-scatter's end
  std::vector<TimeNs> backward_start;  // per backward step, its layer's first compute task
  std::vector<std::string> dp_stream;  // the dp-comm stream's backward collectives in order ("G" / "R")
  bool reduces_on_own_lane = false;
};

Timeline run(const ShardedDataParallel& z) {
  ModelSpec m = strata::testing::small_gpt(kLayers);
  PlanSpec p;
  p.dp = 2;
  p.zero_stage = 3;
  p.micro_batch_size = 1;
  p.global_batch_size = 2;
  p.accumulate_allreduce_grads_in_fp32 = false;
  const GemmCountCosts costs(1000, m.vocab_size);
  // B first, with free communication; then every collective costs exactly B.
  const AlphaBetaComm free_comm(0, 1e30);
  Workload probe = build_workload(m, p, costs, free_comm, Fidelity::kFull);
  const RunResult pr = run_task_graph(probe.graph, nullptr);
  TimeNs b = 0;
  for (TaskId t : probe.stream(0, StreamKind::kCompute)) {
    const TaskInfo& info = probe.notes.info(t);
    if (probe.notes.label_of_task(t).phase == Phase::kBackward && info.layer == kLayers - 1) {
      b += pr.end_ns[t] - pr.start_ns[t];
    }
  }
  WorkloadOptions o;
  o.sharded = z;
  const AlphaBetaComm comm(0, kLayerBytes / (static_cast<double>(b) * 1e-9));
  Workload w = build_workload(m, p, costs, comm, Fidelity::kFull, o);
  const RunResult r = run_task_graph(w.graph, nullptr);
  Timeline out;
  out.backward_unit = b;
  out.backward_start.assign(kLayers, -1);
  for (TaskId t : w.stream(0, StreamKind::kCompute)) {
    const TaskInfo& info = w.notes.info(t);
    if (w.notes.label_of_task(t).phase != Phase::kBackward || info.layer < 0) continue;
    TimeNs& start = out.backward_start[kLayers - 1 - info.layer];
    if (start < 0) start = r.start_ns[t];
  }
  for (StreamKind lane : {StreamKind::kDpComm, StreamKind::kDpReduce}) {
    for (TaskId t : w.stream(0, lane)) {
      const TaskLabel& l = w.notes.label_of_task(t);
      if (l.name == "grad reduce_scatter") {
        out.last_reduce_end = std::max(out.last_reduce_end, r.end_ns[t]);
        if (lane == StreamKind::kDpReduce) out.reduces_on_own_lane = true;
      }
      if (lane == StreamKind::kDpComm && l.phase == Phase::kBackward) {
        out.dp_stream.push_back(l.name == "grad reduce_scatter" ? "R" : "G");
      }
    }
  }
  return out;
}

// Times in units of B since the first forward gather (which starts at 0).
std::vector<double> in_units(const Timeline& t, const std::vector<TimeNs>& ns) {
  std::vector<double> out;
  for (TimeNs x : ns) out.push_back(static_cast<double>(x) / static_cast<double>(t.backward_unit));
  return out;
}

void expect_times(const Timeline& t, const std::vector<double>& backward_start, double last_reduce_end) {
  const std::vector<double> got = in_units(t, t.backward_start);
  ASSERT_EQ(got.size(), backward_start.size());
  for (std::size_t s = 0; s < got.size(); ++s) EXPECT_NEAR(got[s], backward_start[s], 1e-3) << "step " << s;
  EXPECT_NEAR(static_cast<double>(t.last_reduce_end) / static_cast<double>(t.backward_unit), last_reduce_end, 1e-3);
}

ShardedDataParallel order(BackwardPrefetch prefetch, ReduceStream stream) {
  ShardedDataParallel z;
  z.backward_prefetch = prefetch;
  z.unsharded_layers = 2;
  z.reduce_stream = stream;
  return z;
}

TEST(ZeroThreeOrder, FsdpPrefetchesTheNextGatherBeforeTheGradientsAndReducesOnItsOwnStream) {
  const Timeline t = run(order(BackwardPrefetch::kPre, ReduceStream::kOwn));
  ASSERT_GT(t.backward_unit, 0);
  EXPECT_TRUE(t.reduces_on_own_lane);
  EXPECT_EQ(t.dp_stream, (std::vector<std::string>{"G", "G", "G", "G"}));
  expect_times(t, {5, 6, 7, 8}, 10);
}

TEST(ZeroThreeOrder, OneStreamRunsCollectivesInIssueOrder) {
  const Timeline t = run(order(BackwardPrefetch::kPre, ReduceStream::kGathers));
  EXPECT_FALSE(t.reduces_on_own_lane);
  EXPECT_EQ(t.dp_stream, (std::vector<std::string>{"G", "G", "R", "G", "R", "G", "R", "R"}));
  expect_times(t, {5, 6, 8, 10}, 12);
}

TEST(ZeroThreeOrder, BackwardPostGathersAfterTheLayersGradients) {
  const Timeline t = run(order(BackwardPrefetch::kPost, ReduceStream::kOwn));
  expect_times(t, {5, 7, 9, 11}, 13);
}

// What every ZeRO-3 plan got before: gather, compute, reduce-scatter in series.
TEST(ZeroThreeOrder, NoPrefetchOnOneStreamSerialisesTheBackward) {
  const Timeline t = run(order(BackwardPrefetch::kNone, ReduceStream::kGathers));
  EXPECT_EQ(t.dp_stream, (std::vector<std::string>{"G", "R", "G", "R", "G", "R", "G", "R"}));
  expect_times(t, {5, 8, 11, 14}, 16);
}

// The shipped presets say what their sources say.
// FSDP2 copies the gathered buffer out into the parameters on the compute
// stream before the layer's forward and before its backward, and the gradients
// into the reduce-scatter's input after its backward; FSDP1's flat parameter is
// a view of the gathered buffer. With every copy costing c, layer 0's forward
// compute grows by c and its backward by 2c.
TEST(ZeroThreeOrder, Fsdp2CopiesGatheredWeightsOutAndGradientsIn) {
  constexpr TimeNs kCopy = 300;
  const ModelSpec m = strata::testing::small_gpt(kLayers);
  PlanSpec p;
  p.dp = 2;
  p.zero_stage = 3;
  p.micro_batch_size = 1;
  p.global_batch_size = 2;
  const testing::GemmAndCopyCosts costs(1000, m.vocab_size, kCopy);
  const AlphaBetaComm comm(0, 1e30);
  auto layer0 = [&](bool copies, Phase phase) {
    WorkloadOptions o;
    o.sharded = order(BackwardPrefetch::kPre, ReduceStream::kOwn);
    o.sharded.gather_copy_out = copies;
    o.sharded.reduce_copy_in = copies;
    const Workload w = build_workload(m, p, costs, comm, Fidelity::kFull, o);
    TimeNs sum = 0;
    for (TaskId t : w.stream(0, StreamKind::kCompute)) {
      if (w.notes.label_of_task(t).phase == phase && w.notes.info(t).layer == 0) sum += w.graph.duration_ns(t);
    }
    return sum;
  };
  EXPECT_EQ(layer0(true, Phase::kForward) - layer0(false, Phase::kForward), kCopy);
  EXPECT_EQ(layer0(true, Phase::kBackward) - layer0(false, Phase::kBackward), 2 * kCopy);
  const FrameworkProfile fsdp2 = load_framework_profile("pytorch-fsdp2");
  EXPECT_TRUE(fsdp2.sharded->gather_copy_out);
  EXPECT_TRUE(fsdp2.sharded->reduce_copy_in);
  const FrameworkProfile fsdp1 = load_framework_profile("pytorch-fsdp1");
  EXPECT_FALSE(fsdp1.sharded->gather_copy_out);
  EXPECT_FALSE(fsdp1.sharded->reduce_copy_in);
}

TEST(ZeroThreeOrder, PresetsOrderAsTheirFrameworksDo) {
  const FrameworkProfile fsdp1 = load_framework_profile("pytorch-fsdp1");
  ASSERT_TRUE(fsdp1.sharded);
  EXPECT_EQ(fsdp1.sharded->backward_prefetch, BackwardPrefetch::kPre);    // FSDP's default BACKWARD_PRE
  EXPECT_EQ(fsdp1.sharded->reduce_stream, ReduceStream::kOwn);
  const FrameworkProfile composer = load_framework_profile("composer-fsdp1");
  ASSERT_TRUE(composer.sharded);
  EXPECT_EQ(composer.sharded->backward_prefetch, BackwardPrefetch::kPost);  // Composer's FSDPConfig default
  const FrameworkProfile runtime = load_framework_profile("strata-runtime");
  ASSERT_TRUE(runtime.sharded);
  EXPECT_EQ(runtime.sharded->reduce_stream, ReduceStream::kGathers);  // one data-parallel communicator
  EXPECT_FALSE(load_framework_profile("megatron-lm-2021").sharded);   // no ZeRO-3 in 2021 Megatron-LM
}

}  // namespace
}  // namespace strata::sim
