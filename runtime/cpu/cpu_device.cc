#include "runtime/cpu/cpu_device.h"

#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <new>
#include <string>
#include <thread>

#include <Eigen/Core>
#include <fmt/format.h>

#include "core/error.h"
#include "runtime/cpu/cpu_device_impl.h"
#include "runtime/kernel_checks.h"
#include "runtime/mpi_env.h"

namespace strata::rt {
namespace {

// 64 bytes: a cache line, and the widest vector (AVX-512) Eigen loads.
constexpr std::size_t kAlignmentBytes = 64;

int cores_available() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof(set), &set) == 0) return std::max(1, CPU_COUNT(&set));
  return std::max(1u, std::thread::hardware_concurrency());
}

std::string cpu_model_name() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("model name", 0) == 0) {
      auto colon = line.find(':');
      if (colon != std::string::npos) {
        auto start = line.find_first_not_of(" \t", colon + 1);
        return start == std::string::npos ? "cpu" : line.substr(start);
      }
    }
  }
  return "cpu";
}

std::int64_t largest_data_cache_bytes() {
  for (int level : {_SC_LEVEL4_CACHE_SIZE, _SC_LEVEL3_CACHE_SIZE, _SC_LEVEL2_CACHE_SIZE,
                    _SC_LEVEL1_DCACHE_SIZE}) {
    const long bytes = sysconf(level);
    if (bytes > 0) return bytes;
  }
  return 0;
}

std::int64_t physical_memory_bytes() {
  const long pages = sysconf(_SC_PHYS_PAGES);
  const long page_bytes = sysconf(_SC_PAGESIZE);
  return pages > 0 && page_bytes > 0 ? static_cast<std::int64_t>(pages) * page_bytes : 0;
}

struct CpuEvent final : Event {
  std::chrono::steady_clock::time_point when{};
  bool recorded = false;
};

}  // namespace

CpuDevice::CpuDevice(const DeviceOptions& options) {
  const int cores = cores_available();
  if (options.cpu_threads > 0) {
    threads_ = options.cpu_threads;
  } else {
    // Ranks on this node share its cores: never more threads in all than cores.
    const int local_ranks = std::max(1, detect_launch().local_size);
    threads_ = std::max(1, cores / local_ranks);
  }
  Eigen::setNbThreads(threads_);

  info_.backend = Backend::kCpu;
  info_.index = 0;
  info_.name = cpu_model_name();
  info_.compute_units = threads_;
  info_.host_cores = cores;
  info_.memory_bytes = physical_memory_bytes();
  info_.cache_bytes = largest_data_cache_bytes();
  info_.isa = Eigen::SimdInstructionSetsInUse();
  info_.versions["eigen"] =
      fmt::format("{}.{}.{}", EIGEN_WORLD_VERSION, EIGEN_MAJOR_VERSION, EIGEN_MINOR_VERSION);
  for (DType d : {DType::kBf16, DType::kFp16, DType::kFp32, DType::kTf32}) {
    info_.storage_dtype[d] = DType::kFp32;
  }
  info_.notes = fmt::format(
      "cpu backend: bf16, fp16 and tf32 requests are stored and computed in fp32; "
      "{} compute thread(s) of {} core(s); SIMD: {}",
      threads_, cores, info_.isa);
}

void* CpuDevice::raw_allocate(std::size_t bytes, MemoryKind /*kind*/) {
  const std::size_t rounded = (bytes + kAlignmentBytes - 1) / kAlignmentBytes * kAlignmentBytes;
  void* data = std::aligned_alloc(kAlignmentBytes, rounded);
  if (data == nullptr) {
    throw InternalError(fmt::format("cpu device: out of host memory allocating {} bytes", bytes));
  }
  return data;
}

void CpuDevice::raw_free(void* data, std::size_t /*bytes*/, MemoryKind /*kind*/) noexcept {
  std::free(data);
}

void CpuDevice::copy_to_device(const void* host, void* device_dst, std::size_t bytes) {
  if (bytes > 0) std::memcpy(device_dst, host, bytes);
}

void CpuDevice::copy_to_host(const void* device_src, void* host, std::size_t bytes) {
  if (bytes > 0) std::memcpy(host, device_src, bytes);
}

void CpuDevice::copy_on_device(const void* src, void* dst, std::size_t bytes) {
  if (bytes > 0) std::memmove(dst, src, bytes);
}

std::unique_ptr<Event> CpuDevice::create_event() { return std::make_unique<CpuEvent>(); }

void CpuDevice::record(Event& event) {
  auto* e = dynamic_cast<CpuEvent*>(&event);
  if (e == nullptr) throw InternalError("cpu device: record() given another backend's event");
  e->when = std::chrono::steady_clock::now();
  e->recorded = true;
}

TimeNs CpuDevice::elapsed_ns(const Event& start, const Event& end) {
  const auto* s = dynamic_cast<const CpuEvent*>(&start);
  const auto* e = dynamic_cast<const CpuEvent*>(&end);
  if (s == nullptr || e == nullptr) {
    throw InternalError("cpu device: elapsed_ns() given another backend's event");
  }
  if (!s->recorded || !e->recorded) throw InternalError("cpu device: elapsed_ns() on an unrecorded event");
  return std::chrono::duration_cast<std::chrono::nanoseconds>(e->when - s->when).count();
}

float* f32(const char* kernel, const char* name, const TensorView& v, std::int64_t numel) {
  check::dtype(kernel, name, v, DType::kFp32);
  check::numel(kernel, name, v, numel);
  return static_cast<float*>(v.data);
}

std::unique_ptr<Device> make_cpu_device(const DeviceOptions& options) {
  return std::make_unique<CpuDevice>(options);
}

}  // namespace strata::rt
