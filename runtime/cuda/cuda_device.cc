// The cuda Device: memory, copies, events and cuBLAS GEMMs (the cuda_*.cu files
// have the other kernels).
#include "runtime/cuda/cuda_device_impl.h"

#include <nccl.h>

#include <algorithm>
#include <cstdint>
#include <limits>

#include <fmt/format.h>

#include "core/error.h"
#include "runtime/device/backend.h"
#include "runtime/cuda/cuda_backend.h"
#include "runtime/cuda/cublas_loader.h"
#include "runtime/device/kernel_checks.h"
#include "runtime/launch/mpi_env.h"

namespace strata::rt {
namespace {

// cuBLAS's recommended workspace for Hopper (cuBLAS documentation,
// cublasSetWorkspace: 32 MiB on Hopper, 4 MiB on other architectures); a fixed,
// user-provided workspace also keeps the choice of algorithm repeatable.
constexpr std::size_t kCublasWorkspaceBytes = 32u << 20;

struct CudaEvent final : Event {
  cudaEvent_t event = nullptr;
  int ordinal = 0;
  bool recorded = false;
  ~CudaEvent() override {
    if (event != nullptr) {
      cudaSetDevice(ordinal);
      cudaEventDestroy(event);
    }
  }
};

cudaDataType_t cuda_type(DType d) {
  switch (d) {
    case DType::kBf16: return CUDA_R_16BF;
    case DType::kFp16: return CUDA_R_16F;
    case DType::kFp32:
    case DType::kTf32: return CUDA_R_32F;
  }
  return CUDA_R_32F;
}

std::string version_text(int v) { return fmt::format("{}.{}", v / 1000, (v % 1000) / 10); }

}  // namespace

void cuda_check(cudaError_t status, const char* what) {
  if (status != cudaSuccess) {
    throw InternalError(fmt::format("{}: {} ({})", what, cudaGetErrorString(status),
                                    cudaGetErrorName(status)));
  }
}

void cublas_check(cublasStatus_t status, const char* what) {
  if (status != CUBLAS_STATUS_SUCCESS) {
    throw InternalError(fmt::format("{}: {}", what, cublas_api().status_string(status)));
  }
}

CudaDevice::CudaDevice(int ordinal) : ordinal_(ordinal) {
  const int count = cuda_device_count();
  if (count == 0) {
    throw InputError("", "",
                     "backend 'cuda' is not available on this machine: the CUDA runtime sees no "
                     "GPU (no device or no driver); use --backend cpu");
  }
  if (ordinal < 0 || ordinal >= count) {
    throw InputError("", "",
                     fmt::format("cuda device {} does not exist: this machine has {} GPU(s), "
                                 "ordinals 0 to {}", ordinal, count, count - 1));
  }
  activate();
  cudaDeviceProp prop{};
  cuda_check(cudaGetDeviceProperties(&prop, ordinal), "cudaGetDeviceProperties");
  cuda_check(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking), "cudaStreamCreate");
  // Device tensors come from the stream-ordered pool (cudaMallocAsync) and go
  // back to it, kept for reuse: cudaFree synchronizes the whole device, and a
  // training step frees an activation or a transient gradient after nearly every
  // kernel (the role of PyTorch's caching allocator).
  cudaMemPool_t pool = nullptr;
  cuda_check(cudaDeviceGetDefaultMemPool(&pool, ordinal), "cudaDeviceGetDefaultMemPool");
  std::uint64_t keep_all = UINT64_MAX;
  cuda_check(cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &keep_all),
             "cudaMemPoolSetAttribute(release threshold)");
  const CublasApi& blas = cublas_api();
  cublas_check(blas.create(&cublas_), "cublasCreate");
  cublas_check(blas.set_stream(cublas_, stream_), "cublasSetStream");
  cuda_check(cudaMalloc(&cublas_workspace_, kCublasWorkspaceBytes), "cudaMalloc(cuBLAS workspace)");
  cublas_check(blas.set_workspace(cublas_, cublas_workspace_, kCublasWorkspaceBytes),
               "cublasSetWorkspace");
  cuda_check(cudaMalloc(reinterpret_cast<void**>(&reduce_partials_),
                        kReducePartials * sizeof(double)),
             "cudaMalloc(reduction partials)");

  info_.backend = Backend::kCuda;
  info_.index = ordinal;
  info_.name = prop.name;
  info_.compute_units = prop.multiProcessorCount;
  info_.host_cores = cores_available();
  info_.memory_bytes = static_cast<std::int64_t>(prop.totalGlobalMem);
  info_.cache_bytes = prop.l2CacheSize;
  info_.isa = fmt::format("sm_{}{}", prop.major, prop.minor);
  int runtime_version = 0;
  int driver_version = 0;
  cudaRuntimeGetVersion(&runtime_version);
  cudaDriverGetVersion(&driver_version);
  info_.versions["cuda_runtime"] = version_text(runtime_version);
  info_.versions["cuda_driver"] = version_text(driver_version);
  int cublas_version = 0;
  blas.get_version(cublas_, &cublas_version);
  info_.versions["cublas"] = std::to_string(cublas_version);
  int nccl_version = 0;
  ncclGetVersion(&nccl_version);
  info_.versions["nccl"] = std::to_string(nccl_version);
  info_.storage_dtype = {{DType::kBf16, DType::kBf16},
                         {DType::kFp16, DType::kFp16},
                         {DType::kFp32, DType::kFp32},
                         {DType::kTf32, DType::kFp32}};
  info_.notes =
      "cuda backend: cuBLAS GEMMs on tensor cores (bf16/fp16 inputs, fp32 accumulation; tf32 "
      "requests store fp32 and multiply in TF32); other kernels compute in fp32";
}

