// The sweep against brute force, and its answers against what practitioners know.
#include <atomic>

#include <gtest/gtest.h>

#include <algorithm>
#include <set>
#include <sstream>

#include "core/error.h"
#include "costmodel/profile.h"
#include "plan/memory_model.h"
#include "sim/scenario.h"
#include "sim/simulate.h"
#include "sweep/sweep.h"
#include "sweep/sweep_output.h"
#include "topologies/cluster_spec.h"
#include "sim/device_memory.h"

namespace strata::sim {
namespace {

ClusterSpec cluster(const std::string& name, int nodes) {
  ClusterSpec c = load_cluster_spec(name);
  c.nodes = nodes;
  return c;
}

// A small space: the tiny model on one 8-GPU node.
struct SmallSpace {
  ModelSpec model = load_model_spec("gpt-tiny");
  ClusterSpec cl = load_cluster_spec("dgx-a100-1node");
  Profile profile = load_profile(cl.profile);
  Simulator simulator{cl, profile};
  PlanSpaceRequest request;
  SmallSpace() {
    request.global_batch_size = 16;
    request.max_micro_batch_size = 2;
    request.max_vpp = 2;
  }
};

// A folded sweep, ranked (two threads, no full-fidelity re-simulation).
SweepResult folded_sweep(const ModelSpec& m, const ClusterSpec& c, const PlanSpaceRequest& req) {
  Simulator simulator(c, load_profile(c.profile));
  SweepOptions options;
  options.threads = 2;
  options.full_top = 0;
  SweepResult r = run_sweep(m, simulator, req, options);
  rank_sweep(r, m, simulator, options);
  return r;
}

// The winner of a folded sweep.
PlanOutcome best_plan(const ModelSpec& m, const ClusterSpec& c, const PlanSpaceRequest& req) {
  const SweepResult r = folded_sweep(m, c, req);
  EXPECT_EQ(r.plans.at(0).rank, 1) << "no plan fits on " << c.name;
  return r.plans.at(0);
}

// The sweep's best plan is the best found by simulating every plan one by one, and
// its pruned count is exactly what the memory model rejects.
TEST(Sweep, BestEqualsBruteForce) {
  SmallSpace s;
  // A capacity that lets about half of the plans fit: their median peak.
  PlanSpaceCounts space;
  std::vector<double> peaks;
  for (const PlanSpec& p : enumerate_plans(s.model, s.cl, s.request, space)) {
    peaks.push_back(memory_report(s.model, p, device_memory(s.profile)).peak_bytes);
  }
  std::sort(peaks.begin(), peaks.end());
  Profile tight = s.profile;
  tight.device.memory_bytes = peaks[peaks.size() / 2];
  Simulator simulator(s.cl, tight);
  SweepOptions options;
  options.threads = 2;
  options.full_top = 0;
  SweepResult sweep = run_sweep(s.model, simulator, s.request, options);
  rank_sweep(sweep, s.model, simulator, options);

  PlanSpaceCounts counts;
  std::vector<PlanSpec> plans = enumerate_plans(s.model, s.cl, s.request, counts);
  ASSERT_GT(plans.size(), 50u);
  std::int64_t rejected = 0;
  double best = 0.0;
  std::string best_label;
  SimulationOptions so;
  so.fidelity = Fidelity::kFolded;
  so.keep_timeline = false;
  for (const PlanSpec& p : plans) {
    if (!memory_report(s.model, p, device_memory(tight)).fits) {
      ++rejected;
      continue;
    }
    Scenario sc;
    sc.model = s.model;
    sc.plan = p;
    sc.cluster = s.cl;
    sc.profile = tight;
    SimulationResult r = simulate(sc, so);
    if (r.tokens_per_s > best) {
      best = r.tokens_per_s;
      best_label = plan_label(p);
    }
  }
  EXPECT_GT(rejected, 0);
  EXPECT_EQ(sweep.counts.pruned_memory, rejected);
  // The uneven-stage variants the sweep adds to its best pipelines come on top.
  EXPECT_EQ(sweep.counts.simulated - sweep.counts.balanced, static_cast<std::int64_t>(plans.size()) - rejected);
  ASSERT_EQ(sweep.plans[0].rank, 1);
  EXPECT_GE(sweep.plans[0].tokens_per_s, best);
  const auto best_even = std::find_if(sweep.plans.begin(), sweep.plans.end(),
                                      [](const PlanOutcome& o) { return !o.plan.uneven_stages(); });
  ASSERT_NE(best_even, sweep.plans.end());
  EXPECT_DOUBLE_EQ(best_even->tokens_per_s, best);
  EXPECT_EQ(best_even->label, best_label);
}

// sweep.csv names every plan.json key as a column, so no two plans read alike:
// a plan with every optional key written (cp, hybrid shards, uneven stages).
TEST(Sweep, CsvHasAColumnForEveryPlanKey) {
  PlanSpec p;
  p.tp = 2;
  p.pp = 2;
  p.dp = 2;
  p.cp = 2;
  p.zero_stage = 3;
  p.zero_shard_size = 2;
  p.first_stage_layers = 3;
  p.last_stage_layers = 1;
  p.account_for_embedding = true;
  p.account_for_loss = true;
  const std::string csv = sweep_csv(SweepResult{});
  const std::string header = csv.substr(0, csv.find('\n'));
  std::set<std::string> columns;
  for (std::size_t start = 0; start <= header.size();) {
    const std::size_t comma = std::min(header.find(',', start), header.size());
    columns.insert(header.substr(start, comma - start));
    start = comma + 1;
  }
  const nlohmann::ordered_json plan_json = to_json(p);
  for (const auto& [key, value] : plan_json.items()) EXPECT_TRUE(columns.count(key)) << key;
}

// Plans that differ only in a field the first columns lacked get distinct rows,
// and byte counts are exact integers (sweep.json's values, not 6 digits).
TEST(Sweep, CsvRowsTellPlansApartAndGiveExactBytes) {
  PlanOutcome a;
  a.peak_bytes = 76543210987.0;
  a.capacity_bytes = 85899345920.0;
  PlanOutcome b = a;
  b.plan.dtype = DType::kFp16;
  PlanOutcome c = a;
  c.plan.overlap_param_gather = !a.plan.overlap_param_gather;
  SweepResult r;
  r.plans = {a, b, c};
  std::istringstream lines(sweep_csv(r));
  std::string header, ra, rb, rc;
  std::getline(lines, header);
  std::getline(lines, ra);
  std::getline(lines, rb);
  std::getline(lines, rc);
  EXPECT_NE(ra, rb);
  EXPECT_NE(ra, rc);
  EXPECT_NE(ra.find(",76543210987,85899345920,"), std::string::npos) << ra;
  // sweep.json's labels too.
  EXPECT_NE(plan_label(a.plan), plan_label(b.plan));
  EXPECT_NE(plan_label(a.plan), plan_label(c.plan));
}

// One thread or several, the same files.
TEST(Sweep, SameOutputWithAnyThreadCount) {
  SmallSpace s;
  auto files = [&](int threads) {
    SweepOptions options;
    options.threads = threads;
    options.full_top = 2;
    SweepResult r = run_sweep(s.model, s.simulator, s.request, options);
    rank_sweep(r, s.model, s.simulator, options);
    return sweep_csv(r) + sweep_json(r, {}).dump();
  };
  EXPECT_EQ(files(1), files(2));
}

// The progress contract (core/progress.h): every simulated plan is reported,
// and a false answer stops the sweep with Cancelled, on any thread count.
TEST(Sweep, ReportsEveryPlanAndStopsWhenAsked) {
  SmallSpace s;
  for (int threads : {1, 2}) {
    SweepOptions options;
    options.threads = threads;
    std::atomic<std::int64_t> reports{0}, last_total{0};
    options.progress = [&](std::int64_t, std::int64_t total, std::string_view) {
      ++reports;
      last_total = total;
      return true;
    };
    const SweepResult r = run_sweep(s.model, s.simulator, s.request, options);
    EXPECT_EQ(reports.load(), r.counts.simulated);
    EXPECT_EQ(last_total.load(), r.counts.simulated);
    std::atomic<std::int64_t> calls{0};
    options.progress = [&](std::int64_t done, std::int64_t, std::string_view) {
      ++calls;
      return done < 3;
    };
    EXPECT_THROW(run_sweep(s.model, s.simulator, s.request, options), Cancelled);
    EXPECT_LT(calls.load(), r.counts.simulated) << "threads " << threads;
  }
}

TEST(Sweep, ConstraintsRestrictThePlans) {
  SmallSpace s;
  s.request.constraints = {parse_constraint("tp<=2", "--where"), parse_constraint("zero_stage in [1,2]", "--where"),
                           parse_constraint("recompute=full", "--where")};
  PlanSpaceCounts counts;
  std::vector<PlanSpec> plans = enumerate_plans(s.model, s.cl, s.request, counts);
  ASSERT_FALSE(plans.empty());
  EXPECT_GT(counts.constrained, 0);
  for (const PlanSpec& p : plans) {
    EXPECT_LE(p.tp, 2);
    EXPECT_TRUE(p.zero_stage == 1 || p.zero_stage == 2);
    EXPECT_EQ(p.recompute, Recompute::kFull);
  }
}

// --where lists as a shell user types them: bare words, or JSON's quoted strings.
TEST(Sweep, WhereListsTakeBareWordsAndJsonValues) {
  const std::vector<std::string> expected = {"none", "full"};
  EXPECT_EQ(parse_constraint("recompute in [none,full]", "--where").allowed, expected);
  EXPECT_EQ(parse_constraint("recompute in [ none , full ]", "--where").allowed, expected);
  EXPECT_EQ(parse_constraint(R"(recompute in ["none", "full"])", "--where").allowed, expected);
  EXPECT_EQ(parse_constraint("zero_stage in [1,2]", "--where").allowed, (std::vector<std::string>{"1", "2"}));
  EXPECT_EQ(parse_constraint("flash_attention in [true,false]", "--where").allowed,
            (std::vector<std::string>{"true", "false"}));
  EXPECT_THROW(parse_constraint("recompute in [none,]", "--where"), InputError);
  EXPECT_THROW(parse_constraint("recompute in none,full", "--where"), InputError);
  EXPECT_THROW(parse_constraint("recompute in [none,fast]", "--where"), InputError);  // not a recompute value
}

// Context parallelism is an axis of the space: cp takes the divisors of
// GPUs / tp for which the sequence cuts into 2 cp chunks and each rank keeps
// min_cp_tokens, only with fused attention, and the exchange types a constraint
// lists (cp = 1 has none to pick).
TEST(Sweep, ContextParallelIsAnAxisOfTheSpace) {
  SmallSpace s;
  s.model.seq_length = 24;  // 2 cp divides 24 for cp 1, 2, 4 but not 8
  s.request.min_cp_tokens = 1;
  s.request.constraints = {parse_constraint(R"(cp_comm_type in ["p2p", "allgather"])", "test"),
                           parse_constraint(R"(flash_attention in [true, false])", "test")};
  PlanSpaceCounts counts;
  std::set<int> cps;
  std::set<std::pair<int, std::string>> cp_types;
  bool unfused_cp1 = false;
  for (const PlanSpec& p : enumerate_plans(s.model, s.cl, s.request, counts)) {
    EXPECT_EQ(p.tp * p.cp * p.pp * p.dp, s.cl.num_gpus()) << plan_label(p);
    cps.insert(p.cp);
    cp_types.insert({p.cp, to_string(p.cp_comm_type)});
    if (p.cp > 1) {
      EXPECT_TRUE(p.flash_attention) << plan_label(p);
    }
    unfused_cp1 = unfused_cp1 || (p.cp == 1 && !p.flash_attention);
  }
  EXPECT_EQ(cps, (std::set<int>{1, 2, 4}));
  EXPECT_EQ(cp_types, (std::set<std::pair<int, std::string>>{
                          {1, "p2p"}, {2, "p2p"}, {2, "allgather"}, {4, "p2p"}, {4, "allgather"}}));
  EXPECT_TRUE(unfused_cp1);

  // At least 12 tokens per rank: cp 1 and 2 (24 / 4 = 6 is too few) ...
  s.request.min_cp_tokens = 12;
  s.request.constraints = {};
  cps.clear();
  for (const PlanSpec& p : enumerate_plans(s.model, s.cl, s.request, counts)) cps.insert(p.cp);
  EXPECT_EQ(cps, (std::set<int>{1, 2}));
  // ... unless a constraint on cp takes over.
  s.request.constraints = {parse_constraint("cp>=2", "test")};
  cps.clear();
  for (const PlanSpec& p : enumerate_plans(s.model, s.cl, s.request, counts)) cps.insert(p.cp);
  EXPECT_EQ(cps, (std::set<int>{2, 4}));
  EXPECT_THROW(parse_constraint("cp_comm_type=ring", "--where"), InputError);
}

// Hybrid sharding is swept only where a constraint lists shard-group sizes: on
// one 8-GPU node, groups of 4 (hybrid, ZeRO >= 1 only) and of all 8 (plain ZeRO).
TEST(Sweep, ZeroShardSizeConstraintListsTheGroupSizes) {
  SmallSpace s;
  PlanSpaceCounts counts;
  for (const PlanSpec& p : enumerate_plans(s.model, s.cl, s.request, counts)) EXPECT_EQ(p.zero_shard_size, 0);
  s.request.constraints = {parse_constraint("zero_shard_size in [4, 8]", "test"), parse_constraint("dp=8", "test")};
  std::set<std::pair<int, int>> seen;  // (shard group size, zero stage > 0)
  for (const PlanSpec& p : enumerate_plans(s.model, s.cl, s.request, counts)) {
    seen.insert({p.zero_shards(), p.zero_stage > 0 ? 1 : 0});
    if (p.zero_shard_size > 0) {
      EXPECT_GE(p.zero_stage, 1);
    }
  }
  EXPECT_EQ(seen, (std::set<std::pair<int, int>>{{4, 1}, {8, 0}, {8, 1}}));
}

// Every plan runs with the sweep's framework; ZeRO-3 is tried only with one that
// shards parameters (Megatron-LM of 2021 has no ZeRO-3), and with DeepSpeed's
// per-module ZeRO-3 only without pipeline parallelism.
TEST(Sweep, PlansRunWithTheRequestedFramework) {
  SmallSpace s;
  auto zero3_plans = [&](const std::string& framework, bool pipelined) {
    s.request.framework = framework;
    PlanSpaceCounts counts;
    int zero3 = 0;
    for (const PlanSpec& p : enumerate_plans(s.model, s.cl, s.request, counts)) {
      EXPECT_EQ(p.framework, framework);
      zero3 += p.zero_stage == 3 && (p.pp > 1) == pipelined ? 1 : 0;
    }
    return zero3;
  };
  EXPECT_GT(zero3_plans("pytorch-fsdp1", false), 0);
  EXPECT_GT(zero3_plans("pytorch-fsdp1", true), 0);
  EXPECT_EQ(zero3_plans("megatron-lm-2021", false), 0);
  EXPECT_GT(zero3_plans("deepspeed-zero3-2021", false), 0);
  EXPECT_EQ(zero3_plans("deepspeed-zero3-2021", true), 0);
}

TEST(Sweep, ParetoFrontIsNotDominated) {
  SmallSpace s;
  SweepOptions options;
  options.full_top = 0;
  SweepResult r = run_sweep(s.model, s.simulator, s.request, options);
  rank_sweep(r, s.model, s.simulator, options);
  int front = 0;
  for (const PlanOutcome& a : r.plans) {
    if (!a.pareto) continue;
    ++front;
    for (const PlanOutcome& b : r.plans) {
      if (!b.simulated) continue;
      const bool dominates = b.tokens_per_s >= a.tokens_per_s && b.headroom() >= a.headroom() &&
                             (b.tokens_per_s > a.tokens_per_s || b.headroom() > a.headroom());
      EXPECT_FALSE(dominates) << a.label << " is dominated by " << b.label;
    }
  }
  EXPECT_GE(front, 1);
  EXPECT_TRUE(r.plans[0].pareto);  // the fastest plan is always on the front
}

// GPT-3 175B on 1,024 A100 (Narayanan et al. 2021 ran tp 8): the winner uses tp 8
// within a node and not ZeRO-3. The space is that paper's software: no fused
// attention (Megatron-LM of 2021 materialised the score matrices), no sequence
// parallelism and no selective recompute (both Korthikanti et al. 2022). With
// selective recompute the model prefers tp 4 pp 8 (docs/sweep.md): it removes the
// activation memory that made tp 8 necessary, and tp 4 halves the exposed
// tensor-parallel time.
TEST(SweepAnswers, Gpt3On1024A100UsesTp8NotZero3) {
  PlanSpaceRequest req;
  req.global_batch_size = 1536;
  req.max_micro_batch_size = 4;
  req.max_vpp = 8;
  req.constraints = {parse_constraint("offload_optimizer=false", "test"),
                     parse_constraint("flash_attention=false", "test"),
                     parse_constraint("sequence_parallel=false", "test"),
                     parse_constraint(R"(recompute in ["full", "none"])", "test")};
  const PlanOutcome best = best_plan(load_model_spec("gpt3-175b"), load_cluster_spec("dgx-a100-128node"), req);
  EXPECT_EQ(best.plan.tp, 8) << best.label;
  EXPECT_NE(best.plan.zero_stage, 3) << best.label;
}

// On a PCIe box (GPUs on two sockets), the winner keeps tensor parallelism off the
// socket link: tp no larger than the 4 GPUs of one socket.
TEST(SweepAnswers, PcieBoxAvoidsTpAcrossSockets) {
  const ClusterSpec c = load_cluster_spec("pcie-8gpu-1node");
  PlanSpaceRequest req;
  req.global_batch_size = 64;
  req.max_micro_batch_size = 2;
  req.max_vpp = 1;
  const PlanOutcome best = best_plan(load_model_spec("llama3-8b"), c, req);
  EXPECT_LE(best.plan.tp, c.node.gpus / c.node.sockets) << best.label;
}

// Llama 3 70B at 32K tokens on 64 H100 (the long-context issue's acceptance):
// without recomputation no cp = 1 plan fits (a layer's activations at 32K are
// ~34 s h bytes per sequence, Korthikanti et al. 2022), cp > 1 plans do, and the
// best one's explanation says what cp 1 would need.
TEST(SweepAnswers, Llama3_70bAt32kTokensFitsOnlyWithContextParallelism) {
  ModelSpec m = load_model_spec("llama3-70b");
  m.seq_length = 32768;
  PlanSpaceRequest req;
  req.global_batch_size = 128;
  req.max_micro_batch_size = 1;
  req.max_vpp = 1;
  req.constraints = {parse_constraint("recompute=none", "test"), parse_constraint("offload_optimizer=false", "test")};
  const SweepResult r = folded_sweep(m, load_cluster_spec("dgx-h100-8node"), req);
  int cp1_plans = 0;
  for (const PlanOutcome& o : r.plans) {
    if (o.plan.cp > 1) continue;
    ++cp1_plans;
    EXPECT_FALSE(o.fits) << o.label;
  }
  EXPECT_GT(cp1_plans, 0);
  const PlanOutcome& best = r.plans.at(0);
  ASSERT_EQ(best.rank, 1);
  EXPECT_GT(best.plan.cp, 1) << best.label;
  EXPECT_NE(best.why.find("at cp 1 (dp " + std::to_string(best.plan.dp * best.plan.cp) + ") it does not fit"),
            std::string::npos)
      << best.why;
}

// Llama 3 8B in two 1F1B stages on one DGX H100: the last stage also runs the
// 128,256-word output layer and loss (2·s·h·V FLOPs per sequence, about 2.4
// layers' worth), so the sweep's uneven splits find 17 / 15 faster than 16 / 16
// and say why; the winning split is one the plan checks accept.
TEST(SweepAnswers, Llama3_8bInTwoStagesGivesTheLastStageOneLayerFewer) {
  const ModelSpec m = load_model_spec("llama3-8b");
  PlanSpaceRequest req;
  req.global_batch_size = 32;
  req.max_micro_batch_size = 1;
  req.constraints = {parse_constraint("pp=2", "test"), parse_constraint("tp=1", "test"),
                     parse_constraint("schedule=1f1b", "test"), parse_constraint("cp=1", "test")};
  const SweepResult r = folded_sweep(m, load_cluster_spec("dgx-h100-1node"), req);
  EXPECT_GT(r.counts.balanced, 0);
  const PlanOutcome& best = r.plans.at(0);
  ASSERT_EQ(best.rank, 1);
  EXPECT_EQ(best.plan.first_stage_layers, 17) << best.label;
  EXPECT_EQ(best.plan.last_stage_layers, 15) << best.label;
  EXPECT_NE(best.why.find("split 17/15 (even 16): the last stage carries the 128256-vocabulary output layer and loss: "
                          "1 layer fewer there balances it"),
            std::string::npos)
      << best.why;
  // Its even twin is in the ranking, slower.
  PlanSpec even = best.plan;
  even.first_stage_layers = 0;
  even.last_stage_layers = 0;
  const auto twin = std::find_if(r.plans.begin(), r.plans.end(),
                                 [&](const PlanOutcome& o) { return to_json(o.plan).dump() == to_json(even).dump(); });
  ASSERT_NE(twin, r.plans.end());
  EXPECT_LT(twin->tokens_per_s, best.tokens_per_s);
}

// Llama 3 8B in four stages on one DGX H100 without interleaving: 1F1B idles
// (p - 1)/(m + p - 1) of the step; the zero-bubble schedules fill it with the
// deferred weight gradients, so one of them ranks first, and the why line gives
// the bubble against its 1F1B twin.
TEST(SweepAnswers, Llama3_8bInFourStagesRunsAZeroBubbleSchedule) {
  const ModelSpec m = load_model_spec("llama3-8b");
  PlanSpaceRequest req;
  req.global_batch_size = 16;
  req.max_micro_batch_size = 1;
  req.max_vpp = 1;
  req.constraints = {parse_constraint("pp=4", "test"), parse_constraint("tp=1", "test"),
                     parse_constraint("cp=1", "test")};
  const SweepResult r = folded_sweep(m, load_cluster_spec("dgx-h100-1node"), req);
  const PlanOutcome& best = r.plans.at(0);
  ASSERT_EQ(best.rank, 1);
  EXPECT_TRUE(splits_backward(best.plan.schedule)) << best.label;
  const std::string expected = fmt::format("({} vs 1f1b", to_string(best.plan.schedule));
  EXPECT_NE(best.why.find(expected), std::string::npos) << best.why;
  // Its 1F1B twin is in the ranking, with the larger bubble.
  PlanSpec twin = best.plan;
  twin.schedule = Schedule::kOneFOneB;
  twin.first_stage_layers = twin.last_stage_layers = 0;
  const auto it = std::find_if(r.plans.begin(), r.plans.end(),
                               [&](const PlanOutcome& o) { return to_json(o.plan).dump() == to_json(twin).dump(); });
  ASSERT_NE(it, r.plans.end());
  EXPECT_GT(it->bubble_ratio, 1.5 * best.bubble_ratio) << best.label << " " << best.why;
}

// Doubling the nodes (same global batch) does not slow the best plan down.
TEST(SweepAnswers, DoublingNodesDoesNotSlowTheBestPlan) {
  ModelSpec m = load_model_spec("llama3-8b");
  PlanSpaceRequest req;
  req.global_batch_size = 256;
  req.max_micro_batch_size = 2;
  req.max_vpp = 2;
  double previous = 0.0;
  for (int nodes : {2, 4}) {
    const PlanOutcome best = best_plan(m, cluster("dgx-h100-8node", nodes), req);
    EXPECT_GE(best.tokens_per_s, previous) << nodes << " nodes: " << best.label;
    previous = best.tokens_per_s;
  }
}

}  // namespace
}  // namespace strata::sim

