// The runtime backends: where kernels run and how ranks talk.
//   cpu  - Eigen kernels in fp32 on the host; communicator over OpenMPI.
//   cuda - cuBLAS GEMMs and CUDA kernels on an NVIDIA GPU; communicator over NCCL.
#pragma once

#include <optional>
#include <string>

namespace strata::rt {

enum class Backend { kCpu, kCuda };

// "cpu" | "cuda".
const char* to_string(Backend backend);
// Parses "cpu" | "cuda"; nullopt for anything else.
std::optional<Backend> parse_backend(const std::string& name);

// Whether this build contains the backend (cuda: STRATA_HAVE_CUDA). Says nothing
// about whether the machine has a GPU: see cuda_device_count().
bool backend_compiled(Backend backend);
// Whether this build has MPI (cpu communicator across processes, NCCL bootstrap).
bool mpi_compiled();
// GPUs the CUDA runtime sees; 0 in a build without cuda or when the driver
// reports none or fails (no driver, no device). Never throws.
int cuda_device_count();

}  // namespace strata::rt
