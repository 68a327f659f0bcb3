#include "sim/trace_writer.h"

#include <algorithm>
#include <tuple>

#include <fmt/format.h>

#include "core/trace_json.h"
#include "sim/metrics.h"

namespace strata::sim {
namespace {

struct Event {
  int pid;
  int tid;
  TimeNs ts;
  TimeNs dur;
  TaskId task;
  int op;  // detail op index, -1 for the whole task
};

std::vector<char> selected_ranks(const Workload& w, const TraceOptions& o) {
  std::vector<char> sel(w.graph.num_ranks(), o.ranks.empty() ? 1 : 0);
  for (int r : o.ranks) {
    if (r >= 0 && r < w.graph.num_ranks()) sel[r] = 1;
  }
  return sel;
}

template <typename Fn>
void for_each_event(const Workload& w, const RunResult* run, const TraceOptions& o, Fn&& fn) {
  const TaskGraph& g = w.graph;
  const std::vector<char> sel = selected_ranks(w, o);
  for (TaskId t = 0; t < g.num_tasks(); ++t) {
    for (const std::int32_t* s = g.slots_begin(t); s != g.slots_end(t); ++s) {
      const int rank = g.rank_of_slot(*s);
      const int tid = *s % g.streams_per_rank();
      const TaskInfo& info = w.notes.info(t);
      const TimeNs start = run ? run->start_ns[t] : 0;
      const TimeNs end = run ? run->end_ns[t] : 0;
      if (sel[rank]) {
        if (o.expand_ops && info.detail >= 0) {
          TimeNs at = start;
          const auto& ops = w.notes.detail(info.detail);
          for (int k = 0; k < static_cast<int>(ops.size()); ++k) {
            fn(Event{rank, static_cast<int>(ops[k].lane), at, ops[k].duration_ns, t, k});
            at += ops[k].duration_ns;
          }
        } else {
          fn(Event{rank, tid, start, end - start, t, -1});
        }
      }
      // A pipeline transfer also shows on the receiver's pp-recv lane.
      if (info.peer >= 0 && sel[info.peer]) {
        fn(Event{info.peer, static_cast<int>(StreamKind::kPpRecv), start, end - start, t, -1});
      }
    }
  }
}

}  // namespace

std::int64_t trace_event_count(const Workload& w, const TraceOptions& o) {
  std::int64_t n = 0;
  for_each_event(w, nullptr, o, [&](const Event&) { ++n; });
  // The exposed lane: at most one wait before each compute task and a few after
  // the last; the count is an estimate, to decide whether to expand ops.
  const std::vector<char> sel = selected_ranks(w, o);
  for (int r = 0; r < w.graph.num_ranks(); ++r) {
    if (sel[r]) n += static_cast<std::int64_t>(w.stream(r, StreamKind::kCompute).size()) + 1;
  }
  return n;
}

std::string trace_json(const Workload& w, const RunResult& run, const TraceOptions& o) {
  const TaskGraph& g = w.graph;
  std::vector<Event> events;
  for_each_event(w, &run, o, [&](const Event& e) { events.push_back(e); });
  std::sort(events.begin(), events.end(), [](const Event& a, const Event& b) {
    return std::tie(a.pid, a.tid, a.ts, a.task, a.op) < std::tie(b.pid, b.tid, b.ts, b.task, b.op);
  });

  std::string out;
  out.reserve(events.size() * 180 + 4096);
  out += "{\"traceEvents\":[\n";
  bool first = true;
  auto sep = [&] {
    if (!first) out += ",\n";
    first = false;
  };
  const std::vector<char> sel = selected_ranks(w, o);
  for (int r = 0; r < g.num_ranks(); ++r) {
    if (!sel[r]) continue;
    std::string name = r < static_cast<int>(o.rank_names.size()) ? o.rank_names[r] : fmt::format("rank {}", r);
    sep();
    out += fmt::format("{{\"ph\":\"M\",\"name\":\"process_name\",\"pid\":{},\"args\":{{\"name\":\"", r);
    append_json_escaped(out, name);
    out += "\"}}";
    sep();
    out += fmt::format("{{\"ph\":\"M\",\"name\":\"process_sort_index\",\"pid\":{},\"args\":{{\"sort_index\":{}}}}}", r, r);
    for (int s = 0; s <= kNumStreamKinds; ++s) {
      const char* lane = s < kNumStreamKinds ? to_string(static_cast<StreamKind>(s)) : trace::kExposedLaneName;
      sep();
      out += fmt::format("{{\"ph\":\"M\",\"name\":\"thread_name\",\"pid\":{},\"tid\":{},\"args\":{{\"name\":\"{}\"}}}}",
                         r, s, lane);
    }
  }
  for (const Event& e : events) {
    const TaskInfo& info = w.notes.info(e.task);
    const TaskLabel& label = w.notes.label_of_task(e.task);
    std::string name;
    Category category;
    double flops;
    double bytes;
    int layer = info.layer;
    if (e.op >= 0) {
      const auto& op = w.notes.detail(info.detail)[e.op];
      name = op.name;
      category = op.category;
      flops = op.flops;
      bytes = op.bytes;
      layer = op.layer_offset < 0 ? -1 : info.layer + op.layer_offset;
    } else {
      name = label.name;
      category = label.category;
      flops = info.detail >= 0 ? w.notes.detail_flops(info.detail) : 0.0;
      bytes = info.bytes;
    }
    sep();
    out += "{\"ph\":\"X\",\"name\":\"";
    append_json_escaped(out, name);
    out += fmt::format("\",\"cat\":\"{}\",\"pid\":{},\"tid\":{},\"ts\":", to_string(category), e.pid, e.tid);
    append_trace_us(out, e.ts);
    out += ",\"dur\":";
    append_trace_us(out, e.dur);
    out += fmt::format(",\"args\":{{\"mb\":{},\"layer\":{},\"chunk\":{},\"phase\":\"{}\",\"flops\":{},\"bytes\":{}}}}}",
                       info.microbatch, layer, info.chunk, to_string(label.phase), flops, bytes);
  }
  // The exposed lane: why each rank's compute stream was idle, named after what it
  // waited for ("exposed dp: grad reduce-scatter"; a folded block's own collectives
  // "exposed tp", under the op on the tp-comm lane), with that task's micro-batch,
  // layer and chunk.
  const std::vector<std::vector<ComputeWait>> waits = compute_stream_waits(w, run);
  for (int r = 0; r < g.num_ranks(); ++r) {
    if (!sel[r]) continue;
    for (const ComputeWait& wait : waits[r]) {
      std::string name;
      int mb = -1, layer = -1, chunk = 0;
      if (wait.blocker >= 0) {
        const TaskInfo& info = w.notes.info(wait.blocker);
        mb = info.microbatch;
        layer = info.layer;
        chunk = info.chunk;
      }
      if (wait.why == Category::kBubble) {
        name = "bubble";
      } else if (wait.why == Category::kWait && wait.blocker < 0) {
        name = "waiting for slower ranks";  // the step's end, a single stage
      } else if (wait.why == Category::kWait) {
        const int other = g.rank_of_slot(*g.slots_begin(wait.blocker));
        name = fmt::format("waiting for rank {}", other < static_cast<int>(w.global_rank.size()) ? w.global_rank[other] : other);
      } else if (wait.why == Category::kHost) {
        name = "host dispatch";
      } else {
        const TaskLabel& label = w.notes.label_of_task(wait.blocker);
        std::string_view what = label.name;
        const bool block = label.category == Category::kGemm || label.category == Category::kAttention ||
                           label.category == Category::kElementwise;
        if (!block) {  // a transfer, or the copy lane's host optimizer step
          name = fmt::format("exposed {}: {}", to_string(wait.why), what);
        } else {  // a folded block: its collectives are ops of the block
          name = fmt::format("exposed {}", to_string(wait.why));
        }
      }
      sep();
      out += "{\"ph\":\"X\",\"name\":\"";
      append_json_escaped(out, name);
      out += fmt::format("\",\"cat\":\"{}\",\"pid\":{},\"tid\":{},\"ts\":", to_string(wait.why), r,
                         trace::kExposedLaneTid);
      append_trace_us(out, wait.start_ns);
      out += ",\"dur\":";
      append_trace_us(out, wait.end_ns - wait.start_ns);
      out += fmt::format(",\"args\":{{\"mb\":{},\"layer\":{},\"chunk\":{}}}}}", mb, layer, chunk);
    }
  }
  // Memory over the step: a counter per rank ("C" events; Perfetto draws a track
  // under the process), in bytes.
  for (int r = 0; r < static_cast<int>(o.memory.size()) && r < g.num_ranks(); ++r) {
    if (!sel[r]) continue;
    for (const MemoryPoint& m : o.memory[r].points) {
      sep();
      out += fmt::format("{{\"ph\":\"C\",\"name\":\"memory\",\"pid\":{},\"ts\":", r);
      append_trace_us(out, m.t_ns);
      out += fmt::format(",\"args\":{{\"bytes\":{:.0f}}}}}", m.bytes);
    }
  }
  // The busiest links: counters of a process after the ranks.
  if (!o.links.empty()) {
    const int pid = g.num_ranks();
    sep();
    out += fmt::format("{{\"ph\":\"M\",\"name\":\"process_name\",\"pid\":{},\"args\":{{\"name\":\"busiest links\"}}}}", pid);
    sep();
    out += fmt::format("{{\"ph\":\"M\",\"name\":\"process_sort_index\",\"pid\":{},\"args\":{{\"sort_index\":{}}}}}", pid, pid);
    for (const TraceOptions::LinkSeries& link : o.links) {
      for (const auto& [t, u] : link.utilization) {
        sep();
        out += "{\"ph\":\"C\",\"name\":\"";
        append_json_escaped(out, link.name);
        out += fmt::format("\",\"pid\":{},\"ts\":", pid);
        append_trace_us(out, t);
        out += fmt::format(",\"args\":{{\"utilization\":{:.6f}}}}}", u);
      }
    }
  }
  // Pipeline transfers as flows (Chrome trace format's "s" and "f", bound to
  // the enclosing slices): Perfetto draws an arrow from the sender's send to the
  // receiver's receive, to follow a micro-batch from stage to stage.
  for (TaskId t = 0; t < g.num_tasks(); ++t) {
    const TaskInfo& info = w.notes.info(t);
    if (info.peer < 0 || !sel[info.peer] || g.slots_begin(t) == g.slots_end(t)) continue;
    const int from = g.rank_of_slot(*g.slots_begin(t));
    if (!sel[from] || run.end_ns[t] <= run.start_ns[t]) continue;  // an empty slice holds no flow
    const std::string& name = w.notes.label_of_task(t).name;
    sep();
    out += fmt::format("{{\"ph\":\"s\",\"id\":{},\"name\":\"{}\",\"cat\":\"pp\",\"pid\":{},\"tid\":{},\"ts\":", t,
                       name, from, *g.slots_begin(t) % g.streams_per_rank());
    append_trace_us(out, run.start_ns[t]);
    out += "}";
    sep();
    out += fmt::format("{{\"ph\":\"f\",\"bp\":\"e\",\"id\":{},\"name\":\"{}\",\"cat\":\"pp\",\"pid\":{},\"tid\":{},\"ts\":",
                       t, name, info.peer, static_cast<int>(StreamKind::kPpRecv));
    append_trace_us(out, run.start_ns[t]);
    out += "}";
  }
  out += "\n],\n\"otherData\":{\"strata\":";
  out += o.other_data.dump();
  out += "}}\n";
  return out;
}

}  // namespace strata::sim
