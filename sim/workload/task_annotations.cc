#include "sim/workload/task_annotations.h"

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

std::int32_t TaskAnnotations::add_label(TaskLabel label) {
  labels_.push_back(std::move(label));
  return static_cast<std::int32_t>(labels_.size() - 1);
}

std::int32_t TaskAnnotations::add_detail(std::vector<DetailOp> ops) {
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
