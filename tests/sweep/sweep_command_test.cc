// `strata sweep` as a user runs it: the files do not depend on the thread count or
// on sharding over MPI ranks, bad constraints are errors that write nothing, and
// --nodes compares cluster sizes.
#include <gtest/gtest.h>

#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "cli_test_util.h"

namespace strata::testing {
namespace {

// A small sweep: the tiny GPT on one DGX A100 (a few hundred plans).
std::vector<std::string> small_sweep(const std::string& out_dir) {
  return {"sweep", "--model", "gpt-tiny", "--cluster", "dgx-a100-1node", "--global-batch-size", "16",
          "--full-top", "2", "--out", out_dir};
}

TEST(SweepCommand, SameFilesWithOneThreadTwoThreadsAndTwoMpiRanks) {
  TempDir dir;
  std::vector<std::string> one = small_sweep(dir.file("one"));
  one.insert(one.end(), {"--threads", "1"});
  CommandResult r1 = run_strata(one);
  ASSERT_EQ(r1.exit_code, 0) << r1.err;
  std::vector<std::string> two = small_sweep(dir.file("two"));
  two.insert(two.end(), {"--threads", "2"});
  CommandResult r2 = run_strata(two);
  ASSERT_EQ(r2.exit_code, 0) << r2.err;
  const std::string csv = read_file(dir.file("one/sweep.csv"));
  const std::string json = read_file(dir.file("one/sweep.json"));
  ASSERT_FALSE(csv.empty());
  EXPECT_EQ(csv, read_file(dir.file("two/sweep.csv")));
  EXPECT_EQ(json, read_file(dir.file("two/sweep.json")));
  // The printed ranking names the plans of the files.
  const nlohmann::json doc = nlohmann::json::parse(json);
  ASSERT_TRUE(doc.contains("plans"));
  EXPECT_NE(r1.out.find("why"), std::string::npos) << r1.out;

  if (!have_mpirun()) GTEST_SKIP() << "no mpirun in this build";
  std::vector<std::string> mpi = small_sweep(dir.file("mpi"));
  mpi.insert(mpi.end(), {"--threads", "1"});
  CommandResult rm = run_strata_mpirun(2, mpi);
  ASSERT_EQ(rm.exit_code, 0) << rm.err;
  EXPECT_EQ(csv, read_file(dir.file("mpi/sweep.csv")));
  EXPECT_EQ(json, read_file(dir.file("mpi/sweep.json")));
  // Rank 0 alone prints the table, and says that the plans were split.
  EXPECT_EQ(rm.out.find("rank  tp"), rm.out.rfind("rank  tp")) << rm.out;
  EXPECT_NE(rm.out.find("sharded over 2 MPI ranks"), std::string::npos) << rm.out;
  EXPECT_EQ(r1.out.find("sharded"), std::string::npos) << r1.out;
}

// sweep.json lists every plan the counts count: the simulated ones ranked, with
// their result, then those not simulated with why (Llama 3 8B on one DGX H100:
// plans without ZeRO or tensor parallelism do not fit), each with its memory, as
// sweep.csv lists them.
TEST(SweepCommand, SweepJsonListsThePlansThatDoNotFitWithTheirReason) {
  TempDir dir;
  CommandResult r = run_strata({"sweep", "--model", "llama3-8b", "--cluster", "dgx-h100-1node", "--global-batch-size",
                                "16", "--full-top", "0", "--where", "pp == 1", "--out", dir.file("out")});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const nlohmann::json doc = nlohmann::json::parse(read_file(dir.file("out/sweep.json")));
  const nlohmann::json& counts = doc["counts"];
  ASSERT_EQ(doc["plans"].size(), counts["enumerated"].get<std::size_t>() + counts["balanced"].get<std::size_t>());
  std::size_t simulated = 0, not_simulated = 0;
  for (const nlohmann::json& p : doc["plans"]) {
    if (p.contains("result")) {
      EXPECT_EQ(not_simulated, 0u) << "a simulated plan after one not simulated";
      EXPECT_EQ(p["rank"].get<std::size_t>(), simulated + 1);
      ++simulated;
    } else {
      EXPECT_FALSE(p.contains("rank"));
      EXPECT_FALSE(p["fits"].get<bool>());
      EXPECT_NE(p["prune_reason"].get<std::string>().find("exceed memory"), std::string::npos) << p["prune_reason"];
      EXPECT_GT(p["peak_bytes"].get<double>(), p["capacity_bytes"].get<double>());
      ++not_simulated;
    }
  }
  EXPECT_EQ(simulated, counts["simulated"].get<std::size_t>());
  EXPECT_EQ(not_simulated, counts["pruned_memory"].get<std::size_t>() + counts["too_large"].get<std::size_t>());
  EXPECT_GT(not_simulated, 0u);
  // `strata export --from-sweep` still finds a plan by its rank among them.
  CommandResult e = run_strata({"export", "--from-sweep", dir.file("out/sweep.json"), "--rank", "1", "--out",
                                dir.file("export")});
  EXPECT_EQ(e.exit_code, 0) << e.err;
}

TEST(SweepCommand, BadConstraintIsAnErrorThatWritesNothing) {
  TempDir dir;
  std::vector<std::string> args = small_sweep(dir.file("out"));
  args.insert(args.end(), {"--where", "tensor_parallel<=4"});
  CommandResult r = run_strata(args);
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("tensor_parallel"), std::string::npos) << r.err;
  EXPECT_FALSE(file_exists(dir.file("out/sweep.csv")));

