#include "sim/simulate.h"

#include <algorithm>
#include <chrono>
#include <filesystem>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "core/data_paths.h"
#include "core/error.h"
#include "core/memory_budget.h"
#include "plan/pipeline_schedule.h"
#include "sim/costs/profile_op_costs.h"
#include "sim/costs/topology_comm_costs.h"
#include "sim/memory_timeline.h"
#include "sim/trace_writer.h"
#include "topologies/kinds.h"
#include "sim/device_memory.h"

namespace strata::sim {
namespace {

// What the plan's framework profile makes the prediction assume, in one line:
// the software behaviours that apply to this plan, and where their sources are.
std::string framework_note(const FrameworkProfile& f, const PlanSpec& p, const AttentionKernel* kernel) {
  std::vector<std::string> parts;
  if (kernel != nullptr) parts.push_back(fmt::format("attention {}", kernel->name));
  if (f.host_dispatch) {
    parts.push_back(fmt::format("host dispatch {} {:g} us per kernel", to_string(f.host_dispatch->mode),
                                f.host_dispatch->per_kernel_us));
  }
  if (p.tp > 1) {
    const bool userbuffers = p.sequence_parallel && f.tp_overlap;  // TE's needs sequence parallelism
    if (userbuffers) parts.push_back("TP collectives under GEMMs (userbuffers)");
    if (f.tp_async_backward) parts.push_back("TP backward collectives beside GEMMs (async)");
    if (!userbuffers && !f.tp_async_backward) parts.push_back("TP collectives in turn");
  }
  if (p.zero_stage == 3 && f.sharded) {
    parts.push_back(fmt::format("ZeRO-3 backward prefetch {}, {} layers unsharded, reduce-scatters on {} stream",
                                to_string(f.sharded->backward_prefetch), f.sharded->unsharded_layers,
                                f.sharded->reduce_stream == ReduceStream::kOwn ? "their own" : "the gathers'"));
  }
  if (p.pp > 1) {
    const bool blocks = f.pipeline_p2p && f.pipeline_p2p->blocks(p.vpp);
    parts.push_back(blocks ? "pipeline sends block the next op" : "pipeline sends beside the next op");
  }
  std::string list;
  for (const std::string& s : parts) list += (list.empty() ? "" : "; ") + s;
  // A shipped profile relative to the data root, so outputs do not depend on
  // where Strata lives; a user's file as resolve_data_file kept it, as given.
  const std::filesystem::path in_root = std::filesystem::path(f.file).lexically_relative(data_root());
  const bool shipped = !in_root.empty() && *in_root.begin() != "..";
  const std::string where = shipped ? in_root.generic_string() : f.file;
  return fmt::format("software: framework {}{}{} (each figure's source in {})", f.name, list.empty() ? "" : ": ", list,
                     where);
}

topo::CollectiveEfficiency efficiency_from(const CostModel& cm) {
  topo::CollectiveEfficiency eff;
  eff.source = cm.profile().name;
  for (CollectiveOp op : {CollectiveOp::kAllReduce, CollectiveOp::kAllGather, CollectiveOp::kReduceScatter,
                          CollectiveOp::kBroadcast, CollectiveOp::kAllToAll, CollectiveOp::kSendRecv}) {
    for (bool inter : {false, true}) {
      if (auto f = cm.collective_efficiency(op, inter)) {
        eff.factor[{op, inter ? topo::Scope::kInterNode : topo::Scope::kIntraNode}] = std::min(1.0, *f);
      }
    }
  }
  return eff;
}

std::vector<LinkUse> link_usage(const topo::Topology& topology, const Workload& w, const RunResult& run) {
  std::vector<double> bytes(topology.num_links(), 0.0);
  const TaskGraph& g = w.graph;
  for (TaskId t = 0; t < g.num_tasks(); ++t) {
    const std::int32_t c = g.comm_of(t);
    if (c < 0) continue;
    const CommSpec& spec = g.comm(c);
    for (std::size_t i = 0; i < spec.links.size(); ++i) bytes[spec.links[i]] += spec.bytes * spec.link_weight(i);
  }
  std::vector<LinkUse> out;
  const double step = ns_to_seconds(run.makespan_ns);
  for (int l = 0; l < topology.num_links(); ++l) {
    if (bytes[l] <= 0.0) continue;
    const topo::Link& link = topology.link(l);
    LinkUse u;
    u.from = topology.vertex(link.from_vertex).name;
    u.to = topology.vertex(link.to_vertex).name;
    u.kind = topo::to_string(link.kind);
    u.bandwidth_bytes_per_s = link.bandwidth_bytes_per_s;
    u.bytes = bytes[l];
    u.utilization = step > 0 ? bytes[l] / (link.bandwidth_bytes_per_s * step) : 0.0;
    out.push_back(std::move(u));
  }
  // The busiest links over time: each task's mean rate on them from its start to
  // its end, summed.
  std::vector<int> ids;  // link id of each entry of out
  for (int l = 0; l < topology.num_links(); ++l) {
    if (bytes[l] > 0.0) ids.push_back(l);
  }
  std::vector<int> order(out.size());
  for (std::size_t i = 0; i < order.size(); ++i) order[i] = static_cast<int>(i);
  std::stable_sort(order.begin(), order.end(),
                   [&](int a, int b) { return out[a].utilization > out[b].utilization; });
  order.resize(std::min<std::size_t>(order.size(), kBusiestLinksOverTime));
  std::vector<int> slot_of_link(topology.num_links(), -1);
  for (std::size_t k = 0; k < order.size(); ++k) slot_of_link[ids[order[k]]] = static_cast<int>(k);
  std::vector<std::vector<std::pair<TimeNs, double>>> changes(order.size());  // (time, rate change)
  for (TaskId t = 0; t < g.num_tasks(); ++t) {
    const std::int32_t c = g.comm_of(t);
    if (c < 0 || run.end_ns[t] <= run.start_ns[t]) continue;
    const CommSpec& spec = g.comm(c);
    const double seconds = ns_to_seconds(run.end_ns[t] - run.start_ns[t]);
    for (std::size_t i = 0; i < spec.links.size(); ++i) {
      const int k = slot_of_link[spec.links[i]];
      if (k < 0) continue;
      const double rate = spec.bytes * spec.link_weight(i) / seconds;
      changes[k].emplace_back(run.start_ns[t], rate);
      changes[k].emplace_back(run.end_ns[t], -rate);
    }
  }
  for (std::size_t k = 0; k < order.size(); ++k) {
    LinkUse& u = out[order[k]];
    std::sort(changes[k].begin(), changes[k].end());
    double rate = 0.0;
    u.utilization_over_time.emplace_back(0, 0.0);
    for (std::size_t i = 0; i < changes[k].size();) {
      const TimeNs at = changes[k][i].first;
      for (; i < changes[k].size() && changes[k][i].first == at; ++i) rate += changes[k][i].second;
      const double value = std::max(0.0, rate) / u.bandwidth_bytes_per_s;
      if (u.utilization_over_time.back().first == at) {
        u.utilization_over_time.back().second = value;
      } else {
        u.utilization_over_time.emplace_back(at, value);
      }
    }
  }
  return out;
}

}  // namespace

namespace {

// The fused-attention kernel the plan's framework runs on this device, if any.
const AttentionKernel* framework_attention_kernel(const FrameworkProfile& framework, const std::string& device) {
  return framework.attention ? &attention_kernel(framework.attention->kernel_for(device)) : nullptr;
}

topo::Topology build_topology(const ClusterSpec& cluster, const std::vector<SlowNic>& slow_nics,
                              const std::vector<SlowLink>& slow_links) {
  topo::Topology t = topo::Topology::build(cluster);
  for (const SlowNic& n : slow_nics) t.slow_nic(n.node, n.rail, n.factor);
  for (const SlowLink& l : slow_links) t.slow_link(l.from, l.to, l.factor, "", "--slow-link");
  return t;
}

}  // namespace

std::vector<int> critical_path_ranks(const Workload& w, const RunResult& run) {
  const TaskGraph& g = w.graph;
  TaskId t = -1;
  for (TaskId k = 0; k < g.num_tasks(); ++k) {
    if (t < 0 || run.end_ns[k] > run.end_ns[t]) t = k;
  }
  std::vector<char> on(w.global_rank.size(), 0);
  const int compute = stream_index(StreamKind::kCompute);
  for (; t >= 0; t = run.blocker[t]) {
    if (g.comm_of(t) >= 0) continue;
    for (const std::int32_t* s = g.slots_begin(t); s != g.slots_end(t); ++s) {
      if (*s % g.streams_per_rank() == compute) on[static_cast<std::size_t>(g.rank_of_slot(*s))] = 1;
    }
  }
  std::vector<int> ranks;
  for (std::size_t i = 0; i < on.size(); ++i) {
    if (on[i] != 0) ranks.push_back(w.global_rank[i]);
  }
  std::sort(ranks.begin(), ranks.end());
  return ranks;
}

struct Simulator::State {
  State(const ClusterSpec& c, const Profile& p, const std::vector<SlowNic>& slow_nics,
        const std::vector<SlowLink>& slow_links)
      : cluster(c),
        profile(p),
        cost_model(profile),
        topology(build_topology(cluster, slow_nics, slow_links)),
        collectives(topology, topo::default_nccl_tuning(), efficiency_from(cost_model)) {}
  ClusterSpec cluster;
  Profile profile;
  CostModel cost_model;
  topo::Topology topology;
  topo::CollectiveModel collectives;
  mutable CommCostCache comm_cache;
};

Simulator::Simulator(const ClusterSpec& cluster, const Profile& profile, const std::vector<SlowNic>& slow_nics,
                     const std::vector<SlowLink>& slow_links)
    : state_(std::make_unique<State>(cluster, profile, slow_nics, slow_links)) {}

Simulator::~Simulator() = default;

const ClusterSpec& Simulator::cluster() const { return state_->cluster; }
const Profile& Simulator::profile() const { return state_->profile; }

Workload Simulator::build_workload_of(const ModelSpec& model, const PlanSpec& plan,
                                     const SimulationOptions& options, bool detail_ops) const {
  report_progress(options.progress, 0, kSimulationWork, "building the step");
  const State& st = *state_;
  const auto started = std::chrono::steady_clock::now();
  const FrameworkProfile& framework = framework_profile(plan.framework);
  const std::string& device = st.profile.device.name;
  const AttentionKernel* kernel = framework_attention_kernel(framework, device);
  ProfileOpCosts op_costs(st.cost_model, kernel, device);
  TopologyCommCosts comm_costs(st.topology, st.collectives, st.cost_model, plan, options.fidelity,
                               st.comm_cache);
  WorkloadOptions workload_options;
  if (framework.sharded) workload_options.sharded = *framework.sharded;
  workload_options.host_dispatch = framework.host_dispatch;
  workload_options.tp_overlap = framework.tp_overlap;
  workload_options.tp_async_backward = framework.tp_async_backward;
  workload_options.blocking_pipeline_sends = framework.pipeline_p2p && framework.pipeline_p2p->blocks(plan.vpp);
  workload_options.pipeline_scatter_gather = framework.pipeline_p2p && framework.pipeline_p2p->scatter_gather;
  workload_options.compute_units = st.profile.device.compute_units;
  workload_options.gpus_per_node = st.topology.gpus_per_node();
  const double budget = options.memory_budget_bytes > 0 ? options.memory_budget_bytes : memory_budget_bytes();
  workload_options.max_tasks = budget / kBytesPerEstimatedTask;
  workload_options.detail_ops = detail_ops;
  Workload workload = build_workload(model, plan, op_costs, comm_costs, options.fidelity, workload_options);
  // Phase timings go to the debug log (`strata -v simulate ...`).
  if (spdlog::should_log(spdlog::level::debug)) {
    spdlog::debug("simulate: workload took {:.2f} ms",
                  std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - started).count());
  }
  return workload;
}

