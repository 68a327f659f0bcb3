// A scenario: the model, plan, cluster and device profile one prediction is for,
// read and checked against each other.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "calib/model/profile.h"
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

// Checks a plan against an already loaded model and cluster (used by sweeps).
void check_plan(PlanSpec& plan, const ModelSpec& model, const ClusterSpec& cluster,
                bool allow_cross_node_tp, const std::string& plan_file);

// The inputs echoed into outputs.
nlohmann::ordered_json inputs_json(const Scenario& s);

}  // namespace strata
