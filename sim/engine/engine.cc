#include "sim/engine/engine.h"

#include <cmath>
#include <queue>

#include <fmt/format.h>

#include "core/error.h"
#include "core/flat_id_map.h"

namespace strata::sim {
namespace {

// A task's end, or a flow's (version > 0): 24 bytes, as the queue moves them a lot.
struct Event {
  TimeNs time;
  std::uint64_t seq;
  std::int32_t id;         // the task, or the flow's slot
  std::uint32_t version;   // 0: a task's end; else the flow slot's version when it was scheduled
  bool flow() const { return version != 0; }
};

struct Later {
  bool operator()(const Event& a, const Event& b) const {
    return a.time != b.time ? a.time > b.time : a.seq > b.seq;
  }
};

TimeNs transfer_ns(double bytes, double rate) {
  if (bytes <= 0.0) return 0;
  return static_cast<TimeNs>(std::ceil(bytes / rate * kNsPerSecond));
}

// A flow in flight (a transfer, or one part of it): how much is left and at which
// rate it has been moving since `since`.
struct ActiveFlow {
  FlowModel::FlowId id = -1;
  TaskId task = -1;
  double remaining_bytes = 0.0;
  double rate = 0.0;
  TimeNs since = 0;
};

// A flow about to start: the task, and which of its comm's parts (-1: the whole).
struct StartingFlow {
  TaskId task;
  int part;
};

class Engine {
 public:
  Engine(const TaskGraph& graph, FlowModel* network, const EngineProgress& progress,
         const std::vector<TimeNs>* durations)
      : g_(graph), net_(network), progress_(progress), durations_(durations) {
    if (durations_ != nullptr && durations_->size() != static_cast<std::size_t>(g_.num_tasks())) {
      throw InternalError("event engine: one duration per task");
    }
    const int n = g_.num_tasks();
    result_.start_ns.assign(n, -1);
    result_.end_ns.assign(n, -1);
    state_.resize(static_cast<std::size_t>(n) + 1);  // and a last record, where the last task's ranges end
    blocker_.assign(n, -1);
    const std::int32_t* slots = g_.num_slot_entries() > 0 ? g_.slots_begin(0) : nullptr;
    next_on_stream_ = g_.num_slot_entries() > 0 ? g_.next_on_streams_begin(0) : nullptr;
    const TaskId* successors = g_.num_dependencies_total() > 0 ? g_.successors_begin(0) : nullptr;
    for (TaskId t = 0; t < n; ++t) {
      TaskState& st = state_[t];
      st.slot_begin = static_cast<std::int32_t>(g_.slots_begin(t) - slots);
      st.succ_begin = static_cast<std::int32_t>(g_.successors_begin(t) - successors);
      st.comm = g_.comm_of(t);
      st.pending = g_.num_dependencies(t) + static_cast<std::int32_t>(g_.slots_end(t) - g_.slots_begin(t));
    }
    state_[n].slot_begin = static_cast<std::int32_t>(g_.num_slot_entries());
    state_[n].succ_begin = static_cast<std::int32_t>(g_.num_dependencies_total());
    successors_ = successors;
  }

  RunResult run() {
    // Every stream's first task is at its head.
    for (std::int32_t slot = 0; slot < g_.num_slots(); ++slot) {
      const auto tasks = g_.stream_by_slot(slot);
      if (!tasks.empty()) release(tasks[0], -1);
    }
    flush_ready();
    // Events of one instant are handled together: the flows that end and start then
    // reach the network as one change (one re-solve of the link sharing).
    while (!queue_.empty()) {
      // A completion superseded by a rate change is dropped before it can move the
      // clock: the step must not end at the time a flow would have ended.
      if (stale(queue_.top())) {
        queue_.pop();
        continue;
      }
      if (queue_.top().time < now_) throw InternalError("event engine: time ran backwards");
      now_ = queue_.top().time;
      while (!queue_.empty() && queue_.top().time == now_) {
        Event e = queue_.top();
        queue_.pop();
        // The next event's task record and slots, fetched while this one is handled
        // (the engine waits mostly on such misses).
        if (!queue_.empty() && !queue_.top().flow()) {
          const TaskState& next = state_[queue_.top().id];
          __builtin_prefetch(&next);
          __builtin_prefetch(next_on_stream_ + next.slot_begin);
        }
        if (stale(e)) continue;  // superseded by a rate change
        if (++result_.events % kEngineProgressEvents == 0 && progress_) {
          progress_(tasks_done_, g_.num_tasks(), result_.events);
        }
        if (e.flow()) {
          flow_done(e.id);
        } else {
          task_done(e.id);
        }
      }
      flush_ready();
    }
    for (TaskId t = 0; t < g_.num_tasks(); ++t) {
      if (result_.end_ns[t] < 0) {
        throw InternalError(fmt::format("event engine: deadlock, task {} never ran", t));
      }
    }
    result_.makespan_ns = now_;
    result_.blocker = std::move(blocker_);
    return std::move(result_);
  }

