#include "sweep/sweep.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <map>
#include <thread>

#include <fmt/format.h>

#include "core/error.h"
#include "core/memory_budget.h"
#include "plan/memory_model.h"
#include "sim/sampling.h"
#include "plan/pipeline_split.h"
#include "sim/device_memory.h"

namespace strata::sim {
namespace {

// Why a plan does not fit: the model states alone (with the framework's fixed
// reserve), or the activations on top. The reserve's fragmentation share grows
// with the activations, so it counts with them.
std::string prune_reason(const MemoryReport& r, const DeviceMemory& device) {
  const StageMemory& s = r.stages[r.peak_stage];
  const double states = s.params_bytes + s.grads_bytes + s.optimizer_bytes;
  if (states + device.framework_reserve_bytes > r.capacity_bytes) return "model states exceed memory";
  return "activations exceed memory";
}

// Runs fn(i) for i in [0, n) on `threads` threads; results land by index, so the
// outcome does not depend on the thread count.
template <typename Fn>
void parallel_for(std::int64_t n, int threads, Fn&& fn) {
  std::atomic<std::int64_t> next{0};
  auto worker = [&] {
    for (std::int64_t i = next++; i < n; i = next++) fn(i);
  };
  std::vector<std::thread> pool;
  for (int t = 1; t < threads; ++t) pool.emplace_back(worker);
  worker();
  for (std::thread& t : pool) t.join();
}

std::string percent(double x) { return fmt::format("{:.1f}%", 100 * x); }
std::string secs(double x) { return x >= 1.0 ? fmt::format("{:.2f} s", x) : fmt::format("{:.0f} ms", 1e3 * x); }

// A plan's first and last stage layers, "17/15", or "even".
std::string stage_split_text(const PlanSpec& p) {
  const std::string label = stage_split_label(p);
  return label.empty() ? "even" : label;
}

// The plan keys that differ, "vpp 2 vs 1, mbs 2 vs 1".
std::string plan_differences(const PlanSpec& a, const PlanSpec& b) {
  std::vector<std::string> parts;
  auto add = [&](const char* name, const std::string& x, const std::string& y) {
    if (x != y) parts.push_back(fmt::format("{} {} vs {}", name, x, y));
  };
  add("tp", std::to_string(a.tp), std::to_string(b.tp));
  add("cp", std::to_string(a.cp), std::to_string(b.cp));
  if (a.cp > 1 && b.cp > 1) add("cp exchange", to_string(a.cp_comm_type), to_string(b.cp_comm_type));
  if (a.moe.active && b.moe.active) {
    add("ep", std::to_string(a.moe.ep), std::to_string(b.moe.ep));
    add("etp", std::to_string(a.moe.etp), std::to_string(b.moe.etp));
  }
  add("pp", std::to_string(a.pp), std::to_string(b.pp));
  add("vpp", std::to_string(a.vpp), std::to_string(b.vpp));
  add("stages", stage_split_text(a), stage_split_text(b));
  add("micro-batch", std::to_string(a.micro_batch_size), std::to_string(b.micro_batch_size));
  add("schedule", to_string(a.schedule), to_string(b.schedule));
  add("ZeRO", std::to_string(a.zero_stage), std::to_string(b.zero_stage));
  if (a.zero_shard_size > 0 || b.zero_shard_size > 0) {
    add("ZeRO shard group", std::to_string(a.zero_shards()), std::to_string(b.zero_shards()));
  }
  add("offload", a.offload_optimizer ? "on" : "off", b.offload_optimizer ? "on" : "off");
  add("recompute", recompute_label(a), recompute_label(b));
  add("sequence parallel", a.sequence_parallel ? "on" : "off", b.sequence_parallel ? "on" : "off");
  add("flash attention", a.flash_attention ? "on" : "off", b.flash_attention ? "on" : "off");
  std::string out;
  for (std::size_t i = 0; i < parts.size() && i < 3; ++i) out += (i ? ", " : "") + parts[i];
  return out;
}

// Why `a` beats `b`: the part of the step where b loses most time to a.
std::string explain(const PlanOutcome& a, const PlanOutcome& b) {
  struct Part {
    std::string name;
    double a, b;
    bool ratio;  // show as a share of the step
  };
  std::vector<Part> parts = {
      {"bubble", a.bubble_ratio * a.step_time_s, b.bubble_ratio * b.step_time_s, true},
      {"compute", a.compute_s, b.compute_s, false},
      {"exposed tp", a.exposed_s[0], b.exposed_s[0], false},
      {"exposed pp", a.exposed_s[1], b.exposed_s[1], false},
      {"exposed dp", a.exposed_s[2], b.exposed_s[2], false},
      {"exposed zero", a.exposed_s[3], b.exposed_s[3], false},
      {"exposed offload", a.exposed_s[4], b.exposed_s[4], false},
      {"exposed cp", a.exposed_s[static_cast<int>(CommKind::kCp)], b.exposed_s[static_cast<int>(CommKind::kCp)], false},
      {"exposed ep (MoE all-to-all)", a.exposed_s[static_cast<int>(CommKind::kEp)],
       b.exposed_s[static_cast<int>(CommKind::kEp)], false}};
  const Part* best = &parts[0];
  for (const Part& p : parts) {
    if (p.b - p.a > best->b - best->a) best = &p;
  }
  const double gain = b.tokens_per_s > 0 ? a.tokens_per_s / b.tokens_per_s - 1.0 : 0.0;
  const std::string diff = plan_differences(a.plan, b.plan);
  // Within 0.05%: a tie on throughput, decided by memory (then by the plan's name).
  if (gain < 5e-4) {
    const std::string tie = a.peak_bytes < b.peak_bytes
                                ? fmt::format("memory ({:.2f} vs {:.2f} GiB peak)", a.peak_bytes / 1073741824.0,
                                              b.peak_bytes / 1073741824.0)
                                : "plan order (same memory)";
    return fmt::format("ties with #{} on tokens/s ({:+.2f}%), ahead on {}{}", b.rank, 100 * gain, tie,
                       diff.empty() ? "" : " (" + diff + ")");
  }
  std::string what = best->ratio ? fmt::format("{} {} vs {}", best->name, percent(a.bubble_ratio), percent(b.bubble_ratio))
                                 : fmt::format("{} {} vs {}", best->name, secs(best->a), secs(best->b));
  return fmt::format("{} more tokens/s than #{}: {}{}", percent(gain), b.rank, what,
                     diff.empty() ? "" : " (" + diff + ")");
}

// What context parallelism buys a top plan: the same plan with its cp ranks as
// data-parallel ranks instead ("" when that plan is not in the sweep).
std::string against_cp1(const PlanOutcome& o, const std::map<std::string, const PlanOutcome*>& by_plan) {
  if (o.plan.cp == 1) return "";
  PlanSpec twin = o.plan;
  twin.dp *= twin.cp;
  twin.cp = 1;
  twin.cp_comm_type = CpCommType::kP2p;
  const auto it = by_plan.find(to_json(twin).dump());
  if (it == by_plan.end()) return "";
  const PlanOutcome& t = *it->second;
  const double gib = 1024.0 * 1024.0 * 1024.0;
  if (!t.fits) {
    return fmt::format("; at cp 1 (dp {}) it does not fit: {} ({:.1f} of {:.1f} GiB)", twin.dp, t.prune_reason,
                       t.peak_bytes / gib, t.capacity_bytes / gib);
  }
  if (t.rank == 0) return "";
  return fmt::format("; at cp 1 (dp {}) it ranks #{}, {} {} tokens/s", twin.dp, t.rank,
                     percent(std::abs(o.tokens_per_s / t.tokens_per_s - 1.0)),
                     o.tokens_per_s >= t.tokens_per_s ? "fewer" : "more");
}

// What an uneven split buys a top plan: the same plan split evenly, and why the
// ends want fewer (or more) layers: the last stage also runs the output layer
// and loss over the vocabulary, the first the embedding.
std::string against_even(const PlanOutcome& o, const ModelSpec& m,
                         const std::map<std::string, const PlanOutcome*>& by_plan) {
  if (!o.plan.uneven_stages() || o.plan.account_for_embedding || o.plan.account_for_loss) return "";
  PlanSpec twin = o.plan;
  twin.first_stage_layers = 0;
  twin.last_stage_layers = 0;
  const auto it = by_plan.find(to_json(twin).dump());
  if (it == by_plan.end()) return "";
  const PlanOutcome& t = *it->second;
  const int even = m.num_layers / o.plan.pp;
  auto layers = [](int n) { return fmt::format("{} layer{}", n, n == 1 ? "" : "s"); };
  std::string reason;
  const int last = o.plan.last_stage_layers, first = o.plan.first_stage_layers;
  if (last < even) {
    reason = fmt::format("the last stage carries the {}-vocabulary output layer and loss: {} fewer there balances it",
                         m.vocab_size, layers(even - last));
  } else if (first < even) {
    reason = fmt::format("the first stage carries the embedding: {} fewer there balances it", layers(even - first));
  } else {
    reason = "the split balances the stages' compute";
  }
  return fmt::format("; split {}/{} (even {}): {}, {} {} tokens/s than the even split (#{})", first, last, even,
                     reason, percent(std::abs(o.tokens_per_s / t.tokens_per_s - 1.0)),
                     o.tokens_per_s >= t.tokens_per_s ? "more" : "fewer", t.rank);
}

// What a zero-bubble schedule buys a top plan: the same plan under 1F1B, whose
// bubble it fills with the deferred weight gradients, at what memory.
std::string against_1f1b(const PlanOutcome& o, const std::map<std::string, const PlanOutcome*>& by_plan) {
  if (!splits_backward(o.plan.schedule)) return "";
  PlanSpec twin = o.plan;
  twin.schedule = Schedule::kOneFOneB;
  twin.vpp = 1;  // zb-v's two chunks are one stage under 1F1B
  auto it = by_plan.find(to_json(twin).dump());
  // The split search tries the best even pipelines only: an uneven split's
  // 1F1B twin may be there with the even split alone.
  std::string even;
  if (it == by_plan.end() && twin.uneven_stages()) {
    twin.first_stage_layers = twin.last_stage_layers = 0;
    it = by_plan.find(to_json(twin).dump());
    even = ", even split";
  }
  if (it == by_plan.end()) return "";
  const PlanOutcome& t = *it->second;
  const double gib = 1024.0 * 1024.0 * 1024.0;
  return fmt::format("; bubble {} vs {} ({} vs 1f1b{}, #{}), peak memory {:.1f} vs {:.1f} GiB",
                     percent(o.bubble_ratio), percent(t.bubble_ratio), to_string(o.plan.schedule), even, t.rank,
                     o.peak_bytes / gib, t.peak_bytes / gib);
}

}  // namespace

void record_simulation(PlanOutcome& o, const SimulationResult& r) {
  o.simulated = true;
  o.fidelity = to_string(r.fidelity);
  o.step_time_s = r.metrics.step_time_s;
  o.tokens_per_s = r.tokens_per_s;
  o.mfu = r.mfu;
  o.hfu = r.hfu;
  o.tflops_per_gpu = r.tflops_per_gpu;
  o.bubble_ratio = r.metrics.bubble_ratio;
  o.compute_s = r.metrics.compute_s;
  o.exposed_s = r.metrics.exposed_s;
}

double sweep_memory_budget_bytes() {
  return memory_budget_bytes() / std::max(1u, std::thread::hardware_concurrency());
}

namespace {

// Why a plan that fits is not simulated: its folded step, bounded from the plan
// alone (the most layers an uneven split gives a stage), exceeds the budget.
std::string too_large_reason(const ModelSpec& model, const PlanSpec& p, double limit) {
  const int chunk_layers = (model.num_layers + p.pp * p.vpp - 1) / (p.pp * p.vpp) + 2;
  const double tasks = estimated_tasks(p, Fidelity::kFolded, chunk_layers, 0);
  if (tasks <= limit) return "";
  return fmt::format("too large to simulate: {} micro-batches make about {:.3g} tasks folded, more than the {:.3g} "
                     "one simulation of a sweep may build here",
                     p.num_microbatches(), tasks, limit);
}

}  // namespace

SweepResult run_sweep(const ModelSpec& model, const Simulator& simulator, const PlanSpaceRequest& request,
                      const SweepOptions& options) {
  SweepResult sweep;
  std::vector<PlanSpec> plans = enumerate_plans(model, simulator.cluster(), request, sweep.counts.space);
  sweep.counts.valid = static_cast<std::int64_t>(plans.size());
  sweep.plans.resize(plans.size());
  // The memory model first: nothing that cannot fit is simulated.
  const DeviceMemory device = device_memory(simulator.profile());
  const double budget = sweep_memory_budget_bytes();
  const double max_tasks = std::min(budget / kBytesPerEstimatedTask, kMaxTasks);
  std::vector<std::int64_t> to_simulate;
  for (std::size_t i = 0; i < plans.size(); ++i) {
    PlanOutcome& o = sweep.plans[i];
    o.plan = plans[i];
    o.label = plan_label(plans[i]);
    const MemoryReport mem = memory_report(model, plans[i], device);
    const StageMemory& peak = mem.stages[mem.peak_stage];
    o.fits = mem.fits;
    o.peak_bytes = mem.peak_bytes;
    o.capacity_bytes = mem.capacity_bytes;
    o.model_state_bytes = peak.params_bytes + peak.grads_bytes + peak.optimizer_bytes;
    if (!mem.fits) {
      o.prune_reason = prune_reason(mem, device);
      ++sweep.counts.pruned_memory;
      ++sweep.counts.pruned_by_reason[o.prune_reason];
    } else if (o.prune_reason = too_large_reason(model, o.plan, max_tasks); !o.prune_reason.empty()) {
      ++sweep.counts.too_large;
    } else if (static_cast<int>(i % options.shard_count) == options.shard_index) {
      to_simulate.push_back(static_cast<std::int64_t>(i));
    }
  }
  std::atomic<std::int64_t> done{0};
  std::atomic<bool> cancelled{false};
  SimulationOptions sim_options;
  sim_options.fidelity = Fidelity::kFolded;
  sim_options.keep_timeline = false;
  sim_options.memory_budget_bytes = budget;
  const std::int64_t total = static_cast<std::int64_t>(to_simulate.size());
  parallel_for(total, std::max(1, options.threads), [&](std::int64_t k) {
    if (cancelled) return;  // the workers drain the rest without simulating
    PlanOutcome& o = sweep.plans[to_simulate[k]];
    record_simulation(o, simulator.run(model, o.plan, sim_options));
    const std::int64_t d = ++done;
    if (options.progress && !options.progress(d, total, "plans simulated")) cancelled = true;
  });
  if (cancelled) throw Cancelled();
  sweep.counts.simulated = static_cast<std::int64_t>(to_simulate.size());
  return sweep;
}

namespace {

// Uneven stages (plan/pipeline_split.h): each of the best top_k even pipelines
// again with its first and last stage's layers moved by up to 2 per model chunk
// around the even count, folded; the splits that fit join the ranking. Returns whether any did.
bool balance_stages(SweepResult& sweep, const ModelSpec& model, const Simulator& simulator,
                    const SweepOptions& options) {
  // The enumerated plans are all even (enumerate_plans tries no split), so only
  // the variants can repeat one another.
  std::map<std::string, bool> seen;
  const DeviceMemory device = device_memory(simulator.profile());
  const ClusterSpec& cluster = simulator.cluster();
  const PlanContext context{cluster.num_gpus(), cluster.gpus_per_node, true};  // the plans are checked already
  std::vector<PlanOutcome> variants;
  int tried = 0;
  for (const PlanOutcome& o : sweep.plans) {
    if (tried >= options.top_k || !o.simulated) break;
    // zb-v's V splits evenly only (resolve_and_check_plan).
    if (o.plan.pp < 2 || o.plan.uneven_stages() || v_shaped(o.plan.schedule) || model.num_layers % o.plan.pp != 0) {
      continue;
    }
    ++tried;
    // Steps of one layer per model chunk (a stage's layers split evenly over its vpp chunks).
    const int even = model.num_layers / o.plan.pp;
    const int step = o.plan.vpp;
    for (int first = even - 2 * step; first <= even + 2 * step; first += step) {
      for (int last = even - 2 * step; last <= even + 2 * step; last += step) {
        if ((first == even && last == even) || first < 1 || last < 1) continue;
        PlanSpec p = o.plan;
        p.first_stage_layers = first;
        p.last_stage_layers = last;
        if (pipeline_split_problem(model, p)) continue;
        try {
          resolve_and_check_plan(p, model, context, "(sweep)");
        } catch (const InputError&) {
          continue;
        }
        if (!seen.emplace(to_json(p).dump(), true).second) continue;
        const MemoryReport mem = memory_report(model, p, device);
        if (!mem.fits) continue;
        PlanOutcome v;
        v.plan = p;
        v.label = plan_label(p);
        v.fits = true;
        v.peak_bytes = mem.peak_bytes;
        v.capacity_bytes = mem.capacity_bytes;
        const StageMemory& peak = mem.stages[mem.peak_stage];
        v.model_state_bytes = peak.params_bytes + peak.grads_bytes + peak.optimizer_bytes;
        variants.push_back(std::move(v));
      }
    }
  }
  SimulationOptions sim_options;
  sim_options.fidelity = Fidelity::kFolded;
  sim_options.keep_timeline = false;
  parallel_for(static_cast<std::int64_t>(variants.size()), std::max(1, options.threads),
               [&](std::int64_t k) { record_simulation(variants[k], simulator.run(model, variants[k].plan, sim_options)); });
  sweep.counts.balanced = static_cast<std::int64_t>(variants.size());
  sweep.counts.simulated += sweep.counts.balanced;
  for (PlanOutcome& v : variants) sweep.plans.push_back(std::move(v));
  return !variants.empty();
}

}  // namespace

void rank_sweep(SweepResult& sweep, const ModelSpec& model, const Simulator& simulator,
                const SweepOptions& options) {
  // Best first: throughput, then memory (less is safer), then the label (stable).
  auto better = [](const PlanOutcome& a, const PlanOutcome& b) {
    if (a.simulated != b.simulated) return a.simulated;
    if (a.simulated && a.tokens_per_s != b.tokens_per_s) return a.tokens_per_s > b.tokens_per_s;
    if (a.peak_bytes != b.peak_bytes) return a.peak_bytes < b.peak_bytes;
    return a.label < b.label;
  };
  std::stable_sort(sweep.plans.begin(), sweep.plans.end(), better);
  if (balance_stages(sweep, model, simulator, options)) std::stable_sort(sweep.plans.begin(), sweep.plans.end(), better);

  // The best few again at full fidelity, in parallel, then ranked by those numbers.
  const int full = std::min<int>(options.full_top, static_cast<int>(std::count_if(
                                                       sweep.plans.begin(), sweep.plans.end(),
                                                       [](const PlanOutcome& o) { return o.simulated; })));
  SimulationOptions full_options;
  full_options.fidelity = Fidelity::kFull;
  full_options.keep_timeline = false;
  full_options.memory_budget_bytes = sweep_memory_budget_bytes();
  std::atomic<int> resimulated{0};
  parallel_for(full, std::max(1, std::min(options.threads, full)), [&](std::int64_t i) {
    PlanOutcome& o = sweep.plans[i];
    try {
      const SimulationResult r = simulator.run(model, o.plan, full_options);
      o.folded_step_time_s = o.step_time_s;
      record_simulation(o, r);
      ++resimulated;
    } catch (const WorkloadTooLarge&) {
      // keeps its folded figures (fidelity "folded")
    }
  });
  sweep.counts.full_fidelity = resimulated;
  // Ranked by the best figure each plan has (full fidelity where re-simulated): a
  // re-simulated plan that turns out slower falls below folded ones.
  std::stable_sort(sweep.plans.begin(), sweep.plans.end(), better);
  // The re-simulated plans' step-time distributions, each sample on the threads
  // (sample_steps), one plan after another; with rank_by_p90 the sampled plans,
  // still ahead of the others, in order of their P90 step time.
  if (options.samples > 0) {
    const ClockVariation variation(options.clock_cv, options.seed,
                                   options.kernel_cv > 0.0 ? KernelJitter::assumed(options.kernel_cv) : KernelJitter{});
    for (PlanOutcome& o : sweep.plans) {
      if (o.fidelity != "full") continue;
      const StepDistribution d =
          sample_steps(simulator, model, o.plan, full_options, variation, options.samples,
                       o.step_time_s, std::max(1, options.threads));
      o.p50_step_time_s = d.p50.value;
      o.p90_step_time_s = d.p90.value;
      o.p90_ci_low_s = d.p90.ci_low;
      o.p90_ci_high_s = d.p90.ci_high;
    }
    if (options.rank_by_p90) {
      const auto sampled_end = std::stable_partition(sweep.plans.begin(), sweep.plans.end(),
                                                     [](const PlanOutcome& o) { return o.p90_step_time_s > 0.0; });
      std::stable_sort(sweep.plans.begin(), sampled_end, [](const PlanOutcome& a, const PlanOutcome& b) {
        return a.p90_step_time_s < b.p90_step_time_s;
      });
    }
  }

  int rank = 0;
  for (PlanOutcome& o : sweep.plans) {
    if (o.simulated) o.rank = ++rank;
  }
  // Pareto front of throughput vs memory headroom among the simulated plans: walk
  // by throughput (best first) and keep each plan with more headroom than all before it.
  double best_headroom = -1.0;
  for (PlanOutcome& o : sweep.plans) {
    if (!o.simulated) break;
    if (o.headroom() > best_headroom) {
      o.pareto = true;
      best_headroom = o.headroom();
    }
  }
  // The cp = 1 plans by their plan.json, for the top cp > 1 plans' comparison
  // (built only when one of those has cp > 1).
  std::map<std::string, const PlanOutcome*> by_plan;
  const auto top_end = sweep.plans.begin() + std::min(rank, options.top_k);
  const bool top_has_cp = std::any_of(sweep.plans.begin(), top_end, [](const PlanOutcome& o) { return o.plan.cp > 1; });
  const bool top_uneven =
      std::any_of(sweep.plans.begin(), top_end, [](const PlanOutcome& o) { return o.plan.uneven_stages(); });
  const bool top_zero_bubble =
      std::any_of(sweep.plans.begin(), top_end, [](const PlanOutcome& o) { return splits_backward(o.plan.schedule); });
  if (top_has_cp || top_uneven || top_zero_bubble) {
    for (const PlanOutcome& o : sweep.plans) {
      if ((top_has_cp && o.plan.cp == 1) || (top_uneven && o.plan.pp > 1 && !o.plan.uneven_stages()) ||
          (top_zero_bubble && o.plan.schedule == Schedule::kOneFOneB)) {
        by_plan.emplace(to_json(o.plan).dump(), &o);
      }
    }
  }
  for (int i = 0; i + 1 < rank && i < options.top_k; ++i) {
    const PlanOutcome& a = sweep.plans[i];
    const PlanOutcome& b = sweep.plans[i + 1];
    // Ranked by P90: what puts a ahead is its slow steps, whatever its mean.
    const std::string p90 =
        options.rank_by_p90 && a.p90_step_time_s > 0.0 && b.p90_step_time_s > 0.0
            ? fmt::format("P90 step {:.4g} s vs {:.4g} s ({} samples, clock CV {:.1f}%{}); ", a.p90_step_time_s,
                          b.p90_step_time_s, options.samples, 100.0 * options.clock_cv,
                          options.kernel_cv > 0.0 ? fmt::format(", kernel CV {:.1f}%", 100.0 * options.kernel_cv)
                                                  : std::string())
            : "";
    sweep.plans[i].why = p90 + explain(a, b) + against_cp1(a, by_plan) + against_even(a, model, by_plan) +
                         against_1f1b(a, by_plan);
  }
}

}  // namespace strata::sim
