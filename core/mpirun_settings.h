// How OpenMPI's mpirun starts our ranks on any machine: a container, a CI runner
// or a laptop (docs/runtime.md explains each):
//   OMPI_ALLOW_RUN_AS_ROOT=1, OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
//       mpirun refuses to start as root without both (containers run as root);
//   --oversubscribe
//       allow more ranks than cores (-n 4 on a 2-core machine);
//   --mca mpi_yield_when_idle 1
//       oversubscribed ranks spin at 100% in MPI waits unless told to yield;
//   --mca btl_vader_single_copy_mechanism none
//       single-copy shared memory (CMA, process_vm_readv) is often forbidden in
//       containers (ptrace restrictions); fall back to copy-in/copy-out.
// One description for the runtime's launcher (runtime/launch/mpi_launch.h), the
// launch scripts `strata export` writes and the tests.
#pragma once

#include <string>
#include <utility>
#include <vector>

namespace strata {

// The flags between `mpirun -n N` and the command.
std::vector<std::string> mpirun_flags();

// The environment variables (name, value) to set for mpirun and its ranks.
std::vector<std::pair<std::string, std::string>> mpirun_environment();

}  // namespace strata
