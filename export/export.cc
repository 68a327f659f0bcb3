#include "export/export.h"

#include <algorithm>
#include <cctype>
#include <filesystem>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "core/data_paths.h"
#include "core/error.h"
#include "core/json_reader.h"
#include "core/mpirun_settings.h"
#include "core/units.h"
#include "costmodel/framework_profile.h"
#include "plan/moe_spec.h"
#include "plan/params.h"

namespace strata::sim {
namespace {

std::string gib(double bytes) { return fmt::format("{:.2f} GiB", bytes / kGiB); }

std::string backend_of(const Scenario& s, const ExportOptions& o) {
  return o.backend.empty() ? s.profile.device.backend : o.backend;
}

// The launch line with the settings of core/mpirun_settings.h.
std::string mpirun_line(int ranks, const std::string& command) {
  std::string line = "exec env";
  for (const auto& [k, v] : mpirun_environment()) line += " " + k + "=" + v;
  line += fmt::format(" \\\n  \"${{MPIRUN:-mpirun}}\" -n {}", ranks);
  for (const std::string& f : mpirun_flags()) line += " " + f;
  line += " ${HOSTFILE:+--hostfile \"$HOSTFILE\"} \\\n  " + command + "\n";
  return line;
}

// Megatron's make_vocab_size_divisible_by that keeps the model's vocabulary as
// it is (Megatron pads to a multiple of it times tp): the largest divisor up to
// Megatron's default 128; 1 when even a multiple of tp needs padding.
int vocab_padding_divisor(int vocab_size, int tp) {
  for (int d = 128; d > 1; --d) {
    if (vocab_size % (static_cast<long long>(d) * tp) == 0) return d;
  }
  return 1;
}

// An MoE model's flags (megatron/training/arguments.py _add_moe_args and
// TransformerConfig's moe_* fields), with the plan's dispatcher, capacity and
// grouped GEMM; every value written, Megatron's defaults included, so the run
// does not depend on them.
void add_moe_model_flags(const ModelSpec& m, const PlanSpec& p, std::vector<MegatronFlag>& f,
                         std::vector<std::string>* notes) {
  auto add = [&](const std::string& flag, const std::string& value = "") { f.push_back({flag, value}); };
  const MoeModel& moe = m.moe;
  add("--num-experts", std::to_string(moe.num_experts));
  add("--moe-router-topk", std::to_string(moe.moe_router_topk));
  // transformer_config.py:2661-2669: top-1 routing with a softmax router needs the softmax before the top-k.
  if (moe.moe_router_topk == 1) add("--moe-router-pre-softmax");
  add("--moe-ffn-hidden-size", std::to_string(moe.moe_ffn_hidden_size));
  if (moe.moe_shared_expert_intermediate_size > 0) {
    add("--moe-shared-expert-intermediate-size", std::to_string(moe.moe_shared_expert_intermediate_size));
  }
  add("--moe-layer-freq", megatron_moe_layer_freq(m));
  add("--moe-router-load-balancing-type", moe.moe_router_load_balancing_type);
  add("--moe-aux-loss-coeff", fmt::format("{}", moe.moe_aux_loss_coeff));
  if (moe.moe_router_num_groups > 0) {
    add("--moe-router-num-groups", std::to_string(moe.moe_router_num_groups));
    add("--moe-router-group-topk", std::to_string(moe.moe_router_group_topk));
  }
  add("--moe-token-dispatcher-type", to_string(p.moe.token_dispatcher));
  // transformer_config.py: the flex dispatcher's backend, DeepEP (its default, said).
  if (p.moe.token_dispatcher == MoeDispatcher::kFlex) add("--moe-flex-dispatcher-backend", "deepep");
  if (p.moe.grouped_gemm) add("--moe-grouped-gemm");
  if (p.moe.shared_expert_overlap) add("--moe-shared-expert-overlap");
  if (p.moe.expert_capacity_factor > 0.0) {
    add("--moe-expert-capacity-factor", fmt::format("{}", p.moe.expert_capacity_factor));
    if (p.moe.pad_to_capacity) add("--moe-pad-expert-input-to-capacity");
  }
  if (notes != nullptr && p.moe.router_imbalance != 1.0 && p.moe.expert_capacity_factor == 0.0) {
    notes->push_back(fmt::format("moe_router_imbalance {} is a what-if input of the memory model (the busiest expert "
                                 "takes that multiple of its share); Megatron-LM has no flag for it: the routing of "
                                 "the real run decides",
                                 p.moe.router_imbalance));
  }
}

// A flag's value as one shell word: as it is when it has no character the
// shell treats specially (every dense flag), else single-quoted (Megatron's
// --moe-layer-freq pattern "([0]*3+[1]*58)").
std::string shell_word(const std::string& value) {
  const bool plain = std::all_of(value.begin(), value.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '_' || c == '-' || c == '+' || c == '/' ||
           c == '=' || c == ',' || c == ':';
  });
  return plain ? value : "'" + value + "'";
}

// A flag's value as shell words: a list flag's space-separated items each its
// own word (Megatron's nargs='*' --recompute-modules core_attn mla_up_proj).
std::string shell_words(const std::string& value) {
  std::string out;
  std::size_t start = 0;
  while (start <= value.size()) {
    const std::size_t end = std::min(value.find(' ', start), value.size());
    if (!out.empty()) out += ' ';
    out += shell_word(value.substr(start, end - start));
    start = end + 1;
  }
  return out;
}

}  // namespace

