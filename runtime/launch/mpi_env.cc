#include "runtime/launch/mpi_env.h"

#include <sched.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <fmt/format.h>

#include "core/error.h"

#if defined(STRATA_RT_HAVE_MPI)
#include <mpi.h>
#endif

namespace strata::rt {
namespace {

using Getenv = std::function<const char*(const char*)>;

// The integer value of variable name, or nullopt when unset or empty. Throws
// InputError when it is set but not a non-negative integer.
std::optional<int> env_int(const Getenv& getenv, const char* name) {
  const char* value = getenv(name);
  if (value == nullptr || *value == '\0') return std::nullopt;
  char* end = nullptr;
  const long parsed = std::strtol(value, &end, 10);
  if (*end != '\0' || parsed < 0 || parsed > 1'000'000'000) {
    throw InputError("", name,
                     fmt::format("environment variable {}='{}' is not a non-negative integer",
                                 name, value));
  }
  return static_cast<int>(parsed);
}

// SLURM_TASKS_PER_NODE ("4(x2),3": 4 tasks on each of two nodes, then 3) for
// node node_id; nullopt when it cannot be read.
std::optional<int> slurm_tasks_on_node(const char* tasks_per_node, int node_id) {
  if (tasks_per_node == nullptr) return std::nullopt;
  std::string spec = tasks_per_node;
  int node = 0;
  std::size_t pos = 0;
  while (pos < spec.size()) {
    std::size_t comma = spec.find(',', pos);
    if (comma == std::string::npos) comma = spec.size();
    const std::string entry = spec.substr(pos, comma - pos);
    int count = 0;
    int repeat = 1;
    if (std::sscanf(entry.c_str(), "%d(x%d)", &count, &repeat) < 1) return std::nullopt;
    if (node_id < node + repeat) return count;
    node += repeat;
    pos = comma + 1;
  }
  return std::nullopt;
}

void check_rank(const LaunchInfo& info, const char* rank_var) {
  if (info.size < 1 || info.rank >= info.size) {
    throw InputError("", rank_var,
                     fmt::format("launcher says rank {} of {} ranks: a rank must be in [0, size)",
                                 info.rank, info.size));
  }
  if (info.local_size < 1 || info.local_rank >= info.local_size) {
    throw InputError("", rank_var,
                     fmt::format("launcher says local rank {} of {} on this node: a local rank "
                                 "must be in [0, local size)",
                                 info.local_rank, info.local_size));
  }
}

}  // namespace

LaunchInfo detect_launch(const Getenv& getenv) {
  LaunchInfo info;
  if (auto rank = env_int(getenv, "OMPI_COMM_WORLD_RANK")) {
    info.launcher = "openmpi";
    info.rank = *rank;
    info.size = env_int(getenv, "OMPI_COMM_WORLD_SIZE").value_or(1);
    info.local_rank = env_int(getenv, "OMPI_COMM_WORLD_LOCAL_RANK").value_or(0);
    info.local_size = env_int(getenv, "OMPI_COMM_WORLD_LOCAL_SIZE").value_or(info.size);
    check_rank(info, "OMPI_COMM_WORLD_RANK");
    return info;
  }
  if (auto rank = env_int(getenv, "PMI_RANK")) {
    info.launcher = "pmi";
    info.rank = *rank;
    info.size = env_int(getenv, "PMI_SIZE").value_or(1);
    info.local_rank = env_int(getenv, "PMI_LOCAL_RANK")
                          .value_or(env_int(getenv, "MPI_LOCALRANKID").value_or(0));
    info.local_size = env_int(getenv, "PMI_LOCAL_SIZE")
                          .value_or(env_int(getenv, "MPI_LOCALNRANKS").value_or(info.size));
    check_rank(info, "PMI_RANK");
    return info;
  }
  // srun sets SLURM_STEP_ID for the tasks it starts; a batch script's own shell
  // (step "batch") also has SLURM_PROCID but was not launched as a rank.
  const char* step = getenv("SLURM_STEP_ID");
  if (step == nullptr) step = getenv("SLURM_STEPID");
  const bool in_step = step != nullptr && *step != '\0' && std::string(step) != "4294967294" &&
                       std::string(step) != "batch";
  if (in_step) {
    if (auto rank = env_int(getenv, "SLURM_PROCID")) {
      info.launcher = "slurm";
      info.rank = *rank;
      info.size = env_int(getenv, "SLURM_NTASKS").value_or(env_int(getenv, "SLURM_NPROCS").value_or(1));
      info.local_rank = env_int(getenv, "SLURM_LOCALID").value_or(0);
      const int node_id = env_int(getenv, "SLURM_NODEID").value_or(0);
      info.local_size = slurm_tasks_on_node(getenv("SLURM_STEP_TASKS_PER_NODE"), node_id)
                            .value_or(slurm_tasks_on_node(getenv("SLURM_TASKS_PER_NODE"), node_id)
                                          .value_or(info.size));
      check_rank(info, "SLURM_PROCID");
      return info;
    }
  }
  return info;
}

int cores_available() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof(set), &set) == 0) return std::max(1, CPU_COUNT(&set));
  return std::max(1, static_cast<int>(std::thread::hardware_concurrency()));
}

