// The cpu backend's Communicator: OpenMPI, non-blocking operations polled
// against the timeout (runtime/comm/poll.h). Built only with STRATA_WITH_MPI.
#pragma once

#include <memory>

#include "runtime/comm/communicator.h"

namespace strata::rt {

// MPI_COMM_WORLD on device (cpu). MPI must be initialized (MpiSession).
std::unique_ptr<Communicator> make_mpi_world_communicator(Device& device,
                                                          const CommOptions& options);

}  // namespace strata::rt
