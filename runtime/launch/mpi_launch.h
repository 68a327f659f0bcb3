// Starting N ranks of a command under OpenMPI's mpirun, with the settings of
// core/mpirun_settings.h. Used by tests and `strata validate --quick`.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "core/mpirun_settings.h"

namespace strata::rt {

// The mpirun executable: $STRATA_MPIRUN, else the one found at configure time,
// else "mpirun" on PATH; "" when none is executable.
std::string find_mpirun();

// argv for `mpirun -n ranks <mpirun_flags()> command...` (mpirun first). Throws
// InternalError when ranks < 1 or command is empty.
std::vector<std::string> mpirun_argv(const std::string& mpirun, int ranks,
                                     const std::vector<std::string>& command);

// One shell command line: `env K=V ... mpirun ... command...`, each word quoted.
std::string mpirun_shell_command(const std::string& mpirun, int ranks,
                                 const std::vector<std::string>& command);

}  // namespace strata::rt
