// plan.json: how one training step is parallelised. Keys follow Megatron-LM.
// Every key, its unit and default is documented in docs/formats.md.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/dtype.h"
#include "plan/model_spec.h"
#include "plan/rank_layout.h"

namespace strata {

namespace json {
class ObjectReader;
}

// kZbH1, kZbH2: the zero-bubble schedules (Qi et al., "Zero Bubble Pipeline
// Parallelism", ICLR 2024, arXiv 2401.10241, section 3): the backward split into B
// (input gradients) and W (weight gradients), W deferred into the bubbles.
// ZB-H1 keeps 1F1B's peak of p micro-batches in flight; ZB-H2 holds up to 2p - 1
// and needs the optimizer step's post-validation (section 4) to reach zero bubble.
// kZbV: the V-shaped zero-bubble schedule (the same paper, section 6; Qi et al.,
// "Pipeline Parallelism with Controllable Memory", arXiv 2405.15362): two model
// chunks per rank placed as a V (plan/stage_map.h), 1F1B's peak activation memory
// and, with equal F, B and W times, no bubble.
enum class Schedule { kGpipe, kOneFOneB, kInterleaved, kZbH1, kZbH2, kZbV };
// kSelectiveOp: torchtitan's op-level selective activation checkpointing
// (activation_checkpoint.mode "selective", selective_ac_option "op"): every
// op's output is recomputed except the fused attention's and every other matmul's.
enum class Recompute { kNone, kSelective, kFull, kSelectiveOp };

// What selective recompute replays (Megatron-Core's --recompute-modules with
// --recompute-granularity selective): core_attn, the attention core (its
// default); mla_up_proj, multi-head latent attention's up-projections and
// rotary assembly (Q, K and V freed after the attention, rebuilt before its
// backward; multi_latent_attention.py's CheckpointWithoutOutput).
struct RecomputeModules {
  bool core_attn = true;
  bool mla_up_proj = false;
  bool is_default() const { return core_attn && !mla_up_proj; }
  bool operator==(const RecomputeModules&) const = default;
};

// How context-parallel attention exchanges keys and values (Megatron-Core's
// --cp-comm-type, Transformer Engine's attention with context parallelism):
// kP2p: the ring (cp - 1 steps, each step's K/V sent on while the step before
// computes); kAllGather: K/V all-gathered before the local attention (the Llama 3
// paper's choice, arXiv 2407.21783 section 3.3.2); kA2a: all-to-all from sequence
// to head sharding and back around the attention (DeepSpeed-Ulysses' exchange,
// inside Megatron's layer).
enum class CpCommType { kP2p, kAllGather, kA2a };

// How an MoE layer moves its tokens to the experts (Megatron-Core's
// --moe-token-dispatcher-type): kAllToAll sends each token to its experts' ranks
// over the expert-parallel group (MoEAlltoAllTokenDispatcher); kAllGather
// gathers every token of the etp x ep group on every rank, which keeps those
// its local experts take (MoEAllGatherTokenDispatcher; Megatron's default);
// kFlex is MoEFlexTokenDispatcher with DeepSeek's DeepEP (`flex`, backend
// `deepep`): a token crosses the network once per node that holds one of its
// experts, to the GPU on its own rail, which forwards the copies over NVLink.
enum class MoeDispatcher { kAllToAll, kAllGather, kFlex };

// A plan's mixture-of-experts keys (plan/moe_spec.h reads, writes and checks
// them); meaningful only for a model with experts.
struct MoePlan {
  bool active = false;  // resolved: the model has experts (resolve_and_check_plan)
  int ep = 1;           // expert-model-parallel size (--expert-model-parallel-size)
  int etp = 0;          // expert tensor-parallel size (--expert-tensor-parallel-size); 0 until resolved to tp
  MoeDispatcher token_dispatcher = MoeDispatcher::kAllGather;
  // Tokens an expert takes, as a multiple of its balanced share (Megatron's
  // --moe-expert-capacity-factor; the rest are dropped); 0: dropless.
  double expert_capacity_factor = 0.0;
  bool grouped_gemm = false;     // --moe-grouped-gemm
  // --moe-shared-expert-overlap: the shared experts run on a side stream beside
  // the dispatch and combine all-to-alls (alltoall and flex dispatchers only).
  bool shared_expert_overlap = false;
  // --moe-pad-expert-input-to-capacity: every expert's input padded to its
  // capacity (needs a capacity factor). The costs are those of the busiest expert
  // at capacity either way; with padding every expert computes that much.
  bool pad_to_capacity = false;
  // Expected max / mean tokens per expert (1: balanced routing). A what-if
  // input: the busiest expert's rank holds this many times its share.
  double router_imbalance = 1.0;
  std::string first_key;  // the first MoE key the plan file gave ("" when none)
};

// Megatron-LM's gradient bucket floor, 40M parameters (DistributedDataParallel:
// bucket_size = max(40000000, 1000000 * dp)); Strata uses the floor.
inline constexpr std::int64_t kDefaultDdpBucketSize = 40000000;

// The framework a plan runs with when it names none.
inline constexpr const char* kDefaultFramework = "strata-runtime";

struct PlanSpec {
  int tp = 1;
  int pp = 1;
  int dp = 0;                 // 0 until resolved from the cluster's GPU count
  // Context parallelism (Megatron's --context-parallel-size): each rank holds
  // seq_length / cp tokens of every sequence, as two load-balanced causal chunks.
  int cp = 1;
  CpCommType cp_comm_type = CpCommType::kP2p;
  int vpp = 1;                // virtual stages (model chunks) per pipeline rank
  // Uneven pipeline stages (plan/pipeline_split.h, Megatron-Core's rule):
  // transformer layers on the first / last pipeline stage (Megatron's
  // --decoder-first-pipeline-num-layers / --decoder-last-pipeline-num-layers; 0:
  // the even split), or the embedding / loss counted as a layer
  // (--account-for-embedding-in-pipeline-split / --account-for-loss-in-pipeline-split).
  int first_stage_layers = 0;
  int last_stage_layers = 0;
  bool account_for_embedding = false;
  bool account_for_loss = false;
  int micro_batch_size = 1;
  int global_batch_size = 1;  // sequences per optimizer step
  Schedule schedule = Schedule::kOneFOneB;
  int zero_stage = 0;
  // Hybrid sharding (PyTorch FSDP's HYBRID_SHARD, Megatron-Core's
  // --num-distributed-optimizer-instances, DeepSpeed's MiCS): ZeRO shards within
  // groups of this many of the grad_replicas() ranks, consecutive in rank order
  // (within a node first), and replicates the shards across the groups. 0: one
  // group of them all, plain ZeRO (resolve_and_check_plan writes 0 for that too).
  int zero_shard_size = 0;
  bool offload_optimizer = false;
  Recompute recompute = Recompute::kNone;
  RecomputeModules recompute_modules;  // read with recompute "selective" only
  bool sequence_parallel = false;
  bool overlap_grad_reduce = true;
  bool overlap_param_gather = true;
  DType dtype = DType::kBf16;
  bool flash_attention = false;  // fused attention: the s x s scores are never stored
  // Gradients accumulated and data-parallel reduced in fp32 (Megatron-LM's
  // --accumulate-allreduce-grads-in-fp32, on by default with bf16): 4-byte gradients.
  bool accumulate_allreduce_grads_in_fp32 = false;
  // How global ranks fill the parallel dimensions, fastest first (Megatron-Core's
  // RankGenerator order; plan/rank_layout.h).
  RankOrder rank_order;
  // Parameters per data-parallel gradient bucket (Megatron-LM's --ddp-bucket-size;
  // its default floor is 40M: max(40M, 1M * dp) in distributed_data_parallel.py).
  std::int64_t ddp_bucket_size = kDefaultDdpBucketSize;
  // The training software the plan runs with: a framework profile's name
  // (scenarios/frameworks/; costmodel/framework_profile.h), Strata's own runtime
  // unless the plan names another.
  std::string framework = kDefaultFramework;
  MoePlan moe;
  std::string source;

