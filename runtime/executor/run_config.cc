#include "runtime/executor/run_config.h"

#include <map>

#include <fmt/format.h>

#include "core/error.h"
#include "core/json_reader.h"

namespace strata::rt {
namespace {

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

void read_parallel(json::ObjectReader r, PlanSpec& p, int& world_size) {
  p.tp = static_cast<int>(r.integer("tensor_model_parallel_size", 1, 1 << 16));
  p.pp = static_cast<int>(r.integer("pipeline_model_parallel_size", 1, 1 << 16));
  p.dp = static_cast<int>(r.integer("data_parallel_size", 1, 1 << 24));
  p.vpp = static_cast<int>(r.integer("virtual_pipeline_model_parallel_size", 1, 1024));
  p.sequence_parallel = r.boolean("sequence_parallel");
  const std::string schedule = r.choice("pipeline_schedule", {"gpipe", "1f1b", "interleaved-1f1b"});
  p.schedule = schedule == "gpipe" ? Schedule::kGpipe
               : schedule == "1f1b" ? Schedule::kOneFOneB
                                    : Schedule::kInterleaved;
  if (r.has("rank_order")) p.rank_order = read_rank_order(r.string("rank_order"), r.file(), r.path_of("rank_order"));
  world_size = static_cast<int>(r.integer("world_size", 1, 1 << 24));
  if (static_cast<std::int64_t>(p.tp) * p.pp * p.dp != world_size) {
    r.fail("world_size", fmt::format("must equal tensor_model_parallel_size * pipeline_model_parallel_size "
                                     "* data_parallel_size = {}*{}*{} = {}",
                                     p.tp, p.pp, p.dp, static_cast<std::int64_t>(p.tp) * p.pp * p.dp));
  }
  r.finish();
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

void read_training(json::ObjectReader r, RunConfig& c) {
  PlanSpec& p = c.plan;
  p.dtype = *parse_dtype(r.choice("params_dtype", {"bf16", "fp16", "fp32"}));
  p.zero_stage = static_cast<int>(r.integer("zero_stage", 0, 3));
  if (r.boolean("use_distributed_optimizer") != (p.zero_stage >= 1)) {
    r.fail("use_distributed_optimizer",
           fmt::format("must be {} for zero_stage {} (Megatron's distributed optimizer shards the "
                       "optimizer state over data_parallel_size, as ZeRO stage 1 and above do)",
                       p.zero_stage >= 1, p.zero_stage));
  }
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
  // Megatron's default: on with bf16 (arguments.py); the runtime keeps and
  // reduces gradients in fp32 either way (its main_grad), the key says what the
  // prediction assumed.
  p.accumulate_allreduce_grads_in_fp32 =
      r.boolean_or("accumulate_allreduce_grads_in_fp32", p.dtype == DType::kBf16);
  p.overlap_grad_reduce = r.boolean("overlap_grad_reduce");
  p.overlap_param_gather = r.boolean("overlap_param_gather");
  p.flash_attention = r.boolean("use_flash_attn");
  c.steps = static_cast<int>(r.integer("train_iters", 1, 1000000));
  c.timing_warmup_steps = static_cast<int>(r.integer_or("timing_warmup_iters", 1, 0, 1000000));
  if (c.timing_warmup_steps >= c.steps) {
    r.fail("timing_warmup_iters", fmt::format("must be less than train_iters ({}), so that at least one "
                                              "step is timed", c.steps));
  }
  c.seed = static_cast<std::uint64_t>(r.integer("seed", 0, std::int64_t{1} << 62));
  c.adam.lr = static_cast<float>(r.number("lr", 0.0, 10.0));
  c.adam.weight_decay = static_cast<float>(r.number_or("weight_decay", 0.0, 0.0, 1.0));
  c.adam.beta1 = static_cast<float>(r.number_or("adam_beta1", 0.9, 0.0, 0.999999));
  c.adam.beta2 = static_cast<float>(r.number_or("adam_beta2", 0.999, 0.0, 0.999999));
  c.adam.eps = static_cast<float>(r.number_or("adam_eps", 1e-8, 0.0, 1.0));
  c.plan.ddp_bucket_size = r.integer_or("ddp_bucket_size", kDefaultDdpBucketSize, 1, std::int64_t{1} << 40);
  r.finish();
}

void read_runtime(json::ObjectReader r, RunConfig& c) {
  const std::string backend = r.choice("backend", {"cpu", "cuda"});
  c.backend = *parse_backend(backend);
  const double timeout_s = r.number_or("timeout_s", 20.0, 0.1, 86400.0);
  c.timeout = std::chrono::milliseconds(static_cast<std::int64_t>(timeout_s * 1000.0));
  c.cpu_threads = static_cast<int>(r.integer_or("cpu_threads", 0, 0, 4096));
  r.finish();
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

RunConfig read_run_config(const nlohmann::json& doc, const std::string& file) {
  json::ObjectReader r(doc, file);
  const std::string schema = r.string("schema");
  if (schema != kRunConfigSchema) {
    r.fail("schema", fmt::format("expected \"{}\", got \"{}\"", kRunConfigSchema, schema));
  }
  RunConfig c;
  c.file = file;
  c.model = read_model_spec(r.raw("model"), file, "$.model");
  int world = 0;
  read_parallel(r.object("parallel"), c.plan, world);
  read_batch(r.object("batch"), c.plan);
  read_training(r.object("training"), c);
  read_runtime(r.object("runtime"), c);
  {
    json::ObjectReader cluster = r.object("cluster");
    cluster.string("name");
    cluster.integer("nodes", 1, 1 << 20);
    c.gpus_per_node = static_cast<int>(cluster.integer("gpus_per_node", 1, 1 << 16));
    cluster.finish();
  }
  c.rank_map = read_rank_map(r, c.plan, world);
  const nlohmann::json& prediction = r.raw("prediction");
  if (!prediction.is_object()) r.fail("prediction", "expected an object, got " + json::describe(prediction));
  c.prediction = nlohmann::ordered_json(prediction);
  const nlohmann::json& profile = r.raw("profile");
  if (!profile.is_object()) r.fail("profile", "expected an object, got " + json::describe(profile));
  c.profile = nlohmann::ordered_json(profile);
  r.allow_text("source");
  r.allow_text("notes");
  r.finish();

  // The plan against the model, with errors at the Megatron key that holds the value.
  PlanContext context;
  context.num_gpus = world;
  context.gpus_per_node = c.gpus_per_node;
  context.allow_cross_node_tp = true;  // the export already checked placement
  try {
    resolve_and_check_plan(c.plan, c.model, context, file, "$");
  } catch (const InputError& e) {
    std::string path = e.json_path();
    const std::string key = path.rfind("$.", 0) == 0 ? path.substr(2) : path;
    auto it = megatron_paths().find(key);
    if (it != megatron_paths().end()) path = it->second;
    throw InputError(file, path, e.message());
  }

  // What this runtime cannot run, said up front rather than half-way.
  if (c.plan.offload_optimizer) {
    throw InputError(file, "$.training.offload_optimizer",
                     "strata run keeps the optimizer on the device; optimizer offload is costed by "
                     "`strata simulate` and exported for DeepSpeed, but not run here: set it to false");
  }
  if (c.model.vocab_size % c.plan.tp != 0) {
    throw InputError(file, "$.model.vocab_size",
                     fmt::format("vocab_size {} must be divisible by tensor_model_parallel_size {} "
                                 "(the vocabulary-parallel embedding splits it evenly; Megatron pads it "
                                 "to a multiple of 128 * tp)",
                                 c.model.vocab_size, c.plan.tp));
  }
  const std::int64_t tokens = static_cast<std::int64_t>(c.model.seq_length) * c.plan.micro_batch_size;
  if (c.plan.sequence_parallel && tokens % c.plan.tp != 0) {
    throw InputError(file, "$.parallel.sequence_parallel",
                     fmt::format("sequence parallelism splits the {} tokens of a micro-batch "
                                 "(seq_length * micro_batch_size) over tensor_model_parallel_size {}: "
                                 "they must divide evenly",
                                 tokens, c.plan.tp));
  }
  return c;
}

RunConfig load_run_config(const std::string& path) {
  return read_run_config(json::parse_file(path), path);
}

}  // namespace strata::rt
