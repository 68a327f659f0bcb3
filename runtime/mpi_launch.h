// Starting N ranks of a command under OpenMPI's mpirun, with the settings a
// container, a CI runner or a laptop needs (docs/runtime.md explains each):
//   OMPI_ALLOW_RUN_AS_ROOT=1, OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
//       mpirun refuses to start as root without both (containers run as root);
//   --oversubscribe
//       allow more ranks than cores (-n 4 on a 2-core machine);
//   --mca mpi_yield_when_idle 1
//       oversubscribed ranks spin at 100% in MPI waits unless told to yield;
//   --mca btl_vader_single_copy_mechanism none
//       single-copy shared memory (CMA, process_vm_readv) is often forbidden in
//       containers (ptrace restrictions); fall back to copy-in/copy-out.
// Used by tests, `strata validate --quick` and the launch scripts of `strata export`.
#pragma once

#include <string>
#include <utility>
#include <vector>

namespace strata::rt {

// The mpirun executable: $STRATA_MPIRUN, else the one found at configure time,
// else "mpirun" on PATH; "" when none is executable.
std::string find_mpirun();

// argv for `mpirun -n ranks --oversubscribe --mca ... command...` (mpirun
// first). Throws InternalError when ranks < 1 or command is empty.
std::vector<std::string> mpirun_argv(const std::string& mpirun, int ranks,
                                     const std::vector<std::string>& command);

// The environment variables (name, value) to set for mpirun and its ranks.
std::vector<std::pair<std::string, std::string>> mpirun_environment();

// One shell command line: `env K=V ... mpirun ... command...`, each word quoted.
std::string mpirun_shell_command(const std::string& mpirun, int ranks,
                                 const std::vector<std::string>& command);

}  // namespace strata::rt
