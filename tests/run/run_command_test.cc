// The commands as a user runs them: strata export, strata run alone and under
// mpirun, strata validate --run; and the failures: a bad config, a world that
// does not match the plan, a rank killed mid-run and a rank that hangs - each
// a clean error, every rank gone within 30 s, no half-written output.
#include <dirent.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <map>
#include <set>
#include <sstream>
#include <thread>
#include <tuple>

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "cli_test_util.h"
#include "core/trace_vocabulary.h"
#include "runtime/launch/mpi_launch.h"

extern char** environ;

namespace strata::testing {
namespace {

using Clock = std::chrono::steady_clock;

// One host with `gpus` "GPUs" (ranks) and the A100 profile's figures; runs use
// the cpu backend (export --backend cpu). The plans are bf16: the A100 datasheet
// profile costs bf16 and fp16 GEMMs only, and the cpu backend stores and
// computes bf16 in fp32 (a note in measured.json says so).
std::string cluster_file(const TempDir& dir, int gpus) {
  return dir.write("cluster.json", nlohmann::json{
                                       {"name", "test-host"},
                                       {"nodes", 1},
                                       {"gpus_per_node", gpus},
                                       {"node",
                                        {{"gpus", gpus},
                                         {"gpus_per_pcie_switch", gpus},
                                         {"pcie", {{"bandwidth_gbytes_per_s", 25.0}, {"latency_us", 1.0},
                                                   {"source", "test figure"}}}}},
                                       {"profile", "a100-sxm4-80gb"}}
                                       .dump());
}

// Exports tiny (or another shipped model) with the given plan into dir/out;
// returns the run config's path.
std::string export_tiny(const TempDir& dir, int gpus, const std::string& plan, int steps,
                        const std::string& timeout = "20", const std::string& model = "tiny") {
  const std::string plan_file = dir.write("plan.json", plan);
  const CommandResult r = run_strata({"export", "--model", model, "--plan", plan_file, "--cluster", cluster_file(dir, gpus),
                                      "--backend", "cpu", "--steps", std::to_string(steps), "--warmup-steps", "1",
                                      "--timeout", timeout, "--out", dir.file("out")});
  EXPECT_EQ(r.exit_code, 0) << r.err << r.out;
  return dir.file("out/strata-run.json");
}

std::string mpirun_command(int ranks, const std::vector<std::string>& args) {
  std::vector<std::string> command = {STRATA_RUN_BIN};
  command.insert(command.end(), args.begin(), args.end());
  return rt::mpirun_shell_command(rt::find_mpirun(), ranks, command);
}

// Runs a shell command line, capturing both streams.
CommandResult shell(const std::string& command, const TempDir& dir) {
  const std::string out = dir.file("cmd.out");
  const std::string err = dir.file("cmd.err");
  const int status = std::system((command + " >" + out + " 2>" + err + " </dev/null").c_str());
  CommandResult r;
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  r.out = read_file(out);
  r.err = read_file(err);
  return r;
}

TEST(RunCommand, ExportThenRunOneRankWritesMeasuredFiles) {
  TempDir dir;
  const std::string config = export_tiny(dir, 1, R"({"tp": 1, "pp": 1, "micro_batch_size": 1,
    "global_batch_size": 2, "dtype": "bf16"})", 3);
  for (const char* f : {"strata-run.json", "prediction.json", "megatron-args.sh", "deepspeed.json", "launch.slurm",
                        "launch-mpirun.sh"}) {
    EXPECT_TRUE(file_exists(dir.file(std::string("out/") + f))) << f;
  }
  EXPECT_EQ(access(dir.file("out/launch-mpirun.sh").c_str(), X_OK), 0);
  const CommandResult r = run_strata({"run", config});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const nlohmann::json m = nlohmann::json::parse(read_file(dir.file("out/measured.json")));
  EXPECT_EQ(m["schema"], "strata-measured/1");
  EXPECT_EQ(m["ranks"], 1);
  ASSERT_EQ(m["step_times_s"].size(), 3u);
  EXPECT_GT(m["step_time_s"].get<double>(), 0.0);
  EXPECT_LT(m["loss"][2].get<double>(), m["loss"][0].get<double>());  // it trains
  EXPECT_GT(m["memory"]["peak_bytes"].get<double>(), 0.0);
  const nlohmann::json trace = nlohmann::json::parse(read_file(dir.file("out/measured-trace.json")));
  EXPECT_EQ(trace["otherData"]["strata"]["kind"], "measured");
  int gemms = 0;
  for (const auto& e : trace["traceEvents"]) gemms += e.value("cat", "") == "gemm";
  // 4 layers x 4 weight GEMMs x (forward + dgrad + wgrad) x 2 micro-batches, plus the logits' 3 x 2.
  EXPECT_EQ(gemms, 4 * 4 * 3 * 2 + 3 * 2);
  EXPECT_NE(r.out.find("step time"), std::string::npos) << r.out;
}

TEST(RunCommand, TwoRanksUnderMpirunThenValidateRun) {
  TempDir dir;
  const std::string config = export_tiny(dir, 2, R"({"tp": 2, "pp": 1, "micro_batch_size": 1,
    "global_batch_size": 2, "dtype": "bf16", "sequence_parallel": true})", 3);
  const CommandResult r = shell(mpirun_command(2, {"run", config}), dir);
  ASSERT_EQ(r.exit_code, 0) << r.err << r.out;
  const nlohmann::json m = nlohmann::json::parse(read_file(dir.file("out/measured.json")));
  EXPECT_EQ(m["ranks"], 2);
  EXPECT_EQ(m["transport"], "mpi");
  ASSERT_EQ(m["memory"]["peak_bytes_per_rank"].size(), 2u);
  const nlohmann::json trace = nlohmann::json::parse(read_file(dir.file("out/measured-trace.json")));
  bool tp_collective = false, rank1 = false;
  for (const auto& e : trace["traceEvents"]) {
    tp_collective = tp_collective || e.value("cat", "") == "tp";
    rank1 = rank1 || (e.value("ph", "") == "X" && e.value("pid", -1) == 1);
  }
  EXPECT_TRUE(tp_collective);
  EXPECT_TRUE(rank1);
  const CommandResult v = run_strata({"validate", "--run", dir.file("out"), "--json", dir.file("v.json")});
  ASSERT_EQ(v.exit_code, 0) << v.err;
  EXPECT_NE(v.out.find("tp 2, m 2, seq par"), std::string::npos) << v.out;
  const nlohmann::json vj = nlohmann::json::parse(read_file(dir.file("v.json")));
  ASSERT_EQ(vj["runs"].size(), 1u);
  EXPECT_DOUBLE_EQ(vj["runs"][0]["measured_step_time_s"].get<double>(), m["step_time_s"].get<double>());
}

