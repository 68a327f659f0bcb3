// `strata topo show` run as a user would.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "cli_test_util.h"

namespace strata::testing {
namespace {

TEST(TopoCommand, ShowsTheNodeMatrixAndBusbw) {
  CommandResult r = run_strata({"topo", "show", "--cluster", "dgx-a100-2node"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  // NVLink between GPUs (240 GB/s achievable, 2 links), PCIe to the local NICs.
  EXPECT_NE(r.out.find("NV 240 (2)"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("PIX 24 (2)"), std::string::npos);
  EXPECT_NE(r.out.find("socket 0: GPUs 0-3, NICs 0-3"), std::string::npos);
  EXPECT_NE(r.out.find("socket 1: GPUs 4-7, NICs 4-7"), std::string::npos);
  // Bisection of two nodes: node 0's 8 HDR NICs, 25 GB/s x 4096/4122 each.
  EXPECT_NE(r.out.find("bisection 198.7 GB/s"), std::string::npos);
  EXPECT_NE(r.out.find("all_reduce as NCCL 2.20.3"), std::string::npos);
  EXPECT_NE(r.out.find("datasheet"), std::string::npos);
  EXPECT_NE(r.out.find("cluster      16    1 GiB"), std::string::npos);
}

TEST(TopoCommand, PcieBoxShowsTheSocketCrossing) {
  CommandResult r = run_strata({"topo", "show", "--cluster", "pcie-8gpu-1node"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("SYS 10 (5)"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("NODE 24 (4)"), std::string::npos);
  EXPECT_NE(r.out.find("bisection none"), std::string::npos);
}

TEST(TopoCommand, WritesJsonAndDotIdentically) {
  TempDir dir;
  auto run = [&](const std::string& suffix) {
    return run_strata({"topo", "show", "--cluster", "dgx-h100-1node", "--json", dir.file("t" + suffix + ".json"),
                       "--dot", dir.file("t" + suffix + ".dot"), "--group", "0,1,2,3"});
  };
  CommandResult a = run("a");
  ASSERT_EQ(a.exit_code, 0) << a.err;
  CommandResult b = run("b");
  ASSERT_EQ(b.exit_code, 0) << b.err;
  EXPECT_EQ(read_file(dir.file("ta.json")), read_file(dir.file("tb.json")));
  EXPECT_EQ(read_file(dir.file("ta.dot")), read_file(dir.file("tb.dot")));
  nlohmann::json j = nlohmann::json::parse(read_file(dir.file("ta.json")));
  EXPECT_EQ(j["bandwidths"], "datasheet");
  ASSERT_EQ(j["all_reduce"].size(), 3u);
  EXPECT_EQ(j["all_reduce"][2]["algorithm"], "nvls");
  EXPECT_EQ(j["node_matrix"]["rows"][0][1]["type"], "NV");
  EXPECT_EQ(j["group_all_reduce"].size(), 3u);
  std::string dot = read_file(dir.file("ta.dot"));
  EXPECT_EQ(dot.rfind("digraph cluster {", 0), 0u);
  EXPECT_NE(dot.find("nvlink 370.8 GB/s\", dir=both"), std::string::npos);
}

TEST(TopoCommand, BadInputWritesNothing) {
  TempDir dir;
  std::string bad = dir.write("bad.json", R"({"name": "b", "nodes": 1, "gpus_per_node": 2,
      "node": {"gpus": 2, "pcie": {"bandwidth_gbytes_per_s": 31.5}}, "profile": "a100-sxm4-80gb",
      "graph": {"vertices": [{"name": "g0", "kind": "gpu", "node": 0}, {"name": "g1", "kind": "gpu", "node": 0}],
                "links": [{"from": "g0", "to": "g2", "kind": "nvlink", "bandwidth_gbytes_per_s": 10}]}})");
  CommandResult r = run_strata({"topo", "show", "--cluster", bad, "--json", dir.file("out.json")});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("$.graph.links[0].to"), std::string::npos) << r.err;
  EXPECT_FALSE(file_exists(dir.file("out.json")));

  CommandResult g = run_strata({"topo", "show", "--cluster", "dgx-a100-1node", "--group", "0,99",
                                "--json", dir.file("out.json")});
  EXPECT_EQ(g.exit_code, 2);
  EXPECT_NE(g.err.find("--group"), std::string::npos) << g.err;
  EXPECT_NE(g.err.find("GPU 99 does not exist"), std::string::npos);
  EXPECT_FALSE(file_exists(dir.file("out.json")));
}

}  // namespace
}  // namespace strata::testing
