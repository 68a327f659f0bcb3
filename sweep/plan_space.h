// Every valid plan for a model on a cluster: the candidate values of each plan key,
// crossed, filtered by the user's constraints and by the same checks plan.json
// gets (divisibility, node size, schedule rules).
#pragma once

#include <algorithm>

#include <cstdint>
#include <string>
#include <vector>

#include "plan/model_spec.h"
#include "plan/plan_spec.h"
#include "sweep/constraints.h"
#include "topologies/cluster_spec.h"

namespace strata::sim {

// The global batch a sweep uses when none is given: 4 Mi tokens per step (GPT-3
// used 3.2M, Llama 2 4M), as whole sequences, rounded up to a multiple of the GPU
// count so data parallelism has something to split.
inline int default_global_batch(int seq_length, int gpus) {
  const int sequences = std::max(1, (4 << 20) / seq_length);
  return (sequences + gpus - 1) / gpus * gpus;
}

struct PlanSpaceRequest {
  int global_batch_size = 0;
  std::vector<Constraint> constraints;
  bool allow_cross_node_tp = false;
  DType dtype = DType::kBf16;
  // Fused attention is what current Megatron-LM and DeepSpeed runs use; a
  // constraint `flash_attention=false` (or in [true,false]) says otherwise.
  bool flash_attention = true;
  int max_micro_batch_size = 16;  // micro-batch sizes tried: powers of two up to this
  int max_vpp = 8;                // virtual stages tried: divisors of layers per stage up to this
  // The training software every plan runs with (a framework profile's name); ZeRO-3
  // is tried only when it shards parameters.
  std::string framework = kDefaultFramework;
};

struct PlanSpaceCounts {
  std::int64_t candidates = 0;   // combinations of the keys' candidate values
  std::int64_t constrained = 0;  // dropped by the user's constraints
  std::int64_t invalid = 0;      // dropped by the plan checks
};

// Valid plans in a deterministic order (tp, pp, vpp, micro-batch, schedule, ZeRO,
// offload, recompute, sequence parallel, ...), dp resolved.
std::vector<PlanSpec> enumerate_plans(const ModelSpec& model, const ClusterSpec& cluster,
                                      const PlanSpaceRequest& request, PlanSpaceCounts& counts);

// A compact, stable text of the plan's keys ("tp8 pp8 dp16 vpp1 mbs1 1f1b z1 ...").
std::string plan_label(const PlanSpec& plan);

}  // namespace strata::sim
