// Outputs are written all or none, never over an input, and a failure to write
// is told apart from bad input: exit 3 with the system's reason (docs/formats.md).
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <filesystem>
#include <string>
#include <vector>

#include "cli_test_util.h"

namespace strata::testing {
namespace {

// The shell makes every file over 4 blocks "too large" (EFBIG, what a full disk
// gives as ENOSPC), and ignores SIGXFSZ so that the write fails instead of
// killing the process.
constexpr const char* kDiskFull = "ulimit -f 4; trap '' XFSZ";

const char* kPlan = R"({"tp": 2, "pp": 1, "micro_batch_size": 1, "global_batch_size": 8})";

TEST(OutputSafety, AnOutputNamingAnInputIsRefusedAndTheInputKept) {
  TempDir dir;
  const std::string plan = dir.write("plan.json", kPlan);
  CommandResult r = run_strata({"memory", "--model", "tiny", "--plan", plan, "--cluster", "dgx-a100-1node",
                                "--json", plan});
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_NE(r.err.find("is an input of this command"), std::string::npos) << r.err;
  EXPECT_EQ(read_file(plan), kPlan);

  // The same file under another name is the same input.
  std::filesystem::create_symlink(plan, dir.file("alias.json"));
  r = run_strata({"memory", "--model", "tiny", "--plan", plan, "--cluster", "dgx-a100-1node", "--json",
                  dir.file("alias.json")});
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_EQ(read_file(plan), kPlan);
}

// `validate --run DIR --json DIR/measured.json` used to replace the measured run
// with the comparison.
TEST(OutputSafety, ValidateDoesNotOverwriteTheMeasuredRun) {
  TempDir dir;
  dir.write("run/prediction.json", R"({"step_time_s": 0.020, "memory": {"peak_bytes": 1048576},
    "inputs": {"plan": {"tp": 2, "pp": 1, "dp": 1, "micro_batch_size": 1, "global_batch_size": 4,
                        "zero_stage": 1}}})");
  const std::string measured_text = R"({"step_time_s": 0.025, "ranks": 2, "memory": {"peak_bytes": 1101004.8},
    "plan": {"tp": 2, "pp": 1, "dp": 1, "micro_batch_size": 1, "global_batch_size": 4, "zero_stage": 1}})";
  const std::string measured = dir.write("run/measured.json", measured_text);
  CommandResult r = run_strata({"validate", "--run", dir.file("run"), "--json", measured});
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_NE(r.err.find("measured.json"), std::string::npos) << r.err;
  EXPECT_EQ(read_file(measured), measured_text);
  // The same comparison to a new file works.
  r = run_strata({"validate", "--run", dir.file("run"), "--json", dir.file("comparison.json")});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(file_exists(dir.file("comparison.json")));
}

// On a full disk simulate left result.json without trace.json, and export 2 of
// its files; both exited 2 as for bad input, without the system's reason.
TEST(OutputSafety, AFullDiskLeavesNoOutputAndExitsThree) {
  TempDir dir;
  const std::vector<std::vector<std::string>> commands = {
      {"simulate", "--model", "tiny", "--plan", "tiny-2", "--cluster", "dgx-a100-1node", "--out",
       dir.file("sim")},
      {"export", "--model", "tiny", "--plan", "tiny-2", "--cluster", "dgx-a100-1node", "--out",
       dir.file("export")}};
  for (const auto& args : commands) {
    CommandResult r = run_strata_after(kDiskFull, args);
    EXPECT_EQ(r.exit_code, 3) << args[0] << ": " << r.err;
    EXPECT_NE(r.err.find("File too large"), std::string::npos) << args[0] << ": " << r.err;
    EXPECT_FALSE(file_exists(args.back())) << args[0] << " left " << args.back();
  }
  // Without the limit both write everything.
  for (const auto& args : commands) {
    CommandResult r = run_strata(args);
    EXPECT_EQ(r.exit_code, 0) << args[0] << ": " << r.err;
  }
  EXPECT_TRUE(file_exists(dir.file("sim/result.json")));
  EXPECT_TRUE(file_exists(dir.file("sim/trace.json")));
  EXPECT_TRUE(file_exists(dir.file("export/strata-run.json")));
}

