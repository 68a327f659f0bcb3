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
  const ModelSpec& model = inputs.model;
  const ClusterSpec& cluster = inputs.cluster;
  const Profile& profile = inputs.profile;
  const std::string profile_name = a.profile.empty() ? cluster.profile : a.profile;
  const std::optional<DType> dtype = parse_dtype(a.dtype);
  if (!dtype) throw InputError("", "dtype", "expected bf16, fp16 or fp32, got \"" + a.dtype + "\"");

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
  options.shard_count = kSweepChunks;

  sim::SweepResult merged;
  for (int shard = 0; shard < kSweepChunks; ++shard) {
    report_progress(progress, shard, kSweepChunks, "sweep");
    options.shard_index = shard;
    // Worker threads report here; a false answer stops the chunk (run_sweep
    // throws Cancelled).
    options.progress = [&](std::int64_t done, std::int64_t total, std::string_view what) {
      return !progress || progress(shard * total + done, kSweepChunks * total, what);
    };
    sim::SweepResult part = sim::run_sweep(model, simulator, space, options);
    if (shard == 0) {
      merged = std::move(part);
      continue;
    }
    for (std::size_t i = 0; i < part.plans.size(); ++i) {
      if (part.plans[i].simulated) merged.plans[i] = std::move(part.plans[i]);
    }
    merged.counts.simulated += part.counts.simulated;
  }
  report_progress(progress, kSweepChunks, kSweepChunks, "sweep");
  options.shard_index = 0;
  options.shard_count = 1;
  options.progress = nullptr;
  sim::rank_sweep(merged, model, simulator, options);

  // The request as `strata sweep` records it (cli/cmd_sweep.cc, request_json).
  nlohmann::ordered_json request;
  request["model"] = a.model;
  request["cluster"] = a.cluster;
  request["profile"] = profile_name;
  request["global_batch_size"] = space.global_batch_size;
  request["seq_length"] = model.seq_length;
  request["dtype"] = a.dtype;
  request["allow_cross_node_tp"] = a.allow_cross_node_tp;
  request["constraints"] = sim::to_json(space.constraints);
  request["model_spec"] = to_json(model);
  request["cluster_spec"] = to_json(cluster);

  SweepOutput out;
  out.sweep_csv = sim::sweep_csv(merged);
  const nlohmann::ordered_json doc = sim::sweep_json(merged, request);
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