std::vector<MegatronFlag> megatron_flags(const ModelSpec& m, const PlanSpec& p, std::vector<std::string>* notes) {
  std::vector<MegatronFlag> f;
  auto add = [&](const std::string& flag, const std::string& value = "") { f.push_back({flag, value}); };
  auto note = [&](const std::string& text) {
    if (notes != nullptr) notes->push_back(text);
  };
  // Model shape.
  add("--num-layers", std::to_string(m.num_layers));
  add("--hidden-size", std::to_string(m.hidden_size));
  add("--num-attention-heads", std::to_string(m.num_attention_heads));
  if (m.num_query_groups != m.num_attention_heads) {
    add("--group-query-attention");
    add("--num-query-groups", std::to_string(m.num_query_groups));
  }
  add("--ffn-hidden-size", std::to_string(m.ffn_hidden_size));
  if (m.swiglu) add("--swiglu");
  add("--normalization", m.normalization == Normalization::kLayerNorm ? "LayerNorm" : "RMSNorm");
  add("--seq-length", std::to_string(m.seq_length));
  add("--max-position-embeddings", std::to_string(m.seq_length));
  switch (m.position_embedding_type) {
    case PositionEmbedding::kLearnedAbsolute: add("--position-embedding-type", "learned_absolute"); break;
    case PositionEmbedding::kRope: add("--position-embedding-type", "rope"); break;
    case PositionEmbedding::kNone: add("--position-embedding-type", "none"); break;
    case PositionEmbedding::kAlibi:
      add("--position-embedding-type", "none");
      note("Megatron-LM has no ALiBi: --position-embedding-type none stands in (same parameters and cost); "
           "Megatron-DeepSpeed has ALiBi");
      break;
  }
  if (m.untie_embeddings_and_output_weights) add("--untie-embeddings-and-output-weights");
  if (!m.add_bias_linear) add("--disable-bias-linear");
  add("--hidden-dropout", fmt::format("{}", m.hidden_dropout));
  add("--attention-dropout", fmt::format("{}", m.attention_dropout));
  add("--attention-backend", p.flash_attention ? "flash" : "unfused");
  // Megatron's --kv-channels, only where the model's head size is not h / a.
  if (m.kv_channels > 0) add("--kv-channels", std::to_string(m.kv_channels));
  if (m.mla.enabled) {
    // Megatron-LM's MLA arguments (arguments.py _add_mla_args); --qk-layernorm
    // gives the latents their RMSNorms (gpt_layer_specs.py fuses them into the
    // up-projections only with it), as Strata models them.
    add("--multi-latent-attention");
    if (m.mla.q_lora_rank > 0) add("--q-lora-rank", std::to_string(m.mla.q_lora_rank));
    add("--kv-lora-rank", std::to_string(m.mla.kv_lora_rank));
    add("--qk-head-dim", std::to_string(m.mla.qk_head_dim));
    add("--qk-pos-emb-head-dim", std::to_string(m.mla.qk_pos_emb_head_dim));
    add("--v-head-dim", std::to_string(m.mla.v_head_dim));
    add("--qk-layernorm");
  }
  if (m.mtp_num_layers > 0) add("--mtp-num-layers", std::to_string(m.mtp_num_layers));
  if (m.is_moe()) add_moe_model_flags(m, p, f, notes);
  // Parallelism.
  add("--tensor-model-parallel-size", std::to_string(p.tp));
  add("--pipeline-model-parallel-size", std::to_string(p.pp));
  if (p.cp > 1) {
    add("--context-parallel-size", std::to_string(p.cp));
    add("--cp-comm-type", to_string(p.cp_comm_type));
    if (p.cp_comm_type == CpCommType::kA2a) {
      note("strata run runs context parallelism with p2p or allgather; a2a (Ulysses' head exchange) is for "
           "Megatron-LM, which runs it with these flags");
    }
  }
  if (m.is_moe()) {
    // Megatron-Core folds the experts over the stage's ranks (MoE Parallel Folding).
    add("--expert-model-parallel-size", std::to_string(p.moe.ep));
    add("--expert-tensor-parallel-size", std::to_string(p.moe.etp));
  }
  // Megatron-Core builds its groups in the order "tp-cp-ep-dp-pp", or "tp-cp-ep-pp-dp"
  // with --use-tp-pp-dp-mapping; no flag gives any other order.
  if (p.rank_order == kTpPpDpRankOrder) {
    add("--use-tp-pp-dp-mapping");
  } else if (!(p.rank_order == RankOrder{})) {
    note(fmt::format("rank_order {} has no Megatron-LM flag (it builds tp-cp-ep-dp-pp, or tp-cp-ep-pp-dp with "
                     "--use-tp-pp-dp-mapping): Megatron will number ranks in its default order",
                     to_string(p.rank_order)));
  }
  // Uneven stages (plan/pipeline_split.h) by Megatron-Core's own flags; with
  // them Megatron takes the interleaving degree as virtual stages per rank.
  if (p.first_stage_layers > 0) add("--decoder-first-pipeline-num-layers", std::to_string(p.first_stage_layers));
  if (p.last_stage_layers > 0) add("--decoder-last-pipeline-num-layers", std::to_string(p.last_stage_layers));
  if (p.account_for_embedding) add("--account-for-embedding-in-pipeline-split");
  if (p.account_for_loss) add("--account-for-loss-in-pipeline-split");
  if (p.vpp > 1 && p.uneven_stages()) {
    add("--num-virtual-stages-per-pipeline-rank", std::to_string(p.vpp));
  } else if (p.vpp > 1) {
    add("--num-layers-per-virtual-pipeline-stage", std::to_string(m.num_layers / (p.pp * p.vpp)));
  }
  if (p.pp > 1 && p.schedule == Schedule::kGpipe) {
    note("Megatron-LM has no GPipe schedule: with pipeline parallelism it runs 1F1B "
         "(forward_backward_pipelining_without_interleaving), which has the same bubble and holds fewer "
         "micro-batches' activations");
  }
  if (p.schedule == Schedule::kZbV) {
    // The authors' fork asserts 2 virtual stages with --zero-bubble-v-schedule
    // (megatron/training/arguments.py), which the flag above gives; mainline
    // Megatron-LM reads the same flags as its interleaved schedule.
    note(fmt::format("zb-v: Megatron-LM runs these flags as interleaved 1F1B with 2 virtual stages per rank "
                     "(the same gradients, another order and layer placement; the prediction's bubble and memory "
                     "are zb-v's){}. For the V schedule run sail-sg's zero-bubble-pipeline-parallelism fork with "
                     "--zero-bubble-v-schedule --enable-optimizer-post-validation, or PyTorch's "
                     "ScheduleZBVZeroBubble (torchtitan: pipeline_parallel_schedule ZBVZeroBubble)",
                     p.num_microbatches() % p.pp != 0
                         ? fmt::format("; its interleaving wants the {} micro-batches divisible by pp {}",
                                       p.num_microbatches(), p.pp)
                         : ""));
  } else if (splits_backward(p.schedule)) {
    // Mainline Megatron-LM has no split backward; the paper's authors' fork
    // (sail-sg/zero-bubble-pipeline-parallelism, megatron/core/zbpp_utils.py)
    // adds these flags, which mainline's parser would reject.
    const int pending = p.schedule == Schedule::kZbH1 ? p.pp : 2 * p.pp;
    note(fmt::format("{}: Megatron-LM runs these flags as 1F1B (the same gradients, another order; the prediction's "
                     "bubble and memory are {}'s). For the zero-bubble schedule run sail-sg's "
                     "zero-bubble-pipeline-parallelism fork with --enable-zero-bubble "
                     "--zero-bubble-max-pending-backward {}{} (its searched schedule with the same in-flight limit)",
                     to_string(p.schedule), to_string(p.schedule), pending,
                     p.schedule == Schedule::kZbH2 ? " --enable-optimizer-post-validation" : ""));
  }
  if (p.sequence_parallel) add("--sequence-parallel");
  // The framework the prediction assumed overlaps TP collectives with GEMMs
  // (Transformer Engine userbuffers, which need sequence parallelism).
  if (p.tp > 1 && p.sequence_parallel && framework_profile(p.framework).tp_overlap) {
    add("--tp-comm-overlap");
    note(fmt::format("--tp-comm-overlap: the prediction overlaps tensor-parallel collectives as framework {} "
                     "does ({}); pass Transformer Engine the same userbuffers settings with --tp-comm-overlap-cfg",
                     p.framework, framework_profile(p.framework).tp_overlap->source));
  }
  if (p.zero_stage >= 1) add("--use-distributed-optimizer");
  if (p.zero_shard_size > 0) {
    // Megatron-Core shards within consecutive blocks of its dp-cp group and
    // replicates across them (parallel_state.py's intra-partial data-parallel
    // groups; Megatron-FSDP's HSDP when the instances are > 1).
    add("--num-distributed-optimizer-instances", std::to_string(p.zero_shard_groups()));
    note(fmt::format("zero_shard_size {}: Megatron-LM --num-distributed-optimizer-instances {}; in PyTorch FSDP "
                     "this is ShardingStrategy.HYBRID_SHARD over a ({}, {}) device mesh",
                     p.zero_shard_size, p.zero_shard_groups(), p.zero_shard_groups(), p.zero_shard_size));
  }
  if (p.zero_stage >= 2) {
    // Megatron-FSDP (megatron/core/distributed/fsdp): optim_grads is ZeRO-2,
    // optim_grads_params ZeRO-3.
    add("--use-megatron-fsdp");
    add("--data-parallel-sharding-strategy", p.zero_stage == 2 ? "optim_grads" : "optim_grads_params");
    add("--no-gradient-accumulation-fusion");
    add("--ckpt-format", "fsdp_dtensor");
  }
  if (p.offload_optimizer) {
    // arguments.py:1884-1888: the CPU offload runs on the precision-aware
    // optimizer's code path (which itself needs the distributed optimizer,
    // core/optimizer/__init__.py:1057; offload plans have zero_stage >= 1).
    add("--optimizer-cpu-offload");
    add("--use-precision-aware-optimizer");
  }
  if (p.overlap_grad_reduce) add("--overlap-grad-reduce");
  if (p.overlap_param_gather && p.zero_stage >= 1) {
    // arguments.py:1024-1029: Megatron overlaps the parameter all-gather only
    // together with the gradient reduce-scatter.
    if (p.overlap_grad_reduce) {
      add("--overlap-param-gather");
    } else {
      note("overlap_param_gather without overlap_grad_reduce: Megatron-LM overlaps the parameter all-gather only "
           "with --overlap-grad-reduce (arguments.py validate_args), so neither is written and Megatron exposes the "
           "all-gather the prediction overlaps; set overlap_grad_reduce true in the plan to overlap both");
    }
  }
  add("--ddp-bucket-size", std::to_string(p.ddp_bucket_size));
  // Batch.
  add("--micro-batch-size", std::to_string(p.micro_batch_size));
  add("--global-batch-size", std::to_string(p.global_batch_size));
  // Recompute.
  if (p.recompute == Recompute::kSelective) {
    add("--recompute-granularity", "selective");
    if (!p.recompute_modules.is_default()) {
      add("--recompute-modules", fmt::format("{}", fmt::join(recompute_module_names(p.recompute_modules), " ")));
    }
  }
  if (p.recompute == Recompute::kSelectiveOp) {
    note("recompute selective_op is torchtitan's op-level policy, which Megatron-LM does not have: no recompute "
         "flag is written; --recompute-granularity selective keeps more activations, full fewer");
  }
  if (p.recompute == Recompute::kFull) {
    add("--recompute-granularity", "full");
    add("--recompute-method", "uniform");
    add("--recompute-num-layers", "1");
  }
  // Precision (fp32: neither flag). Megatron turns fp32 gradient accumulation
  // and reduction on by itself with --bf16; said explicitly, it is the same run.
  if (p.dtype == DType::kBf16) add("--bf16");
  if (p.dtype == DType::kFp16) add("--fp16");
  if (p.accumulate_allreduce_grads_in_fp32 && p.dtype != DType::kFp32) add("--accumulate-allreduce-grads-in-fp32");
  // With --bf16 Megatron turns on fp32 gradient accumulation and reduction by
  // itself (arguments.py:1206-1217) unless told --grad-reduce-in-bf16: without
  // it a plan that reduces bf16 gradients would run with twice their bytes.
  if (p.dtype == DType::kBf16 && !p.accumulate_allreduce_grads_in_fp32) {
    add("--grad-reduce-in-bf16");
    note("--grad-reduce-in-bf16: the plan accumulates and reduces gradients in bf16 "
         "(accumulate_allreduce_grads_in_fp32 false); Megatron-LM's own default with --bf16 is fp32, which doubles "
         "the gradient buffers and data-parallel traffic: set accumulate_allreduce_grads_in_fp32 true in the plan "
         "to predict that run");
  }
  // Megatron pads the vocabulary to a multiple of make_vocab_size_divisible_by
  // x tp (core/tokenizers/utils/build_tokenizer.py, vocab_size_with_padding;
  // default 128): the largest divisor that keeps the model's own vocabulary
  // keeps the embedding and logits the prediction costs.
  const int divisor = vocab_padding_divisor(m.vocab_size, p.tp);
  if (divisor != 128) add("--make-vocab-size-divisible-by", std::to_string(divisor));
  if (m.vocab_size % p.tp != 0) {
    note(fmt::format("vocab_size {} is not a multiple of tp {}: Megatron-LM pads it to {} (as the prediction does)",
                     m.vocab_size, p.tp, padded_vocab_size(m, p)));
  }
  return f;
}

