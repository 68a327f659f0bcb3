// What `strata run` executes: a strata-run.json (plan/run_spec.h, the schema
// `strata export` writes) in the runtime's terms, with what this runtime cannot
// run refused up front.
#pragma once

#include <chrono>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "plan/model_spec.h"
#include "plan/plan_spec.h"
#include "plan/run_spec.h"
#include "runtime/device/backend.h"
#include "runtime/device/device.h"

namespace strata::rt {

struct RunConfig {
  ModelSpec model;
  PlanSpec plan;                 // dp resolved: tp * pp * dp is the world size
  RunTraining training;          // steps, warm-up, seed, Adam
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

// The device's Adam update of the run's training settings.
AdamParams adam_params(const RunTraining& training);

// Reads a strata-run.json document strictly (read_run_spec), then refuses what
// this runtime cannot run (optimizer offload; a vocabulary or token count that
// tensor parallelism cannot split evenly) with InputError at the key at fault.
RunConfig read_run_config(const nlohmann::json& doc, const std::string& file);
// Reads the file at path.
RunConfig load_run_config(const std::string& path);

}  // namespace strata::rt
