// strata-run.json: what `strata run` executes. Written by `strata export`
// (sim/export.h), read here; the schema is documented in docs/runtime.md
// ("strata-run.json"). Parallel, batch and training keys use Megatron-LM's
// argument names in snake_case (tensor_model_parallel_size, micro_batch_size,
// recompute_granularity, ...), so the file reads like the Megatron launch it
// mirrors.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "runtime/backend.h"
#include "runtime/device.h"
#include "plan/model_spec.h"
#include "plan/plan_spec.h"

namespace strata::rt {

inline constexpr const char* kRunConfigSchema = "strata-run/1";

// Where one rank runs (informational: the launcher decides; `strata run` checks
// the world size and the rank's coordinates against it).
struct RankPlacement {
  int rank = 0;
  int node = 0;
  int local_rank = 0;  // GPU index on the node (cuda ordinal)
  int tp_rank = 0;
  int dp_rank = 0;
  int pp_rank = 0;
};

struct RunConfig {
  ModelSpec model;
  PlanSpec plan;                 // dp resolved: tp * pp * dp is the world size
  int steps = 10;                // train_iters
  int timing_warmup_steps = 1;   // first steps left out of the median step time
  std::uint64_t seed = 1234;     // parameters and synthetic data
  AdamParams adam;               // lr, adam_beta1/2, adam_eps, weight_decay
  Backend backend = Backend::kCpu;
  // Longest any single wait on a peer may take before every rank stops.
  std::chrono::milliseconds timeout{std::chrono::seconds(20)};
  int cpu_threads = 0;           // 0: cores / ranks on the node
  int gpus_per_node = 0;         // cluster's, for the plan check (0: world size)
  std::vector<RankPlacement> rank_map;
  nlohmann::ordered_json prediction = nlohmann::ordered_json::object();  // summary, echoed
  nlohmann::ordered_json profile = nlohmann::ordered_json::object();     // name, file, kind
  std::string file;              // where it was read from
};

// Reads a strata-run.json document strictly. Throws InputError naming file and
// the JSON path for unknown keys, wrong types, out-of-range values and plans
// that contradict the model (with the Megatron key at fault), and for what this
// runtime cannot run (optimizer offload; a vocabulary or token count that tensor
// parallelism cannot split evenly).
RunConfig read_run_config(const nlohmann::json& doc, const std::string& file);
// Reads the file at path.
RunConfig load_run_config(const std::string& path);

}  // namespace strata::rt