std::shared_ptr<const Workload> Simulator::build(const ModelSpec& model, const PlanSpec& plan,
                                                 const SimulationOptions& options) const {
  // Kept and run again, perhaps for a trace: with every stretch's ops.
  return std::make_shared<const Workload>(build_workload_of(model, plan, options, true));
}

SimulationResult Simulator::run(const ModelSpec& model, const PlanSpec& plan,
                                const SimulationOptions& options) const {
  // The workload goes out with the result only with the timeline: otherwise the
  // metrics read no stretch's ops, only their totals.
  Workload workload = build_workload_of(model, plan, options, options.keep_timeline);
  return run_built(workload, &workload, model, plan, options);
}

SimulationResult Simulator::run(const Workload& built, const ModelSpec& model, const PlanSpec& plan,
                                const SimulationOptions& options) const {
  return run_built(built, nullptr, model, plan, options);
}

SimulationResult Simulator::run_built(const Workload& workload, Workload* owned, const ModelSpec& model,
                                      const PlanSpec& plan, const SimulationOptions& options) const {
  auto report = [&](std::int64_t done, std::string_view what) {
    report_progress(options.progress, done, kSimulationWork, what);
  };
  const State& st = *state_;
  SimulationResult r;
  r.fidelity = options.fidelity;
  r.num_gpus = plan.num_gpus();
  auto phase_start = std::chrono::steady_clock::now();
  auto phase_done = [&](const char* phase) {
    if (!spdlog::should_log(spdlog::level::debug)) return;
    const auto now = std::chrono::steady_clock::now();
    spdlog::debug("simulate: {} took {:.2f} ms", phase,
                  std::chrono::duration<double, std::milli>(now - phase_start).count());
    phase_start = now;
  };
  const FrameworkProfile& framework = framework_profile(plan.framework);
  const std::string& device = st.profile.device.name;
  const AttentionKernel* kernel = framework_attention_kernel(framework, device);
  const bool slowed = !options.slow_ranks.empty() || !options.rank_factors.empty() || options.kernel_factor;
  if (slowed && options.fidelity != Fidelity::kFull) {
    throw InternalError("simulate: slow ranks need full fidelity (folded simulates one rank per stage)");
  }
  // Slower GPUs and kernels: their compute tasks take longer, in durations beside
  // the graph (which the trace then takes, when this run keeps it).
  std::vector<TimeNs> durations;
  if (slowed) {
    // Per simulated rank (at full fidelity every global rank is one).
    std::vector<double> factor(workload.global_rank.size(), 1.0);
    for (std::size_t i = 0; i < factor.size(); ++i) {
      const int g = workload.global_rank[i];
      if (!options.rank_factors.empty()) factor[i] = options.rank_factors.at(static_cast<std::size_t>(g));
      for (const SlowRank& slow : options.slow_ranks) {
        if (slow.rank == g) factor[i] *= slow.factor;
      }
    }
    const int compute = stream_index(StreamKind::kCompute);
    if (options.kernel_factor) {
      durations = workload.graph.scaled_durations_by(compute, [&](TaskId t, int rank) {
        return factor[static_cast<std::size_t>(rank)] *
               options.kernel_factor(t, workload.global_rank[static_cast<std::size_t>(rank)]);
      });
    } else {
      durations = workload.graph.scaled_durations(compute, factor);
    }
  }
  report(300, "running the step");
  std::unique_ptr<TopologyFlowModel> network;
  if (options.fidelity == Fidelity::kFull) network = std::make_unique<TopologyFlowModel>(st.topology);
  RunResult run = run_task_graph(
      workload.graph, network.get(),
      [&](std::int64_t tasks_done, std::int64_t tasks, std::int64_t events) {
        report(300 + 600 * tasks_done / std::max<std::int64_t>(tasks, 1),
               fmt::format("running the step: {:.1f} M events", events / 1e6));
      },
      durations.empty() ? nullptr : &durations);
  phase_done("engine");
  report(900, "the results");

  if (options.step_time_only) {
    r.metrics.step_time_s = step_time_s(workload, run);
  } else {
    r.metrics = step_metrics(workload, run);
  }
  if (options.critical_path && options.fidelity == Fidelity::kFull) r.critical_ranks = critical_path_ranks(workload, run);
  r.flops = step_flops(model, plan);
  r.memory = memory_report(model, plan, device_memory(st.profile));
  r.events = run.events;
  r.peak_flops_per_gpu = st.profile.device.peak_flops(plan.dtype);
  const double step = r.metrics.step_time_s;
  const double gpus = r.num_gpus;
  r.mfu = r.flops.model_flops / (step * gpus * r.peak_flops_per_gpu);
  r.hfu = r.flops.hardware_flops / (step * gpus * r.peak_flops_per_gpu);
  r.tflops_per_gpu = r.flops.model_flops / step / gpus / 1e12;
  r.hw_tflops_per_gpu = r.flops.hardware_flops / step / gpus / 1e12;
  r.tokens_per_s = static_cast<double>(plan.global_batch_size) * model.seq_length / step;
  r.bubble_ratio_analytic = analytic_bubble_ratio(plan.schedule, plan.pp, plan.vpp, plan.num_microbatches());
  if (options.fidelity == Fidelity::kFull && options.keep_timeline) {
    r.links = link_usage(st.topology, workload, run);
  } else if (options.keep_timeline) {
    r.notes.push_back("folded fidelity: link utilization is reported by --fidelity full only");
  }
  phase_done("metrics");
  r.cost_origins = st.cost_model.origins();
  // Fused attention at the framework's kernel's published rates where they exist
  // for this GPU: that, not the device profile, is the attention figure's origin.
  if (kernel != nullptr && plan.flash_attention && kernel->measured_on(device)) {
    for (SectionOrigin& o : r.cost_origins) {
      if (o.section != "attention") continue;
      o.origin = "published";
      o.summary = fmt::format("{} (framework {}) as its benchmarks measured it on {}: {}", kernel->name,
                              framework.name, device, kernel->source);
    }
    r.notes.push_back(fmt::format("attention costs use {}'s published benchmark rates on {} (framework {}), "
                                  "not a measurement on your hardware",
                                  kernel->name, device, framework.name));
  }
  for (const SectionOrigin& o : r.cost_origins) {
    if (o.origin != "measured" && o.origin != "published") {
      r.notes.push_back(fmt::format("{} costs use {} figures of profile {} ({}); run `strata calibrate` "
                                    "on your hardware for measured ones",
                                    o.section, o.origin, st.profile.name, o.summary));
    }
  }
  r.notes.push_back(framework_note(framework, plan, kernel != nullptr && plan.flash_attention ? kernel : nullptr));
  if (!st.collectives.calibrated()) {
    r.notes.push_back("collectives use NCCL's model on datasheet link bandwidths (no measured efficiency)");
  }
  if (plan.moe.active) {
    r.notes.push_back(fmt::format(
        "MoE: MFU counts active parameters (each token's top-{} of {} experts, as MoE papers report it); the "
        "busiest expert-parallel rank sets the pace, its routed tokens at {:.2f}x the balanced share ({})",
        model.moe.moe_router_topk, model.moe.num_experts, expert_load_factor(plan),
        plan.moe.expert_capacity_factor > 0.0 ? "the capacity factor" : "moe_router_imbalance, dropless"));
  }
  // Rank placement is kept even without the timeline: per-stage metrics need it.
  r.workload.fidelity = workload.fidelity;
  r.workload.global_rank = workload.global_rank;
  r.workload.stage = workload.stage;
  r.workload.tp_rank = workload.tp_rank;
  r.workload.dp_rank = workload.dp_rank;
  if (options.keep_timeline) {
    if (owned != nullptr) {
      r.workload = std::move(*owned);
    } else {
      r.workload = workload;
    }
    if (slowed) r.workload.graph.set_durations(std::move(durations));
    r.run = std::move(run);
  }
  report(kSimulationWork, "");
  return r;
}