// A file nested 100,000 deep crashed every loader (exit 139).
TEST(OutputSafety, DeeplyNestedInputIsABadInput) {
  TempDir dir;
  const std::string deep = dir.write("deep.json", std::string(100000, '[') + std::string(100000, ']'));
  for (const char* flag : {"--model", "--plan", "--cluster"}) {
    std::vector<std::string> args = {"memory", "--model", "tiny", "--plan", "tiny-2", "--cluster", "dgx-a100-1node"};
    for (std::size_t i = 0; i + 1 < args.size(); ++i) {
      if (args[i] == flag) args[i + 1] = deep;
    }
    CommandResult r = run_strata(args);
    EXPECT_EQ(r.exit_code, 2) << flag << ": " << r.err;
    EXPECT_NE(r.err.find("nested deeper than 256"), std::string::npos) << flag << ": " << r.err;
  }
}

// A FIFO blocked the loaders that did not check for one (sweep's constraints,
// export --from-sweep, run, validate's measured.json) forever.
TEST(OutputSafety, AFifoIsRefusedByEveryLoader) {
  TempDir dir;
  const std::string fifo = dir.file("pipe.json");
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  std::filesystem::create_directories(dir.file("run"));
  ASSERT_EQ(::mkfifo(dir.file("run/measured.json").c_str(), 0600), 0);
  dir.write("run/prediction.json", R"({"step_time_s": 0.020, "memory": {"peak_bytes": 1}})");
  const std::vector<std::vector<std::string>> commands = {
      {"sweep", "--model", "tiny", "--cluster", "dgx-a100-1node", "--constraints", fifo, "--out", dir.file("s")},
      {"export", "--from-sweep", fifo, "--rank", "1", "--out", dir.file("e")},
      {"run", fifo},
      {"validate", "--run", dir.file("run")}};
  for (const auto& args : commands) {
    // `timeout` turns a hang into a failure instead of a stuck test.
    CommandResult r = run_strata_after("true", args, "timeout 60");
    EXPECT_EQ(r.exit_code, 2) << args[0] << ": " << r.err;
    EXPECT_NE(r.err.find("FIFO"), std::string::npos) << args[0] << ": " << r.err;
  }
}

// CLI11's ranges let NaN through and node counts went unchecked: --nodes 0
// ended in SIGFPE, -1 in SIGSEGV.
TEST(OutputSafety, OutOfRangeFlagsAreBadInput) {
  TempDir dir;
  const std::vector<std::vector<std::string>> commands = {
      {"sweep", "--model", "tiny", "--cluster", "dgx-h100-8node", "--nodes", "0", "--out", dir.file("s")},
      {"sweep", "--model", "tiny", "--cluster", "dgx-h100-8node", "--nodes", "-1", "--out", dir.file("s")},
      {"sweep", "--model", "tiny", "--cluster", "dgx-a100-1node", "--seq-length", "2147483647", "--out",
       dir.file("s")},
      {"export", "--model", "tiny", "--plan", "tiny-2", "--cluster", "dgx-a100-1node", "--timeout", "nan",
       "--out", dir.file("e")},
      {"simulate", "--model", "tiny", "--plan", "tiny-2", "--cluster", "dgx-a100-1node", "--train-tokens",
       "nan", "--out", dir.file("m")},
      {"simulate", "--model", "tiny", "--plan", "tiny-2", "--cluster", "dgx-a100-1node", "--train-tokens",
       "1e308", "--out", dir.file("m")}};
  for (const auto& args : commands) {
    CommandResult r = run_strata(args);
    std::string line;
    for (const auto& a : args) line += a + " ";
    EXPECT_EQ(r.exit_code, 2) << line << ": " << r.err;
    EXPECT_LT(r.err.size(), 400u) << line << ": " << r.err;  // no 309-digit bounds
    EXPECT_FALSE(file_exists(args.back())) << line;
  }
}

}  // namespace
}  // namespace strata::testing
