#include "plan/plan_spec.h"

#include "plan/pipeline_split.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "core/data_paths.h"
#include "core/error.h"
#include "core/json_reader.h"
#include "plan/moe_spec.h"

namespace strata {

const char* to_string(Schedule s) {
  switch (s) {
    case Schedule::kGpipe: return "gpipe";
    case Schedule::kOneFOneB: return "1f1b";
    case Schedule::kInterleaved: return "interleaved-1f1b";
    case Schedule::kZbH1: return "zb-h1";
    case Schedule::kZbH2: return "zb-h2";
    case Schedule::kZbV: return "zb-v";
  }
  return "1f1b";
}

const std::vector<std::string>& schedule_names() {
  static const std::vector<std::string> names = {
      to_string(Schedule::kGpipe), to_string(Schedule::kOneFOneB), to_string(Schedule::kInterleaved),
      to_string(Schedule::kZbH1), to_string(Schedule::kZbH2), to_string(Schedule::kZbV)};
  return names;
}

std::optional<Schedule> parse_schedule(const std::string& name) {
  for (Schedule s : {Schedule::kGpipe, Schedule::kOneFOneB, Schedule::kInterleaved, Schedule::kZbH1,
                     Schedule::kZbH2, Schedule::kZbV}) {
    if (name == to_string(s)) return s;
  }
  return std::nullopt;
}

bool splits_backward(Schedule s) { return s == Schedule::kZbH1 || s == Schedule::kZbH2 || s == Schedule::kZbV; }

const char* to_string(Recompute r) {
  switch (r) {
    case Recompute::kNone: return "none";
    case Recompute::kSelective: return "selective";
    case Recompute::kFull: return "full";
    case Recompute::kSelectiveOp: return "selective_op";
  }
  return "none";
}

const char* to_string(CpCommType c) {
  switch (c) {
    case CpCommType::kP2p: return "p2p";
    case CpCommType::kAllGather: return "allgather";
    case CpCommType::kA2a: return "a2a";
  }
  return "p2p";
}

const std::vector<std::string>& cp_comm_type_names() {
  static const std::vector<std::string> names = {to_string(CpCommType::kP2p), to_string(CpCommType::kAllGather),
                                                 to_string(CpCommType::kA2a)};
  return names;
}

std::optional<CpCommType> parse_cp_comm_type(const std::string& name) {
  for (CpCommType c : {CpCommType::kP2p, CpCommType::kAllGather, CpCommType::kA2a}) {
    if (name == to_string(c)) return c;
  }
  return std::nullopt;
}

PlanSpec read_plan_spec(const nlohmann::json& doc, const std::string& file, const std::string& path) {
  json::ObjectReader r(doc, file, path);
  PlanSpec p;
  p.tp = static_cast<int>(r.integer("tp", 1, 1 << 16));
  p.pp = static_cast<int>(r.integer("pp", 1, 1 << 16));
  p.dp = static_cast<int>(r.integer_or("dp", 0, 1, 1 << 24));
  p.cp = static_cast<int>(r.integer_or("cp", 1, 1, 1 << 16));
  p.cp_comm_type = *parse_cp_comm_type(r.choice_or("cp_comm_type", "p2p", cp_comm_type_names()));
  p.schedule = *parse_schedule(r.choice_or("schedule", "1f1b", schedule_names()));
  // zb-v always runs two chunks per rank: vpp may be left out.
  p.vpp = static_cast<int>(r.integer_or("vpp", p.schedule == Schedule::kZbV ? 2 : 1, 1, 1024));
  read_stage_split(r, p);
  p.micro_batch_size = static_cast<int>(r.integer("micro_batch_size", 1, 1 << 20));
  p.global_batch_size = static_cast<int>(r.integer("global_batch_size", 1, 1 << 30));
  p.zero_stage = static_cast<int>(r.integer_or("zero_stage", 0, 0, 3));
  p.zero_shard_size = static_cast<int>(r.integer_or("zero_shard_size", 0, 1, 1 << 24));
  p.offload_optimizer = r.boolean_or("offload_optimizer", false);
  std::string recompute = r.choice_or("recompute", "none", {"none", "selective", "full", "selective_op"});
  p.recompute = recompute == "none"        ? Recompute::kNone
                : recompute == "selective" ? Recompute::kSelective
                : recompute == "full"      ? Recompute::kFull
                                           : Recompute::kSelectiveOp;
  if (r.has("recompute_modules")) {
    if (p.recompute != Recompute::kSelective) {
      r.fail("recompute_modules", "names what recompute \"selective\" replays (Megatron-Core's "
                                  "--recompute-modules); set recompute \"selective\" or drop it");
    }
    const nlohmann::json& list = r.array("recompute_modules");
    p.recompute_modules = RecomputeModules{false, false};
    for (std::size_t i = 0; i < list.size(); ++i) {
      const std::string name = list[i].is_string() ? list[i].get<std::string>() : "";
      if (name == "core_attn") {
        p.recompute_modules.core_attn = true;
      } else if (name == "mla_up_proj") {
        p.recompute_modules.mla_up_proj = true;
      } else {
        throw InputError(file, r.element_path("recompute_modules", i),
                         "must be \"core_attn\" or \"mla_up_proj\" (Megatron-Core's modules Strata models)");
      }
    }
    if (list.empty()) r.fail("recompute_modules", "must name at least one module: \"core_attn\" or \"mla_up_proj\"");
  }
  p.sequence_parallel = r.boolean_or("sequence_parallel", false);
  p.overlap_grad_reduce = r.boolean_or("overlap_grad_reduce", true);
  p.overlap_param_gather = r.boolean_or("overlap_param_gather", true);
  // fp32 is for the cpu backend, which trains in single precision.
  p.dtype = *parse_dtype(r.choice_or("dtype", "bf16", {"bf16", "fp16", "fp32"}));
  p.flash_attention = r.boolean_or("flash_attention", false);
  if (p.recompute == Recompute::kSelectiveOp && !p.flash_attention) {
    r.fail("recompute",
           "\"selective_op\" (torchtitan's op-level policy) keeps the fused attention's output and needs "
           "flash_attention true; without it use \"selective\" or \"full\"");
  }
  // Megatron-LM turns fp32 gradient accumulation on whenever bf16 is used
  // (arguments.py: "if args.bf16: args.accumulate_allreduce_grads_in_fp32 = True").
  p.accumulate_allreduce_grads_in_fp32 =
      r.boolean_or("accumulate_allreduce_grads_in_fp32", p.dtype == DType::kBf16);
  if (r.has("rank_order")) p.rank_order = read_rank_order(r.string("rank_order"), file, r.path_of("rank_order"));
  p.ddp_bucket_size = r.integer_or("ddp_bucket_size", kDefaultDdpBucketSize, 1, std::int64_t{1} << 40);
  p.framework = r.string_or("framework", kDefaultFramework);
  read_moe_plan(r, p);
  if (r.has("source")) p.source = r.string("source");
  r.allow_text("notes");
  r.finish();
  return p;
}

PlanSpec load_plan_spec(const std::string& path_or_name) {
  std::string path = resolve_data_file(path_or_name, "scenarios/plans", "plan");
  return read_plan_spec(json::parse_file(path), path);
}

void resolve_and_check_plan(PlanSpec& p, const ModelSpec& m, const PlanContext& c,
                            const std::string& file, const std::string& plan_path) {
  // Paths below are written "$.key"; the plan may sit deeper in its file.
  auto fail = [&](const std::string& path, const std::string& message) {
    throw InputError(file, plan_path + path.substr(1), message);
  };
  const std::int64_t model_parallel = static_cast<std::int64_t>(p.tp) * p.cp * p.pp;
  // The factors as the plan has them: cp is named only where it is used.
  const bool cp = p.cp > 1;
  const std::string factors = cp ? "tp*cp*pp" : "tp*pp";
  const std::string values = cp ? fmt::format("{}*{}*{}", p.tp, p.cp, p.pp) : fmt::format("{}*{}", p.tp, p.pp);
  if (p.dp == 0) {
    if (c.num_gpus % model_parallel != 0) {
      fail(cp ? "$.cp" : "$.pp", fmt::format("{} = {} = {} must divide the cluster's {} GPUs (dp is derived "
                                             "as GPUs / ({}))",
                                             factors, values, model_parallel, c.num_gpus, factors));
    }
    p.dp = static_cast<int>(c.num_gpus / model_parallel);
  } else if (model_parallel * p.dp != c.num_gpus) {
    fail("$.dp", fmt::format("{}*dp = {}*{} = {} must equal the cluster's {} GPUs", factors, values, p.dp,
                             model_parallel * p.dp, c.num_gpus));
  }
  if (p.cp > 1) {
    if (m.seq_length % (2 * p.cp) != 0) {
      fail("$.cp", fmt::format("seq_length {} of model {} must be divisible by 2*cp = {}: each context-parallel "
                               "rank holds two load-balanced causal chunks of seq_length / (2*cp) tokens",
                               m.seq_length, m.name, 2 * p.cp));
    }
    if (!p.flash_attention) {
      fail("$.cp", fmt::format("cp {} > 1 needs flash_attention true: context parallelism shards the fused "
                               "attention kernel (Transformer Engine's, as Megatron-Core requires); the unfused "
                               "attention's s x s scores cannot be split over the sequence",
                               p.cp));
    }
    if (p.cp_comm_type == CpCommType::kA2a && (m.num_attention_heads / p.tp) % p.cp != 0) {
      fail("$.cp_comm_type", fmt::format("cp_comm_type \"a2a\" gives each context-parallel rank 1/cp of the "
                                         "heads: num_attention_heads / tp = {} / {} must be divisible by cp {}; "
                                         "use \"p2p\" or \"allgather\"",
                                         m.num_attention_heads, p.tp, p.cp));
    }
    if (p.cp_comm_type == CpCommType::kA2a && (m.num_query_groups / p.tp) % p.cp != 0) {
      fail("$.cp_comm_type", fmt::format("cp_comm_type \"a2a\" gives each context-parallel rank 1/cp of the "
                                         "key/value heads: num_query_groups / tp = {} / {} must be divisible by "
                                         "cp {}; use \"p2p\" or \"allgather\"",
                                         m.num_query_groups, p.tp, p.cp));
    }
  }
  if (p.tp > c.gpus_per_node && !c.allow_cross_node_tp) {
    fail("$.tp", fmt::format("tp {} is larger than a node ({} GPUs); tensor parallelism across "
                             "nodes needs --allow-cross-node-tp",
                             p.tp, c.gpus_per_node));
  }
  if (p.tp <= c.gpus_per_node && c.gpus_per_node % p.tp != 0) {
    fail("$.tp", fmt::format("tp {} must divide the {} GPUs of a node, so no tensor-parallel group "
                             "straddles two nodes",
                             p.tp, c.gpus_per_node));
  }
  if (p.tp > c.gpus_per_node && p.tp % c.gpus_per_node != 0) {
    fail("$.tp", fmt::format("tp {} across nodes must be a multiple of the {} GPUs of a node", p.tp,
                             c.gpus_per_node));
  }
  if (!c.allow_cross_node_tp && c.gpus_per_node > 0 && !(p.rank_order == RankOrder{})) {
    // Every tensor-parallel group inside one node (with the default order it is tp
    // consecutive GPUs, which the checks above keep in a node).
    const RankLayout layout(p);
    for (const std::vector<int>& g : layout.all_groups(GroupKind::kTensor)) {
      for (int rank : g) {
        if (rank / c.gpus_per_node != g.front() / c.gpus_per_node) {
          fail("$.rank_order",
               fmt::format("rank order \"{}\" puts the tensor-parallel group of rank {} on two nodes "
                           "(ranks {} and {}); tensor parallelism across nodes needs --allow-cross-node-tp",
                           to_string(p.rank_order), g.front(), g.front(), rank));
        }
      }
    }
  }
  if (p.recompute == Recompute::kSelectiveOp && m.mla.enabled) {
    fail("$.recompute", fmt::format("\"selective_op\" (torchtitan's op-level policy) is modelled over standard "
                                    "attention's matmuls, not multi-head latent attention's (model {}); use "
                                    "\"selective\" with recompute_modules, or \"full\"",
                                    m.name));
  }
  if (p.recompute == Recompute::kSelective && p.recompute_modules.mla_up_proj && !m.mla.enabled) {
    fail("$.recompute_modules", fmt::format("\"mla_up_proj\" recomputes multi-head latent attention's "
                                            "up-projections; model {} has none (multi_latent_attention false)",
                                            m.name));
  }
  if (m.num_attention_heads % p.tp != 0) {
    fail("$.tp", fmt::format("num_attention_heads {} of model {} must be divisible by tp {}",
                             m.num_attention_heads, m.name, p.tp));
  }
  if (m.num_query_groups % p.tp != 0) {
    fail("$.tp", fmt::format("num_query_groups {} of model {} must be divisible by tp {}",
                             m.num_query_groups, m.name, p.tp));
  }
  if (m.ffn_hidden_size % p.tp != 0) {
    fail("$.tp", fmt::format("ffn_hidden_size {} of model {} must be divisible by tp {}",
                             m.ffn_hidden_size, m.name, p.tp));
  }
  if (p.schedule == Schedule::kZbV) {
    if (p.vpp != 2) {
      fail("$.vpp", fmt::format("schedule \"zb-v\" runs exactly 2 model chunks per pipeline rank (the V); vpp "
                                "must be 2 or left out, got {}",
                                p.vpp));
    }
    if (p.uneven_stages()) {
      // The V puts the first and the last virtual stage on rank 0, so Megatron-Core's
      // per-rank first/last counts do not say which chunk they mean.
      fail(p.first_stage_layers > 0                ? "$.decoder_first_pipeline_num_layers"
           : p.last_stage_layers > 0               ? "$.decoder_last_pipeline_num_layers"
           : p.account_for_embedding               ? "$.account_for_embedding_in_pipeline_split"
                                                   : "$.account_for_loss_in_pipeline_split",
           "schedule \"zb-v\" splits the layers evenly over its 2*pp virtual stages (rank 0 holds both the "
           "first and the last, so the embedding and the loss share it); uneven stages go with the other "
           "schedules");
    }
  } else if (p.vpp > 1 && p.schedule != Schedule::kInterleaved) {
    fail("$.schedule", fmt::format("vpp {} > 1 needs schedule \"interleaved-1f1b\" or \"zb-v\", got \"{}\"",
                                   p.vpp, to_string(p.schedule)));
  }
  if (p.schedule == Schedule::kInterleaved && p.vpp < 2) {
    fail("$.vpp", "schedule \"interleaved-1f1b\" needs vpp > 1 (virtual stages per pipeline rank)");
  }
  if (p.schedule == Schedule::kInterleaved && p.pp < 2) {
    fail("$.pp", "schedule \"interleaved-1f1b\" needs pp > 1");
  }
  if (splits_backward(p.schedule) && p.pp < 2) {
    fail("$.pp", fmt::format("schedule \"{}\" needs pp > 1 (it fills pipeline bubbles)", to_string(p.schedule)));
  }
  if (splits_backward(p.schedule) && p.zero_stage == 3) {
    // ZeRO-3 frees a layer's gathered weights after its backward; a deferred W
    // would need them gathered again, which no framework's zero-bubble schedule does.
    fail("$.zero_stage", fmt::format("schedule \"{}\" defers weight gradients past the backward, which ZeRO-3's "
                                     "per-layer parameter gathering does not allow; use zero_stage 0-2",
                                     to_string(p.schedule)));
  }
  if (const auto problem = pipeline_split_problem(m, p)) fail(problem->key, problem->message);
  const std::int64_t per_step = static_cast<std::int64_t>(p.micro_batch_size) * p.dp;
  if (p.global_batch_size % per_step != 0) {
    fail("$.global_batch_size",
         fmt::format("global_batch_size {} must be divisible by micro_batch_size*dp = {}*{} = {}",
                     p.global_batch_size, p.micro_batch_size, p.dp, per_step));
  }
  if (p.schedule == Schedule::kInterleaved && p.num_microbatches() % p.pp != 0) {
    fail("$.global_batch_size",
         fmt::format("interleaved-1f1b needs the number of micro-batches ({} = global_batch_size / "
                     "(micro_batch_size*dp)) to be divisible by pp {}",
                     p.num_microbatches(), p.pp));
  }
  if (p.sequence_parallel && p.tp < 2) {
    fail("$.sequence_parallel", "sequence_parallel needs tp > 1");
  }
  if (p.zero_shard_size > 0) {
    if (p.grad_replicas() % p.zero_shard_size != 0) {
      fail("$.zero_shard_size",
           fmt::format("zero_shard_size {} must divide the ranks ZeRO shards over, dp*cp = {} (allowed: its "
                       "divisors; absent or {} for one group of them all)",
                       p.zero_shard_size, p.grad_replicas(), p.grad_replicas()));
    }
    if (p.zero_shard_size == p.grad_replicas()) {
      p.zero_shard_size = 0;  // one group of all: plain ZeRO, the same plan
    } else if (p.zero_stage == 0) {
      fail("$.zero_shard_size",
           fmt::format("zero_shard_size {} < dp*cp = {} shards within groups, which needs zero_stage >= 1 "
                       "(with zero_stage 0 nothing is sharded)",
                       p.zero_shard_size, p.grad_replicas()));
    }
  }
  if (p.offload_optimizer && p.zero_stage == 0) {
    fail("$.offload_optimizer",
         "offload_optimizer needs zero_stage >= 1 (the optimizer state is offloaded shard by shard, "
         "as in ZeRO-Offload and Megatron's distributed optimizer)");
  }
  check_moe_plan(p, m, fail);
}

RankOrder read_rank_order(const std::string& text, const std::string& file, const std::string& json_path) {
  RankOrder order;
  if (!parse_rank_order(text, order)) {
    throw InputError(file, json_path,
                     fmt::format("\"{}\" is not a rank order: each of tp, cp, ep, dp, pp once, fastest first, "
                                 "joined by '-' (Megatron-Core's order; default \"{}\")",
                                 text, kDefaultRankOrder));
  }
  return order;
}

int PlanSpec::grad_bytes() const {
  return accumulate_allreduce_grads_in_fp32 ? 4 : dtype_bytes(dtype);
}

void read_stage_split(json::ObjectReader& r, PlanSpec& p) {
  p.first_stage_layers = static_cast<int>(r.integer_or("decoder_first_pipeline_num_layers", 0, 1, 1 << 20));
  p.last_stage_layers = static_cast<int>(r.integer_or("decoder_last_pipeline_num_layers", 0, 1, 1 << 20));
  p.account_for_embedding = r.boolean_or("account_for_embedding_in_pipeline_split", false);
  p.account_for_loss = r.boolean_or("account_for_loss_in_pipeline_split", false);
}

void write_stage_split(const PlanSpec& p, nlohmann::ordered_json& j) {
  // Megatron's names, written only when the split is uneven.
  if (p.first_stage_layers > 0) j["decoder_first_pipeline_num_layers"] = p.first_stage_layers;
  if (p.last_stage_layers > 0) j["decoder_last_pipeline_num_layers"] = p.last_stage_layers;
  if (p.account_for_embedding) j["account_for_embedding_in_pipeline_split"] = true;
  if (p.account_for_loss) j["account_for_loss_in_pipeline_split"] = true;
}

std::vector<std::string> recompute_module_names(const RecomputeModules& modules) {
  std::vector<std::string> names;
  if (modules.core_attn) names.push_back("core_attn");
  if (modules.mla_up_proj) names.push_back("mla_up_proj");
  return names;
}

std::string recompute_label(const PlanSpec& p) {
  if (p.recompute != Recompute::kSelective || p.recompute_modules.is_default()) return to_string(p.recompute);
  return fmt::format("selective({})", fmt::join(recompute_module_names(p.recompute_modules), "+"));
}

nlohmann::ordered_json to_json(const PlanSpec& p) {
  nlohmann::ordered_json j;
  j["tp"] = p.tp;
  j["pp"] = p.pp;
  j["dp"] = p.dp;
  // Written only when used, so a plan without context parallelism reads as before.
  if (p.cp > 1) {
    j["cp"] = p.cp;
    j["cp_comm_type"] = to_string(p.cp_comm_type);
  }
  j["vpp"] = p.vpp;
  write_stage_split(p, j);
  j["micro_batch_size"] = p.micro_batch_size;
  j["global_batch_size"] = p.global_batch_size;
  j["schedule"] = to_string(p.schedule);
  j["zero_stage"] = p.zero_stage;
  if (p.zero_shard_size > 0) j["zero_shard_size"] = p.zero_shard_size;  // only when hybrid
  j["offload_optimizer"] = p.offload_optimizer;
  j["recompute"] = to_string(p.recompute);
  if (p.recompute == Recompute::kSelective && !p.recompute_modules.is_default()) {  // only when not Megatron's default
    j["recompute_modules"] = recompute_module_names(p.recompute_modules);
  }
  j["sequence_parallel"] = p.sequence_parallel;
  j["overlap_grad_reduce"] = p.overlap_grad_reduce;
  j["overlap_param_gather"] = p.overlap_param_gather;
  j["dtype"] = to_string(p.dtype);
  j["flash_attention"] = p.flash_attention;
  j["accumulate_allreduce_grads_in_fp32"] = p.accumulate_allreduce_grads_in_fp32;
  j["rank_order"] = to_string(p.rank_order);
  j["ddp_bucket_size"] = p.ddp_bucket_size;
  j["framework"] = p.framework;
  write_moe_plan(p, j);
  return j;
}

}  // namespace strata
