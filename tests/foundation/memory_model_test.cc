#include "plan/memory_model.h"

#include <gtest/gtest.h>

#include "plan/params.h"
#include "plan/pipeline_schedule.h"
#include "test_models.h"

namespace strata {
namespace {

using testing::gpt3_175b;
using testing::gpt_7_5b;
using testing::plan;

DeviceMemory bare_device(double capacity_bytes) {
  DeviceMemory d;
  d.capacity_bytes = capacity_bytes;
  return d;  // no framework reserve, no fragmentation: model states only
}

double model_states_gb(const StageMemory& s) {
  return (s.params_bytes + s.grads_bytes + s.optimizer_bytes) / 1e9;
}

// ZeRO paper (Rajbhandari et al. 2020), Figure 1: model states per device for a
// 7.5B model at Nd = 64: baseline 120 GB, P_os 31.4 GB, P_os+g 16.6 GB, P_os+g+p 1.88 GB.
TEST(MemoryModel, ZeroPaperFigure1) {
  ModelSpec m = gpt_7_5b();
  EXPECT_NEAR(total_params(m) / 7.5e9, 1.0, 0.005);
  const double expected_gb[4] = {120.0, 31.4, 16.6, 1.88};
  for (int stage = 0; stage <= 3; ++stage) {
    PlanSpec p = plan(1, 1, 64, 1, 64);
    p.dtype = DType::kFp16;  // the paper's setting: fp16 weights and gradients
    p.zero_stage = stage;
    MemoryReport r = memory_report(m, p, bare_device(80e9));
    ASSERT_EQ(r.stages.size(), 1u);
    EXPECT_NEAR(model_states_gb(r.stages[0]) / expected_gb[stage], 1.0, 0.01)
        << "ZeRO stage " << stage << ": " << model_states_gb(r.stages[0]) << " GB";
  }
}

// Korthikanti et al. 2022, Table 2: activation bytes per layer (16-bit activations).
struct ActivationCase {
  const char* name;
  int tp;
  bool sp;
  Recompute recompute;
};

void PrintTo(const ActivationCase& c, std::ostream* os) { *os << c.name; }

class Korthikanti : public ::testing::TestWithParam<ActivationCase> {};

TEST_P(Korthikanti, PerLayerActivationsMatchTable2) {
  const ActivationCase c = GetParam();
  ModelSpec m = gpt3_175b();
  const double s = 2048, b = 1, h = 12288, a = 96, t = c.tp;
  PlanSpec p = plan(c.tp, 8, 1, 1, 64);
  p.sequence_parallel = c.sp;
  p.recompute = c.recompute;
  double expected = 0;
  const double sbh = s * b * h;
  if (c.recompute == Recompute::kFull) {
    expected = 2 * sbh / (c.sp ? t : 1);
  } else if (c.recompute == Recompute::kSelective) {
    expected = c.sp ? sbh * 34 / t : sbh * (10 + 24 / t);
  } else if (c.tp == 1) {
    expected = sbh * (34 + 5 * a * s / h);
  } else {
    expected = c.sp ? sbh / t * (34 + 5 * a * s / h) : sbh * (10 + 24 / t + 5 * a * s / (h * t));
  }
  EXPECT_NEAR(layer_activation_bytes(m, p).total() / expected, 1.0, 1e-12) << c.name;
}

INSTANTIATE_TEST_SUITE_P(
    Gpt3, Korthikanti,
    ::testing::Values(ActivationCase{"no parallelism", 1, false, Recompute::kNone},
                      ActivationCase{"tensor parallel", 8, false, Recompute::kNone},
                      ActivationCase{"tensor + sequence parallel", 8, true, Recompute::kNone},
                      ActivationCase{"tp + selective", 8, false, Recompute::kSelective},
                      ActivationCase{"tp + sp + selective", 8, true, Recompute::kSelective},
                      ActivationCase{"full recompute", 8, false, Recompute::kFull},
                      ActivationCase{"full recompute + sp", 8, true, Recompute::kFull},
                      ActivationCase{"tp 4 + sp", 4, true, Recompute::kNone}));

TEST(MemoryModel, MicrobatchesInFlightPerSchedule) {
  ModelSpec m = gpt3_175b();  // 96 layers
  PlanSpec p = plan(8, 8, 1, 1, 64);  // 64 micro-batches
  p.schedule = Schedule::kOneFOneB;
  EXPECT_DOUBLE_EQ(layer_microbatches_in_flight(m, p, 0), 8 * 12);  // p micro-batches of 12 layers
  EXPECT_DOUBLE_EQ(layer_microbatches_in_flight(m, p, 7), 1 * 12);
  p.schedule = Schedule::kGpipe;
  EXPECT_DOUBLE_EQ(layer_microbatches_in_flight(m, p, 3), 64 * 12);
  p.schedule = Schedule::kInterleaved;
  p.vpp = 3;  // chunks of 4 layers; stage 0 holds 2*7 + 2*8 + 1 = 31 chunks
  EXPECT_DOUBLE_EQ(layer_microbatches_in_flight(m, p, 0), 31 * 4);
  // Korthikanti et al. 2022, section 4.2.3: interleaving stores L*(1 + (p-1)/(p*v)) layers on stage 0.
  EXPECT_DOUBLE_EQ(layer_microbatches_in_flight(m, p, 0), 96 * (1 + 7.0 / 24));
}

// Qi et al. 2024, table 1: a GPT layer's W keeps 32sbh bytes (16-bit inputs and
// output gradients of its four weight GEMMs: 4h + 2h + 5h + 5h per token).
TEST(MemoryModel, WeightGradInputsMatchTheZeroBubblePaper) {
  ModelSpec m = gpt3_175b();
  PlanSpec p = plan(1, 8, 1, 1, 64);
  const double sbh = static_cast<double>(m.seq_length) * p.micro_batch_size * m.hidden_size;
  EXPECT_DOUBLE_EQ(weight_grad_input_bytes(m, p), 32.0 * sbh);
  // Tensor parallelism alone shards the GEMMs' own columns or rows (h + 3h/t,
  // h/t + h, h + 4h/t, 4h/t + h); sequence parallelism also the column-parallel
  // inputs (h/t + 3h/t, h/t + 4h/t), W gathering them again; the row-parallel
  // layers' output gradients stay whole, as the backward gathered them.
  p = plan(8, 8, 1, 1, 64);
  EXPECT_DOUBLE_EQ(weight_grad_input_bytes(m, p), 2.0 * sbh * (4.0 + 12.0 / 8));
  p.sequence_parallel = true;
  EXPECT_DOUBLE_EQ(weight_grad_input_bytes(m, p), 2.0 * sbh * (2.0 + 14.0 / 8));
}

// The paper's section 2.3, in its setting (no tensor parallelism, so M_W =
// 32sbh < M_B): ZB-H1's peak is 1F1B's (p M_B, on stage 0); ZB-H2's (2p - 1) M_B;
// the later stages of ZB-H1 hold W inputs 1F1B frees at once.
TEST(MemoryModel, ZeroBubbleActivationsPerStage) {
  ModelSpec m = gpt3_175b();
  PlanSpec p = plan(1, 8, 1, 1, 64);
  auto report = [&](Schedule s) {
    p.schedule = s;
    return memory_report(m, p, bare_device(800e9));
  };
  const MemoryReport base = report(Schedule::kOneFOneB);
  const MemoryReport h1 = report(Schedule::kZbH1);
  const MemoryReport h2 = report(Schedule::kZbH2);
  const double layer = layer_activation_bytes(m, p).total() * 12;  // M_B of a stage's 12 layers
  EXPECT_DOUBLE_EQ(h1.stages[0].activations_bytes, base.stages[0].activations_bytes);
  EXPECT_DOUBLE_EQ(h1.stages[0].weight_grad_bytes, 0.0);
  EXPECT_DOUBLE_EQ(h1.stages[0].layer_microbatches_in_flight, 8 * 12);
  EXPECT_DOUBLE_EQ(h2.stages[0].layer_microbatches_in_flight, 15 * 12);
  // 7 more micro-batches, each with its layers and its embedding dropout mask (sbh bytes).
  const double mask = static_cast<double>(m.seq_length) * m.hidden_size;
  EXPECT_NEAR(h2.stages[0].activations_bytes - base.stages[0].activations_bytes, 7 * (layer + mask), 1.0);
  // A middle stage holds more than 1F1B's p - i but never more than stage 0.
  for (int stage = 1; stage < 7; ++stage) {
    EXPECT_GT(h1.stages[stage].activations_bytes, base.stages[stage].activations_bytes) << stage;
    EXPECT_LE(h1.stages[stage].activations_bytes, h1.stages[0].activations_bytes) << stage;
  }
}

// ZB-V (Qi et al. 2024, section 6): 2p chunk micro-batches of half a stage in
// flight on each rank, 1F1B's p micro-batches of rank 0's stage; rank 0 also holds
// the output layer and the loss (the V's last stage), so the tied word embedding
// is one tensor there: the ranks hold the model's parameters once.
TEST(MemoryModel, ZeroBubbleVHoldsOneFOneBsActivationsAndTheHeadOnRankZero) {
  ModelSpec m = gpt3_175b();  // tied embeddings
  PlanSpec p = plan(1, 8, 1, 1, 64);
  const MemoryReport base = memory_report(m, p, bare_device(800e9));
  p.schedule = Schedule::kZbV;
  p.vpp = 2;
  const MemoryReport v = memory_report(m, p, bare_device(800e9));
  EXPECT_DOUBLE_EQ(v.stages[0].layer_microbatches_in_flight, base.stages[0].layer_microbatches_in_flight);
  EXPECT_DOUBLE_EQ(v.stages[0].layer_microbatches_in_flight, 8 * 12);
  std::int64_t sum = 0;
  for (int s = 0; s < 8; ++s) sum += stage_params_per_gpu(m, p, s);
  EXPECT_EQ(sum, total_params(m));
  EXPECT_EQ(stage_params_per_gpu(m, p, 0) - stage_params_per_gpu(m, p, 1),
            embedding_params_per_gpu(m, p) + final_norm_params(m));
  // The logits of the micro-batch in its loss are on rank 0 now, not rank 7.
  const double logits = (2.0 + 4.0) * m.seq_length * static_cast<double>(m.vocab_size);
  EXPECT_GT(v.stages[0].activations_bytes - base.stages[0].activations_bytes, logits);
  EXPECT_GT(v.stages[0].activations_bytes - v.stages[1].activations_bytes, logits);
  // Unlike 1F1B's p - i, every rank of the V holds p micro-batches: chunk 0's
  // forwards of the ranks below it come back up through its chunk 1.
  for (int s = 1; s < 8; ++s) {
    EXPECT_DOUBLE_EQ(v.stages[s].layer_microbatches_in_flight, 8 * 12) << s;
    EXPECT_DOUBLE_EQ(base.stages[s].layer_microbatches_in_flight, (8 - s) * 12) << s;
    EXPECT_LT(v.stages[s].activations_bytes, v.stages[0].activations_bytes) << s;
  }
}

// Megatron-LM's distributed optimizer with bf16 weights and fp32 gradients keeps
// 6 + 12/d bytes per parameter (Megatron-LM docs, "Distributed Optimizer" table).
TEST(MemoryModel, MegatronDistributedOptimizerBf16) {
  ModelSpec m = gpt_7_5b();
  PlanSpec p = plan(1, 1, 8, 1, 8);
  p.zero_stage = 1;
  p.accumulate_allreduce_grads_in_fp32 = true;
  MemoryReport r = memory_report(m, p, bare_device(800e9));
  const double psi = static_cast<double>(total_params(m));
  EXPECT_NEAR(model_states_gb(r.stages[0]) * 1e9 / psi, 6.0 + 12.0 / 8, 1e-9);
}

TEST(MemoryModel, ZeroThreeShardsWeightsByDp) {
  ModelSpec m = gpt_7_5b();
  PlanSpec p0 = plan(1, 1, 16, 1, 16);
  PlanSpec p3 = p0;
  p3.zero_stage = 3;
  MemoryReport r0 = memory_report(m, p0, bare_device(80e9));
  MemoryReport r3 = memory_report(m, p3, bare_device(80e9));
  EXPECT_DOUBLE_EQ(r3.stages[0].params_bytes * 16, r0.stages[0].params_bytes);
  EXPECT_DOUBLE_EQ(r3.stages[0].grads_bytes * 16, r0.stages[0].grads_bytes);
  EXPECT_DOUBLE_EQ(r3.stages[0].optimizer_bytes * 16, r0.stages[0].optimizer_bytes);
  EXPECT_GT(r3.stages[0].buffers_bytes, 0.0);  // gathered layers and reduce buckets
}

// ZeRO-2 holds whole only the gradient buckets in flight: the one backward fills
// and the one being reduce-scattered (two of 40 M parameters in fp32), never more
// buckets than the stage has, and without overlap every bucket of the stage.
TEST(MemoryModel, ZeroTwoHoldsTheBucketsInFlight) {
  ModelSpec m = gpt_7_5b();
  PlanSpec p = plan(1, 1, 8, 1, 8);
  p.zero_stage = 2;
  p.accumulate_allreduce_grads_in_fp32 = true;
  const double psi = static_cast<double>(total_params(m));
  ASSERT_GT(psi, 2 * 4e7);
  EXPECT_DOUBLE_EQ(memory_report(m, p, bare_device(80e9)).stages[0].buffers_bytes, 2 * 4e7 * 4.0);
  p.overlap_grad_reduce = false;
  EXPECT_DOUBLE_EQ(memory_report(m, p, bare_device(80e9)).stages[0].buffers_bytes, psi * 4.0);
  // A stage smaller than one bucket has one bucket.
  p.overlap_grad_reduce = true;
  p.ddp_bucket_size = static_cast<std::int64_t>(2 * psi);
  EXPECT_DOUBLE_EQ(memory_report(m, p, bare_device(80e9)).stages[0].buffers_bytes, psi * 4.0);
}

// ZeRO-3 reduce-scatters each layer's gradient after its backward and gathers
// each layer's weights before use: two layers' fp32 gradients (the one computed,
// the one reduced) and, with prefetch, two layers' 16-bit weights.
TEST(MemoryModel, ZeroThreeHoldsTwoLayersOfGradientsAndWeights) {
  ModelSpec m = gpt_7_5b();
  PlanSpec p = plan(1, 1, 8, 1, 8);
  p.zero_stage = 3;
  p.accumulate_allreduce_grads_in_fp32 = true;
  const double layer = static_cast<double>(layer_params_per_gpu(m, 1));
  EXPECT_DOUBLE_EQ(memory_report(m, p, bare_device(80e9)).stages[0].buffers_bytes, 2 * layer * 4.0 + 2 * layer * 2.0);
  p.overlap_param_gather = false;
  EXPECT_DOUBLE_EQ(memory_report(m, p, bare_device(80e9)).stages[0].buffers_bytes, 2 * layer * 4.0 + layer * 2.0);
}

TEST(MemoryModel, OffloadMovesOptimizerStateToHost) {
  ModelSpec m = gpt_7_5b();
  PlanSpec p = plan(1, 1, 8, 1, 8);
  p.zero_stage = 2;
  p.offload_optimizer = true;
  MemoryReport r = memory_report(m, p, bare_device(80e9));
  EXPECT_EQ(r.stages[0].optimizer_bytes, 0.0);
  EXPECT_NEAR(r.host_bytes_per_gpu, 14.0 * static_cast<double>(total_params(m)) / 8, 1.0);
}

TEST(MemoryModel, FitsOnlyWhenEveryStageFits) {
  ModelSpec m = gpt3_175b();
  PlanSpec p = plan(8, 8, 16, 1, 1536);
  p.zero_stage = 1;
  p.sequence_parallel = true;
  p.recompute = Recompute::kSelective;
  MemoryReport r = memory_report(m, p, bare_device(80.0 * (1ull << 30)));
  EXPECT_TRUE(r.fits);
  // Without tensor parallelism 175B cannot fit: 16 bytes x 21.8B params per stage alone is 349 GB.
  PlanSpec no_tp = plan(1, 8, 128, 1, 1536);
  MemoryReport r2 = memory_report(m, no_tp, bare_device(80.0 * (1ull << 30)));
  EXPECT_FALSE(r2.fits);
  for (const StageMemory& s : r2.stages) EXPECT_FALSE(s.fits);
  // The peak stage is reported.
  double peak = 0;
  for (const StageMemory& s : r.stages) peak = std::max(peak, s.total_bytes);
  EXPECT_DOUBLE_EQ(r.peak_bytes, peak);
}

TEST(Params, Gpt3Has175BillionParameters) {
  // 96 * 12h^2 (+ biases and norms) + (V + s) * h = 174.6e9 (Brown et al. 2020: "175B").
  EXPECT_NEAR(total_params(gpt3_175b()) / 174.6e9, 1.0, 0.002);
  // Llama 3 8B: 8.03e9 in the released checkpoint.
  EXPECT_NEAR(total_params(testing::llama3_8b()) / 8.03e9, 1.0, 0.002);
}

TEST(Params, StagesPartitionTheModel) {
  ModelSpec m = testing::llama3_8b();  // untied: no duplicated embedding
  PlanSpec p = plan(1, 4, 1, 1, 4);
  std::int64_t sum = 0;
  for (int s = 0; s < 4; ++s) sum += stage_params_per_gpu(m, p, s);
  EXPECT_EQ(sum, total_params(m));
}

// zero_bubble_held walks 4pp + 4 micro-batches of a longer program: the peak of
// the whole walk, for every stage, both schedules, every length up to 16pp, and
// weights that put the peak on full activations or on W inputs.
TEST(MemoryModel, ZeroBubblePeakOfFewMicroBatchesIsThePeakOfAny) {
  for (Schedule schedule : {Schedule::kZbH1, Schedule::kZbH2, Schedule::kZbV}) {
    for (int pp = 2; pp <= 8; ++pp) {
      for (int m = 1; m <= 16 * pp; ++m) {
        PlanSpec p = plan(1, pp, 1, 1, m);
        p.schedule = schedule;
        p.vpp = schedule == Schedule::kZbV ? 2 : 1;
        for (const auto& [full_bytes, w_bytes] : {std::pair{1.0, 0.3}, std::pair{1.0, 0.9}, std::pair{1.0, 3.0}}) {
          for (int stage = 0; stage < pp; ++stage) {
            double peak = -1.0;
            int forwards = 0, input_grads = 0, weight_grads = 0;
            for (const PipelineOp& op : pipeline_program(schedule, pp, p.vpp, m, stage)) {
              forwards += op.phase == PipelinePhase::kForward;
              input_grads += op.phase == PipelinePhase::kBackward;
              weight_grads += op.phase == PipelinePhase::kWeightGrad;
              peak = std::max(peak, (forwards - input_grads) * full_bytes + (input_grads - weight_grads) * w_bytes);
            }
            const ZeroBubbleHeld held = zero_bubble_held(p, stage, full_bytes, w_bytes);
            ASSERT_DOUBLE_EQ(held.full * full_bytes + held.waiting_weight_grads * w_bytes, peak)
                << to_string(schedule) << " pp " << pp << " m " << m << " stage " << stage;
          }
        }
      }
    }
  }
}

}  // namespace
}  // namespace strata