// An MoE plan (tiny-moe: every layer routes to 2 of 4 experts) with its experts
// over ep 2: exported with strata-run.json, run under mpirun, each rank's trace
// has the dispatch and combine all-to-alls forward and backward and its local
// experts' GEMMs, and measured.json says how unevenly the routing loaded the ranks.
TEST(RunCommand, MoePlanRunsItsExpertsOverTwoRanks) {
  TempDir dir;
  const std::string config = export_tiny(dir, 2, R"({"tp": 1, "pp": 1, "ep": 2, "micro_batch_size": 1,
    "global_batch_size": 4, "dtype": "bf16", "moe_token_dispatcher_type": "alltoall", "zero_stage": 1})", 3, "20",
                                         "tiny-moe");
  const nlohmann::json run_config = nlohmann::json::parse(read_file(config));
  EXPECT_EQ(run_config["parallel"]["expert_model_parallel_size"], 2);
  EXPECT_EQ(run_config["parallel"]["moe_token_dispatcher_type"], "alltoall");
  EXPECT_EQ(run_config["model"]["num_experts"], 4);
  const CommandResult r = shell(mpirun_command(2, {"run", config}), dir);
  ASSERT_EQ(r.exit_code, 0) << r.err << r.out;
  EXPECT_NE(r.out.find("ep 2 (4 experts, top-2)"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("the busiest ep rank took"), std::string::npos) << r.out;
  const nlohmann::json m = nlohmann::json::parse(read_file(dir.file("out/measured.json")));
  // Two ranks: the busier holds between the mean and all of the routed tokens.
  const double load = m["moe"]["expert_load_max_over_mean"];
  EXPECT_GE(load, 1.0);
  EXPECT_LE(load, 2.0);
  const nlohmann::json trace = nlohmann::json::parse(read_file(dir.file("out/measured-trace.json")));
  std::map<int, int> a2a, fc1;
  for (const auto& e : trace["traceEvents"]) {
    if (e.value("ph", "") != "X") continue;
    if (e["name"] == "all_to_all" && e.value("cat", "") == "ep") ++a2a[e["pid"].get<int>()];
    if (e["name"] == "expert_fc1") ++fc1[e["pid"].get<int>()];
  }
  for (int rank : {0, 1}) {
    // 4 MoE layers x 2 micro-batches: dispatch and combine, forward and backward; one fc1 GEMM group each forward.
    EXPECT_EQ(a2a[rank], 4 * 2 * 4) << "rank " << rank;
    EXPECT_EQ(fc1[rank], 4 * 2) << "rank " << rank;
  }
  const CommandResult v = run_strata({"validate", "--run", dir.file("out")});
  ASSERT_EQ(v.exit_code, 0) << v.err;
  EXPECT_NE(v.out.find("ep 2, dp 2, m 2, ZeRO 1"), std::string::npos) << v.out;
}

