#include "sim/costs/profile_op_costs.h"

#include <cmath>

namespace strata::sim {
KernelKind kernel_kind_of(OpRole role) {
  switch (role) {
    case OpRole::kNorm: return KernelKind::kNorm;
    case OpRole::kSoftmax:
    case OpRole::kCrossEntropy: return KernelKind::kSoftmax;  // both a row-wise softmax
    case OpRole::kActivation: return KernelKind::kActivation;
    case OpRole::kResidual: return KernelKind::kResidual;
    case OpRole::kDropout:
    case OpRole::kEmbedding: return KernelKind::kElementwise;
    case OpRole::kPermute:
    case OpRole::kSortChunks:
    case OpRole::kMlaRope: return KernelKind::kCopy;  // rows gathered or scattered, Q/K assembled: a copy's traffic
    // GEMMs and attention are costed by their own models, not as memory-bound kernels.
    case OpRole::kQkv:
    case OpRole::kProj:
    case OpRole::kFc1:
    case OpRole::kFc2:
    case OpRole::kLogits:
    case OpRole::kAttnScores:
    case OpRole::kAttnValues:
    case OpRole::kFlashAttention:
    case OpRole::kRouter:
    case OpRole::kExpertFc1:
    case OpRole::kExpertFc2:
    case OpRole::kMlaDown:
    case OpRole::kMlaUp: break;
  }
  return KernelKind::kElementwise;
}

Duration ProfileOpCosts::gemm(const GemmShape& s, DType dtype) const {
  return Duration::from_seconds(model_.gemm_seconds(GemmQuery{s.m, s.n, s.k, s.batch, dtype}));
}

Duration ProfileOpCosts::elementwise(OpRole role, double bytes, DType dtype) const {
  return Duration::from_seconds(model_.kernel_seconds(kernel_kind_of(role), bytes, dtype));
}

Duration ProfileOpCosts::attention(const AttentionBlock& block, bool backward, DType dtype) const {
  AttentionQuery q;
  q.batch_heads = block.batch_heads;
  q.seq = block.q_seq;
  q.kv_seq = block.kv_seq;
  q.head_dim = block.head_dim;
  q.causal = block.causal;
  q.backward = backward;
  q.dtype = dtype;
  if (kernel_ != nullptr) {
    // The benchmarks' rates are whole-kernel times at their shapes: no overhead added.
    const auto seq = static_cast<std::int64_t>(std::llround(attention_rate_seq(q)));
    if (auto rate = kernel_->rate(device_, q.causal, q.head_dim, seq, backward)) {
      return Duration::from_seconds(attention_flops(q) / rate->flops_per_s);
    }
  }
  return Duration::from_seconds(model_.attention_seconds(q));
}

Duration ProfileOpCosts::optimizer(double bytes) const {
  return Duration::from_seconds(model_.kernel_seconds(KernelKind::kAdam, bytes, DType::kFp32));
}

Duration ProfileOpCosts::host_copy(double bytes) const {
  return Duration::from_seconds(model_.host_copy_seconds(bytes));
}

Duration ProfileOpCosts::device_copy(double bytes) const {
  return Duration::from_seconds(model_.kernel_seconds(KernelKind::kCopy, 2.0 * bytes, DType::kFp32));
}

Duration ProfileOpCosts::host_optimizer(double params) const {
  return Duration::from_seconds(params * kHostOptimizerBytesPerParam / kHostOptimizerBytesPerSecond);
}

}  // namespace strata::sim
