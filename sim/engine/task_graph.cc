#include "sim/engine/task_graph.h"

#include "core/error.h"

namespace strata::sim {

const char* to_string(StreamKind s) {
  switch (s) {
    case StreamKind::kCompute: return "compute";
    case StreamKind::kTpComm: return "tp-comm";
    case StreamKind::kDpComm: return "dp-comm";
    case StreamKind::kPpSend: return "pp-send";
    case StreamKind::kPpRecv: return "pp-recv";
    case StreamKind::kCopy: return "copy";
  }
  return "compute";
}

const char* to_string(Category c) {
  switch (c) {
    case Category::kGemm: return "gemm";
    case Category::kAttention: return "attention";
    case Category::kElementwise: return "elementwise";
    case Category::kTp: return "tp";
    case Category::kPp: return "pp";
    case Category::kDp: return "dp";
    case Category::kZero: return "zero";
    case Category::kOptimizer: return "optimizer";
    case Category::kCopy: return "copy";
  }
  return "elementwise";
}

bool is_communication(Category c) {
  return c == Category::kTp || c == Category::kPp || c == Category::kDp || c == Category::kZero;
}

const char* to_string(Phase p) {
  switch (p) {
    case Phase::kForward: return "fwd";
    case Phase::kBackward: return "bwd";
    case Phase::kRecompute: return "recompute";
    case Phase::kStep: return "step";
  }
  return "fwd";
}

TaskGraph::TaskGraph(int num_ranks) : num_ranks_(num_ranks) {}

std::int32_t TaskGraph::add_label(TaskLabel label) {
  labels_.push_back(std::move(label));
  return static_cast<std::int32_t>(labels_.size() - 1);
}

std::int32_t TaskGraph::add_comm(CommSpec comm) {
  comms_.push_back(std::move(comm));
  return static_cast<std::int32_t>(comms_.size() - 1);
}

std::int32_t TaskGraph::add_detail(std::vector<DetailOp> ops) {
  double flops = 0.0;
  TimeNs comm_ns = 0;
  for (const DetailOp& op : ops) {
    flops += op.flops;
    if (op.lane != StreamKind::kCompute) comm_ns += op.duration_ns;
  }
  detail_flops_.push_back(flops);
  detail_comm_ns_.push_back(comm_ns);
  details_.push_back(std::move(ops));
  return static_cast<std::int32_t>(details_.size() - 1);
}

TaskId TaskGraph::new_task(TimeNs duration_ns, std::int32_t comm, std::int32_t label,
                           const TaskInfo& info) {
  if (finalized_) throw InternalError("task graph: task added after finalize()");
  duration_ns_.push_back(duration_ns);
  comm_.push_back(comm);
  label_.push_back(label);
  info_.push_back(info);
  num_deps_.push_back(0);
  return static_cast<TaskId>(duration_ns_.size() - 1);
}

TaskId TaskGraph::add_compute(int rank, StreamKind stream, TimeNs duration_ns, std::int32_t label,
                              const TaskInfo& info) {
  TaskId t = new_task(duration_ns, -1, label, info);
  std::int32_t slot = rank * kNumStreamKinds + static_cast<int>(stream);
  slots_.push_back(slot);
  slot_offset_.push_back(static_cast<std::int32_t>(slots_.size()));
  return t;
}

TaskId TaskGraph::add_shared_compute(const std::vector<int>& ranks, TimeNs duration_ns,
                                     std::int32_t label, const TaskInfo& info) {
  TaskId t = new_task(duration_ns, -1, label, info);
  for (int rank : ranks) {
    std::int32_t slot = rank * kNumStreamKinds + static_cast<int>(StreamKind::kCompute);
    slots_.push_back(slot);
  }
  slot_offset_.push_back(static_cast<std::int32_t>(slots_.size()));
  return t;
}

void TaskGraph::reserve(std::size_t tasks, std::size_t slots, std::size_t dependencies) {
  duration_ns_.reserve(tasks);
  comm_.reserve(tasks);
  label_.reserve(tasks);
  info_.reserve(tasks);
  num_deps_.reserve(tasks);
  slot_offset_.reserve(tasks + 1);
  slots_.reserve(slots);
  edges_.reserve(dependencies);
}

bool TaskGraph::runs_on(TaskId t, int rank) const {
  for (const std::int32_t* s = slots_begin(t); s != slots_end(t); ++s) {
    if (*s / kNumStreamKinds == rank) return true;
  }
  return false;
}

TaskId TaskGraph::add_comm_task(const std::vector<std::pair<int, StreamKind>>& slots,
                                std::int32_t comm, std::int32_t label, const TaskInfo& info) {
  TaskId t = new_task(comms_[comm].fixed_ns, comm, label, info);
  for (const auto& [rank, stream] : slots) {
    std::int32_t slot = rank * kNumStreamKinds + static_cast<int>(stream);
    slots_.push_back(slot);
  }
  slot_offset_.push_back(static_cast<std::int32_t>(slots_.size()));
  return t;
}

void TaskGraph::add_dependency(TaskId before, TaskId task) {
  if (before == task) throw InternalError("task graph: a task cannot depend on itself");
  edges_.emplace_back(before, task);
  ++num_deps_[task];
}

void TaskGraph::finalize() {
  const std::size_t n = duration_ns_.size();
  // Streams: a counting sort of the slots by stream keeps each stream in task order.
  const int num_streams = num_slots();
  stream_offset_.assign(num_streams + 1, 0);
  for (std::int32_t slot : slots_) ++stream_offset_[slot + 1];
  for (int i = 0; i < num_streams; ++i) stream_offset_[i + 1] += stream_offset_[i];
  stream_tasks_.resize(slots_.size());
  {
    std::vector<std::int32_t> fill(stream_offset_.begin(), stream_offset_.end() - 1);
    for (std::size_t t = 0; t < n; ++t) {
      for (std::int32_t k = slot_offset_[t]; k < slot_offset_[t + 1]; ++k) {
        stream_tasks_[fill[slots_[k]]++] = static_cast<TaskId>(t);
      }
    }
  }
  succ_offset_.assign(n + 1, 0);
  for (const auto& [before, after] : edges_) ++succ_offset_[before + 1];
  for (std::size_t i = 0; i < n; ++i) succ_offset_[i + 1] += succ_offset_[i];
  succ_.assign(edges_.size(), 0);
  std::vector<std::int32_t> fill(succ_offset_.begin(), succ_offset_.end() - 1);
  for (const auto& [before, after] : edges_) succ_[fill[before]++] = after;
  edges_.clear();
  edges_.shrink_to_fit();
  finalized_ = true;
}

}  // namespace strata::sim
