#include "plan/run_spec.h"

#include <map>

#include <fmt/format.h>

#include "core/error.h"
#include "core/json_reader.h"
#include "plan/moe_spec.h"
#include "plan/rank_layout.h"

namespace strata {

std::optional<RunRefusal> run_refusal(const ModelSpec& model, const PlanSpec& plan) {
  if (model.kv_channels > 0) {
    return RunRefusal{"$.model.kv_channels",
                      "strata run builds attention heads of hidden_size / num_attention_heads; a model with its own "
                      "kv_channels runs with Megatron-LM from megatron-args.sh"};
  }
  if (model.mtp_num_layers > 0) {
    return RunRefusal{"$.model.mtp_num_layers",
                      "strata run does not build multi-token prediction layers; the model runs with Megatron-LM "
                      "from megatron-args.sh"};
  }
  if (model.mla.enabled) {
    return RunRefusal{"$.model.multi_latent_attention",
                      "strata run builds multi-head or grouped-query attention; multi-head latent attention runs "
                      "with Megatron-LM from megatron-args.sh"};
  }
  if (!model.is_moe()) return std::nullopt;
  // The runtime's MoE layer (runtime/executor/moe_layer.h): routed experts over
  // ep ranks folded in tp x cp x dp, whole experts, the alltoall and allgather dispatchers.
  const std::string megatron = ": `strata simulate` costs it and megatron-args.sh from `strata export` runs it with "
                               "Megatron-LM";
  auto refuse = [&](std::string path, std::string why) {
    return RunRefusal{std::move(path), fmt::format("strata run's MoE layers do not run {} yet{}", why, megatron)};
  };
  if (plan.moe.etp > 1) return refuse("$.parallel.expert_tensor_parallel_size", "expert tensor parallelism (etp > 1)");
  if (plan.moe.token_dispatcher == MoeDispatcher::kFlex) {
    return refuse("$.parallel.moe_token_dispatcher_type",
                  "the \"flex\" (DeepEP) token dispatcher (they run \"alltoall\" and \"allgather\")");
  }
  const MoeModel& moe = model.moe;
  if (moe.moe_router_load_balancing_type != "aux_loss" && moe.moe_router_load_balancing_type != "none") {
    return refuse("$.model.moe_router_load_balancing_type",
                  fmt::format("\"{}\" balancing (they run \"aux_loss\" and \"none\")", moe.moe_router_load_balancing_type));
  }
  if (splits_backward(plan.schedule)) return refuse("$.parallel.pipeline_schedule", "in zero-bubble schedules");
  if (plan.zero_stage == 3) return refuse("$.training.zero_stage", "with ZeRO-3");
  if (plan.zero_shard_size > 0) return refuse("$.training.zero_shard_size", "with hybrid sharding");
  return std::nullopt;
}

namespace {

using ojson = nlohmann::ordered_json;

// plan.json key -> where strata-run.json keeps it (for errors from the plan check).
const std::map<std::string, std::string>& megatron_paths() {
  static const std::map<std::string, std::string> paths = {
      {"tp", "$.parallel.tensor_model_parallel_size"},
      {"pp", "$.parallel.pipeline_model_parallel_size"},
      {"dp", "$.parallel.data_parallel_size"},
      {"vpp", "$.parallel.virtual_pipeline_model_parallel_size"},
      {"schedule", "$.parallel.pipeline_schedule"},
      {"sequence_parallel", "$.parallel.sequence_parallel"},
      {"micro_batch_size", "$.batch.micro_batch_size"},
      {"global_batch_size", "$.batch.global_batch_size"},
      {"zero_stage", "$.training.zero_stage"},
      {"offload_optimizer", "$.training.offload_optimizer"},
      {"recompute", "$.training.recompute_granularity"},
      {"dtype", "$.training.params_dtype"},
      {"ep", "$.parallel.expert_model_parallel_size"},
      {"etp", "$.parallel.expert_tensor_parallel_size"},
      {"moe_token_dispatcher_type", "$.parallel.moe_token_dispatcher_type"},
      {"moe_expert_capacity_factor", "$.parallel.moe_expert_capacity_factor"},
      {"moe_grouped_gemm", "$.parallel.moe_grouped_gemm"},
  };
  return paths;
}

// A key that is a string or null (Megatron's None).
std::string string_or_null(json::ObjectReader& r, const std::string& key,
                           const std::vector<std::string>& allowed) {
  const nlohmann::json& v = r.raw(key);
  if (v.is_null()) return "";
  if (v.is_string()) {
    const std::string s = v.get<std::string>();
    for (const std::string& a : allowed) {
      if (s == a) return s;
    }
  }
  std::string list;
  for (const std::string& a : allowed) list += (list.empty() ? "\"" : ", \"") + a + "\"";
  r.fail(key, fmt::format("expected null or one of {}, got {}", list, json::describe(v)));
}

// An integer or null.
int integer_or_null(json::ObjectReader& r, const std::string& key, int min, int max) {
  const nlohmann::json& v = r.raw(key);
  if (v.is_null()) return 0;
  if (!v.is_number_integer() || v.get<std::int64_t>() < min || v.get<std::int64_t>() > max) {
    r.fail(key, fmt::format("expected null or an integer in [{}, {}], got {}", min, max, json::describe(v)));
  }
  return v.get<int>();
}

ojson parallel_json(const PlanSpec& p) {
  ojson j;
  j["tensor_model_parallel_size"] = p.tp;
  j["pipeline_model_parallel_size"] = p.pp;
  j["data_parallel_size"] = p.dp;
  // Megatron's names; written only when used, so plans without them read as before.
  if (p.cp > 1) {
    j["context_parallel_size"] = p.cp;
    j["cp_comm_type"] = to_string(p.cp_comm_type);
  }
  j["virtual_pipeline_model_parallel_size"] = p.vpp;
  write_stage_split(p, j);
  j["sequence_parallel"] = p.sequence_parallel;
  if (p.moe.active) {  // Megatron-Core's names, only for a model with experts
    j["expert_model_parallel_size"] = p.moe.ep;
    j["expert_tensor_parallel_size"] = p.moe.etp;
    j["moe_token_dispatcher_type"] = to_string(p.moe.token_dispatcher);
    if (p.moe.expert_capacity_factor > 0.0) j["moe_expert_capacity_factor"] = p.moe.expert_capacity_factor;
    j["moe_grouped_gemm"] = p.moe.grouped_gemm;
  }
  j["pipeline_schedule"] = to_string(p.schedule);
  j["rank_order"] = to_string(p.rank_order);
  j["world_size"] = p.num_gpus();
  return j;
}

// The MoE keys of "parallel" (absent for a dense model), into plan.json's fields;
// first_key names the first present by its plan.json name, as check_moe_plan reports it.
void read_moe_parallel(json::ObjectReader& r, PlanSpec& p) {
  static const std::pair<const char*, const char*> keys[] = {
      {"expert_model_parallel_size", "ep"},
      {"expert_tensor_parallel_size", "etp"},
      {"moe_token_dispatcher_type", "moe_token_dispatcher_type"},
      {"moe_expert_capacity_factor", "moe_expert_capacity_factor"},
      {"moe_grouped_gemm", "moe_grouped_gemm"},
  };
  for (const auto& [key, plan_key] : keys) {
    if (r.has(key)) {
      p.moe.first_key = plan_key;
      break;
    }
  }
  p.moe.ep = static_cast<int>(r.integer_or("expert_model_parallel_size", 1, 1, 1 << 16));
  p.moe.etp = static_cast<int>(r.integer_or("expert_tensor_parallel_size", 0, 1, 1 << 16));
  p.moe.token_dispatcher =
      parse_moe_dispatcher(r.choice_or("moe_token_dispatcher_type", "allgather", moe_dispatcher_names()));
  p.moe.expert_capacity_factor = r.number_or("moe_expert_capacity_factor", 0.0, 0.01, 1000.0);
  p.moe.grouped_gemm = r.boolean_or("moe_grouped_gemm", false);
}

void read_parallel(json::ObjectReader r, PlanSpec& p, int& world_size) {
  p.tp = static_cast<int>(r.integer("tensor_model_parallel_size", 1, 1 << 16));
  p.pp = static_cast<int>(r.integer("pipeline_model_parallel_size", 1, 1 << 16));
  p.dp = static_cast<int>(r.integer("data_parallel_size", 1, 1 << 24));
  p.cp = static_cast<int>(r.integer_or("context_parallel_size", 1, 1, 1 << 16));
  p.cp_comm_type = *parse_cp_comm_type(r.choice_or("cp_comm_type", "p2p", cp_comm_type_names()));
  p.vpp = static_cast<int>(r.integer("virtual_pipeline_model_parallel_size", 1, 1024));
  read_stage_split(r, p);
  p.sequence_parallel = r.boolean("sequence_parallel");
  read_moe_parallel(r, p);
  p.schedule = *parse_schedule(r.choice("pipeline_schedule", schedule_names()));
  if (r.has("rank_order")) p.rank_order = read_rank_order(r.string("rank_order"), r.file(), r.path_of("rank_order"));
  world_size = static_cast<int>(r.integer("world_size", 1, 1 << 24));
  const std::int64_t ranks = static_cast<std::int64_t>(p.tp) * p.cp * p.pp * p.dp;
  if (ranks != world_size) {
    r.fail("world_size", fmt::format("must equal tensor_model_parallel_size * context_parallel_size * "
                                     "pipeline_model_parallel_size * data_parallel_size = {}*{}*{}*{} = {}",
                                     p.tp, p.cp, p.pp, p.dp, ranks));
  }
  r.finish();
}

ojson batch_json(const PlanSpec& p) {
  return {{"micro_batch_size", p.micro_batch_size},
          {"global_batch_size", p.global_batch_size},
          {"num_micro_batches", p.num_microbatches()}};
}

void read_batch(json::ObjectReader r, PlanSpec& p) {
  p.micro_batch_size = static_cast<int>(r.integer("micro_batch_size", 1, 1 << 20));
  p.global_batch_size = static_cast<int>(r.integer("global_batch_size", 1, 1 << 30));
  const std::int64_t m = r.integer("num_micro_batches", 1, 1 << 30);
  const std::int64_t per_step = static_cast<std::int64_t>(p.micro_batch_size) * p.dp;
  if (p.global_batch_size % per_step != 0 || p.global_batch_size / per_step != m) {
    r.fail("num_micro_batches",
           fmt::format("must be global_batch_size / (micro_batch_size * data_parallel_size) = {} / ({} * {}), "
                       "a whole number",
                       p.global_batch_size, p.micro_batch_size, p.dp));
  }
  r.finish();
}

ojson training_json(const PlanSpec& p, const RunTraining& t) {
  ojson j;
  j["params_dtype"] = to_string(p.dtype);
  j["zero_stage"] = p.zero_stage;
  j["use_distributed_optimizer"] = p.zero_stage >= 1;
  if (p.zero_shard_size > 0) j["zero_shard_size"] = p.zero_shard_size;  // hybrid sharding only
  j["offload_optimizer"] = p.offload_optimizer;
  const bool full = p.recompute == Recompute::kFull;
  j["recompute_granularity"] = p.recompute == Recompute::kNone ? ojson() : ojson(to_string(p.recompute));
  j["recompute_method"] = full ? ojson("uniform") : ojson();
  j["recompute_num_layers"] = full ? ojson(1) : ojson();
  j["accumulate_allreduce_grads_in_fp32"] = p.accumulate_allreduce_grads_in_fp32;
  j["overlap_grad_reduce"] = p.overlap_grad_reduce;
  j["overlap_param_gather"] = p.overlap_param_gather;
  j["use_flash_attn"] = p.flash_attention;
  j["train_iters"] = t.steps;
  j["timing_warmup_iters"] = t.timing_warmup_steps;
  j["seed"] = t.seed;
  j["lr"] = t.lr;
  j["weight_decay"] = t.weight_decay;
  j["adam_beta1"] = t.adam_beta1;
  j["adam_beta2"] = t.adam_beta2;
  j["adam_eps"] = t.adam_eps;
  j["ddp_bucket_size"] = p.ddp_bucket_size;
  return j;
}

void read_training(json::ObjectReader r, PlanSpec& p, RunTraining& t) {
  const RunTraining defaults;
  p.dtype = *parse_dtype(r.choice("params_dtype", {"bf16", "fp16", "fp32"}));
  p.zero_stage = static_cast<int>(r.integer("zero_stage", 0, 3));
  if (r.boolean("use_distributed_optimizer") != (p.zero_stage >= 1)) {
    r.fail("use_distributed_optimizer",
           fmt::format("must be {} for zero_stage {} (Megatron's distributed optimizer shards the "
                       "optimizer state over data_parallel_size, as ZeRO stage 1 and above do)",
                       p.zero_stage >= 1, p.zero_stage));
  }
  p.zero_shard_size = static_cast<int>(r.integer_or("zero_shard_size", 0, 1, 1 << 24));
  p.offload_optimizer = r.boolean("offload_optimizer");
  const std::string granularity = string_or_null(r, "recompute_granularity", {"full", "selective"});
  const std::string method = string_or_null(r, "recompute_method", {"uniform"});
  const int layers = integer_or_null(r, "recompute_num_layers", 1, 1);
  p.recompute = granularity == "full"        ? Recompute::kFull
                : granularity == "selective" ? Recompute::kSelective
                                             : Recompute::kNone;
  if ((granularity == "full") != (method == "uniform") || (granularity == "full") != (layers == 1)) {
    r.fail("recompute_method",
           "with recompute_granularity \"full\", recompute_method must be \"uniform\" and "
           "recompute_num_layers 1 (every layer's input kept, the layer recomputed in backward); "
           "otherwise both must be null");
  }
  // Megatron's default: on with bf16 (arguments.py).
  p.accumulate_allreduce_grads_in_fp32 =
      r.boolean_or("accumulate_allreduce_grads_in_fp32", p.dtype == DType::kBf16);
  p.overlap_grad_reduce = r.boolean("overlap_grad_reduce");
  p.overlap_param_gather = r.boolean("overlap_param_gather");
  p.flash_attention = r.boolean("use_flash_attn");
  t.steps = static_cast<int>(r.integer("train_iters", 1, 1000000));
  t.timing_warmup_steps =
      static_cast<int>(r.integer_or("timing_warmup_iters", defaults.timing_warmup_steps, 0, 1000000));
  if (t.timing_warmup_steps >= t.steps) {
    r.fail("timing_warmup_iters", fmt::format("must be less than train_iters ({}), so that at least one "
                                              "step is timed", t.steps));
  }
  t.seed = static_cast<std::uint64_t>(r.integer("seed", 0, std::int64_t{1} << 62));
  t.lr = r.number("lr", 0.0, 10.0);
  t.weight_decay = r.number_or("weight_decay", defaults.weight_decay, 0.0, 1.0);
  t.adam_beta1 = r.number_or("adam_beta1", defaults.adam_beta1, 0.0, 0.999999);
  t.adam_beta2 = r.number_or("adam_beta2", defaults.adam_beta2, 0.0, 0.999999);
  t.adam_eps = r.number_or("adam_eps", defaults.adam_eps, 0.0, 1.0);
  p.ddp_bucket_size = r.integer_or("ddp_bucket_size", kDefaultDdpBucketSize, 1, std::int64_t{1} << 40);
  r.finish();
}

void read_runtime(json::ObjectReader r, RunSpec& s) {
  const RunSpec defaults;
  s.backend = r.choice("backend", {"cpu", "cuda"});
  s.timeout_s = r.number_or("timeout_s", defaults.timeout_s, 0.1, 86400.0);
  s.cpu_threads = static_cast<int>(r.integer_or("cpu_threads", defaults.cpu_threads, 0, 4096));
  r.finish();
}

ojson rank_map_json(const std::vector<RankPlacement>& ranks) {
  ojson list = ojson::array();
  for (const RankPlacement& e : ranks) {
    list.push_back({{"rank", e.rank}, {"node", e.node}, {"local_rank", e.local_rank},
                    {"tp_rank", e.tp_rank}, {"dp_rank", e.dp_rank}, {"pp_rank", e.pp_rank}});
  }
  return list;
}

std::vector<RankPlacement> read_rank_map(json::ObjectReader& parent, const PlanSpec& p, int world) {
  const nlohmann::json& list = parent.array("rank_map");
  if (static_cast<int>(list.size()) != world) {
    parent.fail("rank_map", fmt::format("has {} entries; the plan has {} ranks", list.size(), world));
  }
  std::vector<RankPlacement> out;
  const RankLayout layout(p);
  for (std::size_t i = 0; i < list.size(); ++i) {
    json::ObjectReader r(list[i], parent.file(), parent.element_path("rank_map", i));
    RankPlacement e;
    e.rank = static_cast<int>(r.integer("rank", 0, world - 1));
    e.node = static_cast<int>(r.integer("node", 0, world - 1));
    e.local_rank = static_cast<int>(r.integer("local_rank", 0, world - 1));
    e.tp_rank = static_cast<int>(r.integer("tp_rank", 0, p.tp - 1));
    e.dp_rank = static_cast<int>(r.integer("dp_rank", 0, p.dp - 1));
    e.pp_rank = static_cast<int>(r.integer("pp_rank", 0, p.pp - 1));
    r.finish();
    // The plan's rank layout gives each rank its coordinates.
    const RankCoord expected = layout.coord(static_cast<int>(i));
    if (e.rank != static_cast<int>(i) || expected.tp != e.tp_rank || expected.dp != e.dp_rank ||
        expected.pp != e.pp_rank) {
      throw InputError(parent.file(), parent.element_path("rank_map", i),
                       fmt::format("entry {} must be rank {} at (tp_rank, dp_rank, pp_rank) = ({}, {}, {}) of rank "
                                   "order {}, got rank {} at ({}, {}, {})",
                                   i, i, expected.tp, expected.dp, expected.pp, to_string(p.rank_order), e.rank,
                                   e.tp_rank, e.dp_rank, e.pp_rank));
    }
    out.push_back(e);
  }
  return out;
}

}  // namespace

std::vector<RankPlacement> rank_placements(const PlanSpec& plan, int gpus_per_node) {
  std::vector<RankPlacement> out;
  const RankLayout layout(plan);
  for (int g = 0; g < layout.world(); ++g) {
    const RankCoord c = layout.coord(g);
    out.push_back({g, g / gpus_per_node, g % gpus_per_node, c.tp, c.dp, c.pp});
  }
  return out;
}

nlohmann::ordered_json to_json(const RunSpec& s) {
  ojson j;
  j["schema"] = kRunSpecSchema;
  j["source"] = s.source;
  j["model"] = to_json(s.model);
  j["parallel"] = parallel_json(s.plan);
  j["batch"] = batch_json(s.plan);
  j["training"] = training_json(s.plan, s.training);
  j["runtime"] = {{"backend", s.backend}, {"timeout_s", s.timeout_s}, {"cpu_threads", s.cpu_threads}};
  j["cluster"] = {{"name", s.cluster_name}, {"nodes", s.nodes}, {"gpus_per_node", s.gpus_per_node}};
  j["rank_map"] = rank_map_json(s.rank_map);
  j["prediction"] = s.prediction;
  j["profile"] = s.profile;
  return j;
}

RunSpec read_run_spec(const nlohmann::json& doc, const std::string& file) {
  json::ObjectReader r(doc, file);
  const std::string schema = r.string("schema");
  if (schema != kRunSpecSchema) {
    r.fail("schema", fmt::format("expected \"{}\", got \"{}\"", kRunSpecSchema, schema));
  }
  RunSpec s;
  if (r.has("source")) s.source = r.string("source");
  s.model = read_model_spec(r.raw("model"), file, "$.model");
  int world = 0;
  read_parallel(r.object("parallel"), s.plan, world);
  read_batch(r.object("batch"), s.plan);
  read_training(r.object("training"), s.plan, s.training);
  read_runtime(r.object("runtime"), s);
  {
    json::ObjectReader cluster = r.object("cluster");
    s.cluster_name = cluster.string("name");
    s.nodes = static_cast<int>(cluster.integer("nodes", 1, 1 << 20));
    s.gpus_per_node = static_cast<int>(cluster.integer("gpus_per_node", 1, 1 << 16));
    cluster.finish();
  }
  s.rank_map = read_rank_map(r, s.plan, world);
  const nlohmann::json& prediction = r.raw("prediction");
  if (!prediction.is_object()) r.fail("prediction", "expected an object, got " + json::describe(prediction));
  s.prediction = ojson(prediction);
  const nlohmann::json& profile = r.raw("profile");
  if (!profile.is_object()) r.fail("profile", "expected an object, got " + json::describe(profile));
  s.profile = ojson(profile);
  r.allow_text("notes");
  r.finish();

  // The plan against the model, with errors at the Megatron key that holds the value.
  PlanContext context;
  context.num_gpus = world;
  context.gpus_per_node = s.gpus_per_node;
  context.allow_cross_node_tp = true;  // the export already checked placement
  try {
    resolve_and_check_plan(s.plan, s.model, context, file, "$");
  } catch (const InputError& e) {
    std::string path = e.json_path();
    const std::string key = path.rfind("$.", 0) == 0 ? path.substr(2) : path;
    auto it = megatron_paths().find(key);
    if (it != megatron_paths().end()) path = it->second;
    throw InputError(file, path, e.message());
  }
  return s;
}

}  // namespace strata
