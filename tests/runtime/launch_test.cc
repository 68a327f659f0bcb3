// Launch detection from the environment (OpenMPI, PMI, SLURM) and the mpirun
// command line, including the three settings docs/runtime.md explains.
#include <cstdlib>
#include <map>
#include <string>

#include <gtest/gtest.h>

#include "core/error.h"
#include "runtime/launch/gpu_binding.h"
#include "runtime/launch/mpi_env.h"
#include "runtime/launch/mpi_launch.h"

namespace strata::rt {
namespace {

LaunchInfo detect(const std::map<std::string, std::string>& env) {
  return detect_launch([&env](const char* name) -> const char* {
    auto it = env.find(name);
    return it == env.end() ? nullptr : it->second.c_str();
  });
}

TEST(Launch, PlainRunIsOneRank) {
  const LaunchInfo info = detect({{"PATH", "/usr/bin"}});
  EXPECT_FALSE(info.launched());
  EXPECT_EQ(info.rank, 0);
  EXPECT_EQ(info.size, 1);
  EXPECT_EQ(info.local_size, 1);
}

TEST(Launch, OpenMpi) {
  const LaunchInfo info = detect({{"OMPI_COMM_WORLD_RANK", "5"},
                                  {"OMPI_COMM_WORLD_SIZE", "8"},
                                  {"OMPI_COMM_WORLD_LOCAL_RANK", "1"},
                                  {"OMPI_COMM_WORLD_LOCAL_SIZE", "4"}});
  EXPECT_EQ(info.launcher, "openmpi");
  EXPECT_EQ(info.rank, 5);
  EXPECT_EQ(info.size, 8);
  EXPECT_EQ(info.local_rank, 1);
  EXPECT_EQ(info.local_size, 4);
}

TEST(Launch, PmiWithHydraLocalVariables) {
  const LaunchInfo info = detect({{"PMI_RANK", "2"}, {"PMI_SIZE", "4"},
                                  {"MPI_LOCALRANKID", "0"}, {"MPI_LOCALNRANKS", "2"}});
  EXPECT_EQ(info.launcher, "pmi");
  EXPECT_EQ(info.rank, 2);
  EXPECT_EQ(info.size, 4);
  EXPECT_EQ(info.local_size, 2);
}

TEST(Launch, SlurmStepWithCompressedTasksPerNode) {
  // Node 2 of "4(x2),3": the first two nodes run 4 tasks, the third 3.
  const LaunchInfo info = detect({{"SLURM_STEP_ID", "0"}, {"SLURM_PROCID", "9"},
                                  {"SLURM_NTASKS", "11"}, {"SLURM_LOCALID", "1"},
                                  {"SLURM_NODEID", "2"}, {"SLURM_TASKS_PER_NODE", "4(x2),3"}});
  EXPECT_EQ(info.launcher, "slurm");
  EXPECT_EQ(info.rank, 9);
  EXPECT_EQ(info.size, 11);
  EXPECT_EQ(info.local_rank, 1);
  EXPECT_EQ(info.local_size, 3);
}

TEST(Launch, SlurmBatchShellIsNotARank) {
  // The batch script's own shell has SLURM_PROCID but was not started by srun.
  const LaunchInfo info = detect({{"SLURM_PROCID", "0"}, {"SLURM_NTASKS", "8"},
                                  {"SLURM_STEP_ID", "4294967294"}});
  EXPECT_FALSE(info.launched());
  EXPECT_EQ(info.size, 1);
}

TEST(Launch, BadVariablesAreInputErrorsNamingThem) {
  try {
    detect({{"OMPI_COMM_WORLD_RANK", "two"}});
    FAIL() << "no error";
  } catch (const InputError& e) {
    EXPECT_EQ(e.json_path(), "OMPI_COMM_WORLD_RANK");
    EXPECT_NE(e.message().find("'two'"), std::string::npos);
  }
  EXPECT_THROW(detect({{"OMPI_COMM_WORLD_RANK", "4"}, {"OMPI_COMM_WORLD_SIZE", "4"}}), InputError);
}

// Both GPU bindings a Slurm or mpirun launch gives: each task sees only its own
// GPU (srun --gpus-per-task=1: CUDA_VISIBLE_DEVICES=1 for task 1, which CUDA
// numbers 0), or every task sees the node's GPUs and takes its local rank's.
TEST(Launch, GpuFromWhatTheTaskSees) {
  for (int local = 0; local < 8; ++local) {
    EXPECT_EQ(cuda_ordinal_for_rank(1, local, 8), 0) << "one GPU per task, local rank " << local;
    EXPECT_EQ(cuda_ordinal_for_rank(8, local, 8), local) << "all GPUs visible, local rank " << local;
  }
  EXPECT_EQ(cuda_ordinal_for_rank(8, 1, 2), 1);  // 2 ranks on an 8-GPU node
  EXPECT_EQ(cuda_ordinal_for_rank(0, 3, 8), 0);  // no GPU: opening device 0 says so
  // Two GPUs per task on an 8-rank node: neither binding; refused, not guessed.
  EXPECT_THROW(cuda_ordinal_for_rank(2, 5, 8), InputError);
  EXPECT_THROW(cuda_ordinal_for_rank(4, 1, 8), InputError);
}

TEST(Launch, MpirunCommandCarriesTheContainerSettings) {
  const auto argv = mpirun_argv("/usr/bin/mpirun", 4, {"./tests", "--gtest_brief=1"});
  const std::vector<std::string> want = {
      "/usr/bin/mpirun", "-n", "4", "--oversubscribe",
      "--mca", "mpi_yield_when_idle", "1",
      "--mca", "btl_vader_single_copy_mechanism", "none",
      "./tests", "--gtest_brief=1"};
  EXPECT_EQ(argv, want);
  const auto env = mpirun_environment();
  const std::vector<std::pair<std::string, std::string>> want_env = {
      {"OMPI_ALLOW_RUN_AS_ROOT", "1"}, {"OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1"},
      {"OMPI_MCA_mpi_yield_when_idle", "1"}, {"OMPI_MCA_btl_vader_single_copy_mechanism", "none"}};
  EXPECT_EQ(env, want_env);
  EXPECT_EQ(mpirun_shell_command("mpirun", 2, {"a b"}),
            "env OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 "
            "OMPI_MCA_mpi_yield_when_idle=1 OMPI_MCA_btl_vader_single_copy_mechanism=none "
            "mpirun -n 2 --oversubscribe --mca mpi_yield_when_idle 1 --mca "
            "btl_vader_single_copy_mechanism none 'a b'");
  EXPECT_THROW(mpirun_argv("mpirun", 0, {"x"}), InternalError);
}

TEST(Launch, HelperStartsTwoRanksAsRoot) {
  // The helper's command line, run for real: as root (this machine's CI runs as
  // root) mpirun refuses to start without the allow-run-as-root settings.
  const std::string mpirun = find_mpirun();
  if (mpirun.empty()) GTEST_SKIP() << "mpirun not found (install openmpi-bin)";
  const std::string line = mpirun_shell_command(
      mpirun, 2, {STRATA_COMM_TEST_BIN, "--gtest_filter=CommTest.AllReduce*:CommTest.WorldMatches*"});
  const int status = std::system((line + " > /dev/null 2>&1").c_str());
  EXPECT_EQ(status, 0) << line;
}

}  // namespace
}  // namespace strata::rt