// pp 2 under mpirun: the measured trace draws every pipeline transfer as a flow
// from the sender's send slice to the receiver's receive slice, as the predicted
// trace does: one "s" on rank 0's pp-send track and one "f" on rank 1's pp-recv
// track per forward micro-batch (the other way for the backward), paired by id,
// category and name, each inside a slice of its own rank and track.
TEST(RunCommand, MeasuredPipelineTransfersAreFlowsFromSendToReceive) {
  TempDir dir;
  const std::string config = export_tiny(dir, 2, R"({"tp": 1, "pp": 2, "micro_batch_size": 1,
    "global_batch_size": 4, "dtype": "bf16"})", 2);
  const CommandResult r = shell(mpirun_command(2, {"run", config}), dir);
  ASSERT_EQ(r.exit_code, 0) << r.err << r.out;
  const nlohmann::json trace = nlohmann::json::parse(read_file(dir.file("out/measured-trace.json")));
  std::map<std::tuple<std::int64_t, std::string, std::string>, std::vector<nlohmann::json>> ends;
  std::vector<nlohmann::json> slices;
  for (const auto& e : trace["traceEvents"]) {
    const std::string ph = e.value("ph", "");
    if (ph == "X") slices.push_back(e);
    if (ph == "s" || ph == "f") ends[{e["id"].get<std::int64_t>(), e["cat"], e["name"]}].push_back(e);
  }
  const int send = static_cast<int>(trace::Lane::kPpSend), recv = static_cast<int>(trace::Lane::kPpRecv);
  std::map<std::string, int> flows;  // name -> count
  for (const auto& [key, pair] : ends) {
    ASSERT_EQ(pair.size(), 2u) << std::get<0>(key);
    const nlohmann::json& s = pair[0]["ph"] == "s" ? pair[0] : pair[1];
    const nlohmann::json& f = pair[0]["ph"] == "s" ? pair[1] : pair[0];
    ASSERT_EQ(s["ph"], "s");
    ASSERT_EQ(f["ph"], "f");
    EXPECT_EQ(f["bp"], "e");
    EXPECT_NE(s["pid"], f["pid"]);
    EXPECT_EQ(s["tid"].get<int>() % trace::kNumLanes, send);
    EXPECT_EQ(f["tid"].get<int>() % trace::kNumLanes, recv);
    // activations go from rank 0 to rank 1, gradients back
    EXPECT_EQ(s["pid"].get<int>(), std::get<2>(key) == "activations" ? 0 : 1) << std::get<2>(key);
    for (const nlohmann::json* end : {&s, &f}) {
      bool bound = false;
      for (const auto& x : slices) {
        bound = bound || (x["pid"] == (*end)["pid"] && x["tid"] == (*end)["tid"] && x["ts"] == (*end)["ts"]);
      }
      EXPECT_TRUE(bound) << end->dump();
    }
    ++flows[std::get<2>(key)];
  }
  // 4 micro-batches on one pipeline, each once forward and once backward
  EXPECT_EQ(flows["activations"], 4);
  EXPECT_EQ(flows["gradients"], 4);
}