// The dtype DeepSpeed accumulates a half-precision plan's gradients in. With ZeRO
// any mix runs, so the plan's choice. Without ZeRO (DeepSpeed v0.16, engine.py
// _do_optimizer_sanity_check, lines 1300-1350): fp16 only in fp16 (its FP16
// wrapper; fp32 is "unsupported mix of model dtype and gradient accumulation
// type"), bf16 only in fp32 (its BF16 wrapper; bf16 "must use a gradient
// accumulation type of fp32" unless the pipeline engine runs it).
DType deepspeed_grad_accum_dtype(const PlanSpec& p) {
  const DType plans = p.accumulate_allreduce_grads_in_fp32 ? DType::kFp32 : p.dtype;
  if (p.zero_stage >= 1) return plans;
  if (p.dtype == DType::kFp16) return DType::kFp16;
  return p.pp > 1 ? plans : DType::kFp32;
}

std::optional<std::string> deepspeed_unsupported(const PlanSpec& p) {
  if (p.pp > 1 && p.uneven_stages()) {
    return "uneven pipeline stages: DeepSpeed's PipelineModule splits the layers itself (its partition_method, "
           "in the model code), which deepspeed.json cannot say";
  }
  if (p.cp > 1) {
    return fmt::format("cp {} > 1: the plan is Megatron's context parallelism (each rank two sequence chunks, K/V "
                       "exchanged as cp_comm_type {}); DeepSpeed's config has no such key, and its sequence "
                       "parallelism (Ulysses: all-to-all to head sharding in the model's own attention wrapper) is "
                       "not the same algorithm, so no DeepSpeed config stands for it (use megatron-args.sh)",
                       p.cp, to_string(p.cp_comm_type));
  }
  if (p.zero_shard_size > 0 && p.zero_stage < 3) {
    return fmt::format("zero_shard_size {} with ZeRO-{}: DeepSpeed shards within groups only at stage 3 (MiCS, "
                       "mics_shard_size); its ZeRO-1/2 shard over every data-parallel rank",
                       p.zero_shard_size, p.zero_stage);
  }
  if (p.tp > 1) {
    return fmt::format("tp {} > 1: DeepSpeed's config has no tensor parallelism for training; it needs "
                       "Megatron-DeepSpeed's model code (use megatron-args.sh)",
                       p.tp);
  }
  if (p.pp > 1 && p.zero_stage >= 2) {
    return fmt::format("ZeRO-{} with pp {} > 1: DeepSpeed's pipeline engine supports ZeRO stages 0 and 1 only "
                       "(ZeRO-2/3 partition the gradients that pipeline micro-batches accumulate)",
                       p.zero_stage, p.pp);
  }
  if (p.pp > 1 && p.schedule != Schedule::kOneFOneB) {
    return fmt::format("schedule {} with pp {} > 1: DeepSpeed's pipeline engine runs its own 1F1B-style "
                       "TrainSchedule, with no GPipe, interleaved or zero-bubble form",
                       to_string(p.schedule), p.pp);
  }
  return std::nullopt;
}

