#include "jobs/run_validation.h"

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <thread>

#include <fmt/format.h>

#include "core/atomic_file.h"
#include "core/error.h"
#include "core/json_reader.h"
#include "core/mpirun_settings.h"
#include "export/export.h"
#include "jobs/host_speed.h"
#include "runtime/launch/mpi_launch.h"
#include "sim/simulate.h"

extern char** environ;

namespace strata::jobs {
namespace {

namespace fs = std::filesystem;

const nlohmann::json& member(const nlohmann::json& doc, const std::string& file, const std::string& path,
                             const char* key) {
  if (!doc.is_object() || !doc.contains(key)) {
    throw InputError(file, path, fmt::format("missing \"{}\" (is this the file `strata {}` wrote?)", key,
                                             file.find("measured") != std::string::npos ? "run" : "export"));
  }
  return doc[key];
}

double number_at(const nlohmann::json& doc, const std::string& file, const std::string& path, const char* key) {
  const nlohmann::json& v = member(doc, file, path, key);
  if (!v.is_number()) throw InputError(file, path + "." + key, "expected a number, got " + json::describe(v));
  return v.get<double>();
}

// A step time, a byte count or a rank count: a finite number above zero (0 or
// less would make every relative error meaningless, or divide by zero).
double positive_number_at(const nlohmann::json& doc, const std::string& file, const std::string& path,
                          const char* key) {
  const double v = number_at(doc, file, path, key);
  if (!(v > 0.0) || !std::isfinite(v)) {
    throw InputError(file, path + "." + key, fmt::format("expected a number above 0, got {}", json::describe(doc[key])));
  }
  return v;
}

std::string plan_label(const nlohmann::json& plan) {
  std::string s;
  auto part = [&](const std::string& p) { s += (s.empty() ? "" : ", ") + p; };
  for (const char* k : {"tp", "cp", "ep", "pp", "dp"}) {
    if (plan.value(k, 1) > 1) part(fmt::format("{} {}", k, plan.value(k, 1)));
  }
  const int dp = std::max(1, plan.value("dp", 1));
  const int b = std::max(1, plan.value("micro_batch_size", 1));
  part(fmt::format("m {}", plan.value("global_batch_size", 1) / (b * dp)));
  if (plan.value("pp", 1) > 1) part(plan.value("schedule", std::string("1f1b")));
  if (plan.value("zero_stage", 0) > 0) part(fmt::format("ZeRO {}", plan.value("zero_stage", 0)));
  if (plan.value("recompute", std::string("none")) != "none") part("recompute " + plan.value("recompute", std::string()));
  if (plan.value("sequence_parallel", false)) part("seq par");
  if (plan.value("moe_router_imbalance", 1.0) > 1.0) part(fmt::format("load {:.2f}", plan.value("moe_router_imbalance", 1.0)));
  return s;
}

// Runs argv with extra environment, output to log, for at most timeout; the
// child gets a process group of its own so a stuck mpirun and its ranks can be
// killed together. Returns the exit code (-signal when killed; 124 on timeout).
int run_logged(const std::vector<std::string>& argv, const std::vector<std::pair<std::string, std::string>>& env,
               const std::string& log, std::chrono::seconds timeout) {
  std::vector<std::string> env_strings;
  for (char** e = environ; *e != nullptr; ++e) env_strings.emplace_back(*e);
  for (const auto& [k, v] : env) env_strings.push_back(k + "=" + v);
  std::vector<char*> envp;
  for (std::string& s : env_strings) envp.push_back(s.data());
  envp.push_back(nullptr);
  std::vector<std::string> args = argv;
  std::vector<char*> argp;
  for (std::string& a : args) argp.push_back(a.data());
  argp.push_back(nullptr);

  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, STDOUT_FILENO, log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  posix_spawn_file_actions_adddup2(&actions, STDOUT_FILENO, STDERR_FILENO);
  posix_spawn_file_actions_addopen(&actions, STDIN_FILENO, "/dev/null", O_RDONLY, 0);
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETPGROUP);
  posix_spawnattr_setpgroup(&attr, 0);
  pid_t pid = 0;
  const int rc = posix_spawnp(&pid, argp[0], &actions, &attr, argp.data(), envp.data());
  posix_spawn_file_actions_destroy(&actions);
  posix_spawnattr_destroy(&attr);
  if (rc != 0) throw InternalError(fmt::format("cannot start {}: {}", argv[0], std::strerror(rc)));
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  int status = 0;
  while (true) {
    const pid_t done = waitpid(pid, &status, WNOHANG);
    if (done == pid) break;
    if (std::chrono::steady_clock::now() > deadline) {
      killpg(pid, SIGKILL);
      waitpid(pid, &status, 0);
      return 124;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  return -WTERMSIG(status);
}

std::string log_tail(const std::string& log, std::size_t lines) {
  std::ifstream in(log);
  std::vector<std::string> all;
  for (std::string line; std::getline(in, line);) all.push_back(line);
  std::string out;
  for (std::size_t i = all.size() > lines ? all.size() - lines : 0; i < all.size(); ++i) out += "  " + all[i] + "\n";
  return out;
}

void run_step(const std::vector<std::string>& argv, const std::string& log, const std::string& what,
              std::chrono::seconds timeout) {
  const int rc = run_logged(argv, mpirun_environment(), log, timeout);
  if (rc != 0) {
    throw InternalError(fmt::format("{} failed ({}); the end of {}:\n{}", what,
                                    rc == 124 ? fmt::format("no result within {} s", timeout.count())
                                              : fmt::format("exit code {}", rc),
                                    log, log_tail(log, 15)));
  }
}

// The 2-rank plans --quick runs on the shipped "tiny" model (tp 2, pp 2, dp 2 and
// cp 2, with several micro-batch counts and ZeRO stages) and on its MoE variant
// "tiny-moe" (its experts over ep 2: the dispatch and combine all-to-alls).
struct QuickPlan {
  const char* name;
  const char* json;
  const char* model = "tiny";
};
const QuickPlan kQuickPlans[] = {
    {"tp2-m2", R"({"tp": 2, "pp": 1, "micro_batch_size": 1, "global_batch_size": 2})"},
    {"tp2-m4-sp", R"({"tp": 2, "pp": 1, "micro_batch_size": 1, "global_batch_size": 4, "sequence_parallel": true})"},
    {"pp2-m2", R"({"tp": 1, "pp": 2, "micro_batch_size": 1, "global_batch_size": 2})"},
    {"pp2-m4", R"({"tp": 1, "pp": 2, "micro_batch_size": 1, "global_batch_size": 4})"},
    {"pp2-m8-gpipe", R"({"tp": 1, "pp": 2, "micro_batch_size": 1, "global_batch_size": 8, "schedule": "gpipe"})"},
    {"dp2-m2-z0", R"({"tp": 1, "pp": 1, "micro_batch_size": 1, "global_batch_size": 4})"},
    {"dp2-m2-z1", R"({"tp": 1, "pp": 1, "micro_batch_size": 1, "global_batch_size": 4, "zero_stage": 1})"},
    {"dp2-m4-z2", R"({"tp": 1, "pp": 1, "micro_batch_size": 1, "global_batch_size": 8, "zero_stage": 2})"},
    {"dp2-m2-z3", R"({"tp": 1, "pp": 1, "micro_batch_size": 1, "global_batch_size": 4, "zero_stage": 3})"},
    // context parallelism needs the fused attention in the plan (plan_spec.cc);
    // strata run's explicit attention is what runs on the cpu
    {"cp2-m2-ring",
     R"({"tp": 1, "cp": 2, "pp": 1, "micro_batch_size": 1, "global_batch_size": 2, "flash_attention": true})"},
    {"moe-ep2-m2-a2a",
     R"({"tp": 1, "pp": 1, "ep": 2, "moe_token_dispatcher_type": "alltoall", "micro_batch_size": 1,
         "global_batch_size": 4, "zero_stage": 1})",
     "tiny-moe"},
};

// An MoE plan's routing balance is an input of the prediction (the plan's
// moe_router_imbalance, 1 by default), not something the simulator predicts: the
// run routes real tokens through a random router. As a user would with the
// balance of their own router, predict again with the load the run measured
// (measured.json "moe"), and compare step times at the same routing.
void repredict_with_measured_load(nlohmann::json plan, const std::string& model, const std::string& plan_dir) {
  const std::string measured = plan_dir + "/measured.json";
  const double load =
      positive_number_at(member(json::parse_file(measured), measured, "$", "moe"), measured, "$.moe",
                         "expert_load_max_over_mean");
  plan["moe_router_imbalance"] = std::max(1.0, std::round(load * 100.0) / 100.0);
  write_file_atomic(plan_dir + "/plan-measured-load.json", plan.dump(2) + "\n");
  ScenarioArgs sa;
  sa.model = model;
  sa.plan = plan_dir + "/plan-measured-load.json";
  sa.cluster = plan_dir + "/../cluster.json";
  const Scenario s = load_scenario(sa);
  write_file_atomic(plan_dir + "/prediction.json", sim::result_json(s, sim::simulate(s)).dump(2) + "\n");
}

}  // namespace

