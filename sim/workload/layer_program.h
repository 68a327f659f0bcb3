// The layer program: each pipeline op (the forward or backward of one
// micro-batch through one model chunk) as tasks — the compute segments of its
// embedding, layers and head, and the tensor-parallel collectives between them
// (segments.h) — for the simulated members of a tensor-parallel group, who share
// them. Full fidelity gives a task per compute segment and per collective; folded
// collapses an op into one task per stretch between boundaries (folding.h).
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "sim/workload/build.h"
#include "sim/workload/folding.h"
#include "sim/workload/segments.h"

namespace strata::sim {

class LayerProgram {
 public:
  // Costs the blocks' segments and registers their labels and details.
  explicit LayerProgram(WorkloadBuild& b);

  // Pass 1: every op of pipeline rank r's program for tensor-parallel group
  // (dp rank d, pipeline rank r), marking where each op, layer and head are.
  void emit_tp_group(int d, int r);

  // Tasks a layer contributes to an op at full fidelity (for sizing the graph).
  std::size_t segments_per_layer() const;

  // A task's label and detail ids, per segment of a block, created once.
  struct SegmentIds {
    std::vector<std::int32_t> label;
    std::vector<std::int32_t> detail;
  };
  struct BlockIds {
    SegmentIds forward, backward, recompute, weight_grad;
  };
  // A block of a pending collapsed stretch: its segments, summary and layer.
  using PendingBlock = CollapsedStretches::Block;

 private:
  SegmentIds register_segments(const std::vector<Segment>& segs, Phase phase);
  BlockIds register_block(const BlockSegments& b);
  // The layer blocks: the dense layer's, and an MoE model's MoE layer's.
  std::vector<BlockSegments*> layer_blocks();
  // Runs the tensor-parallel collectives the framework overlaps under their GEMMs.
  void overlap_tp_comm();
  // Runs each context-parallel ring step's K/V transfer beside its attention step.
  void overlap_cp_ring();

  WorkloadBuild& b_;
  CollapsedStretches stretches_;
  BlockSegments layer_, moe_layer_, embedding_, head_;
  BlockIds layer_ids_, moe_layer_ids_, embedding_ids_, head_ids_;
  // Buffers of the pending stretch, kept so no op allocates.
  std::vector<PendingBlock> pending_blocks_;
  std::vector<int> pending_layers_;
};

}  // namespace strata::sim
