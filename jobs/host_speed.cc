#include "jobs/host_speed.h"

#include <cmath>

#include "calib/bench/gemm_bench.h"
#include "runtime/cpu/cpu_device.h"

namespace strata::jobs {

double probe_gemm_seconds() {
  rt::DeviceOptions options;
  options.cpu_threads = 1;  // as one of the two ranks runs
  const std::unique_ptr<rt::Device> device = rt::make_cpu_device(options);
  calib::TimingOptions timing;
  timing.warmup = 2;
  timing.repeats = 9;
  timing.min_sample_s = 5e-3;
  const std::vector<GemmQuery> shape = {{512, 512, 512, 1, DType::kFp32}};
  const std::vector<GemmPoint> points =
      calib::bench_gemms(*device, shape, timing, calib::gemm_working_set_bytes(device->info()), nullptr);
  return points.at(0).seconds;
}

double host_speed_during(double reference_s, double before_s, double after_s) {
  const double a = reference_s / before_s;
  const double b = reference_s / after_s;
  return std::abs(a - 1.0) >= std::abs(b - 1.0) ? a : b;
}

bool host_speed_steady(double speed) { return std::abs(speed - 1.0) <= 0.10; }

}  // namespace strata::jobs