nlohmann::ordered_json deepspeed_config(const PlanSpec& p, const ExportOptions& o) {
  nlohmann::ordered_json j;
  j["train_batch_size"] = p.global_batch_size;
  j["train_micro_batch_size_per_gpu"] = p.micro_batch_size;
  j["gradient_accumulation_steps"] = p.num_microbatches();
  j["steps_per_print"] = 1;
  j["gradient_clipping"] = 0.0;
  j["optimizer"] = {{"type", "AdamW"},
                    {"params", {{"lr", o.training.lr}, {"betas", {o.training.adam_beta1, o.training.adam_beta2}}, {"eps", o.training.adam_eps},
                                {"weight_decay", o.training.weight_decay}}}};
  nlohmann::ordered_json zero;
  zero["stage"] = p.zero_stage;
  zero["overlap_comm"] = p.overlap_grad_reduce;
  zero["contiguous_gradients"] = true;
  zero["reduce_bucket_size"] = p.ddp_bucket_size;
  if (p.zero_stage == 1 || p.zero_stage == 2) zero["allgather_bucket_size"] = p.ddp_bucket_size;
  // Hybrid sharding at stage 3: MiCS shards within groups of mics_shard_size and
  // replicates across them (DeepSpeed's zero/config.py, MiCS paper arXiv 2205.00119).
  if (p.zero_shard_size > 0) zero["mics_shard_size"] = p.zero_shard_size;
  if (p.offload_optimizer) zero["offload_optimizer"] = {{"device", "cpu"}, {"pin_memory", true}};
  j["zero_optimization"] = zero;
  j["bf16"] = {{"enabled", p.dtype == DType::kBf16}};
  if (p.dtype == DType::kFp16) {
    // Dynamic loss scaling (loss_scale 0), DeepSpeed's recommended fp16 setting.
    j["fp16"] = {{"enabled", true}, {"loss_scale", 0}, {"initial_scale_power", 16}};
  } else {
    j["fp16"] = {{"enabled", false}};
  }
  if (p.dtype != DType::kFp32) j["data_types"] = {{"grad_accum_dtype", to_string(deepspeed_grad_accum_dtype(p))}};
  j["wall_clock_breakdown"] = false;
  return j;
}

