// Hybrid sharding (plan key zero_shard_size): the plan checks, the model states
// against the ZeRO formula with the shard group in place of the data-parallel
// group, and the gradient reduction as two collectives (reduce-scatter within a
// shard group, all-reduce of the shard across the groups) with the bytes worked
// out by hand.
#include <gtest/gtest.h>

#include <map>
#include <string>

#include "core/error.h"
#include "costmodel/profile.h"
#include "plan/memory_model.h"
#include "plan/params.h"
#include "plan/plan_spec.h"
#include "sim/device_memory.h"
#include "sim/simulate.h"
#include "topologies/cluster_spec.h"

namespace strata::sim {
namespace {

// Llama 3 8B on two DGX H100 nodes, dp 16: sharded within a node (8) or over all 16.
struct TwoNodes {
  ModelSpec model = load_model_spec("llama3-8b");
  ClusterSpec cluster = load_cluster_spec("dgx-h100-8node");
  Profile profile = load_profile(cluster.profile);
  TwoNodes() { cluster.nodes = 2; }
  PlanContext context() const { return {cluster.num_gpus(), cluster.gpus_per_node, false}; }
  PlanSpec plan(int zero_stage, int shard) const {
    PlanSpec p;
    p.micro_batch_size = 1;
    p.global_batch_size = 32;
    p.zero_stage = zero_stage;
    p.zero_shard_size = shard;
    p.flash_attention = true;
    p.accumulate_allreduce_grads_in_fp32 = true;
    resolve_and_check_plan(p, model, context(), "plan.json");
    return p;
  }
};

std::string error_path(const std::function<void()>& f) {
  try {
    f();
  } catch (const InputError& e) {
    return e.json_path();
  }
  return "";
}

TEST(HybridSharding, PlanChecksNameZeroShardSize) {
  TwoNodes s;
  EXPECT_EQ(error_path([&] { s.plan(3, 6); }), "$.zero_shard_size");  // 6 does not divide dp 16
  EXPECT_EQ(error_path([&] { s.plan(0, 8); }), "$.zero_shard_size");  // nothing to shard at ZeRO-0
  // One group of all 16 is plain ZeRO: the same plan, and the same plan.json.
  const PlanSpec all = s.plan(3, 16);
  EXPECT_EQ(all.zero_shard_size, 0);
  EXPECT_EQ(to_json(all).dump(), to_json(s.plan(3, 0)).dump());
  const PlanSpec hybrid = s.plan(3, 8);
  EXPECT_EQ(hybrid.zero_shards(), 8);
  EXPECT_EQ(hybrid.zero_shard_groups(), 2);
  EXPECT_EQ(to_json(hybrid)["zero_shard_size"], 8);
}

// ZeRO's model states (Rajbhandari et al. 2020, section 3.1) with the shard
// group's 8 ranks where plain ZeRO has all 16: weights 2 psi / 8, fp32 gradients
// 4 psi / 8, Adam 12 psi / 8 (the profile's optimizer bytes per parameter).
TEST(HybridSharding, ModelStatesShardOverTheGroup) {
  TwoNodes s;
  const DeviceMemory device = device_memory(s.profile);
  const PlanSpec hybrid = s.plan(3, 8);
  const MemoryReport h = memory_report(s.model, hybrid, device);
  const MemoryReport full = memory_report(s.model, s.plan(3, 0), device);
  const double psi = static_cast<double>(h.stages[0].params);
  EXPECT_DOUBLE_EQ(h.stages[0].params_bytes, 2.0 * psi / 8);
  EXPECT_DOUBLE_EQ(h.stages[0].grads_bytes, 4.0 * psi / 8);
  EXPECT_DOUBLE_EQ(full.stages[0].params_bytes, 2.0 * psi / 16);
  EXPECT_DOUBLE_EQ(h.stages[0].optimizer_bytes, 2.0 * full.stages[0].optimizer_bytes);
  EXPECT_DOUBLE_EQ(h.stages[0].activations_bytes, full.stages[0].activations_bytes);
}

// The data-parallel tasks of simulated rank 0, by name: how many and their bytes.
std::map<std::string, std::pair<int, double>> dp_tasks(const SimulationResult& r) {
  std::map<std::string, std::pair<int, double>> out;
  const Workload& w = r.workload;
  for (StreamKind lane : {StreamKind::kDpComm, StreamKind::kDpReduce}) {
    for (TaskId t : w.stream(0, lane)) {
      auto& e = out[w.notes.label_of_task(t).name];
      ++e.first;
      e.second += w.notes.info(t).bytes;
    }
  }
  return out;
}

// ZeRO-1 (reduce-scatter once per step, bucket by bucket) sharded within a node:
// every bucket's reduce-scatter over the node's 8 GPUs is followed by the
// all-reduce of its eighth across the two nodes; the per-step bytes of each are
// the stage's gradients (4 bytes each) and an eighth of them. Full and folded
// fidelity build the same collectives and agree on the step within 5%.
TEST(HybridSharding, GradientsReduceWithinThenAcross) {
  TwoNodes s;
  Simulator simulator(s.cluster, s.profile);
  const PlanSpec hybrid = s.plan(1, 8);
  const double grads = 4.0 * static_cast<double>(stage_params_per_gpu(s.model, hybrid, 0));
  SimulationOptions options;
  options.fidelity = Fidelity::kFull;
  const SimulationResult full = simulator.run(s.model, hybrid, options);
  const auto tasks = dp_tasks(full);
  ASSERT_TRUE(tasks.count("grad reduce_scatter")) << "no reduce-scatter";
  ASSERT_TRUE(tasks.count("grad all_reduce across shard groups")) << "no all-reduce across";
  const auto rs = tasks.at("grad reduce_scatter");
  const auto across = tasks.at("grad all_reduce across shard groups");
  EXPECT_EQ(rs.first, across.first);  // one of each per bucket
  EXPECT_NEAR(rs.second, grads, 1e-6 * grads);
  EXPECT_NEAR(across.second, grads / 8, 1e-6 * grads);

  // Plain ZeRO-1 has no second reduction.
  EXPECT_EQ(dp_tasks(simulator.run(s.model, s.plan(1, 0), options)).count("grad all_reduce across shard groups"), 0u);

  options.fidelity = Fidelity::kFolded;
  const SimulationResult folded = simulator.run(s.model, hybrid, options);
  EXPECT_EQ(dp_tasks(folded).at("grad all_reduce across shard groups").first, across.first);
  EXPECT_NEAR(folded.metrics.step_time_s, full.metrics.step_time_s, 0.05 * full.metrics.step_time_s);
}

// ZeRO-3 sharded within a node: every layer's gathers stay on NVLink (the shard
// group), and each layer's reduce-scatter is followed by its shard's all-reduce
// across the nodes.
TEST(HybridSharding, Zero3GathersStayInTheShardGroup) {
  TwoNodes s;
  Simulator simulator(s.cluster, s.profile);
  SimulationOptions options;
  options.fidelity = Fidelity::kFull;
  const PlanSpec hybrid = s.plan(3, 8);
  const auto tasks = dp_tasks(simulator.run(s.model, hybrid, options));
  const auto rs = tasks.at("grad reduce_scatter");
  EXPECT_EQ(rs.first, s.model.num_layers * hybrid.num_microbatches());
  EXPECT_EQ(tasks.at("grad all_reduce across shard groups").first, rs.first);
  // The same gathers (count and bytes) as plain ZeRO-3: the weights are whole once gathered.
  const auto plain = dp_tasks(simulator.run(s.model, s.plan(3, 0), options));
  EXPECT_EQ(tasks.at("param all_gather").first, plain.at("param all_gather").first);
  EXPECT_DOUBLE_EQ(tasks.at("param all_gather").second, plain.at("param all_gather").second);
}

}  // namespace
}  // namespace strata::sim