CudaDevice::~CudaDevice() {
  cudaSetDevice(ordinal_);
  if (stream_ != nullptr) cudaStreamSynchronize(stream_);
  if (cublas_ != nullptr) cublas_api().destroy(cublas_);
  if (cublas_workspace_ != nullptr) cudaFree(cublas_workspace_);
  if (reduce_partials_ != nullptr) cudaFree(reduce_partials_);
  if (stream_ != nullptr) cudaStreamDestroy(stream_);
}

void CudaDevice::activate() const { cuda_check(cudaSetDevice(ordinal_), "cudaSetDevice"); }

void* CudaDevice::raw_allocate(std::size_t bytes, MemoryKind kind) {
  activate();
  void* data = nullptr;
  const cudaError_t rc = kind == MemoryKind::kPinnedHost ? cudaMallocHost(&data, bytes)
                                                         : cudaMallocAsync(&data, bytes, stream_);
  if (rc != cudaSuccess) {
    cudaGetLastError();
    throw InternalError(fmt::format("cuda device {}: cannot allocate {} bytes of {} memory: {}",
                                    ordinal_, bytes,
                                    kind == MemoryKind::kPinnedHost ? "pinned host" : "device",
                                    cudaGetErrorString(rc)));
  }
  return data;
}

void CudaDevice::raw_free(void* data, std::size_t /*bytes*/, MemoryKind kind) noexcept {
  cudaSetDevice(ordinal_);
  // Work still queued on the device's stream may use the memory: the pool reuses
  // it only after that work (stream order). The communicator's stream is done with
  // a buffer once its request completed, which the executor waits for before it
  // frees one. Pinned host memory is freed only after the stream drains.
  if (kind == MemoryKind::kPinnedHost) {
    cudaStreamSynchronize(stream_);
    cudaFreeHost(data);
  } else {
    cudaFreeAsync(data, stream_);
  }
}

void CudaDevice::copy_to_device(const void* host, void* device_dst, std::size_t bytes) {
  if (bytes == 0) return;
  activate();
  cuda_check(cudaMemcpyAsync(device_dst, host, bytes, cudaMemcpyHostToDevice, stream_),
             "copy_to_device");
}

void CudaDevice::copy_to_host(const void* device_src, void* host, std::size_t bytes) {
  if (bytes == 0) return;
  activate();
  cuda_check(cudaMemcpyAsync(host, device_src, bytes, cudaMemcpyDeviceToHost, stream_),
             "copy_to_host");
}

void CudaDevice::copy_on_device(const void* src, void* dst, std::size_t bytes) {
  if (bytes == 0 || src == dst) return;
  activate();
  cuda_check(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, stream_),
             "copy_on_device");
}

