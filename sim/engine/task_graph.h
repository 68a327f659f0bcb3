// The task graph of one training step: what the event engine executes.
//
// A task runs on one or more (rank, stream) slots: a compute block on one rank's
// compute stream, a pipeline transfer on the sender's pp-send and the receiver's
// pp-recv streams, a collective on the comm stream of every member. Each stream is
// serial and runs its tasks in the order they were added (as a CUDA stream does).
// A task starts when it is at the head of all its streams and all its
// dependencies have finished.
//
// Invariants: task ids are dense and in creation order; a stream runs its tasks in
// creation order. Dependencies may point either way in id order; a cycle shows up
// as a deadlock when the engine runs the graph.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "core/units.h"

namespace strata::sim {

enum class StreamKind : std::uint8_t { kCompute, kTpComm, kDpComm, kPpSend, kPpRecv, kCopy };
inline constexpr int kNumStreamKinds = 6;
const char* to_string(StreamKind s);

// Trace categories (docs/formats.md, trace.json).
enum class Category : std::uint8_t {
  kGemm, kAttention, kElementwise, kTp, kPp, kDp, kZero, kOptimizer, kCopy
};
const char* to_string(Category c);
bool is_communication(Category c);

enum class Phase : std::uint8_t { kForward, kBackward, kRecompute, kStep };
const char* to_string(Phase p);

using TaskId = std::int32_t;

// A communication's cost: a fixed latency plus `bytes` carried at a rate that is
// at most rate_cap; on a network model, over `links` shared max-min fairly.
struct CommSpec {
  TimeNs fixed_ns = 0;
  double bytes = 0.0;
  double rate_cap_bytes_per_s = 0.0;  // 0: the transfer is free (latency only)
  std::vector<std::int32_t> links;    // empty: costed without the network (fixed time)
  std::string name;                   // "all_reduce tp8 24.0 MiB" for traces
};

// What a task is, for traces and metrics. Several tasks share one label.
struct TaskLabel {
  std::string name;  // "fwd L3 attention", "all_reduce", ...
  Category category = Category::kElementwise;
  Phase phase = Phase::kForward;
};

// Kept small: a 1,024-GPU step has millions of tasks. A compute task's FLOPs come
// from its detail (TaskGraph::detail_flops).
struct TaskInfo {
  std::int32_t microbatch = -1;
  std::int32_t layer = -1;   // global layer index, -1 when none
  std::int32_t chunk = 0;
  std::int32_t detail = -1;  // index into TaskGraph::details (per-op breakdown), -1 when none
  std::int32_t peer = -1;    // pipeline transfers: the receiving rank
  double bytes = 0.0;
};

class TaskGraph {
 public:
  explicit TaskGraph(int num_ranks);

  int num_ranks() const { return num_ranks_; }
  int num_tasks() const { return static_cast<int>(duration_ns_.size()); }

  std::int32_t add_label(TaskLabel label);
  std::int32_t add_comm(CommSpec comm);

  // A compute (or copy) task of fixed duration on one stream.
  TaskId add_compute(int rank, StreamKind stream, TimeNs duration_ns, std::int32_t label,
                     const TaskInfo& info);
  // One compute task run in lockstep on the compute streams of several ranks (the
  // identical work of tensor-parallel peers between two of their collectives).
  TaskId add_shared_compute(const std::vector<int>& ranks, TimeNs duration_ns, std::int32_t label,
                            const TaskInfo& info);
  // Capacity hints, to avoid regrowing millions of entries.
  void reserve(std::size_t tasks, std::size_t slots, std::size_t dependencies);
  // A communication task on several (rank, stream) slots.
  TaskId add_comm_task(const std::vector<std::pair<int, StreamKind>>& slots, std::int32_t comm,
                       std::int32_t label, const TaskInfo& info);
  // `task` starts only after `before` finished.
  void add_dependency(TaskId before, TaskId task);

