#include "gui/model/plan_memory.h"

#include "calib/model/profile.h"
#include "core/error.h"
#include "sim/scenario.h"
#include "sim/spec/model_spec.h"
#include "sim/spec/plan_spec.h"
#include "topologies/cluster_spec.h"

namespace strata::gui {
namespace {

std::string request_string(const SweepData& sweep, const char* key) {
  if (!sweep.request.is_object()) return "";
  auto it = sweep.request.find(key);
  return it != sweep.request.end() && it->is_string() ? it->get<std::string>() : "";
}

}  // namespace

MemoryReport memory_for_sweep_plan(const SweepData& sweep, const SweepRow& row) {
  const std::string model_name = request_string(sweep, "model");
  const std::string cluster_name = request_string(sweep, "cluster");
  if (model_name.empty() || cluster_name.empty()) {
    throw InputError(sweep.file, "$.request",
                     "the per-stage memory needs the sweep's model and cluster: open the "
                     "sweep.json written beside sweep.csv");
  }
  const ModelSpec model = load_model_spec(model_name);
  const ClusterSpec cluster = load_cluster_spec(cluster_name);
  const std::string profile_name = request_string(sweep, "profile");
  const Profile profile = load_profile(profile_name.empty() ? cluster.profile : profile_name);
  PlanSpec plan = read_plan_spec(row.plan, sweep.file);
  check_plan(plan, model, cluster, /*allow_cross_node_tp=*/true, sweep.file);
  return memory_report(model, plan, profile);
}

}  // namespace strata::gui
