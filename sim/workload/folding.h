// Folding: which ranks a build simulates, and how a folded op collapses.
//
// Full fidelity simulates every rank. Folded simulates one rank per pipeline
// stage (tp_rank 0, dp_rank 0): tensor-parallel peers and data-parallel replicas
// are symmetric by construction, so their tasks would be copies; the collectives
// of the folded ranks are still costed over their whole groups. A folded op's
// blocks collapse into one task per stretch between boundaries, a boundary being
// where a later pass attaches a dependency (a bucket's gradients final, its
// weights first used); its tensor-parallel collectives are statically costed.
#pragma once

#include <cstdint>
#include <functional>
#include <unordered_map>
#include <vector>

#include "core/flat_id_map.h"
#include "sim/workload/build.h"
#include "sim/workload/segments.h"

namespace strata::sim {

// Chooses the simulated ranks (all, or one per stage) and sizes the marks.
void place_ranks(WorkloadBuild& b);

// Where a collapsed op must start or end a task: before a block whose first task
// receives a dependency, after a block whose last task gives one. Layers are
// indexed [op * chunk_layers + layer], the head [op], for one stage's program; the
// embedding is at an op's start or end, always a boundary.
struct Boundaries {
  std::vector<char> before;
  std::vector<char> after;
  std::vector<char> head_before;
  std::vector<char> head_after;
};
Boundaries collapse_boundaries(const WorkloadBuild& b, int stage);

// A collective's time inside a collapsed stretch: statically costed, its
// contention already in the rate (TopologyCommCosts::folded).
TimeNs collapsed_comm_ns(const CommSpec& spec);
// Inside a collapsed stretch, the exchange at segs[k] with the compute after it
// beside it (Segment::beside_next) costs what it outlasts that compute by,
// max(0, comm_ns - the run's compute time): both ends' dependencies meet there.
TimeNs beside_exposed_ns(const std::vector<Segment>& segs, std::size_t k, TimeNs comm_ns);

// A collective segment's trace category (cp, ep or tp) and its op's name as a
// detail op's.
Category comm_category(const Segment& s);
const OpName& op_name(CollectiveOp op);

// A collapsed block's ops in order, as a stretch's detail lists them: each compute
// segment's ops, and each collective (its comm id the next of `comms`) on the
// tp-comm lane for the time the block exposes it (beside_exposed_ns); every op
// with layer_offset `layer`, handed to sink(op, its segment).
template <typename Sink>
void for_each_block_op(const std::vector<Segment>& segs, const std::vector<std::int32_t>& comms,
                       const TaskGraph& graph, int layer, Sink&& sink) {
  std::size_t comm = 0;
  for (std::size_t k = 0; k < segs.size(); ++k) {
    const Segment& s = segs[k];
    if (s.is_comm) {
      const TimeNs ns = beside_exposed_ns(segs, k, collapsed_comm_ns(graph.comm(comms[comm++])));
      sink(DetailOp{op_name(s.op), comm_category(s), ns, 0.0, s.comm_bytes, StreamKind::kTpComm, layer}, s);
      continue;
    }
    for (DetailOp op : s.ops) {
      op.layer_offset = layer;
      sink(op, s);
    }
  }
}

// One collapsed stretch: its time, bytes and kernels, its detail and label, and
// the layers (of its chunk) and head it covers.
struct CollapsedStretch {
  TimeNs ns = 0;
  double bytes = 0.0;
  std::size_t kernels = 0;
  std::int32_t detail = -1;
  std::int32_t label = -1;
  Phase phase = Phase::kForward;
  std::vector<int> layers;
  bool head = false;
};

// What collapsed stretches share: each block's summed time on a tensor-parallel
// group, one detail per stretch shape, one label per layer range.
class CollapsedStretches {
 public:
  explicit CollapsedStretches(WorkloadBuild& b) : b_(b) {}

  struct BlockSummary {
    TimeNs ns = 0;
    double bytes = 0.0;
    std::size_t kernels = 0;  // compute ops (each one kernel the host issues)
    std::vector<std::int32_t> comms;  // the comm id of each collective segment, in order
    DetailTotals totals;              // of its ops (for_each_block_op)
  };
  // A block's time and bytes with its collectives costed on their groups
  // (comm_of: a collective segment's comm id, on the tensor-parallel group, its
  // first rank's context-parallel group or the expert groups); the cache holds
  // one tensor-parallel group's (start_group clears it).
  using CommOf = std::function<std::int32_t(const Segment&)>;
  const BlockSummary& summary(const std::vector<Segment>& segs, const CommOf& comm_of);
  void start_group() { block_summaries_.clear(); }

  // Stretches of the same shape share one detail; for a shape not seen before it
  // is made of the stretch's blocks (each with its layer): their ops, or with
  // WorkloadOptions::detail_ops false only their summed totals (the metrics'
  // integer times are the same either way; the FLOPs, which only traces read,
  // are summed block by block).
  struct Block {
    const BlockSummary* summary;
    const std::vector<Segment>* segments;
    int layer;
  };
  std::int32_t detail(std::uint64_t key, const std::vector<Block>& blocks);

  // The label of a collapsed stretch: "forward layers 3-5" (first < 0: no layer).
  std::int32_t label(Phase phase, int first, int last);

 private:
  WorkloadBuild& b_;
  // Per build, a few hundred of each: flat maps (no node per entry).
  FlatIdMap detail_ids_;
  FlatIdMap stretch_label_ids_;  // key: phase, first and last layer (label_key)
  std::unordered_map<const std::vector<Segment>*, BlockSummary> block_summaries_;
};

}  // namespace strata::sim
