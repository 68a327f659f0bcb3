// Launch detection and MPI's lifetime in one process.
//
// A plain `strata ...` run must not need mpirun: MPI is initialized only when
// the environment says a launcher started this process (OpenMPI's mpirun, a PMI
// launcher such as MPICH's hydra or srun --mpi=pmi2/pmix, or SLURM's srun).
#pragma once

#include <functional>
#include <string>

namespace strata::rt {

struct LaunchInfo {
  // "openmpi" | "pmi" | "slurm" | "none".
  std::string launcher = "none";
  int rank = 0;
  int size = 1;
  int local_rank = 0;   // rank among the processes on this node
  int local_size = 1;   // processes on this node
  bool launched() const { return launcher != "none"; }
};

// Reads, in this order of precedence, OMPI_COMM_WORLD_{RANK,SIZE,LOCAL_RANK,LOCAL_SIZE},
// PMI_{RANK,SIZE} (PMI_LOCAL_RANK/MPI_LOCALRANKID, PMI_LOCAL_SIZE/MPI_LOCALNRANKS),
// then SLURM_{PROCID,NTASKS,LOCALID} with SLURM_NTASKS_PER_NODE or
// SLURM_TASKS_PER_NODE. getenv is injectable for tests. Throws InputError (no
// file; the variable's name as the path) when a variable is not an integer or a
// rank is outside [0, size).
LaunchInfo detect_launch(const std::function<const char*(const char*)>& getenv);
// detect_launch with the process environment.
LaunchInfo detect_launch();

// Cores this process may run on (its CPU affinity; the hardware's count when
// that cannot be read), at least 1.
int cores_available();

// Owns MPI's initialization for the process (MPI_Init_thread with
// MPI_THREAD_FUNNELED, finalized by the destructor) when the process was
// launched by a launcher and MPI was not initialized yet; otherwise does
// nothing. Create one, early in main, before any communicator; destroy
// communicators first. Throws InputError when launched with several ranks in a
// build without MPI.
class MpiSession {
 public:
  MpiSession();
  ~MpiSession();
  MpiSession(const MpiSession&) = delete;
  MpiSession& operator=(const MpiSession&) = delete;

  // The launch; once MPI is initialized its node-local rank and size are MPI's
  // (MPI_Comm_split_type with MPI_COMM_TYPE_SHARED), not the launcher's variables.
  const LaunchInfo& launch() const { return launch_; }
  // Whether MPI is initialized and not yet finalized in this process.
  static bool active();

 private:
  void take_node_local_rank_from_mpi();

  LaunchInfo launch_;
  bool owns_ = false;
};

}  // namespace strata::rt