 private:
  bool stale(const Event& e) const {
    return e.flow() && e.version != flow_version_[static_cast<std::size_t>(e.id)];
  }

  // One of the task's conditions is met: `by` (a dependency, or the task before it
  // on one of its streams) finished; -1 at the step's start. The blocker is the
  // condition met last, so it is written once, when the task becomes ready (a
  // write per condition missed the cache on most of them).
  void release(TaskId t, TaskId by) {
    if (--state_[t].pending == 0) {
      blocker_[t] = by;
      ready_.push_back(t);
    }
  }

  // Starts tasks in the order they became ready (deterministic).
  void flush_ready() {
    if (!ending_.empty()) {
      net_->remove_all(ending_);
      ending_.clear();
    }
    for (std::size_t i = 0; i < ready_.size(); ++i) start(ready_[i]);
    ready_.clear();
    if (!starting_.empty()) {
      std::vector<const std::vector<std::int32_t>*>& links = scratch_links_;
      std::vector<double>& caps = scratch_caps_;
      std::vector<const std::vector<double>*>& weights = scratch_weights_;
      links.clear();
      caps.clear();
      weights.clear();
      for (const StartingFlow& s : starting_) {
        const CommSpec& comm = g_.comm(state_[s.task].comm);
        if (s.part < 0) {
          links.push_back(&comm.links);
          caps.push_back(comm.rate_cap_bytes_per_s);
          weights.push_back(&comm.link_weights);
        } else {
          const CommPart& part = comm.parts[static_cast<std::size_t>(s.part)];
          links.push_back(&part.links);
          caps.push_back(comm.rate_cap_bytes_per_s * part.share);
          weights.push_back(&part.link_weights);
        }
      }
      const std::vector<FlowModel::FlowId> ids = net_->add_all(links, caps, weights);
      for (std::size_t i = 0; i < starting_.size(); ++i) {
        const StartingFlow& s = starting_[i];
        const CommSpec& comm = g_.comm(state_[s.task].comm);
        ActiveFlow f;
        f.id = ids[i];
        f.remaining_bytes = s.part < 0 ? comm.bytes : comm.bytes * comm.parts[static_cast<std::size_t>(s.part)].share;
        f.since = now_;
        f.task = s.task;
        slot_of_flow_.insert(static_cast<std::uint64_t>(f.id), take_flow_slot(f));
      }
      starting_.clear();
    }
    apply_rate_changes();
  }

  std::int32_t take_flow_slot(const ActiveFlow& f) {
    if (free_flow_slots_.empty()) {
      flow_slots_.push_back(f);
      flow_version_.push_back(0);
      return static_cast<std::int32_t>(flow_slots_.size() - 1);
    }
    const std::int32_t slot = free_flow_slots_.back();
    free_flow_slots_.pop_back();
    flow_slots_[static_cast<std::size_t>(slot)] = f;
    return slot;
  }

  void schedule_task_done(TaskId t, TimeNs at) { queue_.push({at, seq_++, t, 0}); }

  void schedule_flow_done(std::int32_t slot, TimeNs at) { queue_.push({at, seq_++, slot, next_version(slot)}); }

  // A flow slot's next version: never 0, which marks a task's end.
  std::uint32_t next_version(std::int32_t slot) {
    std::uint32_t& v = flow_version_[static_cast<std::size_t>(slot)];
    if (++v == 0) ++v;
    return v;
  }

  void start(TaskId t) {
    result_.start_ns[t] = now_;
    const std::int32_t c = state_[t].comm;
    if (c < 0) {
      schedule_task_done(t, now_ + (durations_ != nullptr ? (*durations_)[t] : g_.duration_ns(t)));
      return;
    }
    const CommSpec& comm = g_.comm(c);
    if (comm.bytes <= 0.0 || comm.rate_cap_bytes_per_s <= 0.0) {
      schedule_task_done(t, now_ + comm.fixed.ns());
    } else if (net_ == nullptr || comm.links.empty()) {
      schedule_task_done(t, now_ + comm.fixed.ns() + transfer_ns(comm.bytes, comm.rate_cap_bytes_per_s));
    } else if (comm.parts.size() < 2) {
      starting_.push_back({t, -1});  // added with the instant's other flows (flush_ready)
      state_[t].pending = 1;
    } else {
      for (std::size_t p = 0; p < comm.parts.size(); ++p) starting_.push_back({t, static_cast<int>(p)});
      state_[t].pending = static_cast<std::int32_t>(comm.parts.size());
    }
  }

