#include "kernel_test_util.h"

#include <algorithm>
#include <sstream>

namespace strata::rt::testing {

std::string case_name(const ::testing::TestParamInfo<BackendCase>& info) {
  return std::string(to_string(info.param.backend)) + "_" + to_string(info.param.dtype);
}

void PrintTo(const BackendCase& c, std::ostream* os) {
  *os << to_string(c.backend) << " " << to_string(c.dtype);
}

std::vector<BackendCase> all_cases() {
  return {{Backend::kCpu, DType::kFp32},
          {Backend::kCpu, DType::kBf16},
          {Backend::kCuda, DType::kFp32},
          {Backend::kCuda, DType::kBf16},
          {Backend::kCuda, DType::kFp16}};
}

double tolerance(DType stored) {
  switch (stored) {
    case DType::kBf16: return 2.0 * 0.0078125;    // 2 ulp at 1.0: 2 * 2^-7
    case DType::kFp16: return 4.0 * 0.0009765625; // 4 ulp at 1.0: 4 * 2^-10
    case DType::kFp32:
    case DType::kTf32: return 2e-5;               // ~170 ulp of 2^-23: fp32 sums of ~1000 terms
  }
  return 2e-5;
}

std::vector<float> random_values(std::int64_t n, std::uint64_t seed, float lo, float hi,
                                 DType dtype) {
  std::vector<float> v(static_cast<std::size_t>(n));
  for (std::int64_t i = 0; i < n; ++i) {
    v[static_cast<std::size_t>(i)] =
        round_to_dtype(random_uniform(seed, static_cast<std::uint64_t>(i), lo, hi), dtype);
  }
  return v;
}

::testing::AssertionResult all_close(const std::vector<float>& got,
                                     const std::vector<double>& want, double tol) {
  if (got.size() != want.size()) {
    return ::testing::AssertionFailure() << "size " << got.size() << " != " << want.size();
  }
  double sq = 0.0;
  for (double w : want) sq += w * w;
  const double rms = want.empty() ? 0.0 : std::sqrt(sq / static_cast<double>(want.size()));
  std::ostringstream failures;
  int bad = 0;
  double worst = 0.0;
  for (std::size_t i = 0; i < got.size(); ++i) {
    const double err = std::abs(static_cast<double>(got[i]) - want[i]);
    const double allowed = tol * (std::abs(want[i]) + rms);
    if (!(err <= allowed)) {  // also catches NaN
      if (bad < 5) failures << "\n  [" << i << "] got " << got[i] << " want " << want[i];
      ++bad;
      worst = std::max(worst, err / (std::abs(want[i]) + rms));
    }
  }
  if (bad == 0) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << bad << " of " << got.size()
                                       << " elements off by more than " << tol
                                       << " (relative; worst " << worst << ")" << failures.str();
}

void KernelTest::SetUp() {
  const BackendCase c = GetParam();
  if (!backend_compiled(c.backend)) {
    GTEST_SKIP() << "backend " << to_string(c.backend) << " is not in this build";
  }
  if (c.backend == Backend::kCuda && cuda_device_count() == 0) {
    GTEST_SKIP() << "no GPU: the CUDA runtime sees no device (cudaGetDeviceCount fails or "
                    "returns 0), so the cuda kernels cannot run here";
  }
  device_ = make_device(c.backend, 0);
  stored_ = device_->storage_dtype(c.dtype);
}

Tensor KernelTest::tensor(const std::vector<float>& values) {
  return tensor_of(GetParam().dtype, values);
}

Tensor KernelTest::tensor_of(DType requested, const std::vector<float>& values) {
  Tensor t = device_->allocate_tensor(static_cast<std::int64_t>(values.size()), requested);
  upload_fp32(*device_, values, t.view());
  return t;
}

Tensor KernelTest::zeros(std::int64_t n, DType requested) {
  Tensor t = device_->allocate_tensor(n, requested);
  device_->fill(t.view(), 0.0f);
  return t;
}

IndexTensor KernelTest::indices(const std::vector<std::int32_t>& values) {
  IndexTensor t = device_->allocate_indices(static_cast<std::int64_t>(values.size()));
  upload_indices(*device_, values, t.view());
  return t;
}

double finite_difference_error(const std::function<double(const std::vector<float>&)>& f,
                               const std::vector<float>& x, const std::vector<float>& gradient,
                               double h, std::uint64_t seed) {
  std::vector<float> plus = x;
  std::vector<float> minus = x;
  double analytic = 0.0;
  for (std::size_t i = 0; i < x.size(); ++i) {
    const float v = random_uniform(seed, i, -1.0f, 1.0f);
    plus[i] = static_cast<float>(x[i] + h * v);
    minus[i] = static_cast<float>(x[i] - h * v);
    analytic += static_cast<double>(gradient[i]) * v;
  }
  const double numeric = (f(plus) - f(minus)) / (2.0 * h);
  return std::abs(numeric - analytic) / std::max(1e-3, std::abs(analytic));
}

}  // namespace strata::rt::testing
