#include "sim/workload/task_annotations.h"

#include <mutex>
#include <unordered_set>

#include "core/error.h"

namespace strata::sim {

const std::string* OpName::intern(const std::string& text) {
  static std::mutex mutex;
  static std::unordered_set<std::string> names;  // nodes never move: pointers stay valid
  const std::lock_guard<std::mutex> lock(mutex);
  return &*names.insert(text).first;
}

std::int32_t TaskAnnotations::add_label(TaskLabel label) {
  labels_.push_back(std::move(label));
  return static_cast<std::int32_t>(labels_.size() - 1);
}

std::int32_t TaskAnnotations::add_detail(std::vector<DetailOp> ops) {
  DetailTotals totals;
  for (const DetailOp& op : ops) totals.add(op);
  const std::int32_t id = add_detail_totals(totals);
  details_.back() = std::move(ops);
  return id;
}

std::int32_t TaskAnnotations::add_detail_totals(const DetailTotals& totals) {
  detail_flops_.push_back(totals.flops);
  detail_comm_ns_.push_back(totals.comm_ns);
  detail_comm_by_category_.push_back(totals.comm_by_category);
  details_.emplace_back();
  return static_cast<std::int32_t>(details_.size() - 1);
}

void TaskAnnotations::add(TaskId task, std::int32_t label, const TaskInfo& info) {
  if (task != static_cast<TaskId>(label_.size())) throw InternalError("task annotations: a task annotated out of order");
  label_.push_back(label);
  info_.push_back(info);
}

void TaskAnnotations::reserve(std::size_t tasks) {
  label_.reserve(tasks);
  info_.reserve(tasks);
}

}  // namespace strata::sim
