// A transformer layer (or the embedding, or the output head) as the event engine
// sees it: compute segments (ops that run back to back on the compute stream)
// separated by tensor-parallel collectives.
//
// Where the collectives sit follows Megatron-LM (Shoeybi et al. 2019, figure 3;
// Korthikanti et al. 2022, figure 5): without sequence parallelism the "g"
// all-reduce follows the row-parallel projection and fc2 in forward, and the "f"
// all-reduce follows the column-parallel QKV and fc1 in backward; with sequence
// parallelism an all-gather precedes QKV and fc1 and a reduce-scatter follows the
// projection and fc2 in forward, and the conjugates run in backward, where each
// column-parallel layer (QKV, fc1, the logits) also all-gathers its input again
// before its data-gradient GEMM: it kept only its rank's tokens, and the weight
// gradient needs them all (Korthikanti et al. 2022, section 4.2.2).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "core/collective.h"
#include "sim/engine/task_graph.h"
#include "plan/layer_ops.h"
#include "plan/model_spec.h"
#include "plan/plan_spec.h"
#include "sim/workload/costs.h"

namespace strata::sim {

struct Segment {
  bool is_comm = false;
  // Compute segment.
  std::vector<DetailOp> ops;
  TimeNs duration_ns = 0;
  double flops = 0.0;
  double bytes = 0.0;
  Category category = Category::kElementwise;  // of its longest op
  // Communication segment (a tensor-parallel collective).
  CollectiveOp op = CollectiveOp::kAllReduce;
  double comm_bytes = 0.0;
};

struct BlockSegments {
  std::vector<Segment> forward;
  std::vector<Segment> backward;   // includes selective recompute of the attention core
  std::vector<Segment> recompute;  // full recompute: the forward again, before backward
};

// Segments of one transformer layer, of the embedding and of the output head
// (final norm, logits, loss) on one GPU for one micro-batch. Tensor-parallel
// collectives appear only when tp > 1.
BlockSegments layer_segments(const ModelSpec& m, const PlanSpec& p, const OpCosts& costs);
BlockSegments embedding_segments(const ModelSpec& m, const PlanSpec& p, const OpCosts& costs);
BlockSegments head_segments(const ModelSpec& m, const PlanSpec& p, const OpCosts& costs);

}  // namespace strata::sim