// A zero-bubble plan runs: every linear layer's weight-gradient GEMM of every
// micro-batch runs in a W op (phase "wgrad"), after the B of its micro-batch,
// and none runs in B; the attention core's GEMMs (no weights) stay in B.
TEST(RunCommand, ZeroBubblePlanRunsItsWeightGradientsInW) {
  TempDir dir;
  const std::string config = export_tiny(dir, 2, R"({"tp": 1, "pp": 2, "micro_batch_size": 1,
    "global_batch_size": 4, "dtype": "bf16", "schedule": "zb-h1"})", 2);
  const CommandResult r = shell(mpirun_command(2, {"run", config}), dir);
  ASSERT_EQ(r.exit_code, 0) << r.err << r.out;
  const nlohmann::json trace = nlohmann::json::parse(read_file(dir.file("out/measured-trace.json")));
  const std::set<std::string> weight_gemms = {"qkv wgrad", "proj wgrad", "fc1 wgrad", "fc2 wgrad", "logits wgrad"};
  std::map<int, std::set<int>> layers;                  // rank -> layers it runs
  std::map<int, int> in_w, in_b;                         // rank -> weight GEMMs in W / in B
  std::map<std::pair<int, int>, double> b_end, w_start;  // (rank, mb) -> last B end, first W start
  for (const auto& e : trace["traceEvents"]) {
    if (e.value("ph", "") != "X" || !e.contains("args")) continue;
    const int rank = e["pid"], mb = e["args"]["mb"], layer = e["args"]["layer"];
    const std::string phase = e["args"]["phase"];
    const double ts = e["ts"], end = ts + e["dur"].get<double>();
    if (phase == "fwd" && layer >= 0) layers[rank].insert(layer);
    // B's compute (a send it posted may still be in flight while W runs)
    if (phase == "bwd" && mb >= 0 && e["cat"] != "pp") b_end[{rank, mb}] = std::max(b_end[{rank, mb}], end);
    if (phase == "wgrad") {
      const auto at = w_start.find({rank, mb});
      w_start[{rank, mb}] = at == w_start.end() ? ts : std::min(at->second, ts);
    }
    if (!weight_gemms.count(e["name"])) continue;
    ++(phase == "wgrad" ? in_w : in_b)[rank];
  }
  ASSERT_EQ(layers.size(), 2u);
  for (const auto& [rank, held] : layers) {
    // 4 micro-batches; 4 weight GEMMs a layer, and the output layer's on the last stage
    const int expected = 4 * (4 * static_cast<int>(held.size()) + (rank == 1 ? 1 : 0));
    EXPECT_EQ(in_w[rank], expected) << "rank " << rank;
    EXPECT_EQ(in_b[rank], 0) << "rank " << rank;
  }
  ASSERT_EQ(w_start.size(), 8u);
  for (const auto& [key, start] : w_start) {
    EXPECT_GE(start, b_end.at(key)) << "rank " << key.first << " mb " << key.second << ": W before its B ended";
  }
}

// The loop from a sweep: `strata sweep` ranks the plans of tiny on 2 GPUs,
// `strata export --from-sweep --rank K` writes the K-th as the files that run it.
TEST(RunCommand, ExportFromASweepTakesItsRankedPlan) {
  TempDir dir;
  const CommandResult sweep = run_strata({"sweep", "--model", "tiny", "--cluster", cluster_file(dir, 2),
                                          "--global-batch-size", "4", "--threads", "1", "--out", dir.file("sweep")});
  ASSERT_EQ(sweep.exit_code, 0) << sweep.err << sweep.out;
  const nlohmann::json sj = nlohmann::json::parse(read_file(dir.file("sweep/sweep.json")));
  ASSERT_GE(sj["plans"].size(), 2u);
  const nlohmann::json& second = sj["plans"][1];
  ASSERT_EQ(second["rank"], 2);
  const CommandResult r = run_strata({"export", "--from-sweep", dir.file("sweep/sweep.json"), "--rank", "2",
                                      "--backend", "cpu", "--out", dir.file("out")});
  ASSERT_EQ(r.exit_code, 0) << r.err << r.out;
  const nlohmann::json run = nlohmann::json::parse(read_file(dir.file("out/strata-run.json")));
  const nlohmann::json& plan = second["plan"];
  EXPECT_EQ(run["parallel"]["tensor_model_parallel_size"], plan["tp"]);
  EXPECT_EQ(run["parallel"]["pipeline_model_parallel_size"], plan["pp"]);
  EXPECT_EQ(run["parallel"]["data_parallel_size"], plan["dp"]);
  EXPECT_EQ(run["parallel"]["virtual_pipeline_model_parallel_size"], plan["vpp"]);
  EXPECT_EQ(run["parallel"]["pipeline_schedule"], plan["schedule"]);
  EXPECT_EQ(run["parallel"]["sequence_parallel"], plan["sequence_parallel"]);
  EXPECT_EQ(run["batch"]["micro_batch_size"], plan["micro_batch_size"]);
  EXPECT_EQ(run["batch"]["global_batch_size"], plan["global_batch_size"]);
  EXPECT_EQ(run["training"]["zero_stage"], plan["zero_stage"]);
  EXPECT_EQ(run["training"]["params_dtype"], plan["dtype"]);
  EXPECT_EQ(run["model"]["name"], "tiny");
  // The prediction is the sweep's plan simulated again (same inputs, same figure
  // at the sweep's fidelity when it simulated that plan fully).
  const nlohmann::json prediction = nlohmann::json::parse(read_file(dir.file("out/prediction.json")));
  EXPECT_EQ(prediction["inputs"]["plan"]["tp"], plan["tp"]);
  // A rank the sweep does not have: an error at $.plans, nothing written.
  const CommandResult missing = run_strata({"export", "--from-sweep", dir.file("sweep/sweep.json"), "--rank", "999",
                                            "--out", dir.file("none")});
  EXPECT_EQ(missing.exit_code, 2);
  EXPECT_NE(missing.err.find("no plan has rank 999"), std::string::npos) << missing.err;
  EXPECT_FALSE(file_exists(dir.file("none/strata-run.json")));
}