SimulationResult simulate(const Scenario& s, const SimulationOptions& options) {
  try {
    return Simulator(s.cluster, s.profile, options.slow_nics, options.slow_links).run(s.model, s.plan, options);
  } catch (const WorkloadTooLarge& e) {
    throw_too_large(s, options, e);
  }
}

void throw_too_large(const Scenario& s, const SimulationOptions& options, const WorkloadTooLarge& e) {
  const PlanSpec& p = s.plan;
  const bool by_batch = e.microbatches >= e.simulated_ranks;
  const bool engine_limit = e.max_tasks >= kMaxTasks;
  const double budget = options.memory_budget_bytes > 0 ? options.memory_budget_bytes : memory_budget_bytes();
  throw InputError(
      by_batch ? s.plan_file : s.cluster_file, by_batch ? "$.global_batch_size" : "$.nodes",
      fmt::format("too large to simulate: {} micro-batches (global_batch_size {} / (micro_batch_size {} x dp {})) on "
                  "{} simulated ranks at {} fidelity make about {:.3g} tasks ({:.1f} GiB at {:.0f} bytes each), "
                  "more than {}; use a smaller global_batch_size{}{}{}",
                  e.microbatches, p.global_batch_size, p.micro_batch_size, p.dp, e.simulated_ranks,
                  to_string(e.fidelity), e.tasks, e.tasks * kBytesPerEstimatedTask / double(1ull << 30),
                  kBytesPerEstimatedTask,
                  engine_limit ? "the engine's 2^31 task ids"
                  : options.memory_budget_bytes > 0
                      ? fmt::format("the {:.1f} GiB allowed", budget / double(1ull << 30))
                      : std::string("this machine allows: ") + memory_budget_words(),
                  e.fidelity == Fidelity::kFull ? (by_batch ? " or" : ",") : "",
                  e.fidelity == Fidelity::kFull ? " --fidelity folded (one rank per pipeline stage)" : "",
                  by_batch ? "" : " or fewer nodes"));
}

