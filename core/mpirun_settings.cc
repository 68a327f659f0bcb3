#include "core/mpirun_settings.h"

namespace strata {

std::vector<std::string> mpirun_flags() {
  return {"--oversubscribe",
          // Ranks beyond the cores must give their core away while they wait.
          "--mca", "mpi_yield_when_idle", "1",
          // CMA (process_vm_readv) is blocked in many containers; copy through shared memory.
          "--mca", "btl_vader_single_copy_mechanism", "none"};
}

std::vector<std::pair<std::string, std::string>> mpirun_environment() {
  return {{"OMPI_ALLOW_RUN_AS_ROOT", "1"},
          {"OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1"},
          {"OMPI_MCA_mpi_yield_when_idle", "1"},
          {"OMPI_MCA_btl_vader_single_copy_mechanism", "none"}};
}

}  // namespace strata
