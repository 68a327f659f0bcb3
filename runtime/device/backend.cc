#include "runtime/device/backend.h"

#if defined(STRATA_RT_HAVE_CUDA)
#include <cuda_runtime_api.h>
#endif

namespace strata::rt {

const char* to_string(Backend backend) {
  switch (backend) {
    case Backend::kCpu: return "cpu";
    case Backend::kCuda: return "cuda";
  }
  return "cpu";
}

std::optional<Backend> parse_backend(const std::string& name) {
  if (name == "cpu") return Backend::kCpu;
  if (name == "cuda") return Backend::kCuda;
  return std::nullopt;
}

bool backend_compiled(Backend backend) {
  switch (backend) {
    case Backend::kCpu: return true;
    case Backend::kCuda:
#if defined(STRATA_RT_HAVE_CUDA)
      return true;
#else
      return false;
#endif
  }
  return false;
}

bool mpi_compiled() {
#if defined(STRATA_RT_HAVE_MPI)
  return true;
#else
  return false;
#endif
}

int cuda_device_count() {
#if defined(STRATA_RT_HAVE_CUDA)
  int count = 0;
  // Fails with cudaErrorNoDevice or cudaErrorInsufficientDriver on machines
  // without a GPU or driver: that is "no GPU", not an error.
  if (cudaGetDeviceCount(&count) != cudaSuccess) {
    cudaGetLastError();  // clear the sticky error for later calls
    return 0;
  }
  return count;
#else
  return 0;
#endif
}

}  // namespace strata::rt
