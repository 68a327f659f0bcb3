// Shared fixture for the kernel tests: every test runs on each backend and dtype
// this machine can run (cpu always; cuda when a GPU is visible, else skipped with
// the reason), against plain reference loops in double precision.
#pragma once

#include <cmath>
#include <cstdint>
#include <functional>
#include <ostream>
#include <memory>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "core/error.h"
#include "runtime/device/backend.h"
#include "runtime/device/device.h"
#include "runtime/device/random.h"
#include "runtime/device/tensor_io.h"

namespace strata::rt::testing {

struct BackendCase {
  Backend backend;
  DType dtype;  // requested; the device stores storage_dtype(dtype)
};

std::string case_name(const ::testing::TestParamInfo<BackendCase>& info);
// "cpu bf16" in test listings instead of the parameter's bytes.
void PrintTo(const BackendCase& c, std::ostream* os);
// cpu fp32, cpu bf16 (stored as fp32), cuda fp32, cuda bf16, cuda fp16.
std::vector<BackendCase> all_cases();

// Relative tolerance of one result stored in dtype: a few units of rounding of
// that dtype (fp32 results also carry fp32 arithmetic against a double
// reference). bf16 has 8 significant bits, fp16 11, fp32 24 (IEEE 754 / bfloat16).
double tolerance(DType stored);

// Values in [lo, hi) from the counter-based generator, rounded to dtype.
std::vector<float> random_values(std::int64_t n, std::uint64_t seed, float lo, float hi,
                                 DType dtype);

// Every |got - want| <= tol * (|want| + rms(want)): relative, with the rms as
// the floor so that entries near zero after cancellation are judged on the
// scale of the whole result. Reports the first few failures.
::testing::AssertionResult all_close(const std::vector<float>& got,
                                     const std::vector<double>& want, double tol);

class KernelTest : public ::testing::TestWithParam<BackendCase> {
 protected:
  void SetUp() override;

  Device& dev() { return *device_; }
  DType stored() const { return stored_; }
  double tol() const { return tolerance(stored_); }

  // A tensor of the case's dtype holding values (already rounded by the caller
  // through random_values / round_to_dtype).
  Tensor tensor(const std::vector<float>& values);
  Tensor tensor_of(DType requested, const std::vector<float>& values);
  Tensor zeros(std::int64_t n, DType requested);
  IndexTensor indices(const std::vector<std::int32_t>& values);
  std::vector<float> get(const Tensor& t) { return download_fp32(*device_, t.view()); }

 private:
  std::unique_ptr<Device> device_;
  DType stored_ = DType::kFp32;
};

// Directional derivative check: for f: R^n -> R (evaluated on the device) and
// its analytic gradient g, compares (f(x + h v) - f(x - h v)) / 2h with g . v
// for a fixed random direction v. Returns the relative error.
double finite_difference_error(const std::function<double(const std::vector<float>&)>& f,
                               const std::vector<float>& x, const std::vector<float>& gradient,
                               double h, std::uint64_t seed);

}  // namespace strata::rt::testing
