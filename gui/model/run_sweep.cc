#include "gui/model/run_sweep.h"

#include <algorithm>
#include <thread>

#include "costmodel/profile.h"
#include "core/atomic_file.h"
#include "core/data_paths.h"
#include "core/dtype.h"
#include "core/error.h"
#include "core/json_reader.h"
#include "sim/scenario.h"
#include "sim/simulate.h"
#include "sweep/sweep.h"
#include "sweep/sweep_output.h"

namespace strata::gui {

SweepOutput run_sweep(const SweepRequest& a, const ProgressFn& progress) {
  const Scenario inputs = load_scenario_inputs(a.model, a.cluster, a.profile);
  require_simulated_model(inputs);
  const ModelSpec& model = inputs.model;
  const ClusterSpec& cluster = inputs.cluster;
  const Profile& profile = inputs.profile;
  const std::optional<DType> dtype = parse_dtype(a.dtype);
  if (!dtype || (*dtype != DType::kBf16 && *dtype != DType::kFp16)) {
    throw InputError("", "dtype", "expected bf16 or fp16 (strata sweep's --dtype), got \"" + a.dtype + "\"");
  }

  sim::PlanSpaceRequest space;
  space.global_batch_size = a.global_batch_size > 0
                                ? a.global_batch_size
                                : sim::default_global_batch(model.seq_length, cluster.num_gpus());
  space.allow_cross_node_tp = a.allow_cross_node_tp;
  space.dtype = *dtype;

  sim::Simulator simulator(cluster, profile);
  sim::SweepOptions options;
  options.threads = a.threads > 0 ? a.threads
                                  : std::max(1, static_cast<int>(std::thread::hardware_concurrency()));
  options.top_k = a.top;
  options.full_top = a.full_top;
  // Worker threads report here; a false answer stops the sweep (run_sweep
  // throws Cancelled within a plan's simulation).
  options.progress = progress;
  sim::SweepResult sweep = sim::run_sweep(model, simulator, space, options);
  options.progress = nullptr;
  sim::rank_sweep(sweep, model, simulator, options);

  SweepOutput out;
  out.sweep_csv = sim::sweep_csv(sweep);
  const nlohmann::ordered_json doc =
      sim::sweep_json(sweep, sim::sweep_request_json(a.model, a.cluster, a.profile, model, cluster, space));
  out.sweep_json = doc.dump(2) + "\n";
  out.sweep = read_sweep_json_value(nlohmann::json::parse(out.sweep_json),
                                    "sweep of " + model.name + " on " + cluster.name);
  return out;
}

void save_sweep(const SweepOutput& output, const std::string& dir) {
  OutputSet out;
  out.add(dir + "/sweep.csv", output.sweep_csv);
  out.add(dir + "/sweep.json", output.sweep_json);
  out.commit();
}

}  // namespace strata::gui
