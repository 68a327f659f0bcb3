// What the tasks of a training step are, for traces and metrics: the workload's
// side tables beside the engine's TaskGraph, which knows only durations,
// communications, streams and dependencies.
//
// Every rank has the streams of StreamKind: its compute stream, a tensor-parallel
// and a data-parallel comm stream, pipeline send and receive streams, and a copy
// stream (host offload). Tasks carry a label (name, category, phase; shared by
// many tasks) and a TaskInfo (micro-batch, layer, chunk, bytes, ...).
#pragma once

#include <array>
#include <cstdint>
#include <ostream>
#include <string>
#include <vector>

#include "core/trace_vocabulary.h"
#include "core/units.h"
#include "sim/engine/task_graph.h"

namespace strata::sim {

// A rank's streams are its trace lanes, categories and phases the trace's
// (core/trace_vocabulary.h).
using StreamKind = trace::Lane;
inline constexpr int kNumStreamKinds = trace::kNumLanes;
inline int stream_index(StreamKind s) { return static_cast<int>(s); }
using Category = trace::Category;
using Phase = trace::Phase;
using trace::is_communication;

// What a task is. Several tasks share one label.
struct TaskLabel {
  std::string name;  // "fwd L3 attention", "all_reduce", ...
  Category category = Category::kElementwise;
  Phase phase = Phase::kForward;
};

// Kept small: a 1,024-GPU step has millions of tasks. A compute task's FLOPs come
// from its detail (TaskAnnotations::detail_flops).
struct TaskInfo {
  std::int32_t microbatch = -1;
  std::int32_t layer = -1;   // global layer index, -1 when none
  std::int32_t chunk = 0;
  std::int32_t detail = -1;  // index into TaskAnnotations::detail (per-op breakdown), -1 when none
  std::int32_t peer = -1;    // pipeline transfers: the receiving rank
  double bytes = 0.0;
};

// An op's name, kept once per process (a table that only grows, by the few
// hundred names models have): copying it copies a pointer. A collapsed stretch's
// detail copies thousands of ops, whose names would otherwise each be a string
// allocated and freed per simulated plan.
class OpName {
 public:
  OpName() : text_(empty()) {}
  OpName(const std::string& text) : text_(intern(text)) {}  // NOLINT(google-explicit-constructor): names are built as strings
  OpName(const char* text) : text_(intern(text)) {}         // NOLINT(google-explicit-constructor)
  const std::string& str() const { return *text_; }
  operator const std::string&() const { return *text_; }  // NOLINT(google-explicit-constructor)
  bool operator==(const OpName& o) const { return text_ == o.text_; }
  friend std::ostream& operator<<(std::ostream& os, const OpName& n) { return os << n.str(); }

 private:
  // The table's copy of `text`; thread-safe (sweeps build workloads on threads).
  static const std::string* intern(const std::string& text);
  // The empty name, looked up once (default-made ops need no lock).
  static const std::string* empty() {
    static const std::string* const text = intern(std::string());
    return text;
  }
  const std::string* text_;
};

// Sub-steps of a task: the ops a compute block is made of, back to back. A
// collapsed block (folded fidelity) also holds the tensor-parallel collectives
// between its ops, on the tp-comm lane.
struct DetailOp {
  OpName name;
  Category category;
  TimeNs duration_ns;
  double flops;
  double bytes;
  StreamKind lane = StreamKind::kCompute;
  std::int32_t layer_offset = 0;  // added to TaskInfo::layer; -1: no layer (embedding, head)
};

// What the metrics read of a detail: its time off the compute lane (the
// collectives inside a collapsed block), in all and per category, and its FLOPs
// (for traces): add_detail sums them op by op; a collapsed stretch kept as totals
// adds its blocks' (integer times: the same sums).
struct DetailTotals {
  double flops = 0.0;
  TimeNs comm_ns = 0;
  std::array<TimeNs, trace::kNumCategories> comm_by_category{};
  void add(const DetailOp& op) {
    flops += op.flops;
    if (op.lane == StreamKind::kCompute) return;
    comm_ns += op.duration_ns;
    comm_by_category[static_cast<std::size_t>(op.category)] += op.duration_ns;
  }
  // Another run of ops' totals after these (the FLOPs then summed run by run).
  void add(const DetailTotals& o) {
    flops += o.flops;
    comm_ns += o.comm_ns;
    for (std::size_t c = 0; c < comm_by_category.size(); ++c) comm_by_category[c] += o.comm_by_category[c];
  }
};

class TaskAnnotations {
 public:
  std::int32_t add_label(TaskLabel label);
  std::int32_t add_detail(std::vector<DetailOp> ops);
  // A detail kept as its totals only, its ops left out (a step simulated for its
  // metrics: no trace reads them); detail(id) is then empty.
  std::int32_t add_detail_totals(const DetailTotals& totals);
  // Annotates the next task; tasks are annotated in the order the graph made them.
  void add(TaskId task, std::int32_t label, const TaskInfo& info);
  void reserve(std::size_t tasks);

  std::int32_t label_of(TaskId t) const { return label_[t]; }
  const TaskLabel& label(std::int32_t id) const { return labels_[id]; }
  const TaskLabel& label_of_task(TaskId t) const { return labels_[label_[t]]; }
  const TaskInfo& info(TaskId t) const { return info_[t]; }
  const std::vector<DetailOp>& detail(std::int32_t id) const { return details_[id]; }
  double detail_flops(std::int32_t id) const { return detail_flops_[id]; }
  // Time of a detail's ops on the tp-comm lane (collectives inside a collapsed block).
  TimeNs detail_comm_ns(std::int32_t id) const { return detail_comm_ns_[id]; }
  // Of it, the collectives of category c (tp, cp or ep).
  TimeNs detail_comm_ns(std::int32_t id, Category c) const {
    return detail_comm_by_category_[id][static_cast<std::size_t>(c)];
  }

 private:
  std::vector<std::int32_t> label_;
  std::vector<TaskInfo> info_;
  std::vector<TaskLabel> labels_;
  std::vector<std::vector<DetailOp>> details_;
  std::vector<double> detail_flops_;
  std::vector<TimeNs> detail_comm_ns_;
  std::vector<std::array<TimeNs, trace::kNumCategories>> detail_comm_by_category_;
};

}  // namespace strata::sim
