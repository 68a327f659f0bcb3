// A scenario: the model, plan, cluster and device profile one prediction is for,
// read and checked against each other. The one loader every front-end uses
// (simulate, sweep, export, validate, the GUI): a shipped name or a path for each
// input, the cluster's profile unless one is named (its errors at the cluster's
// $.profile), the plan checked against model and cluster.
#pragma once

#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "costmodel/profile.h"
#include "plan/model_spec.h"
#include "plan/plan_spec.h"
#include "topologies/cluster_spec.h"

namespace strata {

struct ScenarioArgs {
  std::string model;    // path or shipped name
  std::string plan;     // path or shipped name
  std::string cluster;  // path or shipped name
  std::string profile;  // overrides the cluster's profile when not empty
  bool allow_cross_node_tp = false;
  int seq_length = 0;  // > 0: replaces the model's sequence length (--seq-length)
  // Not empty: replaces the plan's pipeline schedule (--schedule); any but
  // interleaved-1f1b also sets vpp 1.
  std::string schedule;
  // > 0: replaces an MoE plan's moe_router_imbalance (--moe-router-imbalance, a
  // what-if); an error for a dense model.
  double moe_router_imbalance = 0.0;
};

struct Scenario {
  ModelSpec model;
  PlanSpec plan;
  ClusterSpec cluster;
  Profile profile;
  std::string model_file;
  std::string plan_file;
  std::string cluster_file;
};

// Loads the four inputs and checks the plan against the model and the cluster.
// Throws InputError naming the file and JSON path at fault.
Scenario load_scenario(const ScenarioArgs& args);

// The model, cluster and profile of a scenario, without a plan (a sweep's inputs,
// or a sweep's row before its plan is read).
Scenario load_scenario_inputs(const std::string& model, const std::string& cluster, const std::string& profile);

// The profile named, else the cluster's: an error in the cluster's profile file
// is reported there, a name the cluster gives that does not resolve at the
// cluster's $.profile.
Profile load_scenario_profile(const ClusterSpec& cluster, const std::string& cluster_file,
                              const std::string& profile);

// Reads the scenario's plan from `doc` (at `path` of `file`) and checks it
// against the scenario's model and cluster, and that the framework it names
// exists and can run it (costmodel/framework_profile.h).
void read_scenario_plan(Scenario& s, const nlohmann::json& doc, const std::string& file,
                        const std::string& path, bool allow_cross_node_tp);

// Why the event simulator cannot simulate a plan of the model yet, or nothing:
// an MoE plan with ZeRO-3 (at $.zero_stage) or with hybrid sharding (at
// $.zero_shard_size). The message says what it does model. The sweep skips
// such plans as invalid.
std::optional<InputError> simulation_refusal(const ModelSpec& model, const PlanSpec& plan,
                                             const std::string& plan_file);
std::optional<InputError> simulation_refusal(const Scenario& s);
// Throws simulation_refusal's error (exit 2) when there is one.
void require_simulated_model(const Scenario& s);

// The inputs echoed into outputs.
nlohmann::ordered_json inputs_json(const Scenario& s);

}  // namespace strata