QuickValidation run_quick_validation(const QuickValidationOptions& args) {
  const auto t0 = std::chrono::steady_clock::now();
  const std::string mpirun = rt::find_mpirun();
  if (mpirun.empty()) {
    throw InputError("", "--quick", "mpirun not found: install openmpi-bin (tools/install-deps.sh) or set STRATA_MPIRUN");
  }
  const std::string& self = args.strata;
  std::string dir = args.work_dir;
  bool temporary = false;
  if (dir.empty()) {
    std::string pattern = (fs::temp_directory_path() / "strata-validate-XXXXXX").string();
    if (mkdtemp(pattern.data()) == nullptr) throw InternalError("cannot create a temporary directory");
    dir = pattern;
    temporary = true;
  }
  fs::create_directories(dir);
  struct Cleanup {
    std::string dir;
    bool on;
    ~Cleanup() {
      std::error_code ec;
      if (on) fs::remove_all(dir, ec);
    }
  } cleanup{dir, temporary};

  QuickValidation result;
  result.before = host_load();
  result.probe_start_s = probe_gemm_seconds();
  const auto steps = static_cast<std::int64_t>(std::size(kQuickPlans)) + 1;
  std::string profile = args.profile;
  if (profile.empty()) {
    report_progress(args.progress, 0, steps, "calibrating the cpu backend (2 ranks)");
    profile = dir + "/profile.json";
    run_step(rt::mpirun_argv(mpirun, 2, {self, "calibrate", "--backend", "cpu", "--quick", "--model", "tiny", "--model",
                                          "tiny-moe", "--out", profile}),
             dir + "/calibrate.log", "mpirun -n 2 strata calibrate --backend cpu --quick", std::chrono::seconds(300));
  } else {
    profile = fs::absolute(profile).string();
  }
  const Profile p = load_profile(profile);
  if (p.device.backend != "cpu") {
    throw InputError(profile, "$.device.backend",
                     "--quick runs the cpu backend: give a profile from `strata calibrate --backend cpu`, not \"" +
                         p.device.backend + "\"");
  }
  // One host whose two "GPUs" are the MPI ranks; they exchange through shared
  // memory, so the host link is the profile's measured memory bandwidth (the
  // measured collectives set the collectives' times).
  nlohmann::ordered_json cluster;
  cluster["name"] = "cpu-host";
  cluster["nodes"] = 1;
  cluster["gpus_per_node"] = 2;
  cluster["node"] = {{"name", "cpu-ranks"},
                     {"gpus", 2},
                     {"gpu", p.device.name},
                     {"pcie", {{"bandwidth_gbytes_per_s", p.device.memory_bandwidth_bytes_per_s / 1e9},
                               {"latency_us", 1.0},
                               {"source", "cpu ranks exchange through shared memory: the calibrated memory bandwidth"}}}};
  cluster["profile"] = profile;
  cluster["source"] = "strata validate --quick: this host, one MPI rank per \"GPU\"";
  write_file_atomic(dir + "/cluster.json", cluster.dump(2) + "\n");

  result.probe_after_calibration_s = args.profile.empty() ? probe_gemm_seconds() : result.probe_start_s;
  double probe_before_s = result.probe_after_calibration_s;
  std::int64_t done = 1;
  for (const QuickPlan& qp : kQuickPlans) {
    report_progress(args.progress, done++, steps, std::string("plan ") + qp.name);
    const std::string plan_dir = dir + "/" + qp.name;
    nlohmann::json plan = nlohmann::json::parse(qp.json);
    plan["dtype"] = "fp32";
    plan["source"] = "strata validate --quick";
    write_file_atomic(plan_dir + "/plan.json", plan.dump(2) + "\n");
    ScenarioArgs sa;
    sa.model = qp.model;
    sa.plan = plan_dir + "/plan.json";
    sa.cluster = dir + "/cluster.json";
    const Scenario s = load_scenario(sa);
    const sim::SimulationResult r = sim::simulate(s);
    sim::ExportOptions o;
    // 5 steps, the first left out (it pays first touches of memory): the median
    // of 4 timed steps, and the loop stays within a minute on an idle 2-core host.
    o.training.steps = 5;
    o.training.timing_warmup_steps = 1;
    o.backend = "cpu";
    o.command_line = "strata validate --quick";
    OutputSet out;
    for (const sim::ExportFile& f : sim::export_plan(s, r, o).files) out.add(plan_dir + "/" + f.name, f.content);
    out.commit();
    run_step(rt::mpirun_argv(mpirun, 2, {self, "run", plan_dir + "/strata-run.json"}), plan_dir + "/run.log",
             std::string("mpirun -n 2 strata run (plan ") + qp.name + ")", std::chrono::seconds(120));
    const double probe_after_s = probe_gemm_seconds();
    if (s.model.is_moe()) repredict_with_measured_load(plan, qp.model, plan_dir);
    RunComparison row = compare_run(plan_dir);
    row.host_speed = host_speed_during(result.probe_start_s, probe_before_s, probe_after_s);
    result.runs.push_back(row);
    probe_before_s = probe_after_s;
  }
  report_progress(args.progress, steps, steps, "done");
  result.wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  result.after = host_load();
  if (!temporary) result.kept_dir = dir;
  return result;
}