LaunchInfo detect_launch() {
  return detect_launch([](const char* name) -> const char* { return std::getenv(name); });
}

MpiSession::MpiSession() : launch_(detect_launch()) {
  if (!launch_.launched()) return;
#if defined(STRATA_RT_HAVE_MPI)
  int initialized = 0;
  MPI_Initialized(&initialized);
  if (initialized) {
    take_node_local_rank_from_mpi();
    return;
  }
  int provided = 0;
  // FUNNELED: only the main thread calls MPI (OpenMP threads never do).
  if (MPI_Init_thread(nullptr, nullptr, MPI_THREAD_FUNNELED, &provided) != MPI_SUCCESS) {
    throw InternalError("MPI_Init_thread failed");
  }
  owns_ = true;
  // Errors come back as codes that the communicator turns into CommError,
  // instead of MPI aborting the job from inside a call.
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  int size = 0;
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  if (size != launch_.size) {
    MPI_Finalize();
    owns_ = false;
    throw InputError("", "",
                     fmt::format("the {} launcher started {} ranks but MPI sees {}: each process "
                                 "initialized MPI alone (with srun, pass --mpi=pmix or pmi2 so "
                                 "MPI can reach the other ranks)",
                                 launch_.launcher, launch_.size, size));
  }
  take_node_local_rank_from_mpi();
#else
  if (launch_.size > 1) {
    throw InputError("", "",
                     fmt::format("launched as rank {} of {} by {}, but this strata was built "
                                 "without MPI (STRATA_WITH_MPI=OFF or MPI not found): install "
                                 "libopenmpi-dev and reconfigure, or run one rank",
                                 launch_.rank, launch_.size, launch_.launcher));
  }
#endif
}

// The node-local rank as MPI knows it (the ranks that share memory with this
// one), which holds under any launcher; the launcher's variables are what a
// build without MPI has.
void MpiSession::take_node_local_rank_from_mpi() {
#if defined(STRATA_RT_HAVE_MPI)
  int world_rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &world_rank);
  MPI_Comm node = MPI_COMM_NULL;
  if (MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, world_rank, MPI_INFO_NULL, &node) != MPI_SUCCESS) {
    return;  // keep the launcher's figures
  }
  MPI_Comm_rank(node, &launch_.local_rank);
  MPI_Comm_size(node, &launch_.local_size);
  MPI_Comm_free(&node);
#endif
}

MpiSession::~MpiSession() {
#if defined(STRATA_RT_HAVE_MPI)
  if (owns_) {
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (!finalized) MPI_Finalize();
  }
#endif
}

bool MpiSession::active() {
#if defined(STRATA_RT_HAVE_MPI)
  int initialized = 0;
  int finalized = 0;
  MPI_Initialized(&initialized);
  MPI_Finalized(&finalized);
  return initialized && !finalized;
#else
  return false;
#endif
}

}  // namespace strata::rt
