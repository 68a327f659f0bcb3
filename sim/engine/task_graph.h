// A task graph: what the event engine executes. It knows durations,
// communications, streams and dependencies, and nothing of what the tasks are
// (the workload keeps that beside it: sim/workload/task_annotations.h).
//
// A task runs on one or more (rank, stream) slots; every rank has the same number
// of streams. Each stream is serial and runs its tasks in the order they were
// added (as a CUDA stream does). A task starts when it is at the head of all its
// streams and all its dependencies have finished. A communication task's time is
// its CommSpec's: a fixed latency plus its bytes over its links.
//
// Invariants: task ids are dense and in creation order; a stream runs its tasks in
// creation order. Dependencies may point either way in id order; a cycle shows up
// as a deadlock when the engine runs the graph.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "core/units.h"

namespace strata::sim {

using TaskId = std::int32_t;

// One independent pipeline of a transfer (a ring's channels on one rail): it
// carries `share` of the transfer's bytes over its own links, at most at `share`
// of the transfer's rate cap, so that alone every part ends when the whole would.
struct CommPart {
  double share = 1.0;
  std::vector<std::int32_t> links;
  // Bytes carried on links[i] per byte of this part's own bytes; empty: 1 each.
  std::vector<double> link_weights;
};

// A communication's cost: a fixed latency plus `bytes` carried at a rate that is
// at most rate_cap; on a network model, over `links` shared max-min fairly, each
// link loaded with its weight times the rate.
struct CommSpec {
  Duration fixed;  // latency, before and besides the transfer
  double bytes = 0.0;
  double rate_cap_bytes_per_s = 0.0;  // 0: the transfer is free (latency only)
  std::vector<std::int32_t> links;    // empty: costed without the network (fixed time)
  // Bytes carried on links[i] per byte of `bytes` (a collective's flows load its
  // links unequally: a 2-node ring puts an eighth of an NVLink edge's bytes on each
  // NIC); empty: 1 on every link.
  std::vector<double> link_weights;
  // Two or more when the transfer runs as independent parts on a network model,
  // each its own flow: a link shared on one rail then slows that rail's part only,
  // and the transfer ends with its slowest part (NCCL's channels progress on their
  // own). `links` and `link_weights` stay the parts' union (per byte of `bytes`),
  // for link totals and for costing the transfer as one flow.
  std::vector<CommPart> parts;
  std::string name;                   // "all_reduce tp8 24.0 MiB" for traces
  // The thread blocks its kernel occupies while it runs (NCCL: one per channel),
  // SMs a compute kernel beside it cannot use; 0: unknown or no kernel.
  int channels = 0;

  double link_weight(std::size_t i) const { return link_weights.empty() ? 1.0 : link_weights[i]; }
  // Costed without the network from here on (a fixed time, or a rate that already
  // holds the contention).
  void drop_links() {
    links.clear();
    link_weights.clear();
    parts.clear();
  }
};

class TaskGraph {
 public:
  TaskGraph(int num_ranks, int streams_per_rank);

  int num_ranks() const { return num_ranks_; }
  int streams_per_rank() const { return streams_per_rank_; }
  int num_tasks() const { return static_cast<int>(duration_ns_.size()); }

  std::int32_t add_comm(CommSpec comm);

  // A task of fixed duration on one stream.
  TaskId add_compute(int rank, int stream, Duration duration);
  // One task run in lockstep on the same stream of several ranks.
  TaskId add_shared_compute(const std::vector<int>& ranks, int stream, Duration duration);
  // A communication task on several (rank, stream) slots.
  TaskId add_comm_task(const std::vector<std::pair<int, int>>& slots, std::int32_t comm);
  // `task` starts only after `before` finished.
  void add_dependency(TaskId before, TaskId task);
  // Lengthens a task not yet run (before finalize): work found to belong to it
  // after it was added (a host thread's extra issue time).
  void extend(TaskId task, Duration extra);
  // Capacity hints, to avoid regrowing millions of entries.
  void reserve(std::size_t tasks, std::size_t slots, std::size_t dependencies);