nlohmann::ordered_json run_config_json(const Scenario& s, const SimulationResult& r, const ExportOptions& o) {
  RunSpec spec;
  if (!o.command_line.empty()) spec.source = o.command_line;
  spec.model = s.model;
  spec.plan = s.plan;
  spec.training = o.training;
  spec.backend = backend_of(s, o);
  spec.timeout_s = o.timeout_s;
  spec.cluster_name = s.cluster.name;
  spec.nodes = s.cluster.nodes;
  spec.gpus_per_node = s.cluster.gpus_per_node;
  spec.rank_map = rank_placements(s.plan, s.cluster.gpus_per_node);
  nlohmann::ordered_json prediction;
  prediction["file"] = "prediction.json";
  prediction["fidelity"] = to_string(r.fidelity);
  prediction["step_time_s"] = r.metrics.step_time_s;
  prediction["mfu"] = r.mfu;
  prediction["peak_bytes"] = r.memory.peak_bytes;
  prediction["peak_stage"] = r.memory.peak_stage;
  std::vector<double> per_stage;
  for (const StageMemory& st : r.memory.stages) per_stage.push_back(st.total_bytes);
  prediction["memory_per_stage_bytes"] = per_stage;
  prediction["fits"] = r.memory.fits;
  spec.prediction = prediction;
  spec.profile = {{"name", s.profile.name}, {"kind", s.profile.kind}, {"device", s.profile.device.name},
                  {"file", s.profile.file}};
  return to_json(spec);
}

std::optional<std::string> does_not_fit(const Scenario& s, const SimulationResult& r) {
  return does_not_fit(s, r.memory);
}

std::optional<std::string> does_not_fit(const Scenario& s, const MemoryReport& memory) {
  if (memory.fits) return std::nullopt;
  std::string why;
  for (const StageMemory& st : memory.stages) {
    if (st.fits) continue;
    if (!why.empty()) why += "; ";
    why += fmt::format("stage {} needs {} of {} (over by {}): parameters {}, gradients {}, optimizer {}, "
                       "activations {}, buffers {}, reserve {}",
                       st.stage, gib(st.total_bytes), gib(memory.capacity_bytes),
                       gib(st.total_bytes - memory.capacity_bytes), gib(st.params_bytes), gib(st.grads_bytes),
                       gib(st.optimizer_bytes), gib(st.activations_bytes), gib(st.buffers_bytes),
                       gib(st.reserve_bytes));
  }
  return fmt::format("the plan does not fit in {}'s memory: {}", s.profile.device.name, why);
}

