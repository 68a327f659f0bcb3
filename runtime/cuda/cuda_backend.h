// Entry points of the cuda backend for the factories (plain C++: no CUDA types),
// defined only when STRATA_RT_HAVE_CUDA.
#pragma once

#include <memory>
#include <vector>

#include "runtime/comm/communicator.h"
#include "runtime/device/device.h"

namespace strata::rt {

// The GPU with CUDA ordinal local_index. Throws InputError when there is none.
std::unique_ptr<Device> make_cuda_device(int local_index, const DeviceOptions& options);

// NCCL over every rank of the MPI job; rank 0's ncclGetUniqueId is broadcast
// over MPI_COMM_WORLD. device is this rank's cuda Device.
std::unique_ptr<Communicator> make_nccl_world_communicator(Device& device,
                                                           const CommOptions& options);

// One process, several GPUs: ncclCommInitAll over devices (each cuda).
std::vector<std::unique_ptr<Communicator>> make_nccl_local_communicators(
    const std::vector<Device*>& devices, const CommOptions& options);

}  // namespace strata::rt