  int num_gpus() const { return tp * cp * pp * dp; }
  // Ranks that hold one copy of the weights and reduce its gradients: dp x cp
  // (Megatron-Core's data-parallel group with context parallelism; ZeRO shards over it).
  int grad_replicas() const { return dp * cp; }
  // Ranks one ZeRO shard group spans, and how many groups hold copies of the shards.
  int zero_shards() const { return zero_shard_size > 0 ? zero_shard_size : grad_replicas(); }
  int zero_shard_groups() const { return grad_replicas() / zero_shards(); }
  // Replica d's (0 <= d < grad_replicas(), cp fastest) shard group, and its place
  // in it: the groups are consecutive replicas (Megatron-Core's intra-partial
  // data-parallel groups), so within a node first.
  int zero_shard_group_of(int d) const { return d / zero_shards(); }
  int zero_shard_rank_of(int d) const { return d % zero_shards(); }
  // The expert-data-parallel size: ranks of one pipeline stage holding the same
  // experts, tp*cp*dp / (ep*etp) (Megatron-Core's expert_data_parallel_size:
  // world / (etp*ep*pp), parallel_state.py). Expert gradients are reduced, and
  // their ZeRO states sharded, over it; with hybrid sharding within groups of
  // expert_zero_shards() of them (its intra-partial expert data-parallel groups).
  int expert_data_parallel() const { return tp * cp * dp / (moe.ep * moe.etp); }
  int expert_zero_shards() const { return expert_data_parallel() / zero_shard_groups(); }
  // Bytes of one gradient element as accumulated and reduced.
  int grad_bytes() const;
  // Whether the layers are split other than evenly over the stages.
  bool uneven_stages() const {
    return first_stage_layers > 0 || last_stage_layers > 0 || account_for_embedding || account_for_loss;
  }
  // Micro-batches each pipeline processes per step.
  int num_microbatches() const { return global_batch_size / (micro_batch_size * dp); }
};

// What a plan is checked against: the cluster's shape.
struct PlanContext {
  int num_gpus = 0;
  int gpus_per_node = 0;
  bool allow_cross_node_tp = false;  // --allow-cross-node-tp
};

// Reads plan.json without checking it against a model or cluster.
PlanSpec read_plan_spec(const nlohmann::json& doc, const std::string& file,
                        const std::string& path = "$");
PlanSpec load_plan_spec(const std::string& path_or_name);

// Derives dp when absent and checks the plan against the model and the cluster.
// Throws InputError naming plan_file and the JSON path of the offending key.
// plan_path: the JSON path of the plan object in plan_file ("$" for a plan.json).
void resolve_and_check_plan(PlanSpec& plan, const ModelSpec& model, const PlanContext& context,
                            const std::string& plan_file, const std::string& plan_path = "$");

nlohmann::ordered_json to_json(const PlanSpec& plan);
// The recompute setting as tables and plan names show it: to_string(recompute),
// with selective recompute's modules when not Megatron's default
// ("selective(mla_up_proj)", "selective(core_attn+mla_up_proj)").
std::string recompute_label(const PlanSpec& plan);
// Selective recompute's modules by Megatron-Core's names, in its order.
std::vector<std::string> recompute_module_names(const RecomputeModules& modules);

// The uneven-stage keys (decoder_first/last_pipeline_num_layers,
// account_for_embedding/loss_in_pipeline_split), named alike in plan.json and
// strata-run.json's parallel section: read from r, and written into j only
// when the split is uneven (so even plans read and write as before).
void read_stage_split(json::ObjectReader& r, PlanSpec& plan);
void write_stage_split(const PlanSpec& plan, nlohmann::ordered_json& j);

// A rank order as written in a file (plan.json's rank_order, strata-run.json's
// parallel.rank_order); InputError naming file and json_path when it is not one.
RankOrder read_rank_order(const std::string& text, const std::string& file, const std::string& json_path);

const char* to_string(Schedule s);  // "gpipe", "1f1b", "interleaved-1f1b", "zb-h1", "zb-h2", "zb-v"
// Every Schedule's name, in enum order; the schedule a name names, if any.
const std::vector<std::string>& schedule_names();
std::optional<Schedule> parse_schedule(const std::string& name);
// Whether the schedule runs each backward as B and W ops (zero-bubble).
bool splits_backward(Schedule s);
const char* to_string(Recompute r);
const char* to_string(CpCommType c);  // Megatron's --cp-comm-type names: "p2p", "allgather", "a2a"
// Every CpCommType's name, in enum order; the type a name names, if any.
const std::vector<std::string>& cp_comm_type_names();
std::optional<CpCommType> parse_cp_comm_type(const std::string& name);

}  // namespace strata