  const std::string file = dir.write("c.json", R"({"tp": {"max": "four"}})");
  args = small_sweep(dir.file("out"));
  args.insert(args.end(), {"--constraints", file});
  r = run_strata(args);
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("c.json"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("$.tp"), std::string::npos) << r.err;
  EXPECT_FALSE(file_exists(dir.file("out/sweep.csv")));
}

// Mixtral 8x7B on 64 H100: the sweep tries each expert-parallel size dividing the
// 8 experts, etp 1 and tp, and no ZeRO-3 (MoE layers run with the distributed
// optimizer); its csv holds the expert layout, and the best plan keeps its
// all-to-all inside a node (ep <= 8 GPUs of a DGX).
TEST(SweepCommand, MoeSweepExploresExpertParallelism) {
  TempDir dir;
  CommandResult r = run_strata({"sweep", "--model", "mixtral-8x7b", "--cluster", "dgx-h100-8node",
                                "--global-batch-size", "256", "--where", "pp<=2", "--full-top", "1", "--out",
                                dir.path()});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("ep/etp"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("exp ep"), std::string::npos) << r.out;
  const std::string csv = read_file(dir.file("sweep.csv"));
  const std::string header = csv.substr(0, csv.find('\n'));
  ASSERT_NE(header.find(",ep,etp,moe_token_dispatcher_type,exposed_ep_s"), std::string::npos) << header;
  const nlohmann::json doc = nlohmann::json::parse(read_file(dir.file("sweep.json")));
  std::set<int> eps;
  for (const nlohmann::json& p : doc["plans"]) {
    if (!p.contains("result")) continue;  // not simulated: does not fit
    eps.insert(p["plan"]["ep"].get<int>());
    EXPECT_LE(p["plan"]["zero_stage"].get<int>(), 2);
    EXPECT_TRUE(p["result"]["exposed_comm_s"].contains("ep"));
  }
  EXPECT_EQ(eps, (std::set<int>{1, 2, 4, 8}));
  const nlohmann::json& best = doc["plans"][0];
  EXPECT_LE(best["plan"]["ep"].get<int>() * best["plan"]["etp"].get<int>(), 8);
}

// --moe-dispatcher flex: every MoE plan of the sweep uses DeepEP's dispatcher,
// the request records it, and export takes it from the ranked plan; on a dense
// model the option is bad input (exit 2, nothing written).
TEST(SweepCommand, MoeDispatcherChoosesEveryPlansDispatcher) {
  TempDir dir;
  CommandResult r = run_strata({"sweep", "--model", "mixtral-8x7b", "--cluster", "dgx-h100-8node",
                                "--global-batch-size", "256", "--where", "pp<=2", "--full-top", "1",
                                "--moe-dispatcher", "flex", "--out", dir.file("flex")});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find(", flex dispatcher"), std::string::npos) << r.out;
  const nlohmann::json doc = nlohmann::json::parse(read_file(dir.file("flex/sweep.json")));
  EXPECT_EQ(doc["request"]["moe_token_dispatcher_type"], "flex");
  ASSERT_FALSE(doc["plans"].empty());
  for (const nlohmann::json& p : doc["plans"]) EXPECT_EQ(p["plan"]["moe_token_dispatcher_type"], "flex");
  const CommandResult e = run_strata({"export", "--from-sweep", dir.file("flex/sweep.json"), "--rank", "1", "--force",
                                      "--out", dir.file("launch")});
  ASSERT_EQ(e.exit_code, 0) << e.err;
  EXPECT_NE(read_file(dir.file("launch/megatron-args.sh")).find("--moe-token-dispatcher-type flex"), std::string::npos);
  r = run_strata({"sweep", "--model", "llama3-8b", "--cluster", "dgx-h100-1node", "--moe-dispatcher", "flex", "--out",
                  dir.file("dense")});
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_NE(r.err.find("--moe-dispatcher"), std::string::npos) << r.err;
  EXPECT_FALSE(file_exists(dir.file("dense/sweep.json")));
}

