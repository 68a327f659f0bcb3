// Parameter layouts: the shards of every rank tile the whole model exactly
// once, hold what the simulator's parameter counts say a GPU holds, and form
// the buckets the plan asks for.
#include <map>
#include <set>

#include <gtest/gtest.h>

#include "run_test_models.h"
#include "runtime/executor/param_layout.h"
#include "runtime/executor/pipeline_links.h"
#include "plan/params.h"

namespace strata::rt {
namespace {

using testing::gpt_small;
using testing::llama_small;

PlanSpec plan_of(int tp, int pp, int vpp, int dp = 1, int zero = 0) {
  PlanSpec p;
  p.tp = tp;
  p.pp = pp;
  p.vpp = vpp;
  p.dp = dp;
  p.zero_stage = zero;
  p.schedule = vpp > 1 ? Schedule::kInterleaved : Schedule::kOneFOneB;
  p.micro_batch_size = 1;
  p.global_batch_size = 4 * dp;
  return p;
}

// Hand count for gpt_small (h 32, 4 heads, ffn 128, LayerNorm, biases): a
// layer has QKV 32x96 + 96, projection 32x32 + 32, fc1 32x128 + 128, fc2
// 128x32 + 32 and two norms of 2x32: 12,704 parameters.
TEST(ParamLayout, LayerUnitHoldsHandCountedParameters) {
  const ParamLayout one = make_param_layout(gpt_small(), plan_of(1, 1, 1), 0, 0);
  EXPECT_EQ(one.units[one.layer_units[0][0]].numel, 12704);
  // tp 2 splits all but the 192 replicated (norms, row-parallel biases): 12,512 / 2 + 192.
  const ParamLayout two = make_param_layout(gpt_small(), plan_of(2, 1, 1), 1, 0);
  const Unit& u = two.units[two.layer_units[0][0]];
  EXPECT_EQ(u.numel, 6448);
  EXPECT_EQ(u.numel - u.replicated_begin, 192);
}

// What the runtime allocates per stage is what the simulator counts
// (sim/params.h), for both models and several plans.
PlanSpec uneven_1_3() {
  PlanSpec p = plan_of(1, 2, 1);
  p.first_stage_layers = 1;
  return p;
}

TEST(ParamLayout, MatchesSimulatorParameterCounts) {
  for (const ModelSpec& m : {gpt_small(), llama_small()}) {
    for (const PlanSpec& p : {plan_of(1, 1, 1), plan_of(2, 1, 1), plan_of(1, 2, 1), plan_of(2, 2, 2), uneven_1_3()}) {
      for (int stage = 0; stage < p.pp; ++stage) {
        for (int t = 0; t < p.tp; ++t) {
          const ParamLayout layout = make_param_layout(m, p, t, stage);
          EXPECT_EQ(layout.total_numel(), stage_params_per_gpu(m, p, stage))
              << m.name << " tp " << p.tp << " pp " << p.pp << " stage " << stage;
        }
      }
    }
  }
  EXPECT_EQ([] {
    std::int64_t n = 0;
    for (const auto& [name, size] : global_parameter_sizes(llama_small())) n += size;
    return n;
  }(), total_params(llama_small()));
}

// Uneven stages: the first stage holds layer 0, the second layers 1-3.
TEST(ParamLayout, UnevenStagesHoldTheirSplitsLayers) {
  const ParamLayout first = make_param_layout(gpt_small(), uneven_1_3(), 0, 0);
  const ParamLayout last = make_param_layout(gpt_small(), uneven_1_3(), 0, 1);
  ASSERT_EQ(first.layer_units[0].size(), 1u);
  ASSERT_EQ(last.layer_units[0].size(), 3u);
  EXPECT_EQ(first.units[first.layer_units[0][0]].params.front().name.rfind("layers.0.", 0), 0u);
  EXPECT_EQ(last.units[last.layer_units[0][0]].params.front().name.rfind("layers.1.", 0), 0u);
  EXPECT_EQ(last.units[last.layer_units[0][2]].params.front().name.rfind("layers.3.", 0), 0u);
}

// Every global element of every parameter is held by exactly one (tp rank,
// stage) once replicated copies (tp rank > 0) and the tied copy are left out,
// and replicated parameters are whole on every tp rank.
TEST(ParamLayout, ShardsTileTheModelExactlyOnce) {
  for (const ModelSpec& m : {gpt_small(), llama_small()}) {
    for (const PlanSpec& p : {plan_of(2, 2, 1), plan_of(2, 2, 2), plan_of(1, 2, 2)}) {
      std::map<std::string, std::vector<int>> count;
      for (const auto& [name, n] : global_parameter_sizes(m)) count[name].assign(n, 0);
      for (int stage = 0; stage < p.pp; ++stage) {
        for (int t = 0; t < p.tp; ++t) {
          for (const Unit& u : make_param_layout(m, p, t, stage).units) {
            for (const ParamSpec& s : u.params) {
              ASSERT_TRUE(count.count(s.name)) << s.name;
              std::int64_t rows = 0;
              for (const ParamSpec::Piece& piece : s.pieces) rows += piece.rows;
              EXPECT_EQ(rows, s.rows) << s.name;
              if (s.replicated) {
                EXPECT_EQ(s.rows, s.global_rows) << s.name;
              }
              if (s.tied_copy || (s.replicated && t != 0)) continue;
              for (const ParamSpec::Piece& piece : s.pieces) {
                for (std::int64_t e = piece.global_row * s.cols; e < (piece.global_row + piece.rows) * s.cols; ++e) {
                  ++count[s.name][e];
                }
              }
            }
          }
        }
      }
      for (const auto& [name, c] : count) {
        for (std::size_t e = 0; e < c.size(); ++e) ASSERT_EQ(c[e], 1) << m.name << " " << name << " element " << e;
      }
    }
  }
}

TEST(ParamLayout, BucketsFollowTheBucketSizeAndZero3) {
  const ModelSpec m = gpt_small();
  // One layer (12,704) per bucket when the bucket holds 10,000; the head and the
  // top layer share the first (closed once past the size), as the simulator's buckets.
  PlanSpec small_buckets = plan_of(1, 1, 1, 2);
  small_buckets.ddp_bucket_size = 10000;
  const ParamLayout small = make_param_layout(m, small_buckets, 0, 0);
  EXPECT_EQ(small.buckets.size(), 4u);
  for (const Bucket& b : small.buckets) EXPECT_EQ(b.padded_numel % 2, 0);
  // ZeRO-3: one unit per bucket.
  const ParamLayout z3 = make_param_layout(m, plan_of(1, 1, 1, 2, 3), 0, 0);
  EXPECT_EQ(z3.buckets.size(), z3.units.size());
  // Tied embeddings with pp 2 and the distributed optimizer (ZeRO-1): the word
  // embedding and its copy each alone, flagged for the embedding group (Megatron's
  // _does_param_require_new_bucket).
  for (int stage : {0, 1}) {
    const ParamLayout tied = make_param_layout(m, plan_of(1, 2, 1, 2, 1), 0, stage);
    int synced = 0;
    for (const Bucket& b : tied.buckets) {
      if (!b.embedding_sync) continue;
      ++synced;
      ASSERT_EQ(b.units.size(), 1u);
      EXPECT_EQ(tied.units[b.units[0]].params[0].name, "embedding.word_embeddings.weight");
      EXPECT_EQ(tied.units[b.units[0]].params[0].tied_copy, stage == 1);
    }
    EXPECT_EQ(synced, 1) << "stage " << stage;
  }
  // ZeRO-0 all-reduces: the embedding shares the bucket of the layers next to it.
  for (int stage : {0, 1}) {
    const ParamLayout tied = make_param_layout(m, plan_of(1, 2, 1, 2, 0), 0, stage);
    ASSERT_EQ(tied.buckets.size(), 1u) << "stage " << stage;
    EXPECT_TRUE(tied.buckets[0].embedding_sync);
    EXPECT_GT(tied.buckets[0].units.size(), 1u);
  }
}

// Links carry transfers in the order the receiver needs them, for every schedule.
TEST(PipelineLinks, SendAndReceiveOrdersAgree) {
  for (Schedule s : {Schedule::kGpipe, Schedule::kOneFOneB, Schedule::kInterleaved}) {
    PlanSpec p = plan_of(1, 4, s == Schedule::kInterleaved ? 2 : 1);
    p.schedule = s;
    p.global_batch_size = 8;
    for (LinkKind kind : {LinkKind::kActivations, LinkKind::kGradients}) {
      int transfers = 0;
      for (int from = 0; from < 4; ++from) {
        for (int to = 0; to < 4; ++to) {
          const auto sent = sent_transfers(p, kind, from, to);
          EXPECT_EQ(sent, received_transfers(p, kind, from, to));
          transfers += static_cast<int>(sent.size());
        }
      }
      // Each micro-batch crosses every boundary between virtual stages once.
      EXPECT_EQ(transfers, 8 * (4 * p.vpp - 1));
    }
  }
}

}  // namespace
}  // namespace strata::rt
