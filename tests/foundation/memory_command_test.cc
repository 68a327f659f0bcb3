#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "cli_test_util.h"

namespace strata::testing {
namespace {

TEST(MemoryCommand, PrintsTablePerStageAndVerdict) {
  TempDir dir;
  CommandResult r = run_strata({"memory", "--model", "gpt3-175b", "--plan", "gpt3-175b-1024",
                                "--cluster", "dgx-a100-128node", "--json", dir.file("m.json")});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("verdict  FITS"), std::string::npos) << r.out;
  nlohmann::json j = nlohmann::json::parse(read_file(dir.file("m.json")));
  EXPECT_EQ(j["memory"]["stages"].size(), 8u);
  EXPECT_TRUE(j["memory"]["fits"].get<bool>());
  EXPECT_EQ(j["inputs"]["plan"]["dp"], 16);
  // One table row per stage.
  for (int stage = 0; stage < 8; ++stage) {
    EXPECT_NE(r.out.find("\n    " + std::to_string(stage) + "     12 "), std::string::npos) << r.out;
  }
}

TEST(MemoryCommand, SaysDoesNotFit) {
  TempDir dir;
  std::string plan = dir.write("plan.json", R"({"tp": 1, "pp": 1, "micro_batch_size": 1,
      "global_batch_size": 8})");
  CommandResult r = run_strata({"memory", "--model", "llama3-70b", "--plan", plan, "--cluster",
                                "dgx-h100-1node"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("verdict  DOES NOT FIT"), std::string::npos) << r.out;
}

TEST(MemoryCommand, SameInputsSameBytes) {
  TempDir dir;
  std::vector<std::string> args = {"memory", "--model", "llama3-70b", "--plan", "llama3-70b-64",
                                   "--cluster", "dgx-h100-8node", "--json"};
  auto a = args, b = args;
  a.push_back(dir.file("a.json"));
  b.push_back(dir.file("b.json"));
  CommandResult ra = run_strata(a), rb = run_strata(b);
  ASSERT_EQ(ra.exit_code, 0) << ra.err;
  EXPECT_EQ(ra.out, rb.out);
  EXPECT_EQ(read_file(dir.file("a.json")), read_file(dir.file("b.json")));
}

TEST(Cli, HelpOnEverySubcommand) {
  CommandResult r = run_strata({"--help"});
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_NE(r.out.find("memory"), std::string::npos);
  CommandResult m = run_strata({"memory", "--help"});
  EXPECT_EQ(m.exit_code, 0);
  EXPECT_NE(m.out.find("--cluster"), std::string::npos);
}

}  // namespace
}  // namespace strata::testing
