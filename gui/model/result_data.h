// What the GUI shows of result.json (`strata simulate --out DIR`) and memory.json
// (`strata memory --json`): the headline figures, the per-stage memory and the
// link utilization. Keys are documented in docs/formats.md; values are checked
// for type and range, and keys the GUI does not show are allowed, so a newer
// writer's files still open.
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "gui/model/step_distribution.h"
#include "plan/memory_model.h"

namespace strata::gui {

// One directed link of the cluster graph during the simulated step.
struct LinkUse {
  std::string from;  // vertex label: "node0/gpu3", "node0/nvswitch0", "leaf2", "spine0"
  std::string to;
  std::string kind;  // "nvlink", "pcie", "nic", "fabric", ... as the writer names it
  double bandwidth_bytes_per_s = 0.0;
  double bytes = 0.0;        // moved over the link in one step
  double utilization = 0.0;  // busy share of the step, in [0, 1]
};

struct ExposedComm {
  double tp_s = 0.0, pp_s = 0.0, dp_s = 0.0, zero_s = 0.0;
  // Present only for a plan that has them (cp > 1, an MoE model); -1 when absent.
  double cp_s = -1.0, ep_s = -1.0;
};

struct ResultData {
  std::string file;
  double step_time_s = 0.0;
  double mfu = 0.0, hfu = 0.0;
  double tflops_per_gpu = 0.0, hw_tflops_per_gpu = 0.0;
  double tokens_per_s = 0.0;
  double bubble_ratio = 0.0, bubble_ratio_analytic = 0.0;
  std::vector<double> bubble_ratio_per_stage;
  ExposedComm exposed;
  double peer_wait_s = 0.0;  // idle waiting for a slower rank of the stage (0 when absent)
  double compute_s = 0.0;
  int num_gpus = 0;
  std::int64_t events = 0;
  std::string fidelity;  // "full" | "folded" | "" when absent
  std::optional<MemoryReport> memory;
  std::vector<LinkUse> links;
  std::optional<StepDistributionData> distribution;  // `--samples`
  std::optional<WhatIfData> what_if;                 // `--slow-rank`, `--slow-node`, `--slow-nic`
  nlohmann::json inputs;  // model, plan, cluster, profile (null when absent)
};

// Reads the `memory` object of memory.json or result.json at json path `path`.
// Throws InputError naming file and the JSON path of a missing or wrong value.
MemoryReport read_memory_object(const nlohmann::json& memory, const std::string& file,
                                const std::string& path);

// Reads a result object (result.json, or a sweep.json plan's `result`); only
// step_time_s is required. Throws InputError as above.
ResultData read_result_object(const nlohmann::json& result, const std::string& file,
                              const std::string& path);

// Reads result.json; requires "schema": "strata-result/1".
ResultData read_result_file(const std::string& path);

// Reads memory.json ({"inputs": ..., "memory": ...}).
struct MemoryFile {
  std::string file;
  MemoryReport memory;
  nlohmann::json inputs;
};
MemoryFile read_memory_file(const std::string& path);

// "gpt3-175b · tp 8 pp 16 dp 8" from an `inputs` object; "" when it lacks them.
std::string describe_inputs(const nlohmann::json& inputs);

}  // namespace strata::gui