std::vector<int> default_trace_ranks(const SimulationResult& r) {
  const Workload& w = r.workload;
  std::vector<int> ranks;
  for (int i = 0; i < static_cast<int>(w.global_rank.size()); ++i) {
    if (w.global_rank.size() <= 16 || (w.tp_rank[i] == 0 && w.dp_rank[i] == 0)) ranks.push_back(i);
  }
  return ranks;
}

std::vector<int> simulated_ranks_of(const SimulationResult& r, const std::vector<int>& global_ranks) {
  std::vector<int> out;
  for (int g : global_ranks) {
    auto it = std::find(r.workload.global_rank.begin(), r.workload.global_rank.end(), g);
    if (it == r.workload.global_rank.end()) {
      throw InputError("", "--trace-ranks",
                       fmt::format("rank {} was not simulated ({} fidelity simulates {} of {} ranks{})", g,
                                   to_string(r.fidelity), r.workload.global_rank.size(), r.num_gpus,
                                   r.fidelity == Fidelity::kFolded ? ": tp and dp rank 0 of each stage" : ""));
    }
    out.push_back(static_cast<int>(it - r.workload.global_rank.begin()));
  }
  return out;
}

std::string result_trace(const Scenario& s, const SimulationResult& r, const std::vector<int>& ranks) {
  TraceOptions o;
  o.ranks = ranks;
  const Workload& w = r.workload;
  for (std::size_t i = 0; i < w.global_rank.size(); ++i) {
    const int g = w.global_rank[i];
    o.rank_names.push_back(fmt::format("node {} gpu {} (rank {}: tp {} dp {} pp {})", g / s.cluster.gpus_per_node,
                                       g % s.cluster.gpus_per_node, g, w.tp_rank[i], w.dp_rank[i], w.stage[i]));
  }
  // Expanding compute blocks into ops multiplies events ~5x; past 2 million events
  // the blocks are written whole so the file stays openable.
  o.expand_ops = trace_event_count(w, o) <= 400000;
  o.memory = memory_timeline(w, r.run, r.memory, s.model, s.plan, device_memory(s.profile));
  for (const LinkUse& u : r.links) {
    if (u.utilization_over_time.empty()) continue;
    o.links.push_back({fmt::format("{} → {} ({})", u.from, u.to, u.kind), u.utilization_over_time});
  }
  nlohmann::ordered_json other;
  other["kind"] = "predicted";
  other["model"] = s.model.name;
  other["plan"] = to_json(s.plan);
  other["step_time_s"] = r.metrics.step_time_s;
  other["num_ranks"] = r.num_gpus;
  other["memory_capacity_bytes"] = r.memory.capacity_bytes;
  nlohmann::ordered_json written = nlohmann::ordered_json::array();
  for (int i : ranks) written.push_back(w.global_rank[i]);
  other["ranks"] = written;
  other["ops_expanded"] = o.expand_ops;
  o.other_data = other;
  return trace_json(w, r.run, o);
}