namespace {

std::string megatron_script(const Scenario& s, const ExportOptions& o, const std::vector<MegatronFlag>& flags,
                            const std::vector<std::string>& notes) {
  const ModelSpec& m = s.model;
  const PlanSpec& p = s.plan;
  std::string out = "#!/usr/bin/env bash\n";
  const std::string experts = p.moe.active ? fmt::format(" ep {} etp {}", p.moe.ep, p.moe.etp) : "";
  out += fmt::format("# Megatron-LM (pretrain_gpt.py) flags for {} with tp {} pp {} dp {}{}, written by strata export.\n",
                     m.name, p.tp, p.pp, p.dp, experts);
  out += "# Flags and values follow megatron/training/arguments.py; synthetic data (--mock-data), as `strata run` uses.\n";
  for (const std::string& n : notes) out += "# note: " + n + "\n";
  out += "# Usage: MEGATRON=/path/to/Megatron-LM bash megatron-args.sh   (one node; set NNODES, NODE_RANK,\n";
  out += "#        MASTER_ADDR on each node for several). `bash megatron-args.sh --print` prints the flags.\n";
  out += "set -euo pipefail\n\n";
  // Groups as Megatron's examples write them.
  struct Group {
    const char* name;
    std::vector<std::string> prefixes;
  };
  const std::vector<Group> groups = {
      {"MODEL_ARGS",
       {"--num-layers", "--hidden-size", "--num-attention-heads", "--group-query-attention", "--num-query-groups",
        "--ffn-hidden-size", "--swiglu", "--normalization", "--seq-length", "--max-position-embeddings",
        "--position-embedding-type", "--untie-embeddings-and-output-weights", "--disable-bias-linear",
        "--hidden-dropout", "--attention-dropout", "--attention-backend", "--make-vocab-size-divisible-by",
        "--kv-channels", "--multi-latent-attention", "--q-lora-rank", "--kv-lora-rank", "--qk-head-dim",
        "--qk-pos-emb-head-dim", "--v-head-dim", "--qk-layernorm", "--mtp-num-layers", "--num-experts", "--moe-router-topk", "--moe-router-pre-softmax", "--moe-ffn-hidden-size",
        "--moe-shared-expert-intermediate-size", "--moe-layer-freq", "--moe-router-load-balancing-type",
        "--moe-aux-loss-coeff", "--moe-router-num-groups", "--moe-router-group-topk", "--moe-token-dispatcher-type",
        "--moe-flex-dispatcher-backend", "--moe-grouped-gemm", "--moe-shared-expert-overlap",
        "--moe-expert-capacity-factor", "--moe-pad-expert-input-to-capacity"}},
      {"PARALLEL_ARGS",
       {"--tensor-model-parallel-size", "--pipeline-model-parallel-size", "--context-parallel-size", "--cp-comm-type",
        "--expert-model-parallel-size", "--expert-tensor-parallel-size",
        "--use-tp-pp-dp-mapping", "--num-layers-per-virtual-pipeline-stage", "--num-virtual-stages-per-pipeline-rank",
        "--decoder-first-pipeline-num-layers", "--decoder-last-pipeline-num-layers",
        "--account-for-embedding-in-pipeline-split", "--account-for-loss-in-pipeline-split", "--sequence-parallel", "--tp-comm-overlap", "--use-distributed-optimizer", "--num-distributed-optimizer-instances", "--use-megatron-fsdp", "--data-parallel-sharding-strategy",
        "--no-gradient-accumulation-fusion", "--ckpt-format", "--optimizer-cpu-offload",
        "--use-precision-aware-optimizer", "--overlap-grad-reduce",
        "--overlap-param-gather", "--ddp-bucket-size"}},
      {"BATCH_ARGS", {"--micro-batch-size", "--global-batch-size"}},
      {"RECOMPUTE_ARGS", {"--recompute-granularity", "--recompute-modules", "--recompute-method", "--recompute-num-layers"}},
      {"PRECISION_ARGS", {"--bf16", "--fp16", "--accumulate-allreduce-grads-in-fp32", "--grad-reduce-in-bf16"}},
  };
  // Every flag has its group: one that had none would be dropped from the script.
  for (const MegatronFlag& f : flags) {
    bool placed = false;
    for (const Group& g : groups) {
      for (const std::string& prefix : g.prefixes) placed = placed || f.flag == prefix;
    }
    if (!placed) throw InternalError("megatron-args.sh: flag " + f.flag + " has no group in the script");
  }
  for (const Group& g : groups) {
    out += std::string(g.name) + "=(\n";
    for (const MegatronFlag& f : flags) {
      bool mine = false;
      for (const std::string& prefix : g.prefixes) mine = mine || f.flag == prefix;
      if (!mine) continue;
      // Appended piece by piece: the one-expression form trips GCC 12's false
      // -Wstringop-overflow in std::string's operator+ chain.
      out += "  ";
      out += f.flag;
      if (!f.value.empty()) {
        out += ' ';
        out += shell_words(f.value);
      }
      out += '\n';
    }
    out += ")\n";
  }
  out += "TRAINING_ARGS=(\n";
  const RunTraining& t = o.training;
  out += fmt::format("  --train-iters {}\n  --lr {}\n  --lr-decay-style constant\n  --weight-decay {}\n", t.steps, t.lr,
                     t.weight_decay);
  out += fmt::format("  --adam-beta1 {}\n  --adam-beta2 {}\n  --adam-eps {}\n  --clip-grad 0\n", t.adam_beta1,
                     t.adam_beta2, t.adam_eps);
  out += fmt::format("  --seed {}\n  --init-method-std 0.02\n  --log-interval 1\n  --eval-iters 0\n", t.seed);
  out += fmt::format("  --mock-data\n  --tokenizer-type NullTokenizer\n  --vocab-size {}\n", m.vocab_size);

  out += ")\n\n";
  out += "if [[ \"${1:-}\" == \"--print\" ]]; then\n";
  out += "  printf '%s\\n' \"${MODEL_ARGS[@]}\" \"${PARALLEL_ARGS[@]}\" \"${BATCH_ARGS[@]}\" \"${RECOMPUTE_ARGS[@]}\" "
         "\"${PRECISION_ARGS[@]}\" \"${TRAINING_ARGS[@]}\"\n  exit 0\nfi\n\n";
  if (p.zero_stage >= 2) {
    // Megatron-FSDP refuses CUDA_DEVICE_MAX_CONNECTIONS=1 (arguments.py:1166).
    out += "# Megatron-FSDP needs more than one CUDA connection (CUDA_DEVICE_MAX_CONNECTIONS unset).\n";
    out += "unset CUDA_DEVICE_MAX_CONNECTIONS\n";
  } else {
    // Before Blackwell Megatron requires it with tp or cp > 1 (arguments.py:1477).
    out += "# Megatron overlaps its tensor-parallel communication only with one CUDA connection.\n";
    out += "export CUDA_DEVICE_MAX_CONNECTIONS=1\n";
  }
  out += fmt::format("torchrun --nproc-per-node {} --nnodes \"${{NNODES:-{}}}\" --node-rank \"${{NODE_RANK:-0}}\" \\\n",
                     s.cluster.gpus_per_node, s.cluster.nodes);
  out += "  --master-addr \"${MASTER_ADDR:-localhost}\" --master-port \"${MASTER_PORT:-6000}\" \\\n";
  out += "  \"${MEGATRON:?set MEGATRON to a Megatron-LM checkout}/pretrain_gpt.py\" \\\n";
  out += "  \"${MODEL_ARGS[@]}\" \"${PARALLEL_ARGS[@]}\" \"${BATCH_ARGS[@]}\" \"${RECOMPUTE_ARGS[@]}\" "
         "\"${PRECISION_ARGS[@]}\" \"${TRAINING_ARGS[@]}\"\n";
  return out;
}

std::string slurm_script(const Scenario& s, const ExportOptions& o) {
  const bool cuda = backend_of(s, o) == "cuda";
  const int nodes = s.cluster.nodes;
  const int per_node = std::min(s.cluster.gpus_per_node, s.plan.num_gpus());
  std::string out = "#!/bin/bash\n";
  out += fmt::format("# {} with tp {} pp {} dp {} on {}: `strata run` under srun, one task per {}.\n", s.model.name,
                     s.plan.tp, s.plan.pp, s.plan.dp, s.cluster.name, cuda ? "GPU" : "rank");
  out += "# Submit from this directory: sbatch launch.slurm   (STRATA=/path/to/strata if not on PATH)\n";
  out += fmt::format("#SBATCH --job-name=strata-{}\n", s.model.name);
  out += fmt::format("#SBATCH --nodes={}\n", nodes);
  out += fmt::format("#SBATCH --ntasks-per-node={}\n", per_node);
  if (cuda) out += fmt::format("#SBATCH --gpus-per-node={}\n", per_node);
  out += "#SBATCH --time=00:30:00\n";
  out += "#SBATCH --output=strata-run-%j.out\n";
  out += "set -euo pipefail\n";
  out += "HERE=\"${SLURM_SUBMIT_DIR:-$(pwd)}\"\n";
  out += "# --mpi=pmix: the ranks' MPI (cpu collectives, the NCCL id broadcast) needs PMIx from srun.\n";
  out += fmt::format("srun --mpi=pmix --ntasks={} --ntasks-per-node={}{} \\\n", s.plan.num_gpus(), per_node,
                     cuda ? " --gpus-per-task=1" : "");
  out += "  \"${STRATA:-strata}\" run \"$HERE/strata-run.json\" --out \"$HERE\"\n";
  return out;
}

std::string mpirun_script(const Scenario& s, const ExportOptions& o) {
  std::string out = "#!/usr/bin/env bash\n";
  out += fmt::format("# {} with tp {} pp {} dp {}: `strata run` under OpenMPI's mpirun ({} ranks).\n", s.model.name,
                     s.plan.tp, s.plan.pp, s.plan.dp, s.plan.num_gpus());
  out += "# The settings allow root, make waiting ranks yield and avoid single-copy shared memory\n";
  out += "# (docs/runtime.md). Several nodes: HOSTFILE=hosts bash launch-mpirun.sh\n";
  out += "set -euo pipefail\n";
  out += "HERE=\"$(cd \"$(dirname \"${BASH_SOURCE[0]}\")\" && pwd)\"\n";
  out += mpirun_line(s.plan.num_gpus(), "\"${STRATA:-strata}\" run \"$HERE/strata-run.json\" --out \"$HERE\"");
  return out;
}

}  // namespace

