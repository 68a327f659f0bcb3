// ZeRO-3 gathered per module (sim/workload/zero3_modules.h) against schedules
// computed by hand.
//
// 2 layers of the small GPT (h 64), dp 2, one micro-batch, bf16. Every GEMM
// costs 1 us, everything else is free (GemmCountCosts); a collective of b bytes
// takes b / 8192 us (AlphaBetaComm, no links), so a 4096-element weight takes
// 1 us. Biases (at most 256 elements) and norms (128) stay below the
// persistence threshold of 1000: the gathers are the weights, QKV 12288 (3 us),
// projection 4096 (1 us), fc1 and fc2 16384 (4 us each). One module is
// prefetched at a time (bucket 1 element) and every module is freed after each
// use (reuse distance 0).
//
// A layer's forward between module hooks: [qkv, scores, values] 3 us, [proj]
// 1 us, [fc1] 1 us, [fc2] 1 us (the norms' stretches take no time).
// With synchronize, a gather prefetched at a hook waits for all the GPU's work
// before the hook: G(q0) 0-3; q0 3-6 beside G(p0) 3-4; p0 6-7, G(f1) waits for
// q0: 6-10; f1 10-11, G(f2) 10-14; f2 14-15, G(q1) 14-17 (after f1's end 11);
// layer 1: q1 17-20, p1 20-21, G(f1) 20-24, f1 24-25, G(f2) 24-28, f2 28-29.
// Without it each gather follows the one before it on the stream: G(p0) 3-4,
// G(f1) 4-8, f1 8-9, G(f2) 8-12, f2 12-13, G(q1) 12-15, q1 15-18, G(p1) 15-16,
// p1 18-19, G(f1) 16-20, f1 20-21, G(f2) 20-24, f2 24-25.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "costmodel/framework_profile.h"
#include "fake_costs.h"
#include "test_models.h"
#include "sim/engine/engine.h"
#include "plan/params.h"
#include "sim/workload/segments.h"
#include "sim/workload/workload.h"

