// make_device, make_world_communicator and make_local_communicators: the one
// place that knows which backends and transports this build has.
#include <fmt/format.h>

#include "core/error.h"
#include "runtime/comm/communicator.h"
#include "runtime/cpu/cpu_device.h"
#include "runtime/device/device.h"
#include "runtime/launch/mpi_env.h"
#include "runtime/comm/self_communicator.h"

#if defined(STRATA_RT_HAVE_MPI)
#include "runtime/mpi/mpi_communicator.h"
#endif
#if defined(STRATA_RT_HAVE_CUDA)
#include "runtime/cuda/cuda_backend.h"
#endif

namespace strata::rt {
namespace {

#if !defined(STRATA_RT_HAVE_CUDA) || !defined(STRATA_RT_HAVE_MPI)
[[noreturn]] void no_cuda_build() {
  throw InputError("", "",
                   "backend 'cuda' is not available: this strata was built without CUDA "
                   "(STRATA_HAVE_CUDA is OFF: install the CUDA toolkit and NCCL, reconfigure "
                   "with -DSTRATA_WITH_CUDA=ON); use --backend cpu");
}
#endif

}  // namespace

std::unique_ptr<Device> make_device(Backend backend, int local_index,
                                    const DeviceOptions& options) {
  switch (backend) {
    case Backend::kCpu:
      if (local_index != 0) {
        throw InputError("", "", fmt::format("cpu device {} does not exist: the cpu backend has "
                                             "one device per process, index 0", local_index));
      }
      return make_cpu_device(options);
    case Backend::kCuda:
#if defined(STRATA_RT_HAVE_CUDA)
      return make_cuda_device(local_index, options);
#else
      no_cuda_build();
#endif
  }
  throw InternalError("make_device: unknown backend");
}

std::unique_ptr<Communicator> make_world_communicator(Device& device, const CommOptions& options) {
  const LaunchInfo launch = detect_launch();
  if (!launch.launched() || launch.size == 1) {
    if (MpiSession::active() && device.backend() == Backend::kCpu) {
#if defined(STRATA_RT_HAVE_MPI)
      return make_mpi_world_communicator(device, options);
#endif
    }
    return make_self_communicator(device, options);
  }
  if (!mpi_compiled()) {
    throw InputError("", "",
                     fmt::format("launched as rank {} of {} by {}, but this strata was built "
                                 "without MPI: install libopenmpi-dev and reconfigure",
                                 launch.rank, launch.size, launch.launcher));
  }
  if (!MpiSession::active()) {
    throw InternalError("make_world_communicator: MPI is not initialized; create an MpiSession "
                        "at the start of the command");
  }
  switch (device.backend()) {
    case Backend::kCpu:
#if defined(STRATA_RT_HAVE_MPI)
      return make_mpi_world_communicator(device, options);
#else
      break;
#endif
    case Backend::kCuda:
#if defined(STRATA_RT_HAVE_CUDA) && defined(STRATA_RT_HAVE_MPI)
      return make_nccl_world_communicator(device, options);
#else
      no_cuda_build();
#endif
  }
  throw InternalError("make_world_communicator: unknown backend");
}

std::vector<std::unique_ptr<Communicator>> make_local_communicators(
    const std::vector<Device*>& devices, const CommOptions& options) {
  if (devices.empty()) throw InternalError("make_local_communicators: no devices");
  for (Device* d : devices) {
    if (d == nullptr || d->backend() != Backend::kCuda) {
      throw InputError("", "",
                       "one process driving several devices needs the cuda backend (NCCL); the "
                       "cpu backend runs one process per rank under mpirun");
    }
  }
#if defined(STRATA_RT_HAVE_CUDA)
  return make_nccl_local_communicators(devices, options);
#else
  no_cuda_build();
#endif
}

}  // namespace strata::rt
