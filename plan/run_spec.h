// strata-run.json: the run `strata export` writes and `strata run` executes. One
// schema, one writer (to_json) and one reader (read_run_spec); docs/runtime.md
// ("strata-run.json") lists its keys. Parallel, batch and training keys use
// Megatron-LM's argument names in snake_case (tensor_model_parallel_size,
// micro_batch_size, recompute_granularity, ...), so the file reads like the
// Megatron launch it mirrors.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "plan/model_spec.h"
#include "plan/plan_spec.h"

namespace strata {

inline constexpr const char* kRunSpecSchema = "strata-run/1";

// Where one rank runs (informational: the launcher decides; `strata run` checks
// the world size and the rank's coordinates against it).
struct RankPlacement {
  int rank = 0;
  int node = 0;
  int local_rank = 0;  // GPU index on the node (cuda ordinal)
  int tp_rank = 0;
  int dp_rank = 0;
  int pp_rank = 0;
  bool operator==(const RankPlacement&) const = default;
};

// How the run trains: Megatron-LM's training arguments. Adam's are Megatron's
// defaults (--adam-beta1 0.9, --adam-beta2 0.999, --adam-eps 1e-8); the learning
// rate is constant.
struct RunTraining {
  int steps = 10;                // train_iters
  int timing_warmup_steps = 2;   // timing_warmup_iters: first steps left out of the median
  std::uint64_t seed = 1234;     // parameters and synthetic data
  double lr = 1e-3;
  double weight_decay = 0.0;
  double adam_beta1 = 0.9;
  double adam_beta2 = 0.999;
  double adam_eps = 1e-8;
  bool operator==(const RunTraining&) const = default;
};

struct RunSpec {
  std::string source = "strata export";  // who wrote the file
  ModelSpec model;
  PlanSpec plan;  // dp resolved: tp * pp * dp is the world size
  RunTraining training;
  std::string backend = "cpu";  // "cpu" | "cuda"
  double timeout_s = 20.0;      // longest wait on a peer before every rank stops
  int cpu_threads = 0;          // 0: cores / ranks on the node
  std::string cluster_name;
  int nodes = 1;
  int gpus_per_node = 1;
  std::vector<RankPlacement> rank_map;
  nlohmann::ordered_json prediction = nlohmann::ordered_json::object();  // summary, echoed by `strata run`
  nlohmann::ordered_json profile = nlohmann::ordered_json::object();     // name, kind, device, file
};

// What of a model and a resolved plan strata run does not run yet: the
// strata-run.json key at fault ("$.model.kv_channels": heads of their own size;
// for MoE layers the parts of the plan the runtime's MoE layer does not take:
// expert tensor parallelism, the flex (DeepEP) dispatcher, sinkhorn-type balancing, zero-bubble
// schedules, ZeRO-3, hybrid sharding) and why, or nothing. The runtime refuses
// such a plan up front; strata export writes no strata-run.json for it
// (Megatron-LM's flags instead).
struct RunRefusal {
  std::string json_path;
  std::string message;
};
std::optional<RunRefusal> run_refusal(const ModelSpec& model, const PlanSpec& plan);

// Every rank of the plan, numbered by its RankLayout, on nodes of gpus_per_node.
std::vector<RankPlacement> rank_placements(const PlanSpec& plan, int gpus_per_node);

nlohmann::ordered_json to_json(const RunSpec& spec);

// Reads a strata-run.json document strictly. Throws InputError naming file and
// the JSON path for unknown keys, wrong types and out-of-range values, a rank map
// that is not the plan's layout, and plans that contradict the model (with the
// Megatron key at fault).
RunSpec read_run_spec(const nlohmann::json& doc, const std::string& file);

}  // namespace strata