nlohmann::ordered_json result_json(const Scenario& s, const SimulationResult& r) {
  nlohmann::ordered_json j;
  j["schema"] = "strata-result/1";
  j["step_time_s"] = r.metrics.step_time_s;
  j["mfu"] = r.mfu;
  j["hfu"] = r.hfu;
  j["tflops_per_gpu"] = r.tflops_per_gpu;
  j["hw_tflops_per_gpu"] = r.hw_tflops_per_gpu;
  j["tokens_per_s"] = r.tokens_per_s;
  j["bubble_ratio"] = r.metrics.bubble_ratio;
  j["bubble_ratio_per_stage"] = r.metrics.bubble_ratio_per_stage;
  j["bubble_ratio_analytic"] = r.bubble_ratio_analytic;
  nlohmann::ordered_json exposed;
  for (CommKind k : {CommKind::kTp, CommKind::kPp, CommKind::kDp, CommKind::kZero, CommKind::kOffload}) {
    exposed[to_string(k)] = r.metrics.exposed_s[static_cast<int>(k)];
  }
  // Context parallelism's exchanges, only where the plan has them (a plan without
  // cp reads as before).
  if (s.plan.cp > 1) exposed["cp"] = r.metrics.exposed_s[static_cast<int>(CommKind::kCp)];
  // The MoE layers' token exchanges, only for an MoE model.
  if (s.plan.moe.active) exposed["ep"] = r.metrics.exposed_s[static_cast<int>(CommKind::kEp)];
  j["exposed_comm_s"] = exposed;
  j["host_dispatch_s"] = r.metrics.host_s;
  j["peer_wait_s"] = r.metrics.peer_wait_s;
  j["compute_s"] = r.metrics.compute_s;
  j["num_gpus"] = r.num_gpus;
  j["events"] = r.events;
  j["fidelity"] = to_string(r.fidelity);
  j["simulated_ranks"] = r.workload.global_rank.size();
  j["model_flops_per_step"] = r.flops.model_flops;
  j["hardware_flops_per_step"] = r.flops.hardware_flops;
  j["peak_flops_per_gpu"] = r.peak_flops_per_gpu;
  nlohmann::ordered_json per_stage = nlohmann::ordered_json::array();
  {
    // Per stage: the mean over its simulated ranks.
    const int stages = s.plan.pp;
    std::vector<RankMetrics> sum(stages);
    std::vector<int> count(stages, 0);
    for (std::size_t i = 0; i < r.metrics.ranks.size(); ++i) {
      const int st = r.workload.stage[i];
      sum[st].compute_s += r.metrics.ranks[i].compute_s;
      sum[st].bubble_s += r.metrics.ranks[i].bubble_s;
      sum[st].host_s += r.metrics.ranks[i].host_s;
      sum[st].peer_wait_s += r.metrics.ranks[i].peer_wait_s;
      for (int k = 0; k < kNumCommKinds; ++k) sum[st].exposed_s[k] += r.metrics.ranks[i].exposed_s[k];
      ++count[st];
    }
    for (int st = 0; st < stages; ++st) {
      nlohmann::ordered_json e;
      e["stage"] = st;
      e["compute_s"] = sum[st].compute_s / count[st];
      e["bubble_s"] = sum[st].bubble_s / count[st];
      nlohmann::ordered_json ex;
      for (int k = 0; k < kNumCommKinds; ++k) {
        if (static_cast<CommKind>(k) == CommKind::kCp && s.plan.cp == 1) continue;
        if (static_cast<CommKind>(k) == CommKind::kEp && !s.plan.moe.active) continue;
        ex[to_string(static_cast<CommKind>(k))] = sum[st].exposed_s[k] / count[st];
      }
      e["exposed_comm_s"] = ex;
      e["host_dispatch_s"] = sum[st].host_s / count[st];
      e["peer_wait_s"] = sum[st].peer_wait_s / count[st];
      per_stage.push_back(e);
    }
  }
  j["stages"] = per_stage;
  nlohmann::ordered_json mem = to_json(r.memory);
  j["memory"] = mem;
  nlohmann::ordered_json links = nlohmann::ordered_json::array();
  for (const LinkUse& u : r.links) {
    links.push_back({{"from", u.from}, {"to", u.to}, {"kind", u.kind},
                     {"bandwidth_bytes_per_s", u.bandwidth_bytes_per_s}, {"bytes", u.bytes},
                     {"utilization", u.utilization}});
  }
  j["link_utilization"] = links;
  nlohmann::ordered_json origins = nlohmann::ordered_json::array();
  for (const SectionOrigin& o : r.cost_origins) {
    origins.push_back({{"section", o.section}, {"origin", o.origin}, {"summary", o.summary}});
  }
  j["cost_origins"] = origins;
  j["notes"] = r.notes;
  j["inputs"] = inputs_json(s);
  return j;
}

}  // namespace strata::sim
