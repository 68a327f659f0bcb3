#include "calib/bench/calibration.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <ctime>

#include <fmt/format.h>

#include "calib/bench/attention_bench.h"
#include "calib/bench/collective_bench.h"
#include "calib/bench/gemm_bench.h"
#include "calib/bench/kernel_bench.h"
#include "costmodel/fitting.h"
#include "core/error.h"
#include "core/log.h"
#include "runtime/device/tensor_io.h"

namespace strata::calib {
namespace {

constexpr double kKiBytes = 1024.0;
constexpr double kMiBytes = 1024.0 * 1024.0;

// What one run measures: sizes and budgets per backend and mode. The budgets
// keep `--quick` under a minute on two cores and a full GPU run to minutes.
struct BenchPlan {
  DType gemm_dtype = DType::kFp32;
  std::vector<GemmQuery> gemms;
  std::vector<double> kernel_sizes;
  std::vector<double> copy_sizes;
  std::vector<AttentionQuery> attention;
  CollectiveBenchOptions collectives;
  TimingOptions timing;
};

std::vector<double> geometric(double lo, double hi, double factor) {
  std::vector<double> out;
  for (double x = lo; x <= hi * 1.0001; x *= factor) out.push_back(x);
  return out;
}

BenchPlan make_plan(const rt::DeviceInfo& info, const CalibrationOptions& o,
                    std::vector<std::string>& notes) {
  const bool cpu = info.backend == rt::Backend::kCpu;
  BenchPlan p;
  p.timing = o.quick ? quick_timing() : full_timing();
  if (!cpu) {
    // Sustained clocks (measure.h): tens of seconds reach a GPU's thermal steady
    // state; a few tens of ms before each shape keep it there.
    p.timing.soak_s = o.quick ? 5.0 : 30.0;
    p.timing.keep_hot_s = o.quick ? 0.01 : 0.05;
  }
  // The cpu backend computes every dtype in fp32; GPUs train in bf16.
  p.gemm_dtype = cpu ? DType::kFp32 : DType::kBf16;
  const double elt = dtype_bytes(p.gemm_dtype);
  // Memory any one benchmark may take: an eighth of this rank's share.
  const double mem_cap = static_cast<double>(info.memory_bytes) / std::max(1, o.ranks_per_node) / 8.0;
  // FLOPs one GEMM may take (a few tenths of a second at the device's rate).
  const double flop_cap = cpu ? (o.quick ? 4e9 : 6e10) : 4e13;

  std::vector<GemmQuery> shapes =
      cpu ? gemm_grid(64, o.quick ? 1024 : 2048, p.gemm_dtype)
          : gemm_grid(256, o.quick ? 8192 : 16384, p.gemm_dtype);
  int skipped = 0;
  for (GemmQuery q : o.model_gemms) {
    q.dtype = p.gemm_dtype;
    const double bytes = elt * q.batch * (q.m * q.k + q.k * q.n + q.m * q.n);
    if (gemm_flops(q) > flop_cap || bytes > mem_cap) {
      ++skipped;
      continue;
    }
    shapes.push_back(q);
  }
  p.gemms = unique_shapes(shapes);
  if (skipped > 0) {
    notes.push_back(fmt::format("{} model GEMM shapes skipped: over the {} budget of {:.0e} FLOPs "
                                "or {:.0f} MiB (interpolated from the grid instead)",
                                skipped, o.quick ? "--quick" : "per-shape", flop_cap, mem_cap / kMiBytes));
  }

  const double kernel_hi = std::min(cpu ? (o.quick ? 64 : 256) * kMiBytes : (o.quick ? 256 : 1024) * kMiBytes, mem_cap / 4);
  // Sizes double: bandwidth bends at each cache level, and steps of 4 leave too
  // wide a gap for interpolation to follow (docs/calibration.md, held-out errors).
  p.kernel_sizes = geometric(o.quick ? 16 * kKiBytes : 4 * kKiBytes, kernel_hi, 2.0);
  p.copy_sizes = geometric(o.quick ? 64 * kKiBytes : 4 * kKiBytes, kernel_hi, 2.0);

  std::vector<AttentionQuery> attn;
  const std::vector<std::int64_t> bhs = cpu ? std::vector<std::int64_t>{2, 8} : std::vector<std::int64_t>{16, 64};
  const std::vector<std::int64_t> seqs = cpu ? std::vector<std::int64_t>{128, 256, 512}
                                             : std::vector<std::int64_t>{512, 1024, 2048, 4096};
  for (std::int64_t bh : bhs) {
    for (std::int64_t s : seqs) {
      for (std::int64_t d : {64, 128}) attn.push_back({bh, s, d, false, false, p.gemm_dtype});
    }
  }
  int attn_skipped = 0;
  for (AttentionQuery q : o.model_attention) {
    q.dtype = p.gemm_dtype;
    q.causal = false;
    q.backward = false;
    const double scores_bytes = 3.0 * elt * q.batch_heads * q.seq * q.seq;
    if (3.5 * attention_flops(q) > flop_cap || scores_bytes > mem_cap) {
      ++attn_skipped;
      continue;
    }
    attn.push_back(q);
  }
  // Deduplicate.
  std::vector<AttentionQuery> unique;
  for (const AttentionQuery& q : attn) {
    bool seen = false;
    for (const AttentionQuery& u : unique) {
      seen = seen || (u.batch_heads == q.batch_heads && u.seq == q.seq && u.head_dim == q.head_dim);
    }
    if (!seen) unique.push_back(q);
  }
  p.attention = unique;
  if (attn_skipped > 0) {
    notes.push_back(fmt::format("{} model attention shapes skipped: over the budget", attn_skipped));
  }

  // Collectives are cheap to repeat and their small messages are the noisiest
  // (a wake-up late by microseconds doubles them): more samples than the kernels.
  p.collectives.timing = p.timing;
  p.collectives.timing.repeats = std::max(p.timing.repeats, 7);
  p.collectives.timing.min_sample_s = std::max(p.timing.min_sample_s, 1e-3);
  p.collectives.ranks_per_node = o.ranks_per_node;
  p.collectives.max_bytes = std::min(o.quick ? 16 * kMiBytes : 1024 * kMiBytes, mem_cap / 3);
  p.collectives.max_op_s = o.quick ? 0.02 : 0.2;
  return p;
}

std::string utc_now() {
  const std::time_t now = std::chrono::system_clock::to_time_t(std::chrono::system_clock::now());
  std::tm tm{};
  gmtime_r(&now, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

std::string host_name() {
  char buf[256] = {0};
  if (gethostname(buf, sizeof buf - 1) != 0) return "unknown";
  return buf;
}

template <typename T>
nlohmann::json as_json(const T& section) {
  return nlohmann::json::parse(to_json(section).dump());
}

double best_rate(const std::map<KernelKind, std::vector<SizePoint>>& curves) {
  double best = 0.0;
  for (const auto& [kind, pts] : curves) {
    for (const SizePoint& p : pts) best = std::max(best, p.bytes / p.seconds);
  }
  return best;
}

// The device facts and datasheet fall-back sections of a cpu profile: a CPU
// has no published tensor peak, so peaks and bandwidth are the best this
// calibration measured, and every figure says so.
void cpu_base(Profile& p, const rt::DeviceInfo& info, double best_gemm_flops_per_s,
              double best_memory_bytes_per_s, int ranks_per_node) {
  const std::string measured = "measured by strata calibrate on this host";
  p.device.name = info.name;
  p.device.backend = "cpu";
  p.device.compute_units = info.compute_units;
  p.device.memory_bytes = static_cast<double>(info.memory_bytes) / std::max(1, ranks_per_node);
  p.device.memory_bandwidth_bytes_per_s = best_memory_bytes_per_s;
  for (DType d : {DType::kBf16, DType::kFp16, DType::kFp32, DType::kTf32}) {
    p.device.peak_flops_per_s[d] = best_gemm_flops_per_s;
  }
  p.device.sources = {
      {"name", "the host CPU's model name (/proc/cpuinfo)"},
      {"compute_units", "threads the cpu backend uses per rank (cores / ranks on the node)"},
      {"memory_bytes", fmt::format("physical memory / {} ranks on the node", ranks_per_node)},
      {"memory_bandwidth_gbytes_per_s", "best memory-bound kernel rate " + measured},
      {"peak_tflops", "best GEMM rate " + measured + "; the cpu backend computes bf16, fp16 and "
                      "tf32 requests in fp32 (Eigen), so every dtype has the fp32 figure"}};
  p.memory.framework_reserve_bytes = 0.0;
  p.memory.allocator_fragmentation = 0.0;
  p.memory.source = "cpu backend: plain aligned host allocations, no device context or caching allocator";
}

// How the ranks compared on the same kernels.
struct RankComparison {
  double slowest_over_fastest = 1.0;  // median over the kernels
  double median_cv = 0.0;             // median over the kernels of the ranks' coefficient of variation
};

// A synchronous training step runs at its slowest rank's pace, so each kernel
// figure is the slowest rank's (every rank measured the same list at the same
// time). On this project's 2-vCPU host one vCPU ran GEMMs 25% slower than the
// other for minutes at a time; rank 0's figures alone then predicted every
// 2-rank plan 25-30% fast. Also returns how the ranks differed, kernel by kernel:
// the median of slowest / fastest, and the median coefficient of variation
// (sample standard deviation over the mean, the ranks' deviations summed
// relative to their mean in a second pass, so single precision keeps them).
RankComparison keep_slowest_rank(rt::Communicator& world, const std::vector<double*>& seconds) {
  RankComparison out;
  if (world.size() < 2 || seconds.empty()) return out;
  rt::Device& dev = world.device();
  const auto n = static_cast<std::int64_t>(seconds.size());
  std::vector<float> mine(seconds.size());
  for (std::size_t i = 0; i < seconds.size(); ++i) mine[i] = static_cast<float>(*seconds[i]);
  auto all_reduce = [&](const std::vector<float>& values, rt::ReduceOp op) {
    rt::Tensor t = dev.allocate_tensor(n, DType::kFp32);
    rt::upload_fp32(dev, values, t.view());
    world.all_reduce(t.view(), t.view(), op);
    return rt::download_fp32(dev, t.view());
  };
  const std::vector<float> hi = all_reduce(mine, rt::ReduceOp::kMax);
  std::vector<float> negated(mine.size());
  for (std::size_t i = 0; i < mine.size(); ++i) negated[i] = -mine[i];
  const std::vector<float> lo = all_reduce(negated, rt::ReduceOp::kMax);
  const std::vector<float> sum = all_reduce(mine, rt::ReduceOp::kSum);
  const double ranks = world.size();
  std::vector<float> deviation(mine.size(), 0.0f);
  for (std::size_t i = 0; i < mine.size(); ++i) {
    const double mean = sum[i] / ranks;
    if (mean > 0.0) deviation[i] = static_cast<float>(std::pow(mine[i] / mean - 1.0, 2));
  }
  const std::vector<float> squares = all_reduce(deviation, rt::ReduceOp::kSum);
  std::vector<double> ratios, cvs;
  for (std::size_t i = 0; i < seconds.size(); ++i) {
    *seconds[i] = hi[i];
    if (lo[i] < 0.0f) ratios.push_back(hi[i] / -lo[i]);
    if (sum[i] > 0.0f) cvs.push_back(std::sqrt(squares[i] / (ranks - 1.0)));
  }
  auto median = [](std::vector<double> v) {
    std::nth_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(v.size() / 2), v.end());
    return v[v.size() / 2];
  };
  if (!ratios.empty()) out.slowest_over_fastest = median(ratios);
  if (!cvs.empty()) out.median_cv = median(cvs);
  return out;
}

}  // namespace

CalibrationReport run_calibration(rt::Device& device, rt::Communicator& world,
                                  const CalibrationOptions& o, const ProgressFn& progress) {
  const rt::DeviceInfo& info = device.info();
  const bool cpu = info.backend == rt::Backend::kCpu;
  if (!cpu && !o.base) {
    throw InputError("", "--base",
                     fmt::format("no shipped datasheet profile names the device \"{}\"; pass --base "
                                 "PROFILE with its datasheet figures (peak FLOP/s cannot be measured "
                                 "without a reference)", info.name));
  }
  CalibrationReport report;
  BenchPlan plan = make_plan(info, o, report.notes);
  const std::int64_t total = static_cast<std::int64_t>(
      plan.gemms.size() + plan.kernel_sizes.size() * all_kernel_kinds().size() +
      plan.attention.size() + plan.copy_sizes.size() + collective_curve_count(world.size()));
  std::int64_t done = 0;
  auto step = [&](const std::string& what) {
    ++done;
    report_progress(progress, done, total, what);
  };

  spdlog::debug("calibrate rank {}: {} GEMMs, {} kernel sizes, {} attention shapes, {} copy sizes",
                world.rank(), plan.gemms.size(), plan.kernel_sizes.size(), plan.attention.size(),
                plan.copy_sizes.size());
  // GEMMs stream their operands through more than the cache, as a training step
  // does (gemm_bench.h).
  std::vector<GemmPoint> gemm_points = bench_gemms(device, plan.gemms, plan.timing,
                                                   gemm_working_set_bytes(info), [&](std::size_t i) {
    const GemmQuery& q = plan.gemms[i];
    step(fmt::format("gemm {}x{}x{}", q.m, q.n, q.k));
  });
  spdlog::debug("calibrate rank {}: GEMMs done", world.rank());
  std::map<KernelKind, std::vector<SizePoint>> kernels =
      bench_memory_bound(device, plan.kernel_sizes, plan.timing, [&](std::size_t i) {
        step(fmt::format("{} kernels", to_string(all_kernel_kinds()[i / plan.kernel_sizes.size()])));
      });
  spdlog::debug("calibrate rank {}: memory-bound kernels done", world.rank());
  std::vector<AttentionPoint> attention =
      bench_attention(device, plan.attention, plan.timing, [&](std::size_t i) {
        step(fmt::format("attention seq {}", plan.attention[i].seq));
      });
  spdlog::debug("calibrate rank {}: attention done", world.rank());
  auto [h2d, d2h] = bench_host_copies(device, plan.copy_sizes, plan.timing, [&](std::size_t) {
    step("host copies");
  });
  spdlog::debug("calibrate rank {}: host copies done", world.rank());
  // Every rank has finished its device benchmarks before the collectives start.
  world.barrier();
  {
    std::vector<double*> kernel_seconds;
    for (GemmPoint& g : gemm_points) kernel_seconds.push_back(&g.seconds);
    for (auto& [kind, pts] : kernels) {
      for (SizePoint& p : pts) kernel_seconds.push_back(&p.seconds);
    }
    for (AttentionPoint& a : attention) kernel_seconds.push_back(&a.seconds);
    const RankComparison ranks = keep_slowest_rank(world, kernel_seconds);
    if (ranks.slowest_over_fastest > 1.05) {
      report.notes.push_back(fmt::format(
          "ranks ran the same kernels at different speeds (slowest / fastest: median {:.2f}); the "
          "profile keeps the slowest rank's figures, which set a synchronous step's pace",
          ranks.slowest_over_fastest));
    }
    if (world.size() >= 2) {
      report.rank_spread = RankSpread{world.size(), static_cast<int>(kernel_seconds.size()), ranks.median_cv};
    }
  }
  std::vector<CollectiveMeasurement> collectives;
  if (world.size() >= 2) {
    std::size_t curves_done = 0;
    collectives = bench_collectives(world, plan.collectives, [&](std::size_t now) {
      while (curves_done < now) {
        ++curves_done;
        step("collectives");
      }
    });
  } else {
    report.notes.push_back("collectives not measured: one rank (run under `mpirun -n N` to measure them)");
  }
  report.gemms = static_cast<std::int64_t>(gemm_points.size());
  report.attention = static_cast<std::int64_t>(attention.size());
  report.copies = static_cast<std::int64_t>(h2d.size() + d2h.size());
  for (const auto& [k, pts] : kernels) report.kernels += static_cast<std::int64_t>(pts.size());
  for (auto it = collectives.begin(); it != collectives.end();) {
    if (it->points.size() < 2) {
      report.notes.push_back(fmt::format("{} over {} ranks: fewer than 2 sizes within the time bound; left out",
                                         to_string(it->op), it->group_size));
      it = collectives.erase(it);
    } else {
      report.collective_points += static_cast<std::int64_t>(it->points.size());
      ++it;
    }
  }
  if (world.rank() != 0) return report;

  // ---- the profile (rank 0) ----
  Profile& p = report.profile;
  p.kind = "calibrated";
  GemmSection gemm_base;
  MemoryBoundSection mb_base;
  AttentionSection attn_base;
  HostCopySection copy_base;
  const std::string measured = "measured by strata calibrate on this host";
  if (cpu) {
    double best_gemm = 0.0;
    for (const GemmPoint& g : gemm_points) {
      best_gemm = std::max(best_gemm, gemm_flops({g.m, g.n, g.k, g.batch, plan.gemm_dtype}) / g.seconds);
    }
    cpu_base(p, info, best_gemm, best_rate(kernels), o.ranks_per_node);
    p.name = "cpu-calibrated";
    gemm_base.tile_m = 1;
    gemm_base.tile_n = 1;
    gemm_base.overhead_s = 0.0;
    for (DType d : {DType::kBf16, DType::kFp16, DType::kFp32, DType::kTf32}) gemm_base.max_efficiency[d] = 1.0;
    gemm_base.sources = {
        {"max_efficiency", "1: the peak is the best GEMM rate " + measured},
        {"tile", "no tile quantization on the cpu: Eigen's GEMM does not run a fixed grid of output "
                 "tiles over cores, so 1x1 tiles (no steps)"},
        {"overhead_us", "0: part of the measured times"}};
    double smallest = 1e9;
    for (const auto& [k, pts] : kernels) smallest = std::min(smallest, pts.front().seconds);
    mb_base.efficiency = 1.0;
    mb_base.overhead_s = smallest;
    mb_base.sources = {{"efficiency", "1: the bandwidth is the best rate " + measured},
                       {"overhead_us", "the fastest smallest kernel " + measured}};
    double best_fwd = 0.0, best_bwd = 0.0;
    for (const AttentionPoint& a : attention) {
      const double eff = attention_flops({a.batch_heads, a.seq, a.head_dim, a.causal, a.backward, a.dtype}) /
                         (best_gemm * a.seconds);
      (a.backward ? best_bwd : best_fwd) = std::max(a.backward ? best_bwd : best_fwd, eff);
    }
    attn_base.forward_efficiency = std::clamp(best_fwd, 1e-3, 1.0);
    attn_base.backward_efficiency = std::clamp(best_bwd, 1e-3, 1.0);
    attn_base.overhead_s = 0.0;
    attn_base.sources = {{"forward_efficiency", "best forward attention efficiency " + measured},
                         {"backward_efficiency", "best backward attention efficiency " + measured},
                         {"overhead_us", "0: part of the measured times"}};
    copy_base.efficiency = 1.0;
    copy_base.latency_s = 0.0;
    copy_base.sources = {{"efficiency", "cpu backend: host copies are memory copies, " + measured},
                         {"latency_us", "0: part of the measured times"}};
  } else {
    const Profile& base = *o.base;
    p.name = base.name + "-calibrated";
    p.device = base.device;
    p.device.compute_units = info.compute_units;
    p.device.memory_bytes = static_cast<double>(info.memory_bytes);
    p.device.sources["compute_units"] = "SMs the CUDA runtime reports";
    p.device.sources["memory_bytes"] = "total memory the CUDA runtime reports";
    p.memory = base.memory;
    const CostModel base_model(base);
    if (base_model.gemm_section()) gemm_base = *base_model.gemm_section();
    if (base_model.memory_bound_section()) mb_base = *base_model.memory_bound_section();
    if (base_model.attention_section()) attn_base = *base_model.attention_section();
    if (base_model.host_copy_section()) copy_base = *base_model.host_copy_section();
  }
  p.device.name = info.name;

  p.cost_sections["gemm"] = as_json(measured_gemm_section(gemm_base, {{plan.gemm_dtype, gemm_points}}));
  p.cost_sections["memory_bound"] = as_json(measured_memory_bound_section(mb_base, kernels));
  if (!attention.empty()) {
    p.cost_sections["attention"] = as_json(measured_attention_section(attn_base, attention));
  }
  p.cost_sections["host_copy"] = as_json(measured_host_copy_section(copy_base, h2d, d2h));
  if (!collectives.empty()) {
    const double ref = cpu ? p.device.memory_bandwidth_bytes_per_s : p.device.nvlink_bandwidth_bytes_per_s;
    const std::string ref_source =
        cpu ? "intra-node: the best memory-bound kernel rate measured on this host (shared-memory "
              "transports move every byte through memory)"
            : "intra-node: the device's NVLink bandwidth per direction (datasheet)";
    p.cost_sections["collectives"] =
        as_json(measured_collectives_section(collectives, ref, 0.0, {{"reference_busbw_gbytes_per_s", ref_source}}));
  }
  // Validate what was assembled the way any reader will.
  p.file = "(calibration)";
  p = read_profile(nlohmann::json::parse(to_json(p).dump()), "(calibration)");
  p.cost_sections["fit_quality"] = nlohmann::json::parse(fit_quality_json(held_out_quality(p)).dump());
  if (report.rank_spread) p.cost_sections["rank_spread"] = nlohmann::json::parse(to_json(*report.rank_spread).dump());

  Provenance prov;
  prov.host = host_name();
  prov.backend = cpu ? "cpu" : "cuda";
  prov.device = info.name;
  prov.date = utc_now();
  prov.command_line = o.command_line;
  prov.strata_version = o.strata_version;
  prov.ranks = world.size();
  prov.threads_per_rank = cpu ? info.compute_units : 1;
  prov.libraries = info.versions;
  prov.details["isa"] = info.isa;
  if (!info.notes.empty()) prov.details["notes"] = info.notes;
  prov.details["mode"] = o.quick ? "quick" : "full";
  prov.details["gemm_dtype"] = to_string(plan.gemm_dtype);
  prov.details["gemm_operands"] = fmt::format(
      "rotating through {} MiB (out of cache on every call, as in a training step)",
      gemm_working_set_bytes(info) >> 20);
  if (plan.timing.soak_s > 0.0) {
    prov.details["gemm_clock"] = fmt::format(
        "sustained: the largest GEMM ran {:.0f} s before the first shape and {:.0f} ms before each",
        plan.timing.soak_s, plan.timing.keep_hot_s * 1e3);
  }
  p.cost_sections["provenance"] = as_json(prov);
  p.file.clear();
  return report;
}

std::vector<DriftRow> check_drift(rt::Device& device, rt::Communicator& world,
                                  const CostModel& model, const CalibrationOptions& o,
                                  const ProgressFn& progress) {
  std::vector<std::string> notes;
  BenchPlan plan = make_plan(device.info(), o, notes);
  // A sample: every 9th grid GEMM, the kernels at a few sizes, the collectives
  // the profile measured at their group sizes (the world's) at a few sizes.
  std::vector<GemmQuery> gemms;
  for (std::size_t i = 4; i < plan.gemms.size(); i += 9) gemms.push_back(plan.gemms[i]);
  std::vector<double> sizes;
  for (std::size_t i = 1; i < plan.kernel_sizes.size(); i += 2) sizes.push_back(plan.kernel_sizes[i]);
  CollectiveBenchOptions coll = plan.collectives;
  coll.max_bytes = std::min(coll.max_bytes, 4 * kMiBytes);
  coll.min_bytes = 16 * kKiBytes;
  const std::int64_t total = static_cast<std::int64_t>(
      gemms.size() + sizes.size() * all_kernel_kinds().size() +
      (world.size() >= 2 ? collective_curve_count(world.size()) : 0));
  std::int64_t done = 0;
  auto step = [&](const std::string& what) {
    ++done;
    report_progress(progress, done, total, what);
  };
  std::vector<DriftRow> rows;
  // Timed the way the calibration timed them, or the check compares unlike figures.
  std::vector<GemmPoint> g = bench_gemms(device, gemms, plan.timing, gemm_working_set_bytes(device.info()),
                                         [&](std::size_t) { step("gemm"); });
  for (const GemmPoint& p : g) {
    const GemmQuery q{p.m, p.n, p.k, p.batch, plan.gemm_dtype};
    rows.push_back({"gemm", fmt::format("gemm {}x{}x{} {}", p.m, p.n, p.k, to_string(q.dtype)),
                    model.gemm_seconds(q), p.seconds});
  }
  auto kernels = bench_memory_bound(device, sizes, plan.timing, [&](std::size_t) { step("kernels"); });
  for (const auto& [kind, pts] : kernels) {
    for (const SizePoint& p : pts) {
      rows.push_back({"memory_bound", fmt::format("{} {:.0f} B", to_string(kind), p.bytes),
                      model.kernel_seconds(kind, p.bytes, plan.gemm_dtype), p.seconds});
    }
  }
  world.barrier();
  if (world.size() >= 2) {
    std::size_t curves_done = 0;
    auto measured = bench_collectives(world, coll, [&](std::size_t now) {
      while (curves_done < now) {
        ++curves_done;
        step("collectives");
      }
    });
    for (const CollectiveMeasurement& m : measured) {
      for (const SizePoint& p : m.points) {
        auto predicted = model.collective_seconds(m.op, m.group_size, m.inter_node, p.bytes);
        if (!predicted) continue;  // not in the profile: nothing to drift from
        rows.push_back({"collectives",
                        fmt::format("{} {} ranks {:.0f} B", to_string(m.op), m.group_size, p.bytes),
                        *predicted, p.seconds});
      }
    }
  }
  return rows;
}

}  // namespace strata::calib
