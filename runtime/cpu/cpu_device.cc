#include "runtime/cpu/cpu_device.h"

#include <malloc.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <new>
#include <string>

#include <Eigen/Core>
#include <fmt/format.h>

#include "core/error.h"
#include "core/memory_budget.h"
#include "runtime/cpu/cpu_device_impl.h"
#include "runtime/device/kernel_checks.h"
#include "runtime/launch/mpi_env.h"

namespace strata::rt {
namespace {


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


// Eigen allocates its GEMM packing buffers with malloc on every product. Blocks
// over glibc's mmap threshold (128 KiB until a large block is freed) are mapped
// and unmapped per call, and every page of them faults on first touch: with the
// device's own tensors cached (HostBlockCache frees none), 45% of `strata run`'s
// page faults were Eigen's packing and the tp 2 sequence-parallel plan ran 70%
// slower. A fixed threshold at glibc's maximum keeps such blocks in the heap, and
// a high trim threshold keeps freed heap memory for the next call.
void keep_heap_memory() {
  static const bool once = [] {
    mallopt(M_MMAP_THRESHOLD, 32 << 20);
    mallopt(M_TRIM_THRESHOLD, 1 << 30);
    return true;
  }();
  (void)once;
}

}  // namespace

CpuDevice::CpuDevice(const DeviceOptions& options) {
  keep_heap_memory();
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
  // A block larger than the host's memory can never be had: say so before asking
  // (a 2^30-word vocabulary's embedding is 2^30 x hidden floats; AddressSanitizer
  // aborts on such a request instead of returning null).
  const std::uint64_t physical = physical_memory_bytes();
  if (physical > 0 && bytes > physical) {
    throw InputError("", "",
                     fmt::format("cpu device: the plan needs a block of {:.1f} GiB, more than this host's {:.1f} GiB "
                                 "of memory: a smaller model, or more ranks to shard it over",
                                 static_cast<double>(bytes) / double(1ull << 30),
                                 static_cast<double>(physical) / double(1ull << 30)));
  }
  void* data = blocks_.take(bytes);
  if (data == nullptr) {
    throw InternalError(fmt::format("cpu device: out of host memory allocating {} bytes", bytes));
  }
  return data;
}

void CpuDevice::raw_free(void* data, std::size_t bytes, MemoryKind /*kind*/) noexcept {
  blocks_.give_back(data, bytes);
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

Duration CpuDevice::elapsed(const Event& start, const Event& end) {
  const auto* s = dynamic_cast<const CpuEvent*>(&start);
  const auto* e = dynamic_cast<const CpuEvent*>(&end);
  if (s == nullptr || e == nullptr) {
    throw InternalError("cpu device: elapsed() given another backend's event");
  }
  if (!s->recorded || !e->recorded) throw InternalError("cpu device: elapsed() on an unrecorded event");
  return Duration::from_ns(std::chrono::duration_cast<std::chrono::nanoseconds>(e->when - s->when).count());
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