namespace strata::sim {
namespace {

// A small plan space: global batch 64, micro-batch 1, no virtual stages.
PlanSpaceRequest small_space() {
  PlanSpaceRequest req;
  req.global_batch_size = 64;
  req.max_micro_batch_size = 1;
  req.max_vpp = 1;
  return req;
}

// A multi-head latent attention model's space also holds selective recompute
// of its up-projections (Megatron-Core's module mla_up_proj), each such plan
// the twin of a core_attn one; a model without MLA has none.
TEST(Sweep, MlaModelsAlsoTryRecomputingTheUpProjections) {
  const ClusterSpec c = cluster("dgx-h100-8node", 8);
  const PlanSpaceRequest req = small_space();
  auto mla_plans = [&](const ModelSpec& m, std::int64_t* core_attn) {
    PlanSpaceCounts counts;
    std::int64_t up = 0;
    *core_attn = 0;
    for (const PlanSpec& p : enumerate_plans(m, c, req, counts)) {
      if (p.recompute != Recompute::kSelective) continue;
      if (p.recompute_modules.mla_up_proj) {
        ++up;
        EXPECT_FALSE(p.recompute_modules.core_attn);
        EXPECT_EQ(recompute_label(p), "selective(mla_up_proj)");
      } else {
        ++*core_attn;
      }
    }
    return up;
  };
  std::int64_t core_attn = 0;
  EXPECT_EQ(mla_plans(load_model_spec("deepseek-v3"), &core_attn), core_attn);
  EXPECT_GT(core_attn, 0);
  EXPECT_EQ(mla_plans(load_model_spec("mixtral-8x7b"), &core_attn), 0);
  EXPECT_GT(core_attn, 0);
}

// A model with shared experts runs them beside the token exchanges in every plan
// of the all-to-all dispatcher's space, never with the allgather dispatcher (which
// Megatron-Core refuses); a model without shared experts never sets the key.
TEST(Sweep, SharedExpertsRunBesideTheExchangesWhereTheDispatcherAllows) {
  const ClusterSpec c = cluster("dgx-h100-8node", 8);
  PlanSpaceRequest req = small_space();
  auto overlapping = [&](const ModelSpec& m, MoeDispatcher d) {
    req.moe_dispatcher = d;
    PlanSpaceCounts counts;
    std::int64_t on = 0, all = 0;
    for (const PlanSpec& p : enumerate_plans(m, c, req, counts)) {
      ++all;
      on += p.moe.shared_expert_overlap ? 1 : 0;
    }
    EXPECT_GT(all, 0);
    return std::make_pair(on, all);
  };
  const auto qwen = overlapping(load_model_spec("qwen2-57b-a14b"), MoeDispatcher::kAllToAll);
  EXPECT_EQ(qwen.first, qwen.second);
  EXPECT_EQ(overlapping(load_model_spec("qwen2-57b-a14b"), MoeDispatcher::kAllGather).first, 0);
  EXPECT_EQ(overlapping(load_model_spec("mixtral-8x7b"), MoeDispatcher::kAllToAll).first, 0);
}

}  // namespace
}  // namespace strata::sim
