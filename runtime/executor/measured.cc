#include "runtime/executor/measured.h"

#include <algorithm>
#include <numeric>
#include <tuple>

#include <fmt/format.h>

#include "core/error.h"
#include "core/trace_json.h"
#include "runtime/comm/gather_bytes.h"

namespace strata::rt {
namespace {

double median(std::vector<double> v) {
  if (v.empty()) return 0.0;
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

std::string rank_name(const RunConfig& c, int rank) {
  const RankCoord coord = RankLayout(c.plan).coord(rank);
  int node = 0;
  int gpu = rank;
  if (rank < static_cast<int>(c.rank_map.size())) {
    node = c.rank_map[rank].node;
    gpu = c.rank_map[rank].local_rank;
  }
  if (c.plan.cp > 1) {
    return fmt::format("node {} gpu {} (rank {}: tp {} cp {} dp {} pp {})", node, gpu, rank, coord.tp, coord.cp,
                       coord.dp, coord.pp);
  }
  return fmt::format("node {} gpu {} (rank {}: tp {} dp {} pp {})", node, gpu, rank, coord.tp, coord.dp,
                     coord.pp);
}

}  // namespace

std::string trace_events_json(const Recorder& recorder, int rank) {
  std::vector<MeasuredEvent> events = recorder.last_step_events();
  std::stable_sort(events.begin(), events.end(), [](const MeasuredEvent& a, const MeasuredEvent& b) {
    return std::make_tuple(static_cast<int>(a.lane), a.start_ns) < std::make_tuple(static_cast<int>(b.lane), b.start_ns);
  });
  std::string out;
  out.reserve(events.size() * 170);
  // Events of one lane can overlap: transfers in flight together (two pipeline
  // sends posted before either completes). A trace thread must hold disjoint
  // events (Perfetto's importer drops one that overlaps its neighbour without
  // nesting in it), so each event takes the first of its lane's tracks that is
  // free at its start: track 0 is the lane's tid, track k > 0 tid lane + k *
  // kNumLanes, named "pp send (2)" and so on.
  std::vector<std::vector<TimeNs>> track_end(kNumLanes);  // [lane][track]: when its last event ends
  for (const MeasuredEvent& e : events) {
    const int lane = static_cast<int>(e.lane);
    std::vector<TimeNs>& ends = track_end[static_cast<std::size_t>(lane)];
    std::size_t track = 0;
    while (track < ends.size() && ends[track] > e.start_ns) ++track;
    const TimeNs end_ns = e.start_ns + e.duration_ns;
    const int tid = lane + static_cast<int>(track) * kNumLanes;
    if (track == ends.size()) {
      ends.push_back(end_ns);
      if (track > 0) {
        if (!out.empty()) out += ",\n";
        out += fmt::format("{{\"ph\":\"M\",\"name\":\"thread_name\",\"pid\":{},\"tid\":{},\"args\":{{\"name\":\"{} ({})\"}}}}",
                           rank, tid, to_string(e.lane), track + 1);
      }
    } else {
      ends[track] = end_ns;
    }
    if (!out.empty()) out += ",\n";
    out += "{\"ph\":\"X\",\"name\":\"";
    append_json_escaped(out, recorder.names()[e.name]);
    out += fmt::format("\",\"cat\":\"{}\",\"pid\":{},\"tid\":{},\"ts\":", to_string(e.category), rank, tid);
    append_trace_us(out, e.start_ns);
    out += ",\"dur\":";
    append_trace_us(out, e.duration_ns);
    out += fmt::format(",\"args\":{{\"mb\":{},\"layer\":{},\"chunk\":{},\"phase\":\"{}\",\"flops\":{},\"bytes\":{}}}}}",
                       e.microbatch, e.layer, e.chunk, to_string(e.phase), e.flops, e.bytes);
    // A pipeline transfer as a flow (Chrome trace "s" on the send, "f" on the
    // receive, bound to their slices), as the predicted trace draws it: Perfetto
    // follows a micro-batch from rank to rank.
    if (e.transfer >= 0 && e.duration_ns > 0) {
      const bool send = e.lane == Lane::kPpSend;
      out += fmt::format(",\n{{\"ph\":\"{}\",{}\"id\":{},\"name\":\"", send ? "s" : "f", send ? "" : "\"bp\":\"e\",",
                         e.transfer);
      // Named by what it carries ("send activations" and "recv activations" make
      // "activations"): Perfetto pairs a flow's ends by id, category and name.
      const std::string& slice = recorder.names()[e.name];
      append_json_escaped(out, slice.substr(slice.find(' ') + 1));
      out += fmt::format("\",\"cat\":\"pp\",\"pid\":{},\"tid\":{},\"ts\":", rank, tid);
      append_trace_us(out, e.start_ns);
      out += "}";
    }
  }
  return out;
}

std::vector<std::string> runtime_notes(const RunConfig& c, const Device& device) {
  std::vector<std::string> notes;
  if (c.model.hidden_dropout > 0.0 || c.model.attention_dropout > 0.0) {
    notes.push_back(fmt::format("dropout ({} hidden, {} attention) is not applied: runs are deterministic so every "
                                "plan can be checked against one reference; the simulator costs the dropout kernels",
                                c.model.hidden_dropout, c.model.attention_dropout));
  }
  if (c.model.position_embedding_type == PositionEmbedding::kRope ||
      c.model.position_embedding_type == PositionEmbedding::kAlibi) {
    notes.push_back(fmt::format("{} positions are not applied (no kernel in the runtime backends; they have no "
                                "parameters and the simulator does not cost them either)",
                                to_string(c.model.position_embedding_type)));
  }
  if (c.plan.flash_attention) {
    notes.push_back("flash_attention: the runtime backends have no fused attention kernel; attention runs unfused "
                    "(scores stored), so time and memory differ from the fused prediction");
  }
  if (!c.plan.accumulate_allreduce_grads_in_fp32 && c.plan.dtype != DType::kFp32) {
    notes.push_back(fmt::format("gradients are accumulated and reduced in fp32 (Megatron's main_grad), not in {} "
                                "as accumulate_allreduce_grads_in_fp32 = false asks: the data-parallel reduction "
                                "moves twice the bytes the prediction assumed",
                                to_string(c.plan.dtype)));
  }
  if (c.plan.schedule == Schedule::kZbH2 && c.plan.pp > 1) {
    notes.push_back("zb-h2 runs here with the optimizer step synchronised over every rank (the global gradient "
                    "norm, then the update): the prediction assumes the paper's optimizer post-validation (Qi et "
                    "al. 2024, section 4), under which each stage starts the next step alone, so the measured step "
                    "also holds the pipeline's fill and drain that the predicted period overlaps");
  }
  const DType stored = device.storage_dtype(c.plan.dtype);
  if (stored != c.plan.dtype) {
    notes.push_back(fmt::format("{} tensors are stored and computed in {} on the {} backend", to_string(c.plan.dtype),
                                to_string(stored), to_string(device.backend())));
  }
  return notes;
}

MeasuredRun run_training(const RunConfig& config, Device& device, Communicator& world,
                         const ProgressFn& progress) {
  Executor executor(config, device, world);
  MeasuredRun run;
  for (int s = 0; s < config.training.steps; ++s) {
    run.steps.push_back(executor.step());
    // Every rank must run every step (a rank that stopped alone would leave the
    // others waiting until the timeout), so the answer is not a request to stop.
    if (progress) progress(s + 1, config.training.steps, "steps");
  }
  executor.finish();
  const int rank = world.rank();
  nlohmann::ordered_json header;
  header["rank"] = rank;
  header["peak_memory_bytes"] = executor.peak_memory_bytes();
  const std::string mine = header.dump() + "\n" + trace_events_json(executor.recorder(), rank);
  const std::vector<std::string> all = all_gather_bytes(world, mine);
  for (int r = 0; r < static_cast<int>(all.size()); ++r) {
    const std::size_t nl = all[r].find('\n');
    const nlohmann::json h = nlohmann::json::parse(all[r].substr(0, nl));
    RankReport report;
    report.rank = h.at("rank").get<int>();
    report.peak_memory_bytes = h.at("peak_memory_bytes").get<std::int64_t>();
    report.name = rank_name(config, r);
    report.events = nl == std::string::npos ? "" : all[r].substr(nl + 1);
    run.ranks.push_back(std::move(report));
  }
  run.backend = to_string(device.backend());
  run.device_name = device.info().name;
  run.transport = world.transport();
  run.threads_per_rank = device.backend() == Backend::kCpu ? device.info().compute_units : 1;
  run.notes = runtime_notes(config, device);
  return run;
}

double median_step_time_s(const RunConfig& config, const MeasuredRun& run) {
  std::vector<double> timed;
  for (std::size_t i = static_cast<std::size_t>(config.training.timing_warmup_steps); i < run.steps.size(); ++i) {
    timed.push_back(run.steps[i].step_time_s);
  }
  return median(timed);
}

double mean_expert_load(const RunConfig& config, const MeasuredRun& run) {
  std::vector<double> timed;
  for (std::size_t i = static_cast<std::size_t>(config.training.timing_warmup_steps); i < run.steps.size(); ++i) {
    timed.push_back(run.steps[i].expert_load);
  }
  return timed.empty() ? 0.0 : std::accumulate(timed.begin(), timed.end(), 0.0) / static_cast<double>(timed.size());
}

std::vector<std::int64_t> peak_memory_per_stage(const RunConfig& config, const MeasuredRun& run) {
  const RankLayout layout(config.plan);
  std::vector<std::int64_t> out(config.plan.pp, 0);
  for (const RankReport& r : run.ranks) {
    const int stage = layout.coord(r.rank).pp;
    out[stage] = std::max(out[stage], r.peak_memory_bytes);
  }
  return out;
}

nlohmann::ordered_json measured_json(const RunConfig& c, const MeasuredRun& run) {
  nlohmann::ordered_json j;
  j["schema"] = kMeasuredSchema;
  j["model"] = c.model.name;
  j["plan"] = to_json(c.plan);
  j["backend"] = run.backend;
  j["device"] = run.device_name;
  j["transport"] = run.transport;
  j["ranks"] = static_cast<int>(run.ranks.size());
  j["threads_per_rank"] = run.threads_per_rank;
  j["steps"] = c.training.steps;
  j["timing_warmup_steps"] = c.training.timing_warmup_steps;
  j["step_time_s"] = median_step_time_s(c, run);
  std::vector<double> times, losses, norms;
  for (const StepResult& s : run.steps) {
    times.push_back(s.step_time_s);
    losses.push_back(s.loss);
    norms.push_back(s.grad_norm);
  }
  const auto timed_begin = times.begin() + std::min<std::ptrdiff_t>(c.training.timing_warmup_steps, static_cast<std::ptrdiff_t>(times.size()));
  j["step_time_min_s"] = timed_begin == times.end() ? 0.0 : *std::min_element(timed_begin, times.end());
  j["step_time_max_s"] = timed_begin == times.end() ? 0.0 : *std::max_element(timed_begin, times.end());
  j["step_times_s"] = times;
  j["loss"] = losses;
  j["grad_norm"] = norms;
  nlohmann::ordered_json memory;
  std::vector<std::int64_t> per_rank;
  for (const RankReport& r : run.ranks) per_rank.push_back(r.peak_memory_bytes);
  const std::vector<std::int64_t> per_stage = peak_memory_per_stage(c, run);
  memory["peak_bytes"] = per_rank.empty() ? 0 : *std::max_element(per_rank.begin(), per_rank.end());
  memory["peak_bytes_per_stage"] = per_stage;
  memory["peak_bytes_per_rank"] = per_rank;
  memory["what"] = "device memory allocated through the runtime at its peak during the steps: parameters, fp32 "
                   "gradients, optimizer state, activations and buffers (no framework reserve)";
  j["memory"] = memory;
  if (c.model.is_moe()) {
    nlohmann::ordered_json moe;
    moe["expert_load_max_over_mean"] = mean_expert_load(c, run);
    moe["what"] = "the routing the run made: the busiest expert-parallel rank's routed tokens over the mean, averaged "
                  "over the timed steps' MoE layer forwards (the simulator's moe_router_imbalance)";
    j["moe"] = moe;
  }
  j["trace"] = {{"file", "measured-trace.json"}, {"step", c.training.steps - 1}};
  j["prediction"] = c.prediction;
  j["profile"] = c.profile;
  j["notes"] = run.notes;
  return j;
}

std::string measured_trace_json(const RunConfig& c, const MeasuredRun& run) {
  std::string out = "{\"traceEvents\":[\n";
  bool first = true;
  auto sep = [&] {
    if (!first) out += ",\n";
    first = false;
  };
  for (const RankReport& r : run.ranks) {
    sep();
    out += fmt::format("{{\"ph\":\"M\",\"name\":\"process_name\",\"pid\":{},\"args\":{{\"name\":\"", r.rank);
    append_json_escaped(out, r.name);
    out += "\"}}";
    sep();
    out += fmt::format("{{\"ph\":\"M\",\"name\":\"process_sort_index\",\"pid\":{},\"args\":{{\"sort_index\":{}}}}}",
                       r.rank, r.rank);
    for (int t = 0; t < kNumLanes; ++t) {
      sep();
      out += fmt::format("{{\"ph\":\"M\",\"name\":\"thread_name\",\"pid\":{},\"tid\":{},\"args\":{{\"name\":\"{}\"}}}}",
                         r.rank, t, to_string(static_cast<Lane>(t)));
    }
  }
  for (const RankReport& r : run.ranks) {
    if (r.events.empty()) continue;
    sep();
    out += r.events;
  }
  nlohmann::ordered_json other;
  other["kind"] = "measured";
  other["model"] = c.model.name;
  other["plan"] = to_json(c.plan);
  other["step_time_s"] = run.steps.empty() ? 0.0 : run.steps.back().step_time_s;
  other["num_ranks"] = static_cast<int>(run.ranks.size());
  nlohmann::ordered_json ranks = nlohmann::ordered_json::array();
  for (const RankReport& r : run.ranks) ranks.push_back(r.rank);
  other["ranks"] = ranks;
  other["backend"] = run.backend;
  other["step"] = c.training.steps - 1;
  out += "\n],\n\"otherData\":{\"strata\":";
  out += other.dump();
  out += "}}\n";
  return out;
}

}  // namespace strata::rt