TEST(RunCommand, BadConfigIsAnErrorAtItsPathWithNothingWritten) {
  TempDir dir;
  const std::string config = export_tiny(dir, 1, R"({"tp": 1, "pp": 1, "micro_batch_size": 1,
    "global_batch_size": 2, "dtype": "bf16"})", 2);
  nlohmann::json doc = nlohmann::json::parse(read_file(config));
  doc["training"]["learning_rate"] = 0.1;  // Megatron's name is lr
  const std::string bad = dir.write("out/bad.json", doc.dump());
  const CommandResult r = run_strata({"run", bad});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("$.training"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("learning_rate"), std::string::npos) << r.err;
  EXPECT_FALSE(file_exists(dir.file("out/measured.json")));
}

TEST(RunCommand, WorldThatDoesNotMatchThePlanStopsEveryRank) {
  TempDir dir;
  const std::string config = export_tiny(dir, 2, R"({"tp": 1, "pp": 2, "micro_batch_size": 1,
    "global_batch_size": 2, "dtype": "bf16"})", 2);
  // Alone: the plan needs 2 ranks.
  const CommandResult alone = run_strata({"run", config});
  EXPECT_EQ(alone.exit_code, 2);
  EXPECT_NE(alone.err.find("the plan has 2 ranks"), std::string::npos) << alone.err;
  // Under mpirun -n 3: every rank says so and exits 2.
  const auto t0 = Clock::now();
  const CommandResult three = shell(mpirun_command(3, {"run", config}), dir);
  EXPECT_NE(three.exit_code, 0);
  EXPECT_LT(Clock::now() - t0, std::chrono::seconds(30));
  EXPECT_NE(three.err.find("this launch has 3 ranks"), std::string::npos) << three.err;
  EXPECT_FALSE(file_exists(dir.file("out/measured.json")));
}

// mpirun in a process group of its own, output to files.
pid_t start_mpirun(const std::string& command, const TempDir& dir) {
  const std::string line = "exec " + command + " >" + dir.file("bg.out") + " 2>" + dir.file("bg.err") + " </dev/null";
  const char* argv[] = {"/bin/sh", "-c", line.c_str(), nullptr};
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETPGROUP);
  posix_spawnattr_setpgroup(&attr, 0);
  pid_t pid = 0;
  posix_spawn(&pid, "/bin/sh", nullptr, &attr, const_cast<char* const*>(argv), environ);
  posix_spawnattr_destroy(&attr);
  return pid;
}