namespace strata::sim {
namespace {

using testing::AlphaBetaComm;

constexpr TimeNs kUs = 1000;

PlanSpec plan() {
  PlanSpec p;
  p.dp = 2;
  p.zero_stage = 3;
  p.micro_batch_size = 1;
  p.global_batch_size = 2;
  p.accumulate_allreduce_grads_in_fp32 = false;
  return p;
}

ShardedDataParallel per_module(bool synchronize, bool copy_per_rank = false) {
  ShardedDataParallel z;
  ModuleGather g;
  g.prefetch_bucket_elements = 1;
  g.max_reuse_distance_elements = 0;
  g.persistence_threshold_elements = 1000;
  g.synchronize = synchronize;
  g.copy_per_rank = copy_per_rank;
  z.module_gather = g;
  return z;
}

struct Simulated {
  Workload w;
  RunResult r;
  // Start of a forward GEMM on rank 0, by its label ("qkv", "fc2") and layer.
  TimeNs forward_start(const std::string& name, int layer) const {
    for (TaskId t : w.stream(0, StreamKind::kCompute)) {
      const TaskLabel& l = w.notes.label_of_task(t);
      if (l.phase == Phase::kForward && w.notes.info(t).layer == layer && l.name.rfind(name, 0) == 0) {
        return r.start_ns[t];
      }
    }
    return -1;
  }
  std::vector<TaskId> on_rank0(const std::string& name) const {
    std::vector<TaskId> out;
    for (TaskId t = 0; t < w.graph.num_tasks(); ++t) {
      if (w.notes.label_of_task(t).name == name && w.graph.runs_on(t, 0)) out.push_back(t);
    }
    return out;
  }
};

Simulated run(const ShardedDataParallel& z, TimeNs copy_ns = 0, std::optional<HostDispatch> host = std::nullopt) {
  const ModelSpec m = strata::testing::small_gpt(2);
  const testing::GemmAndCopyCosts costs(kUs, m.vocab_size, copy_ns);
  const AlphaBetaComm comm(0, 8192.0 * 1e6);  // 8192 bytes per us
  WorkloadOptions o;
  o.sharded = z;
  o.host_dispatch = host;
  Simulated out{build_workload(m, plan(), costs, comm, Fidelity::kFull, o), {}};
  out.r = run_task_graph(out.w.graph, nullptr);
  return out;
}

TEST(ZeroThreeByModule, SynchronizedGathersOverlapOnlyTheComputeIssuedAfterThem) {
  const Simulated s = run(per_module(true));
  EXPECT_EQ(s.forward_start("qkv", 0), 3 * kUs);
  EXPECT_EQ(s.forward_start("proj", 0), 6 * kUs);
  EXPECT_EQ(s.forward_start("fc1", 0), 10 * kUs);
  EXPECT_EQ(s.forward_start("fc2", 0), 14 * kUs);
  EXPECT_EQ(s.forward_start("qkv", 1), 17 * kUs);
  EXPECT_EQ(s.forward_start("fc2", 1), 28 * kUs);

  const Simulated a = run(per_module(false));
  EXPECT_EQ(a.forward_start("qkv", 0), 3 * kUs);
  EXPECT_EQ(a.forward_start("fc1", 0), 8 * kUs);
  EXPECT_EQ(a.forward_start("fc2", 0), 12 * kUs);
  EXPECT_EQ(a.forward_start("qkv", 1), 15 * kUs);
  EXPECT_EQ(a.forward_start("fc2", 1), 24 * kUs);
}

// Four weights per layer, gathered again for the backward (freed after each
// use): 16 gathers; every parameter's gradient (12 per layer: 4 weights, 4
// biases, 2 norms of 2) reduce-scattered on its own: 24.
TEST(ZeroThreeByModule, OneGatherPerPartitionedParameterAndOneReductionPerParameter) {
  const Simulated s = run(per_module(true));
  EXPECT_EQ(s.on_rank0("param all_gather").size(), 16u);
  EXPECT_EQ(s.on_rank0("grad reduce_scatter").size(), 24u);
}

// Each gather is followed on its stream by the group's per-rank copies (dp 2:
// two copies), each reduce-scatter preceded by them.
TEST(ZeroThreeByModule, ListCollectivesCopyEachRanksChunk) {
  const Simulated s = run(per_module(true, true), 500);
  const std::vector<TaskId> gathers = s.on_rank0("param all_gather");
  const std::vector<TaskId> copies = s.on_rank0("param all_gather rank copies");
  ASSERT_EQ(copies.size(), gathers.size());
  for (std::size_t i = 0; i < copies.size(); ++i) {
    EXPECT_EQ(s.r.end_ns[copies[i]] - s.r.start_ns[copies[i]], 2 * 500) << i;
    EXPECT_EQ(s.r.start_ns[copies[i]], s.r.end_ns[gathers[i]]) << i;
  }
  EXPECT_EQ(s.on_rank0("grad reduce_scatter rank copies").size(), 24u);
  // The qkv of layer 0 now waits for its gather's copies: 3 + 1 us.
  EXPECT_EQ(s.forward_start("qkv", 0), 4 * kUs);
}

// The host issues each per-rank copy (copy_issue_us 1 us, dp 2: 2 us a gather)
// before the hook's module's kernels, with no lead left after synchronize: hook 0
// gathers q0 and prefetches p0 (4 us of copies: qkv at 4 instead of 3); at hook 1
// the host synchronizes for qkv (4-7), issues G(f1)'s copies (2 us): proj at 9
// instead of 6. Kernel issue itself free (0 us a kernel).
TEST(ZeroThreeByModule, TheHostIssuesEachRanksCopyBeforeTheModulesKernels) {
  HostDispatch host;
  host.per_kernel_us = 0.0;
  ShardedDataParallel z = per_module(true, true);
  const Simulated free_issue = run(z, 0, host);
  EXPECT_EQ(free_issue.forward_start("qkv", 0), 3 * kUs);
  EXPECT_EQ(free_issue.forward_start("proj", 0), 6 * kUs);
  z.module_gather->copy_issue_us = 1.0;
  const Simulated s = run(z, 0, host);
  EXPECT_EQ(s.forward_start("qkv", 0), 4 * kUs);
  EXPECT_EQ(s.forward_start("proj", 0), 9 * kUs);
  // Without host dispatch there is no host lane to cost it on (profiles refuse it).
  EXPECT_EQ(run(z).forward_start("proj", 0), 6 * kUs);
  const nlohmann::json bad = nlohmann::json::parse(R"({"name": "x", "description": "d", "source": "s",
      "sharded_data_parallel": {"reduce_stream": "own", "source": "s", "module_gather": {"prefetch_bucket_elements": 1,
         "max_live_elements": 1, "max_reuse_distance_elements": 1, "persistence_threshold_elements": 1,
         "reduce_bucket_elements": 1, "synchronize": true, "copy_per_rank": true, "copy_issue_us": 5,
         "source": "s"}}})");
  try {
    read_framework_profile(bad, "f.json");
    FAIL() << "copy_issue_us without host_dispatch";
  } catch (const InputError& e) {
    EXPECT_EQ(e.json_path(), "$.sharded_data_parallel.module_gather.copy_issue_us");
  }
}

// The gradients of the whole backward fit one 500M-element bucket: reduced at
// the end of the micro-batch's backward. With a 1-element bucket each gradient
// is reduced as the next one arrives, while the backward still runs.
TEST(ZeroThreeByModule, AReduceBucketIsReducedWhenTheNextGradientOverflowsIt) {
  auto last_backward_end = [](const Simulated& x) {
    TimeNs end = 0;
    for (TaskId t : x.w.stream(0, StreamKind::kCompute)) {
      if (x.w.notes.label_of_task(t).phase == Phase::kBackward) end = std::max(end, x.r.end_ns[t]);
    }
    return end;
  };
  auto first_reduce_start = [](const Simulated& x) {
    TimeNs first = -1;
    for (TaskId t : x.on_rank0("grad reduce_scatter")) {
      if (first < 0 || x.r.start_ns[t] < first) first = x.r.start_ns[t];
    }
    return first;
  };
  ShardedDataParallel whole = per_module(false);
  whole.module_gather->reduce_bucket_elements = 500'000'000;
  const Simulated w = run(whole);
  EXPECT_GE(first_reduce_start(w), last_backward_end(w));
  ShardedDataParallel each = per_module(false);
  each.module_gather->reduce_bucket_elements = 1;
  const Simulated e = run(each);
  EXPECT_LT(first_reduce_start(e), last_backward_end(e));
}

nlohmann::json sharded_profile(const std::string& section) {
  return nlohmann::json::parse(R"({"name": "f", "description": "d", "source": "s", "sharded_data_parallel": )" +
                               section + "}");
}

TEST(ZeroThreeByModule, ProfilesSayModuleGatheringOrLayerKeysNotBoth) {
  const std::string module_gather = R"("module_gather": {"prefetch_bucket_elements": 50000000,
      "max_live_elements": 1000000000, "max_reuse_distance_elements": 1000000000,
      "persistence_threshold_elements": 100000, "reduce_bucket_elements": 500000000,
      "synchronize": true, "copy_per_rank": false, "source": "s"})";
  const FrameworkProfile ok = read_framework_profile(
      sharded_profile(R"({"reduce_stream": "own", "source": "s", )" + module_gather + "}"), "f.json");
  ASSERT_TRUE(ok.sharded && ok.sharded->module_gather);
  EXPECT_TRUE(ok.sharded->module_gather->synchronize);
  EXPECT_EQ(ok.sharded->module_gather->reduce_bucket_elements, 500'000'000);
  try {
    read_framework_profile(sharded_profile(R"({"backward_prefetch": "pre", "reduce_stream": "own", "source": "s", )" +
                                           module_gather + "}"),
                           "f.json");
    FAIL() << "layer keys beside module_gather were accepted";
  } catch (const InputError& e) {
    EXPECT_EQ(e.json_path(), "$.sharded_data_parallel.backward_prefetch");
    EXPECT_NE(e.message().find("does not apply with module_gather"), std::string::npos) << e.message();
  }
  try {
    read_framework_profile(sharded_profile(R"({"reduce_stream": "own", "source": "s", "module_gather":
        {"prefetch_bucket_elements": 0, "max_live_elements": 1, "max_reuse_distance_elements": 1,
         "persistence_threshold_elements": 1, "reduce_bucket_elements": 1, "synchronize": true,
         "copy_per_rank": true, "source": "s"}})"),
                           "f.json");
    FAIL() << "an empty prefetch bucket was accepted";
  } catch (const InputError& e) {
    EXPECT_EQ(e.json_path(), "$.sharded_data_parallel.module_gather.prefetch_bucket_elements");
  }
  // The shipped 2021 preset: DeepSpeed v0.3.13's defaults, synchronizing, list collectives.
  const FrameworkProfile ds = load_framework_profile("deepspeed-zero3-2021");
  ASSERT_TRUE(ds.sharded && ds.sharded->module_gather);
  EXPECT_EQ(ds.sharded->module_gather->prefetch_bucket_elements, 50'000'000);
  EXPECT_EQ(ds.sharded->module_gather->persistence_threshold_elements, 100'000);
  EXPECT_TRUE(ds.sharded->module_gather->synchronize);
  EXPECT_TRUE(ds.sharded->module_gather->copy_per_rank);
}

