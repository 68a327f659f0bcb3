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
  // Context parallelism is tried while each rank keeps at least this many tokens
  // of a sequence. The public long-context recipes keep 4,096 or more (NeMo's
  // Llama 3.1 70B/405B at 8K with cp 2; Llama 3 405B at 128K with cp 16, arXiv
  // 2407.21783): below that the chunks' GEMMs and attention tiles shrink while the
  // K/V exchange does not. A constraint on `cp` replaces this bound.
  int min_cp_tokens = 4096;
  // The training software every plan runs with (a framework profile's name); ZeRO-3
  // is tried only when it shards parameters.
  std::string framework = kDefaultFramework;
  // An MoE model's token dispatcher in every plan: the all-to-all, what
  // Megatron-Core's MoE recipes run with ep > 1, unless asked otherwise (flex: DeepEP).
  MoeDispatcher moe_dispatcher = MoeDispatcher::kAllToAll;
};

struct PlanSpaceCounts {
  std::int64_t candidates = 0;   // combinations of the keys' candidate values
  std::int64_t constrained = 0;  // dropped by the user's constraints
  std::int64_t invalid = 0;      // dropped by the plan checks
};

// Valid plans in a deterministic order (tp, cp, pp, vpp, micro-batch, schedule, ZeRO,
// offload, recompute, sequence parallel, ...), dp resolved.
std::vector<PlanSpec> enumerate_plans(const ModelSpec& model, const ClusterSpec& cluster,
                                      const PlanSpaceRequest& request, PlanSpaceCounts& counts);

// A compact, stable text of the plan's keys ("tp8 pp8 dp16 vpp1 mbs1 1f1b z1 ...";
// "tp8 cp2 pp4 ..." with context parallelism, "cp2-allgather" when not the ring;
// "z3/8" with hybrid sharding in groups of 8).
std::string plan_label(const PlanSpec& plan);
// An uneven split's first/last stage layers, "17/15" (or "+emb+loss" when the
// embedding / loss count as layers); "" for the even split.
std::string stage_split_label(const PlanSpec& plan);

}  // namespace strata::sim
