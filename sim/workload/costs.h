// What the workload builder asks about time: how long a compute op takes on one
// GPU (OpCosts) and what a communication costs on the cluster (CommCosts).
// The simulator backs them with the device profile's cost model and the topology;
// tests back them with hand-computable figures.
#pragma once

#include <string>
#include <vector>

#include "core/collective.h"
#include "core/dtype.h"
#include "core/units.h"
#include "sim/engine/task_graph.h"
#include "sim/workload/task_annotations.h"
#include "plan/layer_ops.h"

namespace strata::sim {

// One fused-attention kernel: q_seq queries against kv_seq keys and values per
// head, over batch_heads heads. Self-attention is the causal square; context
// parallelism's ring steps are unmasked rectangles (the chunks a rank's queries
// see whole).
struct AttentionBlock {
  std::int64_t batch_heads = 0;
  std::int64_t q_seq = 0;
  std::int64_t kv_seq = 0;
  std::int64_t head_dim = 0;
  bool causal = true;
};

class OpCosts {
 public:
  virtual ~OpCosts() = default;
  virtual Duration gemm(const GemmShape& shape, DType dtype) const = 0;
  // A memory-bound op of the layer operation list (a norm, softmax, activation,
  // residual add, cross-entropy, ...) moving `bytes`.
  virtual Duration elementwise(OpRole role, double bytes, DType dtype) const = 0;
  // Fused (flash-style) attention.
  virtual Duration attention(const AttentionBlock& block, bool backward, DType dtype) const = 0;
  // The optimizer update (Adam) streaming `bytes` through device memory.
  virtual Duration optimizer(double bytes) const = 0;
  // A pinned host <-> device copy.
  virtual Duration host_copy(double bytes) const = 0;
  // A copy of `bytes` within device memory, one kernel (read once, written once).
  virtual Duration device_copy(double bytes) const = 0;
  // The optimizer update on the host (offload) for `params` parameters.
  virtual Duration host_optimizer(double params) const = 0;
};

class CommCosts {
 public:
  virtual ~CommCosts() = default;
  // A collective over `group` (global GPU indices in rank order) of `bytes`
  // (nccl-tests' convention).
  virtual CommSpec collective(CollectiveOp op, const std::vector<int>& group, double bytes) const = 0;
  // A point-to-point transfer (pipeline activations or gradients).
  virtual CommSpec p2p(int src_gpu, int dst_gpu, double bytes) const = 0;
  // A collective of a few bytes (the gradient norm's scalars), whose time is its
  // latency: costed without the network (no links), and where a model can, without
  // building its flows.
  virtual CommSpec latency_bound(CollectiveOp op, const std::vector<int>& group, double bytes) const {
    CommSpec spec = collective(op, group, bytes);
    spec.drop_links();
    return spec;
  }
  // A collective that runs alongside `partner` on the same group, on another
  // stream (ZeRO-3's reduce-scatter of one layer and gather of the next): where
  // links are not shared while the step runs (folded fidelity) it shares them with
  // the partner's flows here; where they are (the full engine), as alone.
  virtual CommSpec collective_beside(CollectiveOp op, const std::vector<int>& group, double bytes,
                                     CollectiveOp /*partner*/, double /*partner_bytes*/) const {
    return collective(op, group, bytes);
  }
  // A collective whose time is baked into a compute task (a context-parallel ring
  // step's transfer, a tensor-parallel collective under a GEMM): the engine cannot
  // share its links while the step runs, so at either fidelity it is costed with
  // the links shared up front with the group's copies, as the folded fidelity
  // costs every collective.
  virtual CommSpec baked(CollectiveOp op, const std::vector<int>& group, double bytes) const {
    return collective(op, group, bytes);
  }
};

}  // namespace strata::sim
