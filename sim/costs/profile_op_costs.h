// OpCosts backed by a device profile's cost model (costmodel/cost_model.h):
// datasheet rooflines for shipped profiles, measured curves after `strata calibrate`.
#pragma once

#include <string>
#include <utility>

#include "costmodel/attention_kernel.h"
#include "costmodel/cost_model.h"
#include "sim/workload/costs.h"

namespace strata::sim {

// Named assumption for the offloaded optimizer (no profile measures the host):
// DeepSpeed's CPU-Adam streams 28 bytes per parameter through host DRAM at this
// share of the node's DRAM bandwidth per GPU. A dual-socket DGX-class host has
// ~400 GB/s of DDR4-3200 (16 channels x 25.6 GB/s), ~50 GB/s per GPU; a vectorised
// Adam reaches about half of it.
inline constexpr double kHostOptimizerBytesPerSecond = 25e9;
inline constexpr double kHostOptimizerBytesPerParam = 28.0;

class ProfileOpCosts : public OpCosts {
 public:
  explicit ProfileOpCosts(const CostModel& model) : model_(model) {}
  // Fused attention at the rate `kernel` was measured at on `device` where it was
  // measured there; the profile's attention model elsewhere.
  ProfileOpCosts(const CostModel& model, const AttentionKernel* kernel, std::string device)
      : model_(model), kernel_(kernel), device_(std::move(device)) {}
  Duration gemm(const GemmShape& shape, DType dtype) const override;
  Duration elementwise(OpRole role, double bytes, DType dtype) const override;
  Duration attention(const AttentionBlock& block, bool backward, DType dtype) const override;
  Duration optimizer(double bytes) const override;
  Duration host_copy(double bytes) const override;
  Duration device_copy(double bytes) const override;
  Duration host_optimizer(double params) const override;

 private:
  const CostModel& model_;
  const AttentionKernel* kernel_ = nullptr;
  std::string device_;
};

// The memory-bound kernel kind of a layer op (kNorm for a norm, ...).
KernelKind kernel_kind_of(OpRole role);

}  // namespace strata::sim
