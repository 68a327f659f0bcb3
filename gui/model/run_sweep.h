// Running `strata sweep` from the GUI (Run ▸ Sweep…): the same library calls
// (sweep/sweep.h, sweep/sweep_output.h) with the same request, in the
// background with progress and cancel (the progress contract of core/progress.h:
// a false answer stops the sweep within a plan). Qt-free.
#pragma once

#include <string>

#include "gui/model/load_progress.h"
#include "gui/model/sweep_data.h"

namespace strata::gui {

struct SweepRequest {
  std::string model;    // path or shipped name
  std::string cluster;  // path or shipped name
  std::string profile;  // "" : the cluster's
  int global_batch_size = 0;  // 0: strata sweep's default (4 Mi tokens, a multiple of the GPUs)
  std::string dtype = "bf16";
  bool allow_cross_node_tp = false;
  int threads = 0;  // 0: every hardware thread
  int top = 10;     // plans explained
  int full_top = 3; // best plans re-simulated at full fidelity
};

struct SweepOutput {
  SweepData sweep;        // as the table shows it (read back from sweep_json)
  std::string sweep_csv;  // the files `strata sweep --out DIR` writes
  std::string sweep_json;
};

// Loads the request's model, cluster and profile, sweeps, ranks and explains.
// progress (may be empty) gets the plans simulated of those that fit; returning
// false stops the sweep with Cancelled. Throws InputError naming the
// file and JSON path of a bad input.
SweepOutput run_sweep(const SweepRequest& request, const ProgressFn& progress);

// Writes DIR/sweep.csv and DIR/sweep.json (both or neither); the sweep table then
// reads the json back from there. Throws InputError when DIR is not writable.
void save_sweep(const SweepOutput& output, const std::string& dir);

}  // namespace strata::gui
