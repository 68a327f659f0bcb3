// Goodput under failures: how long a training run takes when the job fails and
// restarts from its last checkpoint, and how often to checkpoint.
//
// The model (Daly 2006, "A higher order estimate of the optimum checkpoint
// interval for restart dumps", Future Generation Computer Systems 22(3)):
// failures of the whole job arrive as a Poisson process of mean time between
// failures M (a synchronous job fails when any of its N GPUs does: M = the
// per-GPU MTBF / N); every tau seconds of work the job writes a checkpoint
// taking delta; a failure loses the work since the last checkpoint and costs a
// restart of R (reschedule, reload), during which failures can strike too.
//   - Young (1974): the optimal interval tau = sqrt(2 delta M), first order.
//   - Daly (2006) eq. 37: tau = sqrt(2 delta M) [1 + sqrt(delta / 2M) / 3 +
//     (delta / 2M) / 9] - delta for delta < 2M, else M.
//   - Daly eq. 13: the expected wall time of T_s seconds of work is
//     M e^{R/M} (e^{(tau + delta)/M} - 1) T_s / tau.
// And the same process sampled (seeded, counter-based: the same seed gives the
// same runs everywhere), for the spread of the time to train and the interval
// that minimises its mean.
#pragma once

#include <cstdint>
#include <vector>

#include <nlohmann/json.hpp>

namespace strata::sim {

// Published fleet figures the defaults come from (Llama 3 Team, "The Llama 3 Herd
// of Models", arXiv 2407.21783, section 3.3): its 405B pre-training on 16,384
// H100 had 419 unexpected interruptions in a 54-day snapshot (466 in all, 47 of
// them planned), and checkpointed to Meta's Tectonic file system, which sustains
// 2 TB/s (7 TB/s peak) for the cluster.
inline constexpr double kLlama3UnexpectedInterruptions = 419.0;
inline constexpr double kLlama3SnapshotDays = 54.0;
inline constexpr double kLlama3Gpus = 16384.0;
inline constexpr double kTectonicSustainedBytesPerS = 2e12;
// A GPU's mean time between failures that takes a synchronous job down: 54 days
// x 24 h x 16,384 GPUs / 419 = 50,676 GPU-hours.
inline constexpr double kLlama3GpuMtbfHours =
    kLlama3SnapshotDays * 24.0 * kLlama3Gpus / kLlama3UnexpectedInterruptions;

struct FailureModel {
  double job_mtbf_s = 0.0;   // M: the whole job's mean time between failures
  double checkpoint_s = 0.0;  // delta: a checkpoint's time, the job stalled
  double restart_s = 0.0;     // R: from a failure to training again (reschedule, load)
  // An asynchronous checkpoint (Megatron-LM's --async-save, PyTorch DCP's
  // async_save): the job stalls delta to snapshot its state to host memory, then
  // trains while the snapshot is written for persist_s; a failure before the
  // write completes falls back to the checkpoint before. 0: synchronous (the
  // write is the stall).
  double persist_s = 0.0;
  // Planned interruptions (maintenance, firmware and driver upgrades, changes to
  // the training): one planned_interval_s of wall time after the job last came
  // back from one (the first that long after the start), 0 for none. The job
  // checkpoints where it is (delta, and asynchronously its write, persist_s),
  // stops and restarts (R): nothing is lost. A failure during that downtime is
  // mended in it (not counted).
  double planned_interval_s = 0.0;
};

double young_interval_s(const FailureModel& f);
double daly_interval_s(const FailureModel& f);

// Daly's expected wall time of work_s seconds of training, checkpointing every
// interval_s seconds of work (synchronous checkpoints: persist_s not counted).
double expected_wall_s(const FailureModel& f, double work_s, double interval_s);

// One sampled run's wall time and its parts: the work itself, checkpoints
// written, work lost to failures (redone), restarts (and the failures during them).
struct SampledRun {
  double wall_s = 0.0;
  double checkpoints_s = 0.0;
  double lost_s = 0.0;
  double restarts_s = 0.0;  // after failures
  double planned_s = 0.0;   // planned stops: their checkpoint and restart
  int failures = 0;
  int planned = 0;
};

// The wall time of work_s seconds of training in run `sample` of `seed`:
// failures drawn from an exponential of mean job_mtbf_s, a checkpoint after
// every interval_s of work (and none after the last piece). With persist_s a
// checkpoint counts only once written: a failure during the write loses the
// work since the one before, and a save waits for the previous write to finish.
// With planned_interval_s the planned stops come every that much wall time.
SampledRun sample_run(const FailureModel& f, double work_s, double interval_s, std::uint64_t seed, int sample);

struct GoodputEstimate {
  FailureModel failures;
  double work_s = 0.0;        // the training at speed, no failures, no checkpoints
  double step_s = 0.0;        // one step (the simulator's)
  double interval_s = 0.0;    // the interval used: Daly's (asynchronously at least the write), as whole steps
  int interval_steps = 0;     // Megatron-LM's --save-interval
  double young_s = 0.0, daly_s = 0.0;
  double expected_wall_s = 0.0;  // Daly's eq. 13 at interval_s
  // Sampled runs at interval_s: the wall time's mean, its 2.5% and 97.5%
  // quantiles, and the mean of each part.
  double mean_wall_s = 0.0, p025_wall_s = 0.0, p975_wall_s = 0.0;
  double mean_failures = 0.0, mean_checkpoints_s = 0.0, mean_lost_s = 0.0, mean_restarts_s = 0.0;
  double mean_planned = 0.0, mean_planned_s = 0.0;
  // The sampled optimum: the interval, in whole steps, whose sampled runs have
  // the least mean wall time among multiples of Daly's from 1/4 to 4 (the same
  // runs' failure draws for every interval: common random numbers).
  int best_interval_steps = 0;
  double best_mean_wall_s = 0.0;
  double goodput() const { return mean_wall_s > 0.0 ? work_s / mean_wall_s : 0.0; }
};

// Estimates the run: work_s of training in steps of step_s, `samples` sampled
// runs of `seed` (samples >= 1). interval_steps > 0 fixes the checkpoint
// interval instead of Daly's.
GoodputEstimate estimate_goodput(const FailureModel& f, double work_s, double step_s, int samples,
                                 std::uint64_t seed, int interval_steps = 0);

}  // namespace strata::sim