namespace {

// Why an MoE plan has no deepspeed.json: DeepSpeed-MoE is not a deepspeed.json
// setting (deepspeed/moe/layer.py).
std::string deepspeed_moe_note() {
  return "DeepSpeed builds MoE layers in the model's code (deepspeed.moe.layer.MoE: num_experts, ep_size, k, "
         "capacity_factor, drop_tokens; Megatron-DeepSpeed's --num-experts, --moe-expert-parallel-size, --topk), not "
         "from its JSON config, and its expert parallelism has no expert tensor parallelism nor Megatron-Core's "
         "folding of experts over tp and cp: a deepspeed.json would describe the ZeRO and precision half of this plan "
         "only";
}

}  // namespace

ExportResult export_plan(const Scenario& s, const SimulationResult& r, const ExportOptions& o) {
  // strata-run.json and its launchers only for a model strata run takes; for the
  // others Megatron-LM's flags and the prediction.
  if (run_refusal(s.model, s.plan)) return export_megatron_only(s, r.memory, o, &r);
  if (auto why = does_not_fit(s, r); why && !o.force) {
    throw InputError(s.plan_file, "$", *why + "; nothing exported (pass --force to export it anyway)");
  }
  ExportResult out;
  std::vector<std::string> megatron_notes;
  const std::vector<MegatronFlag> flags = megatron_flags(s.model, s.plan, &megatron_notes);
  out.files.push_back({"strata-run.json", run_config_json(s, r, o).dump(2) + "\n", false});
  out.files.push_back({"prediction.json", result_json(s, r).dump(2) + "\n", false});
  out.files.push_back({"megatron-args.sh", megatron_script(s, o, flags, megatron_notes), true});
  const std::optional<std::string> ds = s.model.is_moe() ? deepspeed_moe_note() : deepspeed_unsupported(s.plan);
  if (ds) {
    out.notes.push_back("no deepspeed.json: " + *ds);
  } else {
    out.files.push_back({"deepspeed.json", deepspeed_config(s.plan, o).dump(2) + "\n", false});
    const DType plans = s.plan.accumulate_allreduce_grads_in_fp32 ? DType::kFp32 : s.plan.dtype;
    if (s.plan.dtype != DType::kFp32 && deepspeed_grad_accum_dtype(s.plan) != plans) {
      out.notes.push_back(fmt::format(
          "deepspeed.json: without ZeRO DeepSpeed accumulates {} gradients only in {} (engine.py "
          "_do_optimizer_sanity_check), not in {} as the plan does: its gradient all-reduce carries {} the bytes "
          "the prediction has",
          to_string(s.plan.dtype), to_string(deepspeed_grad_accum_dtype(s.plan)), to_string(plans),
          deepspeed_grad_accum_dtype(s.plan) == DType::kFp32 ? "twice" : "half"));
    }
  }
  out.files.push_back({"launch.slurm", slurm_script(s, o), true});
  out.files.push_back({"launch-mpirun.sh", mpirun_script(s, o), true});
  for (const std::string& n : megatron_notes) out.notes.push_back("megatron-args.sh: " + n);
  if (auto why = does_not_fit(s, r)) out.notes.push_back("exported with --force: " + *why);
  return out;
}

ExportResult export_megatron_only(const Scenario& s, const MemoryReport& memory, const ExportOptions& o,
                                  const SimulationResult* prediction) {
  if (auto why = does_not_fit(s, memory); why && !o.force) {
    throw InputError(s.plan_file, "$", *why + "; nothing exported (pass --force to export it anyway)");
  }
  ExportResult out;
  std::vector<std::string> megatron_notes;
  const std::vector<MegatronFlag> flags = megatron_flags(s.model, s.plan, &megatron_notes);
  if (prediction != nullptr) out.files.push_back({"prediction.json", result_json(s, *prediction).dump(2) + "\n", false});
  out.files.push_back({"megatron-args.sh", megatron_script(s, o, flags, megatron_notes), true});
  const std::optional<RunRefusal> refusal = run_refusal(s.model, s.plan);
  out.notes.push_back(fmt::format("no strata-run.json, launch.slurm or launch-mpirun.sh: {}; megatron-args.sh runs the "
                                  "plan with Megatron-LM{}",
                                  refusal ? refusal->message : std::string("the simulator does not take this plan"),
                                  prediction != nullptr ? ", prediction.json is the simulator's" : ""));
  if (auto ds = s.model.is_moe() ? deepspeed_moe_note() : deepspeed_unsupported(s.plan)) {
    out.notes.push_back("no deepspeed.json: " + *ds);
  } else {
    out.files.push_back({"deepspeed.json", deepspeed_config(s.plan, o).dump(2) + "\n", false});
  }
  for (const std::string& n : megatron_notes) out.notes.push_back("megatron-args.sh: " + n);
  if (auto why = does_not_fit(s, memory)) out.notes.push_back("exported with --force: " + *why);
  return out;
}

