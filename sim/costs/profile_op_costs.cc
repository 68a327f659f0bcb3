#include "sim/costs/profile_op_costs.h"

namespace strata::sim {
namespace {
bool contains(const std::string& s, const char* part) { return s.find(part) != std::string::npos; }
}  // namespace

KernelKind kernel_kind_of(const std::string& name) {
  if (contains(name, "norm")) return KernelKind::kNorm;
  if (contains(name, "softmax") || contains(name, "cross_entropy")) return KernelKind::kSoftmax;
  if (contains(name, "gelu") || contains(name, "swiglu")) return KernelKind::kActivation;
  if (contains(name, "residual")) return KernelKind::kResidual;
  return KernelKind::kElementwise;
}

TimeNs ProfileOpCosts::gemm_ns(const GemmShape& s, DType dtype) const {
  return seconds_to_ns(model_.gemm_seconds(GemmQuery{s.m, s.n, s.k, s.batch, dtype}));
}

TimeNs ProfileOpCosts::elementwise_ns(const std::string& op_name, double bytes, DType dtype) const {
  return seconds_to_ns(model_.kernel_seconds(kernel_kind_of(op_name), bytes, dtype));
}

TimeNs ProfileOpCosts::attention_ns(std::int64_t batch_heads, std::int64_t seq, std::int64_t head_dim,
                                    bool backward, DType dtype) const {
  AttentionQuery q;
  q.batch_heads = batch_heads;
  q.seq = seq;
  q.head_dim = head_dim;
  q.causal = true;  // decoder-only language models
  q.backward = backward;
  q.dtype = dtype;
  return seconds_to_ns(model_.attention_seconds(q));
}

TimeNs ProfileOpCosts::optimizer_ns(double bytes) const {
  return seconds_to_ns(model_.kernel_seconds(KernelKind::kAdam, bytes, DType::kFp32));
}

TimeNs ProfileOpCosts::host_copy_ns(double bytes) const {
  return seconds_to_ns(model_.host_copy_seconds(bytes));
}

TimeNs ProfileOpCosts::host_optimizer_ns(double params) const {
  return seconds_to_ns(params * kHostOptimizerBytesPerParam / kHostOptimizerBytesPerSecond);
}

}  // namespace strata::sim
