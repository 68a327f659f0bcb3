// Inputs inside the documented ranges that would need more memory than the
// machine has are refused up front, naming the key (issue 22 R5): each of these
// ended in `internal error: std::bad_alloc` after seconds to minutes. The budget
// is pinned (STRATA_MEMORY_BUDGET_GIB) so the outcome is the same on any
// machine, and the address space is capped so a regression fails instead of
// exhausting the host.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "cli_test_util.h"

namespace strata::testing {
namespace {

constexpr const char* kBounded = "export STRATA_MEMORY_BUDGET_GIB=4; ulimit -v 6000000";

CommandResult run_bounded(const std::vector<std::string>& args) { return run_strata_after(kBounded, args, "timeout 120"); }

TEST(MemoryBounds, TenMillionSequencesAreRefusedAtTheGlobalBatchSize) {
  TempDir dir;
  const std::string plan =
      dir.write("plan.json", R"({"tp": 1, "pp": 2, "micro_batch_size": 1, "global_batch_size": 10000000})");
  for (const char* fidelity : {"full", "folded"}) {
    const CommandResult r = run_bounded({"simulate", "--model", "tiny", "--plan", plan, "--cluster", "dgx-a100-1node",
                                         "--fidelity", fidelity, "--out", dir.file("out")});
    EXPECT_EQ(r.exit_code, 2) << fidelity << ": " << r.err;
    EXPECT_NE(r.err.find(plan + ": $.global_batch_size: too large to simulate: 2500000 micro-batches"),
              std::string::npos)
        << r.err;
    EXPECT_NE(r.err.find("4.0 GiB (STRATA_MEMORY_BUDGET_GIB)"), std::string::npos) << r.err;
    EXPECT_FALSE(file_exists(dir.file("out")));
  }
}

TEST(MemoryBounds, ASweepOfHugeBatchesSaysItsPlansAreTooLargeToSimulate) {
  TempDir dir;
  const CommandResult r = run_bounded({"sweep", "--model", "tiny", "--cluster", "dgx-a100-1node",
                                       "--global-batch-size", "1073741824", "--out", dir.file("s")});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("too large to simulate here"), std::string::npos) << r.out;
  const nlohmann::json sweep = nlohmann::json::parse(read_file(dir.file("s/sweep.json")));
  const nlohmann::json& c = sweep["counts"];
  EXPECT_EQ(c["simulated"], 0);
  EXPECT_GT(c["too_large"].get<int>(), 0);
  EXPECT_EQ(c["too_large"].get<int>() + c["pruned_memory"].get<int>(), c["enumerated"].get<int>());
  EXPECT_NE(read_file(dir.file("s/sweep.csv")).find("too large to simulate"), std::string::npos);
}

TEST(MemoryBounds, AMillionNodesAreRefusedBeforeTheirGraphIsBuilt) {
  TempDir dir;
  const std::string fabric =
      R"("fabric": {"kind": "infiniband", "nics_per_node": 8, "nic_gbps": 400, "oversubscription": 1, "switch_radix": )";
  const std::string head = R"({"name": "huge", "nodes": 1048576, "gpus_per_node": 8, "node": "dgx-h100", "profile": "h100-sxm5-80gb", )";
  const std::string radix64 = dir.write("radix64.json", head + fabric + "64}}");
  const std::string radix1024 = dir.write("radix1024.json", head + fabric + "1024}}");
  CommandResult r = run_bounded({"topo", "show", "--cluster", radix64});
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_NE(r.err.find(radix64 + ": $.fabric.switch_radix: 1048576 nodes need 8192 pods"), std::string::npos)
      << r.err;
  r = run_bounded({"topo", "show", "--cluster", radix1024});
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_NE(r.err.find(radix1024 + ": $.nodes: 1048576 nodes need about 32.0 GiB"), std::string::npos) << r.err;
}

TEST(MemoryBounds, ABudgetThatIsNotANumberIsBadInput) {
  const CommandResult r = run_strata_after("export STRATA_MEMORY_BUDGET_GIB=lots",
                                           {"topo", "show", "--cluster", "dgx-h100-8node"});
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_NE(r.err.find("STRATA_MEMORY_BUDGET_GIB: \"lots\" is not a positive number"), std::string::npos) << r.err;
}

}  // namespace
}  // namespace strata::testing
