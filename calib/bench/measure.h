// How every calibration microbenchmark times its work, as nccl-tests and careful
// GPU benchmarking do: warm-up calls first (caches, clocks, lazy library
// set-up), then repeated samples between device events, each sample long enough
// for the timer (many calls when one is short), and the median over samples with
// the spread reported beside it.
#pragma once

#include <functional>
#include <vector>

#include "runtime/device/device.h"

namespace strata::calib {

struct TimingOptions {
  int warmup = 2;               // untimed calls before the first sample
  int repeats = 7;              // timed samples; the median is reported
  double min_sample_s = 2e-3;   // calls per sample are raised until a sample is this long
  int max_calls_per_sample = 1000;
  // GEMMs only: seconds of the largest shape run back to back before the first
  // shape is timed, and before each shape. A GPU at rest boosts its clock for a
  // short burst; a training step keeps every GPU power-limited at a lower,
  // sustained clock (on an H200, 698.6 sustained vs 828.0 burst TFLOP/s:
  // stas00/ml-engineering's MSMF and MAMF, benchmarks/README.md). Measuring after
  // a soak gives the sustained rate. 0 on cpus, whose clocks this does not model.
  double soak_s = 0.0;
  double keep_hot_s = 0.0;
};

// TimingOptions for `--quick` (3 samples of >= 0.5 ms) and for full runs.
TimingOptions quick_timing();
TimingOptions full_timing();

struct Timing {
  double median_s = 0.0;        // per call
  double spread = 0.0;          // (third quartile - first quartile) / median of the samples
  int calls_per_sample = 1;
};

// Median and relative interquartile spread of per-call sample times.
// Throws InternalError on an empty list.
Timing summarize_samples(std::vector<double> per_call_s, int calls_per_sample);

// Calls per sample so that a sample of calls lasting `probe_s` each reaches
// options.min_sample_s (1 .. max_calls_per_sample).
int calls_for(double probe_s, const TimingOptions& options);

// Times `op` on `device`: warm-up, a probe call to choose calls per sample, then
// the samples, each bracketed by device events (device time, not host time).
Timing time_on_device(rt::Device& device, const std::function<void()>& op,
                      const TimingOptions& options);

}  // namespace strata::calib