double median_abs(std::vector<double> v) {
  if (v.empty()) return 0.0;
  for (double& x : v) x = std::abs(x);
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

double max_abs(const std::vector<double>& v) {
  double m = 0.0;
  for (double x : v) m = std::max(m, std::abs(x));
  return m;
}

bool RunComparison::host_steady() const { return host_speed == 0.0 || host_speed_steady(host_speed); }

std::vector<RunComparison> steady_host_runs(const std::vector<RunComparison>& runs) {
  std::vector<RunComparison> steady;
  for (const RunComparison& r : runs) {
    if (r.host_steady()) steady.push_back(r);
  }
  return steady;
}

HostLoad host_load() {
  HostLoad h;
  h.cores = sysconf(_SC_NPROCESSORS_ONLN);
  double l[1] = {0.0};
  if (getloadavg(l, 1) == 1) h.load = l[0];
  return h;
}

RunComparison compare_run(const std::string& dir) {
  const std::string pred_file = dir + "/prediction.json";
  const std::string meas_file = dir + "/measured.json";
  if (!fs::exists(pred_file)) {
    throw InputError(pred_file, "", "missing: run `strata export --out " + dir + "` first");
  }
  if (!fs::exists(meas_file)) {
    throw InputError(meas_file, "", "missing: run the plan first (`mpirun -n N strata run " + dir + "/strata-run.json`)");
  }
  RunComparison r = compare_run_documents(json::parse_file(pred_file), pred_file, json::parse_file(meas_file), meas_file);
  r.dir = dir;
  return r;
}

RunComparison compare_run_documents(const nlohmann::json& pred, const std::string& pred_file,
                                    const nlohmann::json& meas, const std::string& meas_file) {
  RunComparison r;
  r.predicted_step_s = positive_number_at(pred, pred_file, "$", "step_time_s");
  r.measured_step_s = positive_number_at(meas, meas_file, "$", "step_time_s");
  r.predicted_peak_bytes =
      positive_number_at(member(pred, pred_file, "$", "memory"), pred_file, "$.memory", "peak_bytes");
  r.measured_peak_bytes =
      positive_number_at(member(meas, meas_file, "$", "memory"), meas_file, "$.memory", "peak_bytes");
  // A count of processes: a whole number an int holds (1e10 would not convert).
  const double ranks = positive_number_at(meas, meas_file, "$", "ranks");
  if (ranks != std::floor(ranks) || ranks > std::numeric_limits<int>::max()) {
    throw InputError(meas_file, "$.ranks",
                     fmt::format("expected a whole number of ranks from 1 to {}, got {}", std::numeric_limits<int>::max(),
                                 json::describe(meas.at("ranks"))));
  }
  r.ranks = static_cast<int>(ranks);
  const nlohmann::json& measured_plan = member(meas, meas_file, "$", "plan");
  const nlohmann::json& predicted_plan = member(member(pred, pred_file, "$", "inputs"), pred_file, "$.inputs", "plan");
  for (const auto& [key, value] : predicted_plan.items()) {
    // moe_router_imbalance: the expected routing balance the prediction assumed
    // (a what-if input); the run routes for real and measures its own.
    if (key == "source" || key == "notes" || key == "moe_router_imbalance") continue;
    if (!measured_plan.contains(key) || measured_plan[key] != value) {
      throw InputError(meas_file, "$.plan." + key,
                       fmt::format("the run measured a different plan than {} predicted ({} {} vs {})", pred_file, key,
                                   measured_plan.contains(key) ? measured_plan[key].dump() : "absent", value.dump()));
    }
  }
  r.label = plan_label(predicted_plan);
  return r;
}

nlohmann::ordered_json run_validation_json(const std::vector<RunComparison>& rows, const HostLoad& load) {
  nlohmann::ordered_json j;
  std::vector<double> step_errors, memory_errors;
  nlohmann::ordered_json list = nlohmann::ordered_json::array();
  for (const RunComparison& r : rows) {
    list.push_back({{"plan", r.label}, {"dir", r.dir}, {"ranks", r.ranks}, {"predicted_step_time_s", r.predicted_step_s},
                    {"measured_step_time_s", r.measured_step_s}, {"step_time_relative_error", r.step_error()},
                    {"predicted_peak_bytes", r.predicted_peak_bytes}, {"measured_peak_bytes", r.measured_peak_bytes},
                    {"memory_relative_error", r.memory_error()}});
    if (r.host_speed > 0.0) list.back()["host_speed"] = r.host_speed;
    step_errors.push_back(r.step_error());
    memory_errors.push_back(r.memory_error());
  }
  j["runs"] = list;
  j["host"] = {{"cores", load.cores}, {"load_average_1min", load.load}};
  j["step_time_median_abs_error"] = median_abs(step_errors);
  j["step_time_worst_abs_error"] = max_abs(step_errors);
  // The same over the runs during which the host's speed held (host_speed.h):
  // what tests the model when the host changed speed under some of the runs.
  std::vector<double> steady_errors;
  for (const RunComparison& r : steady_host_runs(rows)) steady_errors.push_back(r.step_error());
  j["steady_host_runs"] = steady_errors.size();
  j["steady_host_step_time_median_abs_error"] = median_abs(steady_errors);
  j["steady_host_step_time_worst_abs_error"] = max_abs(steady_errors);
  j["memory_median_abs_error"] = median_abs(memory_errors);
  j["memory_worst_abs_error"] = max_abs(memory_errors);
  return j;
}

}  // namespace strata::jobs