void CudaDevice::gemm(const GemmArgs& g) {
  check::gemm(g);
  check::dtype_in("gemm", "A", g.a, {DType::kBf16, DType::kFp16, DType::kFp32});
  if (g.m == 0 || g.n == 0) return;
  for (std::int64_t v : {g.m, g.n, g.k, g.lda, g.ldb, g.ldc, g.batch}) {
    if (v > std::numeric_limits<int>::max()) {
      throw InternalError(fmt::format("gemm: size {} exceeds cuBLAS's int arguments", v));
    }
  }
  activate();
  // cuBLAS is column-major: a row-major C (m x n, ldc) is a column-major C^T,
  // and C^T = op(B)^T op(A)^T, so B and A swap places and m and n swap.
  const cublasOperation_t op_b = g.trans_b == Transpose::kYes ? CUBLAS_OP_T : CUBLAS_OP_N;
  const cublasOperation_t op_a = g.trans_a == Transpose::kYes ? CUBLAS_OP_T : CUBLAS_OP_N;
  cublasComputeType_t compute = CUBLAS_COMPUTE_32F;
  if (g.a.dtype == DType::kFp32 && g.tf32) compute = CUBLAS_COMPUTE_32F_FAST_TF32;
  const float alpha = g.alpha;
  const float beta = g.beta;
  // k == 0 is an empty sum (C = beta * C), which cuBLAS computes as BLAS defines
  // it; A and B are not read then, but cuBLAS still checks ld >= max(1, rows).
  const std::int64_t min_ld = g.k == 0 ? std::max<std::int64_t>({1, g.m, g.n}) : 1;
  const std::int64_t lda = std::max(g.lda, min_ld);
  const std::int64_t ldb = std::max(g.ldb, min_ld);
  cublas_check(cublas_api().gemm_strided_batched(
                   cublas_, op_b, op_a, static_cast<int>(g.n), static_cast<int>(g.m),
                   static_cast<int>(g.k), &alpha, g.b.data, cuda_type(g.b.dtype),
                   static_cast<int>(ldb), g.stride_b, g.a.data, cuda_type(g.a.dtype),
                   static_cast<int>(lda), g.stride_a, &beta, g.c.data, cuda_type(g.c.dtype),
                   static_cast<int>(g.ldc), g.stride_c, static_cast<int>(g.batch), compute,
                   CUBLAS_GEMM_DEFAULT),
               "cublasGemmStridedBatchedEx");
}

std::unique_ptr<Event> CudaDevice::create_event() {
  activate();
  auto e = std::make_unique<CudaEvent>();
  e->ordinal = ordinal_;
  cuda_check(cudaEventCreate(&e->event), "cudaEventCreate");
  return e;
}

void CudaDevice::record(Event& event) {
  auto* e = dynamic_cast<CudaEvent*>(&event);
  if (e == nullptr) throw InternalError("cuda device: record() given another backend's event");
  activate();
  cuda_check(cudaEventRecord(e->event, stream_), "cudaEventRecord");
  e->recorded = true;
}

Duration CudaDevice::elapsed(const Event& start, const Event& end) {
  const auto* s = dynamic_cast<const CudaEvent*>(&start);
  const auto* e = dynamic_cast<const CudaEvent*>(&end);
  if (s == nullptr || e == nullptr) {
    throw InternalError("cuda device: elapsed() given another backend's event");
  }
  if (!s->recorded || !e->recorded) {
    throw InternalError("cuda device: elapsed() on an unrecorded event");
  }
  activate();
  cuda_check(cudaEventSynchronize(e->event), "cudaEventSynchronize");
  float ms = 0.0f;
  cuda_check(cudaEventElapsedTime(&ms, s->event, e->event), "cudaEventElapsedTime");
  // CUDA events resolve about 0.5 us (CUDA Runtime API, cudaEventElapsedTime).
  return Duration::from_ns(static_cast<TimeNs>(static_cast<double>(ms) * 1e6 + 0.5));
}

void CudaDevice::synchronize() {
  activate();
  cuda_check(cudaStreamSynchronize(stream_), "cudaStreamSynchronize");
}

std::unique_ptr<Device> make_cuda_device(int local_index, const DeviceOptions& /*options*/) {
  return std::make_unique<CudaDevice>(local_index);
}

}  // namespace strata::rt