  // Multiplies the duration of every compute task (no communication) on stream
  // `stream` of each rank by factor[rank] (1: at speed): slower GPUs. A task shared
  // by several ranks in lockstep (a tensor-parallel group's) takes its slowest
  // member's factor, as the group waits for it at every collective.
  void scale_compute(int stream, const std::vector<double>& factor);
  // Every task's duration at once (one per task, as scaled_durations gives them).
  void set_durations(std::vector<TimeNs> durations);
  // The durations scale_compute would give every task, the graph left as it is
  // (a step run many times at different GPU speeds: run_task_graph's durations).
  std::vector<TimeNs> scaled_durations(int stream, const std::vector<double>& factor) const;
  // The same with a factor per task and member rank, factor_of(task, rank): each
  // kernel's own speed (sampled jitter); a shared task takes its slowest member's.
  template <typename FactorOf>
  std::vector<TimeNs> scaled_durations_by(int stream, FactorOf&& factor_of) const;

  // Finalises the successor lists; call once before running.
  void finalize();

  // --- read access (after finalize) ---
  TimeNs duration_ns(TaskId t) const { return duration_ns_[t]; }
  std::int32_t comm_of(TaskId t) const { return comm_[t]; }
  const CommSpec& comm(std::int32_t id) const { return comms_[id]; }
  int num_comms() const { return static_cast<int>(comms_.size()); }
  // True when `rank` is one of the ranks task t runs on.
  bool runs_on(TaskId t, int rank) const;

  int num_dependencies(TaskId t) const { return num_deps_[t]; }
  const TaskId* successors_begin(TaskId t) const { return succ_.data() + succ_offset_[t]; }
  const TaskId* successors_end(TaskId t) const { return succ_.data() + succ_offset_[t + 1]; }

  // Slots of a task: (rank, stream) encoded as rank * streams_per_rank + stream.
  const std::int32_t* slots_begin(TaskId t) const { return slots_.data() + slot_offset_[t]; }
  const std::int32_t* slots_end(TaskId t) const { return slots_.data() + slot_offset_[t + 1]; }
  int rank_of_slot(std::int32_t slot) const { return slot / streams_per_rank_; }
  // The tasks of a stream in program order (after finalize).
  std::span<const TaskId> stream(int rank, int s) const { return stream_by_slot(rank * streams_per_rank_ + s); }
  std::span<const TaskId> stream_by_slot(std::int32_t slot) const {
    return {stream_tasks_.data() + stream_offset_[slot],
            static_cast<std::size_t>(stream_offset_[slot + 1] - stream_offset_[slot])};
  }
  // Beside each of a task's slots (the same index as slots_begin(t)[i]), the next
  // task on that stream, or -1 (after finalize): what the engine releases when the
  // task ends, read beside the slots instead of through each stream's list.
  const TaskId* next_on_streams_begin(TaskId t) const { return next_on_stream_.data() + slot_offset_[t]; }
  int num_slots() const { return num_ranks_ * streams_per_rank_; }
  std::size_t num_dependencies_total() const { return succ_.size(); }
  std::size_t num_slot_entries() const { return slots_.size(); }

 private:
  TaskId new_task(TimeNs duration_ns, std::int32_t comm);
  std::int32_t slot(int rank, int stream) const { return rank * streams_per_rank_ + stream; }

  int num_ranks_;
  int streams_per_rank_;
  std::vector<TimeNs> duration_ns_;
  std::vector<std::int32_t> comm_;
  std::vector<std::int32_t> num_deps_;
  std::vector<std::int32_t> slot_offset_{0};
  std::vector<std::int32_t> slots_;
  // Streams as CSR, built by finalize() from the slots (tasks in creation order).
  std::vector<std::int32_t> stream_offset_;
  std::vector<TaskId> stream_tasks_;
  std::vector<TaskId> next_on_stream_;  // per slot entry
  // Dependencies are collected as (before, after) and turned into CSR successor lists.
  std::vector<std::pair<TaskId, TaskId>> edges_;
  std::vector<std::int32_t> succ_offset_;
  std::vector<TaskId> succ_;
  std::vector<CommSpec> comms_;
  bool finalized_ = false;
};

template <typename FactorOf>
std::vector<TimeNs> TaskGraph::scaled_durations_by(int stream, FactorOf&& factor_of) const {
  std::vector<TimeNs> out = duration_ns_;
  for (TaskId t = 0; t < num_tasks(); ++t) {
    if (comm_[t] >= 0) continue;
    double f = 0.0;
    for (const std::int32_t* s = slots_begin(t); s != slots_end(t); ++s) {
      if (*s % streams_per_rank_ == stream) f = std::max(f, static_cast<double>(factor_of(t, rank_of_slot(*s))));
    }
    if (f > 0.0 && f != 1.0) out[t] = static_cast<TimeNs>(std::llround(static_cast<double>(out[t]) * f));
  }
  return out;
}

}  // namespace strata::sim
