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

// Llama 3 405B's long-context stage as its paper ran it (arXiv 2407.21783: 16,384
// H100, TP 8 CP 16 PP 16 DP 8 at 131,072 tokens, 126 layers as 7 / 8 x 14 / 7):
// it was trained, so it must fit; every stage is shown with its own layers.
TEST(MemoryCommand, Llama3_405bAt128kTokensFitsWithItsUnevenStages) {
  TempDir dir;
  CommandResult r = run_strata({"memory", "--model", "llama3-405b", "--seq-length", "131072", "--plan",
                                "llama3-405b-16384-128k", "--cluster", "meta-h100-2048node", "--json",
                                dir.file("m.json")});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("verdict  FITS"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("seq 131072"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("tp 8 cp 16 (allgather) pp 16 dp 8"), std::string::npos) << r.out;
  const nlohmann::json j = nlohmann::json::parse(read_file(dir.file("m.json")));
  const nlohmann::json& stages = j["memory"]["stages"];
  ASSERT_EQ(stages.size(), 16u);
  for (int s = 0; s < 16; ++s) {
    EXPECT_EQ(stages[s]["layers"], s == 0 || s == 15 ? 7 : 8) << "stage " << s;
  }
  // 126 layers do not split evenly over 16 stages: without the uneven split the
  // plan is refused, naming the key and the way out.
  const std::string even = dir.write("even.json", R"({"tp": 8, "cp": 16, "pp": 16, "dp": 8, "micro_batch_size": 1,
      "global_batch_size": 128, "zero_stage": 2, "sequence_parallel": true, "flash_attention": true})");
  CommandResult bad = run_strata({"memory", "--model", "llama3-405b", "--seq-length", "131072", "--plan", even,
                                  "--cluster", "meta-h100-2048node"});
  EXPECT_EQ(bad.exit_code, 2);
  EXPECT_NE(bad.err.find("$.pp"), std::string::npos) << bad.err;
  EXPECT_NE(bad.err.find("decoder_first_pipeline_num_layers"), std::string::npos) << bad.err;
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
