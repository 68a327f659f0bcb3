// strata calibrate: run the real kernels and collectives on this node, fit cost
// models to them and write a device profile; or, with --check, re-measure a
// sample and report how far a profile has drifted.
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <memory>
#include <thread>

#include <fmt/format.h>

#include "calib/bench/calibration.h"
#include "costmodel/fitting.h"
#include "cli/calibrate_shapes.h"
#include "cli/commands.h"
#include "core/atomic_file.h"
#include "core/data_paths.h"
#include "core/error.h"
#include "core/log.h"
#include "core/progress.h"
#include "runtime/device/backend.h"
#include "runtime/comm/communicator.h"
#include "runtime/device/device.h"
#include "runtime/launch/mpi_env.h"
#include "plan/model_spec.h"

#ifndef STRATA_VERSION
#error "STRATA_VERSION must be defined by the build (cli/CMakeLists.txt)"
#endif

namespace strata::cli {
namespace {

struct CalibrateArgs {
  std::string backend = "cpu";
  bool quick = false;
  std::vector<std::string> models;
  std::string out;
  std::string check;
  std::string base;
  int threads = 0;
  std::vector<std::string> argv;  // for provenance
};

// Fails early, on every rank alike, when the output cannot be written, so no
// rank measures for minutes only to lose the result.
void check_writable(const std::string& out) {
  namespace fs = std::filesystem;
  fs::path dir = fs::path(out).parent_path();
  if (dir.empty()) dir = ".";
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec || access(dir.c_str(), W_OK) != 0) {
    throw InputError("", "--out", fmt::format("cannot write into directory {}", dir.string()));
  }
  if (fs::is_directory(out)) throw InputError("", "--out", out + " is a directory; give a file name");
}

// The shipped datasheet profile whose device name is the device's.
std::optional<Profile> shipped_base(const std::string& device_name) {
  for (const std::string& name : shipped_names("calib/profiles")) {
    Profile p = load_profile(name);
    if (p.kind == "datasheet" && p.device.name == device_name) return p;
  }
  return std::nullopt;
}

// A rank that fails before the world communicator exists cannot abort the
// job through it, and finalizing MPI would wait for ranks that wait for it:
// report and exit at once, which makes mpirun end the other ranks.
[[noreturn]] void exit_launch(const std::exception& e) {
  const bool input = dynamic_cast<const InputError*>(&e) != nullptr;
  std::fprintf(stderr, "%s: %s\n", input ? "error" : "internal error", e.what());
  std::fflush(stderr);
  std::_Exit(input ? kExitBadInput : kExitInternal);
}

std::string percent(double x) { return fmt::format("{:.1f}%", 100.0 * x); }

void print_quality(const std::map<std::string, FitError>& quality,
                   const std::map<std::string, double>& spread) {
  fmt::print("fit quality (relative error on measurements held out of the fit; spread: median\n"
             "interquartile range of the repeats over their median, the timing noise):\n");
  fmt::print("  {:<14} {:>8} {:>10} {:>10} {:>10}\n", "section", "held out", "median", "max", "spread");
  for (const auto& [section, e] : quality) {
    auto it = spread.find(section);
    fmt::print("  {:<14} {:>8} {:>10} {:>10} {:>10}\n", section, e.held_out, percent(e.median_rel_error),
               percent(e.max_rel_error), it == spread.end() ? "-" : percent(it->second));
  }
  for (const auto& [section, sp] : spread) {
    if (sp > 0.2) {
      fmt::print("warning: {} timings varied by {} between repeats: the fit cannot be better than "
                 "the measurements (is the machine busy?)\n", section, percent(sp));
    }
  }
}

// The collectives as nccl-tests prints them: per operation and group, the
// time of the smallest and the largest message and the largest one's algbw
// (bytes / time) and busbw (algbw x the operation's factor, core/collective.h).
void print_collectives(const CostModel& model) {
  if (!model.calibrated("collectives")) return;
  fmt::print("\ncollectives (algbw = bytes / time, busbw = algbw x nccl-tests' factor):\n");
  fmt::print("  {:<15} {:>5} {:>6} {:>12} {:>12} {:>12} {:>12} {:>12}\n", "operation", "ranks", "place",
             "smallest", "time", "largest", "time", "algbw/busbw");
  for (const CollectiveCurve& c : model.collectives_section()->measured) {
    const SizePoint& lo = c.curve.points.front();
    const SizePoint& hi = c.curve.points.back();
    const double algbw = hi.bytes / hi.seconds;
    fmt::print("  {:<15} {:>5} {:>6} {:>10.0f} B {:>9.1f} us {:>10.0f} B {:>9.1f} us {:>5.2f}/{:.2f} GB/s\n",
               to_string(c.op), c.group_size, c.inter_node ? "inter" : "intra", lo.bytes, lo.seconds * 1e6,
               hi.bytes, hi.seconds * 1e6, algbw / 1e9, algbw * busbw_factor(c.op, c.group_size) / 1e9);
  }
}

void print_drift(const std::vector<calib::DriftRow>& rows) {
  std::map<std::string, std::vector<double>> by_section;
  fmt::print("{:<14} {:<40} {:>12} {:>12} {:>8}\n", "section", "sample", "predicted", "measured", "drift");
  for (const calib::DriftRow& r : rows) {
    fmt::print("{:<14} {:<40} {:>9.1f} us {:>9.1f} us {:>+7.1f}%\n", r.section, r.what,
               r.predicted_s * 1e6, r.measured_s * 1e6, 100.0 * r.drift());
    by_section[r.section].push_back(std::abs(r.drift()));
  }
  fmt::print("\n{:<14} {:>8} {:>14} {:>14}\n", "section", "samples", "median |drift|", "max |drift|");
  for (auto& [section, d] : by_section) {
    std::sort(d.begin(), d.end());
    const double median = d.size() % 2 ? d[d.size() / 2] : 0.5 * (d[d.size() / 2 - 1] + d[d.size() / 2]);
    fmt::print("{:<14} {:>8} {:>14} {:>14}\n", section, d.size(), percent(median), percent(d.back()));
  }
}

void run_calibrate(const CalibrateArgs& args) {
  const std::optional<rt::Backend> backend = rt::parse_backend(args.backend);
  if (!backend) throw InputError("", "--backend", "expected \"cpu\" or \"cuda\", got \"" + args.backend + "\"");
  if (args.out.empty() && args.check.empty()) {
    throw InputError("", "--out", "give --out FILE for the profile (or --check PROFILE to check one)");
  }
  // Everything that can be wrong with the inputs is found here, before any
  // rank starts measuring or waits on another.
  std::optional<CostModel> checked;
  if (!args.check.empty()) checked.emplace(load_profile(args.check));
  if (!args.out.empty()) check_writable(args.out);
  std::vector<ModelSpec> models;
  for (const std::string& m : args.models) models.push_back(load_model_spec(m));
  std::optional<Profile> base;
  if (!args.base.empty()) base = load_profile(args.base);
  // A profile describes one backend's device: checking a GPU profile by
  // timing the cpu backend (or the reverse) compares unrelated machines.
  auto same_backend = [&args](const Profile& p, const char* option) {
    if (p.device.backend != args.backend) {
      throw InputError(p.file, "$.device.backend",
                       fmt::format("the profile describes a {} device but --backend is {}: give {} a {} "
                                   "profile or run with --backend {}",
                                   p.device.backend, args.backend, option, args.backend, p.device.backend));
    }
  };
  if (checked) same_backend(checked->profile(), "--check");
  if (base && *backend == rt::Backend::kCuda) same_backend(*base, "--base");

  // One process on a node with several GPUs and no launcher drives them all
  // (a thread per GPU, NCCL without MPI), so its collectives are measured too.
  const rt::LaunchInfo detected = rt::detect_launch();
  const int local_gpus = *backend == rt::Backend::kCuda && !detected.launched() ? rt::cuda_device_count() : 0;

  rt::MpiSession session;
  const rt::LaunchInfo& launch = session.launch();
  rt::DeviceOptions device_options;
  device_options.cpu_threads = args.threads;
  std::vector<std::unique_ptr<rt::Device>> devices;
  std::vector<std::unique_ptr<rt::Communicator>> worlds;
  try {
    if (local_gpus > 1) {
      std::vector<rt::Device*> raw;
      for (int i = 0; i < local_gpus; ++i) {
        devices.push_back(rt::make_device(rt::Backend::kCuda, i, device_options));
        raw.push_back(devices.back().get());
      }
      worlds = rt::make_local_communicators(raw);
    } else {
      // One device per rank: the GPU of this local rank; the host on cpu.
      devices.push_back(
          rt::make_device(*backend, *backend == rt::Backend::kCuda ? launch.local_rank : 0, device_options));
      worlds.push_back(rt::make_world_communicator(*devices.front()));
    }
  } catch (const std::exception& e) {
    if (launch.size > 1) exit_launch(e);
    throw;
  }
  rt::Device& device = *devices.front();
  rt::Communicator& world = *worlds.front();  // this process's first rank
  const bool root = world.rank() == 0;
  double load[1] = {0.0};
  const long cores = sysconf(_SC_NPROCESSORS_ONLN);
  if (root && getloadavg(load, 1) == 1 && load[0] > 0.75 * static_cast<double>(cores)) {
    spdlog::warn("load average {:.1f} on {} cores before calibrating: other work on this host will "
                 "distort the timings", load[0], cores);
  }
  if (!base && *backend == rt::Backend::kCuda) base = shipped_base(device.info().name);

  calib::CalibrationOptions options;
  options.quick = args.quick;
  options.base = base;
  options.ranks_per_node = local_gpus > 1 ? local_gpus : launch.local_size;
  options.strata_version = STRATA_VERSION;
  for (const std::string& a : args.argv) options.command_line += (options.command_line.empty() ? "" : " ") + a;
  const DType dtype = *backend == rt::Backend::kCpu ? DType::kFp32 : DType::kBf16;
  for (const ModelSpec& m : models) {
    CalibrationShapes shapes = model_shapes(m, args.quick ? std::vector<int>{1} : std::vector<int>{1, 2, 4}, dtype);
    options.model_gemms.insert(options.model_gemms.end(), shapes.gemms.begin(), shapes.gemms.end());
    options.model_attention.insert(options.model_attention.end(), shapes.attention.begin(),
                                   shapes.attention.end());
  }

  ProgressLine line(args.check.empty() ? "calibrate" : "check", 0);
  if (!root) line.set_enabled(false);
  auto progress = [&line](std::int64_t done, std::int64_t total, std::string_view what) {
    line.update(done, fmt::format("{}/{} {}", done, total, what));
    return true;
  };

  // What every rank of this process measures; rank 0's results are reported.
  std::vector<calib::CalibrationReport> reports(worlds.size());
  std::vector<std::vector<calib::DriftRow>> drift(worlds.size());
  auto measure = [&](std::size_t i) {
    const calib::ProgressFn report_progress = i == 0 ? calib::ProgressFn(progress) : calib::ProgressFn();
    try {
      if (checked) {
        drift[i] = calib::check_drift(*devices[i], *worlds[i], *checked, options, report_progress);
      } else {
        reports[i] = calib::run_calibration(*devices[i], *worlds[i], options, report_progress);
      }
    } catch (const std::exception& e) {
      if (i == 0) line.finish();
      // Other ranks may be waiting in a collective for this one: end the job
      // rather than let them wait for the communicator's timeout.
      if (worlds[i]->size() > 1) {
        worlds[i]->abort(fmt::format("strata calibrate failed on rank {}: {}", worlds[i]->rank(), e.what()));
      }
      throw;
    }
  };
  if (worlds.size() == 1) {
    measure(0);
  } else {
    // A failing rank aborts the whole communicator (and the process); the
    // exceptions are kept only for an error that gets past that.
    std::vector<std::exception_ptr> errors(worlds.size());
    std::vector<std::thread> threads;
    for (std::size_t i = 0; i < worlds.size(); ++i) {
      threads.emplace_back([&, i] {
        try {
          measure(i);
        } catch (...) {
          errors[i] = std::current_exception();
        }
      });
    }
    for (std::thread& t : threads) t.join();
    for (const std::exception_ptr& e : errors) {
      if (e) std::rethrow_exception(e);
    }
  }
  line.finish();

  const rt::DeviceInfo& info = device.info();
  if (!root) return;
  if (checked) {
    fmt::print("checking {} ({}) on {}, {} rank(s)\n\n", checked->profile().name, checked->profile().file,
               info.name, world.size());
    print_drift(drift.front());
    return;
  }
  const calib::CalibrationReport& report = reports.front();
  const Profile& p = report.profile;
  write_file_atomic(args.out, to_json(p).dump(2) + "\n");
  const CostModel model(p);
  fmt::print("calibrated {} ({} backend), {} rank(s) x {} thread(s)\n", info.name, args.backend, world.size(),
             *backend == rt::Backend::kCpu ? info.compute_units : 1);
  fmt::print("measured  {} GEMMs, {} memory-bound points, {} attention passes, {} host copies, "
             "{} collective points\n\n",
             report.gemms, report.kernels, report.attention, report.copies, report.collective_points);
  print_quality(model.fit_quality(), median_spread(p));
  if (model.rank_spread()) {
    fmt::print("\nranks: the {} ranks ran the same {} kernels {:.2f}% apart (median coefficient of variation "
               "across ranks; `strata simulate --samples N --clock-cv measured` draws each GPU's speed with it)\n",
               model.rank_spread()->ranks, model.rank_spread()->kernels, 100.0 * model.rank_spread()->median_cv);
  }
  print_collectives(model);
  fmt::print("\nfigures:\n");
  for (const SectionOrigin& o : model.origins()) {
    fmt::print("  {:<14} {:<10} {}\n", o.section, o.origin, o.summary);
  }
  for (const std::string& n : report.notes) fmt::print("note: {}\n", n);
  fmt::print("\nwrote {}\n", args.out);
}

}  // namespace

