// `strata export`: a simulated plan as the files that launch it for real.
//
//   strata-run.json    our runtime's config (`strata run`): model, plan in
//                      Megatron-LM's snake_case names, rank map, steps, seed, the
//                      prediction and the profile it came from (docs/formats.md)
//   megatron-args.sh   the Megatron-LM flags of the same run (pretrain_gpt.py)
//   deepspeed.json     the DeepSpeed config, when the plan maps to DeepSpeed
//   launch.slurm       sbatch script: srun, one task per GPU, `strata run`
//   launch-mpirun.sh   the same under OpenMPI's mpirun, with the settings
//                      docs/runtime.md explains
//   prediction.json    the simulator's result.json for the plan
//
// Export is pure: it returns the files' contents; the command writes them as
// one OutputSet (all or nothing).
#pragma once

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "plan/run_spec.h"
#include "sim/scenario.h"
#include "sim/simulate.h"

namespace strata::sim {

struct ExportOptions {
  RunTraining training;              // steps, warm-up, seed, constant lr, Adam (Megatron's defaults)
  std::string backend;               // "cpu" | "cuda"; empty: the profile's device backend
  double timeout_s = 20.0;           // longest wait on a peer before every rank stops
  bool force = false;                // export a plan that does not fit in memory
  std::string command_line;          // recorded as the files' source
};

struct ExportFile {
  std::string name;     // file name inside the output directory
  std::string content;
  bool executable = false;
};

struct ExportResult {
  std::vector<ExportFile> files;
  std::vector<std::string> notes;  // what does not map, and why (printed by the command)
};

// One Megatron-LM command-line flag, with its value ("" for a switch).
struct MegatronFlag {
  std::string flag;
  std::string value;
  bool operator==(const MegatronFlag&) const = default;
};

// The Megatron-LM flags for the model and plan (megatron/training/arguments.py),
// in groups: model shape, parallelism, batch, recompute, precision. Notes say
// what Megatron-LM cannot express (a GPipe schedule, ALiBi) and what stands in.
std::vector<MegatronFlag> megatron_flags(const ModelSpec& model, const PlanSpec& plan,
                                         std::vector<std::string>* notes = nullptr);

// Why the plan does not map to DeepSpeed (its config cannot express it), or
// nullopt when it does.
std::optional<std::string> deepspeed_unsupported(const PlanSpec& plan);
// The dtype deepspeed.json accumulates a half-precision plan's gradients in: the
// plan's where DeepSpeed's engine allows it, else the one it requires (export.cc).
DType deepspeed_grad_accum_dtype(const PlanSpec& plan);
// The DeepSpeed config; requires !deepspeed_unsupported(plan).
nlohmann::ordered_json deepspeed_config(const PlanSpec& plan, const ExportOptions& options);

// strata-run.json for the scenario and its simulated result.
nlohmann::ordered_json run_config_json(const Scenario& scenario, const SimulationResult& result,
                                       const ExportOptions& options);

// Why the plan does not fit (which stage, by how much, what takes the memory),
// or nullopt when every stage fits.
std::optional<std::string> does_not_fit(const Scenario& scenario, const SimulationResult& result);
std::optional<std::string> does_not_fit(const Scenario& scenario, const MemoryReport& memory);

// Every file: for a model strata run does not take (plan/run_spec.h run_refusal)
// those of export_megatron_only with the prediction. Throws InputError (the
// plan's file) when the plan does not fit in memory and options.force is false.
ExportResult export_plan(const Scenario& scenario, const SimulationResult& result, const ExportOptions& options);

// The files of a plan `strata run` cannot take yet (run_refusal: an MoE model or
// one with its own kv_channels): megatron-args.sh (and for a dense model
// deepspeed.json), checked against the memory model's report (InputError when it
// does not fit and options.force is false), and the simulator's prediction.json
// when `prediction` is given (null: a plan the simulator does not take), with
// notes saying why the other files are not written.
ExportResult export_megatron_only(const Scenario& scenario, const MemoryReport& memory, const ExportOptions& options,
                                  const SimulationResult* prediction = nullptr);

// The scenario of plan `rank` of a sweep (sweep.json, schema "strata-sweep/1":
// {"request": {"model", "cluster", "profile"}, "plans": [{"rank", "plan", "result"}]}).
// Throws InputError naming the sweep file and JSON path.
Scenario scenario_from_sweep(const std::string& sweep_file, int rank, bool allow_cross_node_tp);

}  // namespace strata::sim