namespace {

// One input of a sweep (its model or cluster): the file the sweep was given,
// which must still hold what the sweep recorded in its request, or, when the
// file cannot be found any more (the sweep ran elsewhere), the recorded copy.
template <class Spec, class Read, class Fail>
void recorded_or_file(const std::string& arg, const char* subdir, const char* kind,
                      const std::optional<Spec>& recorded, const std::string& sweep_file, Read read, Fail fail,
                      Spec& spec, std::string& file) {
  bool findable = !arg.empty() && std::filesystem::exists(arg);
  if (!arg.empty() && !findable) {
    try {
      resolve_data_file(arg, subdir, "");
      findable = true;
    } catch (const InputError&) {
    }
  }
  if (!findable && recorded) {
    file = sweep_file;
    spec = *recorded;
    return;
  }
  file = resolve_data_file(arg, subdir, kind);
  spec = read(json::parse_file(file), file);
  if (recorded && to_json(*recorded) != to_json(spec)) {
    fail(fmt::format("$.request.{}_spec", kind),
         fmt::format("the sweep ranked its plans for another {} than {} holds now (the file changed since the "
                     "sweep): sweep again, or move the file away to export the recorded {}",
                     kind, file, kind));
  }
}

}  // namespace

Scenario scenario_from_sweep(const std::string& sweep_file, int rank, bool allow_cross_node_tp) {
  const nlohmann::json doc = json::parse_file(sweep_file);
  auto fail = [&](const std::string& path, const std::string& message) {
    throw InputError(sweep_file, path, message);
  };
  if (!doc.is_object()) fail("$", "expected a JSON object (a sweep.json from `strata sweep`)");
  if (!doc.contains("schema") || doc["schema"] != "strata-sweep/1") {
    fail("$.schema", "expected \"strata-sweep/1\" (a sweep.json from `strata sweep`)");
  }
  if (!doc.contains("request") || !doc["request"].is_object()) fail("$.request", "expected an object");
  const nlohmann::json& request = doc["request"];
  const std::string dir = std::filesystem::path(sweep_file).parent_path().string();
  // A path in the request is as the sweep was given it: relative to where it ran,
  // or else to the sweep file's directory; a bare name is a shipped input.
  auto argument = [&](const char* key, bool required) -> std::string {
    if (!request.contains(key) || request[key].is_null()) {
      if (required) fail(std::string("$.request.") + key, "required: a path or shipped name");
      return "";
    }
    if (!request[key].is_string()) {
      fail(std::string("$.request.") + key, "expected a string, got " + json::describe(request[key]));
    }
    const std::string v = request[key].get<std::string>();
    if (!v.empty() && !std::filesystem::exists(v) && !dir.empty() && std::filesystem::exists(dir + "/" + v)) {
      return dir + "/" + v;
    }
    return v;
  };
  ScenarioArgs args;
  args.model = argument("model", true);
  args.cluster = argument("cluster", true);
  args.profile = argument("profile", false);
  args.allow_cross_node_tp = allow_cross_node_tp;
  if (!doc.contains("plans") || !doc["plans"].is_array()) fail("$.plans", "expected an array of ranked plans");
  const nlohmann::json& plans = doc["plans"];
  std::optional<std::size_t> chosen;
  for (std::size_t i = 0; i < plans.size(); ++i) {
    const std::string at = fmt::format("$.plans[{}]", i);
    // A plan the sweep did not simulate (it does not fit) has no rank, only its reason.
    if (plans[i].is_object() && !plans[i].contains("rank") && plans[i].contains("prune_reason")) continue;
    if (!plans[i].is_object() || !plans[i].contains("rank") || !plans[i]["rank"].is_number_integer()) {
      fail(at + ".rank", "expected an integer rank");
    }
    if (plans[i]["rank"].get<int>() != rank) continue;
    if (chosen) {
      fail(at + ".rank", fmt::format("rank {} is given twice (also at $.plans[{}]): which plan to export is "
                                     "ambiguous; a sweep.json from `strata sweep` ranks each plan once",
                                     rank, *chosen));
    }
    chosen = i;
  }
  // The specs the sweep recorded are checked like any model or cluster file,
  // and must be what the named files say now: otherwise the ranking was made
  // for another model or cluster.
  std::optional<ModelSpec> recorded_model;
  std::optional<ClusterSpec> recorded_cluster;
  if (request.contains("model_spec")) {
    recorded_model = read_model_spec(request["model_spec"], sweep_file, "$.request.model_spec");
  }
  if (request.contains("cluster_spec")) {
    recorded_cluster = read_cluster_spec(request["cluster_spec"], sweep_file, "$.request.cluster_spec");
  }
  if (!chosen) {
    fail("$.plans", fmt::format("no plan has rank {} ({} plans in the sweep; ranks start at 1)", rank, plans.size()));
  }
  const std::size_t i = *chosen;
  const std::string at = fmt::format("$.plans[{}]", i);
  if (!plans[i].contains("plan")) fail(at + ".plan", "required: the plan object");
  Scenario s;
  // The model and cluster files the sweep was given; when one cannot be found
  // any more (the sweep ran elsewhere), the copy the sweep kept in its request
  // (model_spec, cluster_spec).
  auto model_of = [](const nlohmann::json& j, const std::string& f) { return read_model_spec(j, f); };
  auto cluster_of = [](const nlohmann::json& j, const std::string& f) { return read_cluster_spec(j, f); };
  recorded_or_file(args.model, "scenarios/models", "model", recorded_model, sweep_file, model_of, fail, s.model,
                   s.model_file);
  recorded_or_file(args.cluster, "scenarios/clusters", "cluster", recorded_cluster, sweep_file, cluster_of, fail,
                   s.cluster, s.cluster_file);
  s.profile = load_scenario_profile(s.cluster, s.cluster_file, args.profile);
  read_scenario_plan(s, plans[i]["plan"], sweep_file, at + ".plan", allow_cross_node_tp);
  return s;
}

}  // namespace strata::sim