void add_calibrate_command(CLI::App& app, int argc, char** argv) {
  auto args = std::make_shared<CalibrateArgs>();
  args->argv.assign(argv, argv + argc);
  CLI::App* cmd = app.add_subcommand(
      "calibrate", "Run GEMMs, memory-bound kernels, attention, host copies and collectives on this "
                   "node and write a device profile of fitted cost models (run under `mpirun -n N` "
                   "to measure collectives)");
  cmd->add_option("--backend", args->backend, "cpu or cuda")->capture_default_str();
  cmd->add_flag("--quick", args->quick, "fewer shapes and sizes, shorter samples (under a minute on cpu)");
  cmd->add_option("--model", args->models,
                  "also measure this model's GEMM and attention shapes (path or shipped name; repeatable)");
  cmd->add_option("--out", args->out, "profile.json to write (rank 0 writes it)");
  cmd->add_option("--check", args->check,
                  "instead of calibrating, re-measure a sample and report drift against this profile");
  cmd->add_option("--base", args->base,
                  "datasheet profile of this GPU (cuda; default: the shipped one with its device name)");
  cmd->add_option("--threads", args->threads, "cpu threads per rank (default: cores / ranks on the node)");
  cmd->callback([args] { run_calibrate(*args); });
}

}  // namespace strata::cli
