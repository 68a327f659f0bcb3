#include "tests/loaders/loaders.h"

#include <stdexcept>

#include "core/json_reader.h"
#include "costmodel/framework_profile.h"
#include "costmodel/profile.h"
#include "importers/calculon.h"
#include "jobs/run_validation.h"
#include "plan/model_spec.h"
#include "plan/plan_spec.h"
#include "runtime/executor/run_config.h"
#include "sim/scenario.h"
#include "sweep/constraints.h"
#include "topologies/cluster_spec.h"
#include "topologies/topology.h"

namespace strata::testing {
namespace {

// model.json, then its echo into every output.
void load_model(const nlohmann::json& doc, const std::string& file) {
  (void)to_json(read_model_spec(doc, file)).dump();
}

// plan.json as every front-end reads it (read_scenario_plan): its keys, its
// framework, its check against a model and a cluster. The scenario is the
// README's Llama-3 70B on 64 H100, so the shipped 64-GPU plan is accepted and its
// mutations reach the checks that need a real layout.
void load_plan(const nlohmann::json& doc, const std::string& file) {
  static const Scenario inputs = load_scenario_inputs("llama3-70b", "dgx-h100-8node", "");
  Scenario s = inputs;
  read_scenario_plan(s, doc, file, "$", false);
  (void)to_json(s.plan).dump();
}

// Building the graph of 512 DGX H100 nodes (4,096 GPUs) takes 0.5 s under the
// sanitizers; larger accepted clusters are read but not built, so that no single
// input eats a 30 s fuzz run. The unit tests and benchmarks build the large presets.
constexpr int kMaxBuiltGpus = 4096;

// cluster.json, then the graph every command builds from it (Topology::build
// refuses what it cannot build with InputError too).
void load_cluster(const nlohmann::json& doc, const std::string& file) {
  const ClusterSpec cluster = read_cluster_spec(doc, file);
  (void)to_json(cluster).dump();
  if (cluster.num_gpus() <= kMaxBuiltGpus) (void)topo::Topology::build(cluster);
}

void load_device_profile(const nlohmann::json& doc, const std::string& file) { (void)read_profile(doc, file); }

void load_framework_profile(const nlohmann::json& doc, const std::string& file) {
  (void)read_framework_profile(doc, file);
}

// strata sweep --constraints FILE: read, applied to a plan, echoed into sweep.json.
void load_constraints(const nlohmann::json& doc, const std::string& file) {
  const std::vector<sim::Constraint> constraints = sim::read_constraints(doc, file);
  (void)sim::satisfies(PlanSpec{}, constraints);
  (void)sim::to_json(constraints).dump();
}

// strata-run.json as `strata run` reads it: strictly (read_run_spec), then what
// this runtime cannot run.
void load_run_config(const nlohmann::json& doc, const std::string& file) { (void)rt::read_run_config(doc, file); }

// measured.json as `strata validate --run DIR` reads it: against the
// prediction.json `strata export` wrote for the same plan (beside this file).
void load_measured(const nlohmann::json& doc, const std::string& file) {
  static const std::string prediction_file = STRATA_LOADERS_DIR "/prediction.json";
  static const nlohmann::json prediction = json::parse_file(prediction_file);
  (void)jobs::compare_run_documents(prediction, prediction_file, doc, file);
}

// strata import calculon: one document holding Calculon's three files (its
// members application, execution and system), each read as the command reads
// its file, then imported (matching the shipped profiles and node presets).
void load_calculon(const nlohmann::json& doc, const std::string& file) {
  json::ObjectReader r(doc, file);
  const auto application = importers::read_calculon_application(r.raw("application"), file, "application");
  const auto execution = importers::read_calculon_execution(r.raw("execution"), file, "execution");
  const auto system = importers::read_calculon_system(r.raw("system"), file, "system");
  r.finish();
  (void)importers::import_calculon(application, execution, system, {file, file, file}, {}).model.dump();
}

}  // namespace

const std::vector<Loader>& loaders() {
  static const std::vector<Loader> all = {
      {"model", "model.json", load_model},
      {"plan", "plan.json", load_plan},
      {"cluster", "cluster.json", load_cluster},
      {"device_profile", "profile.json", load_device_profile},
      {"framework_profile", "framework.json", load_framework_profile},
      {"constraints", "constraints.json", load_constraints},
      {"run_config", "strata-run.json", load_run_config},
      {"measured", "measured.json", load_measured},
      {"calculon", "calculon.json", load_calculon},
  };
  return all;
}

const Loader& loader(const std::string& name) {
  for (const Loader& l : loaders()) {
    if (l.name == name) return l;
  }
  throw std::out_of_range("no loader named " + name);
}

}  // namespace strata::testing
