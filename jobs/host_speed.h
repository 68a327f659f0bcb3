// How fast this host runs the cpu backend now, so that `validate --quick` can
// tell a model error from a host whose speed changed under the measurement.
// On this project's CI VM the same loop measured the first five plans within 4%
// of the prediction and the next five 45-68% slower than predicted, with the
// load average unchanged (1.5 before, 1.4 after): the VM, not the model, had
// slowed. A probe between runs sees that; the load average does not.
#pragma once

namespace strata::jobs {

// Seconds one cpu rank (one compute thread) takes for a 512x512x512 fp32 GEMM,
// operands rotating through the calibration's working set, timed as calibration
// times GEMMs (calib/bench/gemm_bench.h): the median of 9 samples of >= 5 ms.
// About 0.1 s of work.
double probe_gemm_seconds();

// A run's host speed relative to the reference probe, from the probes taken just
// before and just after it: the one further from the reference (1 = unchanged,
// 0.7 = the host ran the probe 1/0.7 times slower).
double host_speed_during(double reference_s, double before_s, double after_s);

// Whether a run's host speed is close enough to the reference for its step time
// to test the model: within 10% (fifteen probes in one process on this
// project's idle 2-core host spread +-5%: docs/validation.md).
bool host_speed_steady(double speed);

}  // namespace strata::jobs
