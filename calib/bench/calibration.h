// A whole calibration: every microbenchmark on this node, fitted into a device
// profile (costmodel), and the drift check of an existing profile.
//
// Every rank runs the device benchmarks at once, as ranks share a node in
// training (memory bandwidth, caches, power); rank 0's measurements make the
// profile. Collectives run over the ranks of the launch.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "costmodel/cost_model.h"
#include "costmodel/profile.h"
#include "runtime/comm/communicator.h"
#include "core/progress.h"
#include "runtime/device/device.h"

namespace strata::calib {

// Progress (core/progress.h): done of total units finished; what: the current
// benchmark ("gemm 512x512x512"). Calibration runs on every rank at once: the
// command reports one rank's and always answers true.
using strata::ProgressFn;

struct CalibrationOptions {
  bool quick = false;
  // Shapes from the models a sweep will try (derived by the caller), measured
  // besides the interpolation grid; those over the mode's budget are skipped
  // and listed in the notes.
  std::vector<GemmQuery> model_gemms;
  std::vector<AttentionQuery> model_attention;
  // The datasheet profile of this device (cuda): its figures and sources are
  // kept as fall-backs. Required for cuda (peak FLOP/s cannot be measured
  // without a reference); ignored on cpu, whose peaks are measured.
  std::optional<Profile> base;
  int ranks_per_node = 1;
  std::string command_line;
  std::string strata_version;
};

struct CalibrationReport {
  Profile profile;                  // complete on rank 0 (fit quality and provenance included)
  std::vector<std::string> notes;   // what was skipped and why
  std::int64_t gemms = 0, kernels = 0, attention = 0, copies = 0, collective_points = 0;
  std::optional<RankSpread> rank_spread;  // with two ranks or more (also in the profile)
};

// Runs the calibration. Collective over world (every rank calls it). Throws
// InputError when cuda runs without a base profile, InternalError or CommError
// when a benchmark fails or gives a wrong result.
CalibrationReport run_calibration(rt::Device& device, rt::Communicator& world,
                                  const CalibrationOptions& options, const ProgressFn& progress);

// One re-measured sample of a profile's model.
struct DriftRow {
  std::string section;   // "gemm", "memory_bound", "collectives", ...
  std::string what;      // "gemm 1024x1024x1024 fp32", "all_reduce 2 ranks 1048576 B"
  double predicted_s = 0.0;
  double measured_s = 0.0;
  double drift() const { return measured_s / predicted_s - 1.0; }
};

// Re-measures a sample of what the profile measured (or, for a datasheet
// profile, a few shapes) and returns the rows (same on every rank of a
// collective's group; rank 0 has them all). Collective over world.
std::vector<DriftRow> check_drift(rt::Device& device, rt::Communicator& world,
                                  const CostModel& model, const CalibrationOptions& options,
                                  const ProgressFn& progress);

}  // namespace strata::calib