// The children of pid whose command is `strata` (the ranks mpirun started).
std::vector<pid_t> ranks_of(pid_t parent) {
  std::vector<pid_t> out;
  DIR* proc = opendir("/proc");
  if (proc == nullptr) return out;
  while (dirent* e = readdir(proc)) {
    const pid_t pid = static_cast<pid_t>(std::atoi(e->d_name));
    if (pid <= 0) continue;
    std::ifstream stat("/proc/" + std::string(e->d_name) + "/stat");
    std::string text((std::istreambuf_iterator<char>(stat)), {});
    const auto close = text.rfind(')');
    if (close == std::string::npos) continue;
    const std::string comm = text.substr(text.find('(') + 1, close - text.find('(') - 1);
    std::istringstream rest(text.substr(close + 2));
    char state = 0;
    pid_t ppid = 0;
    rest >> state >> ppid;
    if (ppid == parent && comm == "strata") out.push_back(pid);
  }
  closedir(proc);
  std::sort(out.begin(), out.end());
  return out;
}

// Waits for pid; returns its exit status (or -1 when still running at the deadline, after killing it).
int wait_for(pid_t pid, std::chrono::seconds limit) {
  const auto deadline = Clock::now() + limit;
  int status = 0;
  while (Clock::now() < deadline) {
    if (waitpid(pid, &status, WNOHANG) == pid) return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  killpg(pid, SIGKILL);
  waitpid(pid, &status, 0);
  return -1;
}

// Starts a long 2-rank run and returns mpirun's pid once both ranks have run a while.
pid_t start_long_run(const TempDir& dir, const std::string& timeout, std::vector<pid_t>& ranks,
                     const std::string& plan = R"({"tp": 2, "pp": 1, "micro_batch_size": 1,
    "global_batch_size": 2, "dtype": "bf16"})") {
  const std::string config = export_tiny(dir, 2, plan, 100000, timeout);
  const pid_t mpirun = start_mpirun(mpirun_command(2, {"run", config}), dir);
  const auto deadline = Clock::now() + std::chrono::seconds(20);
  while (Clock::now() < deadline && ranks.size() < 2) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    ranks = ranks_of(mpirun);
  }
  std::this_thread::sleep_for(std::chrono::seconds(2));  // well into training
  return mpirun;
}

TEST(RunCommand, KilledRankEndsTheJobWithin30Seconds) {
  TempDir dir;
  std::vector<pid_t> ranks;
  const pid_t mpirun = start_long_run(dir, "20", ranks);
  ASSERT_EQ(ranks.size(), 2u) << read_file(dir.file("bg.err"));
  const auto t0 = Clock::now();
  kill(ranks[1], SIGKILL);
  const int status = wait_for(mpirun, std::chrono::seconds(30));
  EXPECT_NE(status, -1) << "the job was still running 30 s after a rank died";
  EXPECT_NE(status, 0);
  EXPECT_LT(Clock::now() - t0, std::chrono::seconds(30));
  const std::string err = read_file(dir.file("bg.err")) + read_file(dir.file("bg.out"));
  EXPECT_NE(err.find("signal 9"), std::string::npos) << err;
  EXPECT_TRUE(ranks_of(mpirun).empty());
  EXPECT_FALSE(file_exists(dir.file("out/measured.json")));
}

// A pipeline keeps several transfers in flight; each used to wait a full timeout
// again while the failed rank unwound (the job ended after 2-4 x timeout). One
// deadline for the abort: every rank is out within the timeout + 5 s.
TEST(RunCommand, HungRankTimesOutAndEveryRankStops) {
  TempDir dir;
  std::vector<pid_t> ranks;
  const pid_t mpirun = start_long_run(dir, "3", ranks, R"({"tp": 1, "pp": 2, "micro_batch_size": 1,
    "global_batch_size": 8, "dtype": "bf16"})");
  ASSERT_EQ(ranks.size(), 2u) << read_file(dir.file("bg.err"));
  const auto t0 = Clock::now();
  kill(ranks[1], SIGSTOP);  // alive but silent: its peer's next wait times out
  const int status = wait_for(mpirun, std::chrono::seconds(30));
  EXPECT_NE(status, -1) << "the job was still running 30 s after a rank hung";
  EXPECT_NE(status, 0);
  const double ended_s = std::chrono::duration<double>(Clock::now() - t0).count();
  EXPECT_LT(ended_s, 3.0 + 5.0) << read_file(dir.file("bg.err"));
  const std::string err = read_file(dir.file("bg.err")) + read_file(dir.file("bg.out"));
  EXPECT_NE(err.find("did not complete within"), std::string::npos) << err;
  EXPECT_NE(err.find("strata run failed on rank 0"), std::string::npos) << err;
  for (pid_t r : ranks) kill(r, SIGKILL);  // in case the stopped one outlived mpirun
}

}  // namespace
}  // namespace strata::testing