// The modules a hook gathers hold the layer's parameters, each tensor once:
// GPT-3 175B at tp 1 (QKV 453M, projection 151M, fc1 and fc2 604M, their biases,
// two LayerNorms) and at tp 8, Llama 3 8B at tp 2 (no biases, RMSNorm).
TEST(ZeroThreeByModule, TheLayersModulesHoldItsParameters) {
  auto total = [](const ModelSpec& m, int tp) {
    PlanSpec p;
    p.tp = tp;
    std::int64_t n = 0;
    for (const ParameterModule& mod : layer_parameter_modules(m, p)) n += mod.elements();
    return n;
  };
  const ModelSpec gpt = strata::testing::gpt3_175b();
  const ModelSpec llama = strata::testing::llama3_8b();
  EXPECT_EQ(total(gpt, 1), layer_params_per_gpu(gpt, 1));
  EXPECT_EQ(total(gpt, 8), layer_params_per_gpu(gpt, 8));
  EXPECT_EQ(total(llama, 2), layer_params_per_gpu(llama, 2));
  PlanSpec p;
  const std::vector<ParameterModule> mods = layer_parameter_modules(gpt, p);
  ASSERT_EQ(mods.size(), 6u);  // input norm, QKV, projection, post-attention norm, fc1, fc2
  EXPECT_EQ(mods[1].params, std::vector<std::int64_t>({3LL * 12288 * 12288, 3 * 12288}));
  EXPECT_EQ(mods[5].params, std::vector<std::int64_t>({4LL * 12288 * 12288, 12288}));
}

}  // namespace
}  // namespace strata::sim