  // Sub-steps of a task, for traces and metrics: the ops a compute block is made
  // of, back to back. A collapsed block (folded fidelity) also holds the
  // tensor-parallel collectives between its ops, on the tp-comm lane.
  struct DetailOp {
    std::string name;
    Category category;
    TimeNs duration_ns;
    double flops;
    double bytes;
    StreamKind lane = StreamKind::kCompute;
    std::int32_t layer_offset = 0;  // added to TaskInfo::layer; -1: no layer (embedding, head)
  };
  std::int32_t add_detail(std::vector<DetailOp> ops);

  // Finalises the successor lists; call once before running.
  void finalize();

  // --- read access (after finalize) ---
  TimeNs duration_ns(TaskId t) const { return duration_ns_[t]; }
  std::int32_t comm_of(TaskId t) const { return comm_[t]; }
  std::int32_t label_of(TaskId t) const { return label_[t]; }
  const TaskInfo& info(TaskId t) const { return info_[t]; }
  const TaskLabel& label(std::int32_t id) const { return labels_[id]; }
  const CommSpec& comm(std::int32_t id) const { return comms_[id]; }
  int num_comms() const { return static_cast<int>(comms_.size()); }
  const std::vector<DetailOp>& detail(std::int32_t id) const { return details_[id]; }
  double detail_flops(std::int32_t id) const { return detail_flops_[id]; }
  // Time of a detail's ops on the tp-comm lane (collectives inside a collapsed block).
  TimeNs detail_comm_ns(std::int32_t id) const { return detail_comm_ns_[id]; }
  // True when `rank` is one of the ranks task t runs on.
  bool runs_on(TaskId t, int rank) const;

  int num_dependencies(TaskId t) const { return num_deps_[t]; }
  const TaskId* successors_begin(TaskId t) const { return succ_.data() + succ_offset_[t]; }
  const TaskId* successors_end(TaskId t) const { return succ_.data() + succ_offset_[t + 1]; }

  // Slots of a task: (rank, stream) encoded as rank * kNumStreamKinds + stream.
  const std::int32_t* slots_begin(TaskId t) const { return slots_.data() + slot_offset_[t]; }
  const std::int32_t* slots_end(TaskId t) const { return slots_.data() + slot_offset_[t + 1]; }
  // The tasks of a stream in program order (after finalize).
  std::span<const TaskId> stream(int rank, StreamKind s) const {
    return stream_by_slot(rank * kNumStreamKinds + static_cast<int>(s));
  }
  std::span<const TaskId> stream_by_slot(std::int32_t slot) const {
    return {stream_tasks_.data() + stream_offset_[slot],
            static_cast<std::size_t>(stream_offset_[slot + 1] - stream_offset_[slot])};
  }
  int num_slots() const { return num_ranks_ * kNumStreamKinds; }
  std::size_t num_dependencies_total() const { return succ_.size(); }
  std::size_t num_slot_entries() const { return slots_.size(); }

 private:
  TaskId new_task(TimeNs duration_ns, std::int32_t comm, std::int32_t label, const TaskInfo& info);

  int num_ranks_;
  std::vector<TimeNs> duration_ns_;
  std::vector<std::int32_t> comm_;
  std::vector<std::int32_t> label_;
  std::vector<TaskInfo> info_;
  std::vector<std::int32_t> num_deps_;
  std::vector<std::int32_t> slot_offset_{0};
  std::vector<std::int32_t> slots_;
  // Streams as CSR, built by finalize() from the slots (tasks in creation order).
  std::vector<std::int32_t> stream_offset_;
  std::vector<TaskId> stream_tasks_;
  // Dependencies are collected as (before, after) and turned into CSR successor lists.
  std::vector<std::pair<TaskId, TaskId>> edges_;
  std::vector<std::int32_t> succ_offset_;
  std::vector<TaskId> succ_;
  std::vector<TaskLabel> labels_;
  std::vector<CommSpec> comms_;
  std::vector<std::vector<DetailOp>> details_;
  std::vector<double> detail_flops_;
  std::vector<TimeNs> detail_comm_ns_;
  bool finalized_ = false;
};

}  // namespace strata::sim
