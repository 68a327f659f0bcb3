#include "calib/bench/kernel_bench.h"

#include <cmath>
#include <cstring>
#include <set>

#include <fmt/format.h>

#include "core/error.h"
#include "runtime/device/tensor_io.h"

namespace strata::calib {
namespace {

constexpr std::int64_t kCols = 1024;  // row length of norm and softmax (a hidden size)

void check_finite(rt::Device& device, const rt::TensorView& v, const char* what) {
  const std::int64_t n = std::min<std::int64_t>(v.numel, 64);
  for (float x : rt::download_fp32(device, v.slice(v.numel - n, n))) {
    if (!std::isfinite(x)) throw InternalError(fmt::format("{} kernel produced {}", what, x));
  }
}

void check_equal(const std::vector<float>& got, const std::vector<float>& want, const char* what) {
  for (std::size_t i = 0; i < got.size(); ++i) {
    if (got[i] != want[i]) {
      throw InternalError(fmt::format("{} kernel: element {} is {}, expected {}", what, i, got[i], want[i]));
    }
  }
}

}  // namespace

double bytes_per_element(KernelKind kind, DType storage) {
  const double e = dtype_bytes(storage);
  switch (kind) {
    case KernelKind::kNorm:
    case KernelKind::kSoftmax:
    case KernelKind::kActivation:
    case KernelKind::kCopy: return 2.0 * e;
    case KernelKind::kResidual:
    case KernelKind::kElementwise: return 3.0 * e;
    case KernelKind::kAdam: return 7.0 * 4.0;
  }
  return 2.0 * e;
}

std::int64_t kernel_rows(KernelKind kind, DType storage, double target_bytes) {
  return std::max<std::int64_t>(
      1, static_cast<std::int64_t>(std::llround(target_bytes / bytes_per_element(kind, storage) / kCols)));
}

std::map<KernelKind, std::vector<SizePoint>> bench_memory_bound(
    rt::Device& device, const std::vector<double>& sizes_bytes, const TimingOptions& timing,
    const std::function<void(std::size_t)>& progress) {
  std::map<KernelKind, std::vector<SizePoint>> out;
  const DType act = device.storage_dtype(DType::kBf16);
  std::size_t step = 0;
  std::uint64_t seed = 1000;
  for (KernelKind kind : all_kernel_kinds()) {
    const DType storage = kind == KernelKind::kAdam ? DType::kFp32 : act;
    std::set<std::int64_t> measured_rows;
    for (double target : sizes_bytes) {
      const std::int64_t rows = kernel_rows(kind, storage, target);
      if (!measured_rows.insert(rows).second) {
        // Two targets rounding to the same whole rows (Adam moves 28 bytes per
        // element, so every target under 1.5 rows is one row): one measurement
        // of that size, not two of the same size in one curve.
        if (progress) progress(step);
        ++step;
        continue;
      }
      const std::int64_t n = rows * kCols;
      rt::Tensor x = device.allocate_tensor(n, storage);
      rt::Tensor y = device.allocate_tensor(n, storage);
      device.fill_random(x.view(), seed++, 0, -1.0f, 1.0f);
      device.fill_random(y.view(), seed++, 0, -1.0f, 1.0f);
      std::function<void()> op;
      std::function<void()> check;
      rt::Tensor gamma, beta, mean, rstd, z, m, v;
      switch (kind) {
        case KernelKind::kNorm:
          gamma = device.allocate_tensor(kCols, storage);
          beta = device.allocate_tensor(kCols, storage);
          mean = device.allocate_tensor(rows, DType::kFp32);
          rstd = device.allocate_tensor(rows, DType::kFp32);
          device.fill_random(gamma.view(), seed++, 0, 0.5f, 1.5f);
          device.fill_random(beta.view(), seed++, 0, -0.5f, 0.5f);
          op = [&] {
            device.layernorm_forward(x.view(), gamma.view(), beta.view(), rows, kCols, 1e-5f,
                                     y.view(), mean.view(), rstd.view());
          };
          check = [&] { check_finite(device, y.view(), "layernorm"); };
          break;
        case KernelKind::kSoftmax:
          op = [&] { device.softmax_forward(x.view(), rows, kCols, rows, 0.125f, false, y.view()); };
          check = [&] { check_finite(device, y.view(), "softmax"); };
          break;
        case KernelKind::kActivation:
          op = [&] { device.gelu_forward(x.view(), y.view()); };
          check = [&] { check_finite(device, y.view(), "gelu"); };
          break;
        case KernelKind::kResidual:
          z = device.allocate_tensor(n, storage);
          op = [&] { device.add(x.view(), y.view(), z.view()); };
          check = [&] {
            const std::int64_t k = std::min<std::int64_t>(n, 16);
            std::vector<float> a = rt::download_fp32(device, x.view().slice(0, k));
            std::vector<float> b = rt::download_fp32(device, y.view().slice(0, k));
            std::vector<float> want(a.size());
            for (std::size_t i = 0; i < a.size(); ++i) want[i] = rt::round_to_dtype(a[i] + b[i], storage);
            check_equal(rt::download_fp32(device, z.view().slice(0, k)), want, "residual add");
          };
          break;
        case KernelKind::kAdam:
          m = device.allocate_tensor(n, DType::kFp32);
          v = device.allocate_tensor(n, DType::kFp32);
          device.fill_random(m.view(), seed++, 0, -1e-3f, 1e-3f);
          device.fill_random(v.view(), seed++, 0, 1e-6f, 1e-5f);
          op = [&] { device.adam_step(x.view(), y.view(), m.view(), v.view(), rt::AdamParams{}, 1); };
          check = [&] { check_finite(device, x.view(), "adam"); };
          break;
        case KernelKind::kCopy:
          op = [&] { device.copy_on_device(x.view().data, y.view().data, static_cast<std::size_t>(x.view().bytes())); };
          check = [&] {
            const std::int64_t k = std::min<std::int64_t>(n, 16);
            check_equal(rt::download_fp32(device, y.view().slice(n - k, k)),
                        rt::download_fp32(device, x.view().slice(n - k, k)), "copy");
          };
          break;
        case KernelKind::kElementwise:
          op = [&] { device.axpy(1e-3f, x.view(), y.view()); };
          check = [&] { check_finite(device, y.view(), "axpy"); };
          break;
      }
      const Timing t = time_on_device(device, op, timing);
      device.synchronize();
      check();
      out[kind].push_back({static_cast<double>(n) * bytes_per_element(kind, storage), t.median_s, t.spread});
      if (progress) progress(step);
      ++step;
    }
  }
  return out;
}

std::pair<std::vector<SizePoint>, std::vector<SizePoint>> bench_host_copies(
    rt::Device& device, const std::vector<double>& sizes_bytes, const TimingOptions& timing,
    const std::function<void(std::size_t)>& progress) {
  std::vector<SizePoint> h2d, d2h;
  std::size_t step = 0;
  for (double target : sizes_bytes) {
    const auto bytes = static_cast<std::size_t>(std::llround(target));
    rt::Buffer host = device.allocate(bytes, rt::MemoryKind::kPinnedHost);
    rt::Buffer back = device.allocate(bytes, rt::MemoryKind::kPinnedHost);
    rt::Buffer dev = device.allocate(bytes, rt::MemoryKind::kDevice);
    auto* h = static_cast<unsigned char*>(host.data());
    for (std::size_t i = 0; i < bytes; ++i) h[i] = static_cast<unsigned char>(i * 131 + 7);
    const Timing up = time_on_device(device, [&] { device.copy_to_device(host.data(), dev.data(), bytes); }, timing);
    const Timing down = time_on_device(device, [&] { device.copy_to_host(dev.data(), back.data(), bytes); }, timing);
    device.synchronize();
    if (std::memcmp(host.data(), back.data(), bytes) != 0) {
      throw InternalError(fmt::format("host copy of {} bytes did not round-trip", bytes));
    }
    h2d.push_back({static_cast<double>(bytes), up.median_s, up.spread});
    d2h.push_back({static_cast<double>(bytes), down.median_s, down.spread});
    if (progress) progress(step++);
  }
  return {h2d, d2h};
}

}  // namespace strata::calib
