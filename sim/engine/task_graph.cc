#include "sim/engine/task_graph.h"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "core/error.h"

namespace strata::sim {

TaskGraph::TaskGraph(int num_ranks, int streams_per_rank)
    : num_ranks_(num_ranks), streams_per_rank_(streams_per_rank) {}

std::int32_t TaskGraph::add_comm(CommSpec comm) {
  comms_.push_back(std::move(comm));
  return static_cast<std::int32_t>(comms_.size() - 1);
}

void TaskGraph::extend(TaskId task, Duration extra) {
  if (finalized_) throw InternalError("task graph: task extended after finalize()");
  duration_ns_[static_cast<std::size_t>(task)] += extra.ns();
}

TaskId TaskGraph::new_task(TimeNs duration_ns, std::int32_t comm) {
  if (finalized_) throw InternalError("task graph: task added after finalize()");
  duration_ns_.push_back(duration_ns);
  comm_.push_back(comm);
  num_deps_.push_back(0);
  return static_cast<TaskId>(duration_ns_.size() - 1);
}

TaskId TaskGraph::add_compute(int rank, int stream, Duration duration) {
  TaskId t = new_task(duration.ns(), -1);
  slots_.push_back(slot(rank, stream));
  slot_offset_.push_back(static_cast<std::int32_t>(slots_.size()));
  return t;
}

TaskId TaskGraph::add_shared_compute(const std::vector<int>& ranks, int stream, Duration duration) {
  TaskId t = new_task(duration.ns(), -1);
  for (int rank : ranks) slots_.push_back(slot(rank, stream));
  slot_offset_.push_back(static_cast<std::int32_t>(slots_.size()));
  return t;
}

void TaskGraph::reserve(std::size_t tasks, std::size_t slots, std::size_t dependencies) {
  duration_ns_.reserve(tasks);
  comm_.reserve(tasks);
  num_deps_.reserve(tasks);
  slot_offset_.reserve(tasks + 1);
  slots_.reserve(slots);
  edges_.reserve(dependencies);
}

void TaskGraph::scale_compute(int stream, const std::vector<double>& factor) {
  duration_ns_ = scaled_durations(stream, factor);
}

void TaskGraph::set_durations(std::vector<TimeNs> durations) {
  if (durations.size() != duration_ns_.size()) {
    throw InternalError(fmt::format("TaskGraph::set_durations: {} durations for {} tasks", durations.size(),
                                    duration_ns_.size()));
  }
  duration_ns_ = std::move(durations);
}

std::vector<TimeNs> TaskGraph::scaled_durations(int stream, const std::vector<double>& factor) const {
  return scaled_durations_by(stream, [&](TaskId, int rank) { return factor[static_cast<std::size_t>(rank)]; });
}

bool TaskGraph::runs_on(TaskId t, int rank) const {
  for (const std::int32_t* s = slots_begin(t); s != slots_end(t); ++s) {
    if (rank_of_slot(*s) == rank) return true;
  }
  return false;
}

TaskId TaskGraph::add_comm_task(const std::vector<std::pair<int, int>>& slots, std::int32_t comm) {
  TaskId t = new_task(comms_[comm].fixed.ns(), comm);
  for (const auto& [rank, stream] : slots) slots_.push_back(slot(rank, stream));
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
  next_on_stream_.assign(slots_.size(), -1);
  {
    std::vector<std::int32_t> fill(stream_offset_.begin(), stream_offset_.end() - 1);
    std::vector<std::int32_t> last_entry(static_cast<std::size_t>(num_streams), -1);  // the stream's last task's entry
    for (std::size_t t = 0; t < n; ++t) {
      for (std::int32_t k = slot_offset_[t]; k < slot_offset_[t + 1]; ++k) {
        const std::int32_t stream = slots_[k];
        stream_tasks_[fill[stream]++] = static_cast<TaskId>(t);
        std::int32_t& last = last_entry[static_cast<std::size_t>(stream)];
        if (last >= 0) next_on_stream_[static_cast<std::size_t>(last)] = static_cast<TaskId>(t);
        last = k;
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