  // Re-plans the completion of every flow whose rate changed.
  void apply_rate_changes() {
    if (net_ == nullptr) return;
    for (FlowModel::FlowId id : net_->take_changed()) {
      const int* slot = slot_of_flow_.find(static_cast<std::uint64_t>(id));
      if (slot == nullptr) continue;  // already finished
      ActiveFlow& f = flow_slots_[static_cast<std::size_t>(*slot)];
      f.remaining_bytes -= f.rate * ns_to_seconds(now_ - f.since);
      if (f.remaining_bytes < 0.0) f.remaining_bytes = 0.0;
      f.since = now_;
      f.rate = net_->rate(id);
      if (!(f.rate > 0.0)) throw InternalError("event engine: a flow was given no bandwidth");
      schedule_flow_done(*slot, now_ + transfer_ns(f.remaining_bytes, f.rate));
    }
  }

  // A flow ended; its task's transfer ends with its last part.
  void flow_done(std::int32_t slot) {
    const ActiveFlow& f = flow_slots_[static_cast<std::size_t>(slot)];
    const TaskId t = f.task;
    ending_.push_back(f.id);  // removed with the instant's other flows (flush_ready)
    slot_of_flow_.erase(static_cast<std::uint64_t>(f.id));
    next_version(slot);  // no event of the old flow stays valid
    free_flow_slots_.push_back(slot);
    if (--state_[t].pending > 0) return;
    schedule_task_done(t, now_ + g_.comm(state_[t].comm).fixed.ns());
  }

  void task_done(TaskId t) {
    result_.end_ns[t] = now_;
    ++tasks_done_;
    const TaskState& st = state_[t];
    const TaskState& next = state_[t + 1];
    for (const TaskId* s = next_on_stream_ + st.slot_begin; s != next_on_stream_ + next.slot_begin; ++s) {
      if (*s >= 0) release(*s, t);
    }
    for (const TaskId* s = successors_ + st.succ_begin; s != successors_ + next.succ_begin; ++s) release(*s, t);
  }

  const TaskGraph& g_;
  FlowModel* net_;
  const EngineProgress& progress_;
  const std::vector<TimeNs>* durations_;  // null: the graph's
  std::int64_t tasks_done_ = 0;
  RunResult result_;
  // What the engine reads of a task, in one 16-byte record (one cache line, not
  // one per array of the graph: the engine's time is mostly misses on per-task
  // data), copied from the graph up front. A task's slots and successors end
  // where the next record's begin, mostly in the same line.
  struct alignas(16) TaskState {
    // Conditions not yet met; then, while its transfer runs, its flows not yet done.
    std::int32_t pending = 0;
    std::int32_t comm = -1;
    std::int32_t slot_begin = 0;  // into the graph's slots and next_on_stream_
    std::int32_t succ_begin = 0;  // into successors_
  };
  std::vector<TaskState> state_;
  std::vector<TaskId> blocker_;  // per task: the last condition met (written, read at the end)
  const TaskId* next_on_stream_ = nullptr;  // the graph's, beside its slots
  const TaskId* successors_ = nullptr;
  // Only the flows in flight (a handful per rank), not one slot per task: slots
  // reused as flows end, each with a version that outdates its pending events.
  std::vector<ActiveFlow> flow_slots_;
  std::vector<std::uint32_t> flow_version_;
  std::vector<std::int32_t> free_flow_slots_;
  FlatIdMap slot_of_flow_;  // FlowId -> its slot
  std::vector<TaskId> ready_;
  std::vector<StartingFlow> starting_;      // flows that start at this instant
  std::vector<FlowModel::FlowId> ending_;   // flows that ended at this instant
  // flush_ready's arguments to the network, reused from instant to instant.
  std::vector<const std::vector<std::int32_t>*> scratch_links_;
  std::vector<double> scratch_caps_;
  std::vector<const std::vector<double>*> scratch_weights_;
  std::priority_queue<Event, std::vector<Event>, Later> queue_;
  std::uint64_t seq_ = 0;
  TimeNs now_ = 0;
};

}  // namespace

RunResult run_task_graph(const TaskGraph& graph, FlowModel* network, const EngineProgress& progress,
                         const std::vector<TimeNs>* durations) {
  return Engine(graph, network, progress, durations).run();
}

}  // namespace strata::sim