// --samples with --rank-by p90: the plans re-simulated at full fidelity are
// sampled under clock variation and ordered by their P90 step time (ahead of the
// rest); the files hold their P50 and P90 and do not depend on the thread count;
// ranking by P90 without samples is bad input.
TEST(SweepCommand, RankByP90OrdersTheSampledPlans) {
  TempDir dir;
  auto sampled = [&](const std::string& out, const std::string& threads) {
    std::vector<std::string> args = small_sweep(dir.file(out));
    args.insert(args.end(), {"--samples", "8", "--clock-cv", "0.05", "--rank-by", "p90", "--threads", threads});
    return run_strata(args);
  };
  CommandResult r = sampled("one", "1");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  ASSERT_EQ(sampled("two", "2").exit_code, 0);
  EXPECT_EQ(read_file(dir.file("one/sweep.csv")), read_file(dir.file("two/sweep.csv")));
  EXPECT_EQ(read_file(dir.file("one/sweep.json")), read_file(dir.file("two/sweep.json")));
  const std::string csv = read_file(dir.file("one/sweep.csv"));
  EXPECT_NE(csv.substr(0, csv.find('\n')).find(",p50_step_time_s,p90_step_time_s"), std::string::npos);
  const nlohmann::json doc = nlohmann::json::parse(read_file(dir.file("one/sweep.json")));
  // small_sweep re-simulates 2 plans at full fidelity: both sampled, ranked 1 and 2 by P90.
  double last = 0.0;
  for (int i = 0; i < 2; ++i) {
    const nlohmann::json& res = doc["plans"][i]["result"];
    ASSERT_TRUE(res.contains("p90_step_time_s")) << i;
    const double p90 = res["p90_step_time_s"].get<double>();
    EXPECT_GE(p90, res["p50_step_time_s"].get<double>());
    EXPECT_GE(p90, last);
    EXPECT_LE(res["p90_ci95"][0].get<double>(), p90);
    EXPECT_GE(res["p90_ci95"][1].get<double>(), p90);
    last = p90;
  }
  EXPECT_FALSE(doc["plans"][2]["result"].contains("p90_step_time_s"));
  EXPECT_NE(r.out.find("P90 step"), std::string::npos) << r.out;
  std::vector<std::string> bad = small_sweep(dir.file("bad"));
  bad.insert(bad.end(), {"--rank-by", "p90"});
  r = run_strata(bad);
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("--rank-by"), std::string::npos) << r.err;
  EXPECT_FALSE(file_exists(dir.file("bad/sweep.csv")));
  // Kernel jitter on top slows the sampled steps further (each plan, found by its
  // label, has a higher P50 than with the clock spread alone); without --samples
  // it is bad input.
  std::vector<std::string> jittered = small_sweep(dir.file("jitter"));
  jittered.insert(jittered.end(), {"--samples", "8", "--clock-cv", "0.05", "--kernel-cv", "0.05", "--rank-by", "p90"});
  r = run_strata(jittered);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("kernel CV 5.0%"), std::string::npos) << r.out;
  const nlohmann::json with = nlohmann::json::parse(read_file(dir.file("jitter/sweep.json")));
  for (int i = 0; i < 2; ++i) {
    const nlohmann::json& res = with["plans"][i]["result"];
    ASSERT_TRUE(res.contains("p50_step_time_s")) << i;
    int same = -1;
    for (int j = 0; j < 2; ++j) {
      if (doc["plans"][j]["label"] == with["plans"][i]["label"]) same = j;
    }
    ASSERT_GE(same, 0) << with["plans"][i]["label"];
    EXPECT_GT(res["p50_step_time_s"].get<double>(), doc["plans"][same]["result"]["p50_step_time_s"].get<double>())
        << with["plans"][i]["label"];
  }
  bad = small_sweep(dir.file("bad2"));
  bad.insert(bad.end(), {"--kernel-cv", "0.02"});
  r = run_strata(bad);
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("--kernel-cv"), std::string::npos) << r.err;
  EXPECT_FALSE(file_exists(dir.file("bad2/sweep.csv")));
}

// --nodes: the best plan per size, with scaling efficiency against the smallest.
TEST(SweepCommand, NodesComparesClusterSizes) {
  TempDir dir;
  CommandResult r = run_strata({"sweep", "--model", "gpt-tiny", "--cluster", "dgx-h100-8node", "--global-batch-size",
                                "64", "--nodes", "1,2", "--full-top", "0", "--out", dir.path()});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::string csv = read_file(dir.file("scaling.csv"));
  EXPECT_EQ(csv.rfind("nodes,gpus,best_plan,tokens_per_s,step_time_s,mfu,scaling_efficiency\n", 0), 0u) << csv;
  EXPECT_NE(csv.find("\n1,8,"), std::string::npos) << csv;
  EXPECT_NE(csv.find("\n2,16,"), std::string::npos) << csv;
  EXPECT_TRUE(file_exists(dir.file("nodes-1/sweep.csv")));
  EXPECT_TRUE(file_exists(dir.file("nodes-2/sweep.json")));
}

}  // namespace
}  // namespace strata::testing
