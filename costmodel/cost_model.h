// The one API through which the simulator costs work on a device.
//
// Every method answers for any profile. Without measurements (the shipped
// datasheet profiles) it evaluates datasheet models:
//   GEMM        max(wave-quantized FLOPs / (peak * max_efficiency),
//                   bytes / (bandwidth * memory efficiency)) + per-call overhead
//   memory-bound bytes / (bandwidth * efficiency) + overhead
//   attention   FLOPs / (peak * forward or backward efficiency) + overhead
//   host copy   latency + bytes / (PCIe bandwidth * efficiency)
// With measurements (`strata calibrate`) it interpolates them:
//   GEMM        the achieved efficiency (ideal wave-quantized roofline time /
//               measured time) interpolated in log space over the measured
//               shapes, then applied to the query's own wave-quantized roofline,
//               so unmeasured shapes near a wave boundary keep their step;
//   memory-bound, host copy, collectives: time over size per kernel kind,
//               direction, or (operation, group size, placement) - see size_curve.h.
// A missing section means the plain peak roofline (efficiency 1, no overhead).
//
// Thread safety: all methods are const and safe to call concurrently. Measured
// GEMM times are memoized per shape (a simulation asks for the same few shapes
// millions of times); copies of a CostModel share that cache.
#pragma once

#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <unordered_map>
#include <string>
#include <vector>

#include "costmodel/cost_queries.h"
#include "costmodel/cost_sections.h"
#include "costmodel/log_interpolator.h"
#include "costmodel/profile.h"
#include "core/collective.h"

namespace strata {

// Where one section's figures come from, for printing beside a prediction.
struct SectionOrigin {
  std::string section;   // "gemm", "memory_bound", "attention", "host_copy", "collectives"
  std::string origin;    // "measured", "datasheet" or "absent"
  std::string summary;   // one line: the parameters or what was measured
};

class CostModel {
 public:
  // Parses and checks the profile's cost sections; the profile is copied.
  // Throws InputError (profile file, JSON path) on a bad section.
  explicit CostModel(const Profile& profile);

  // Seconds for one (batched) GEMM. Zero-sized GEMMs cost nothing.
  double gemm_seconds(const GemmQuery& q) const;
  // Seconds for a memory-bound kernel that reads and writes `bytes` in total.
  // Measured: the kind's curve, else the "elementwise" then "copy" curve, else
  // the datasheet model. Bytes already reflect the dtype, which is not otherwise used.
  double kernel_seconds(KernelKind kind, double bytes, DType dtype) const;
  // Seconds for fused flash-style attention.
  double attention_seconds(const AttentionQuery& q) const;
  // Seconds to copy `bytes` between pinned host memory and the device: the
  // mean of both directions when measured. Throws InputError when the profile
  // has neither a measured copy nor a PCIe bandwidth.
  double host_copy_seconds(double bytes) const;
  // Measured collective time when the profile measured (op, group size,
  // placement); nullopt otherwise. bytes follow nccl-tests (core/collective.h).
  std::optional<double> collective_seconds(CollectiveOp op, int group_size, bool inter_node,
                                           double bytes) const;
  // Measured large-message busbw / the reference busbw the profile states for
  // the placement (taken at the largest measured group size and message);
  // nullopt when not measured or without a reference.
  std::optional<double> collective_efficiency(CollectiveOp op, bool inter_node) const;
  // True when the section ("gemm", "memory_bound", "attention", "host_copy",
  // "collectives") holds measurements.
  bool calibrated(const std::string& section) const;
  // Origin and a one-line summary of every cost section, in a fixed order.
  std::vector<SectionOrigin> origins() const;
  // Held-out fit quality per section, as the profile records it (empty for datasheet profiles).
  const std::map<std::string, FitError>& fit_quality() const { return fit_quality_; }
  const std::optional<Provenance>& provenance() const { return provenance_; }
  const std::optional<RankSpread>& rank_spread() const { return rank_spread_; }

  const Profile& profile() const { return profile_; }
  const std::optional<GemmSection>& gemm_section() const { return gemm_; }
  const std::optional<MemoryBoundSection>& memory_bound_section() const { return memory_bound_; }
  const std::optional<AttentionSection>& attention_section() const { return attention_; }
  const std::optional<HostCopySection>& host_copy_section() const { return host_copy_; }
  const std::optional<CollectivesSection>& collectives_section() const { return collectives_; }

  // The datasheet GEMM time (ignoring measurements): exposed for fitting and tests.
  double datasheet_gemm_seconds(const GemmQuery& q) const;
  // The ideal roofline of a GEMM: max(wave-quantized time at peak, bytes at full
  // bandwidth). Measured efficiencies are this time over the measured time.
  double ideal_gemm_seconds(const GemmQuery& q) const;

 private:
  struct AttentionGroup {
    DType dtype;
    bool backward;
    bool causal;
    LogInterpolator log_efficiency;  // over log2 (batch_heads, seq, head_dim)
  };

  const LogInterpolator* gemm_interpolator(DType dtype) const;
  const AttentionGroup* attention_group(DType dtype, bool backward, bool causal) const;
  double memory_efficiency() const;
  // Wave-quantized compute time at peak (plain FLOPs / peak without a gemm section).
  double peak_compute_seconds(const GemmQuery& q) const;
  // The device's peak for dtype; InputError naming the profile when it has none.
  double peak_flops(DType dtype) const;

  // Constant after construction.
  Profile profile_;
  std::optional<GemmSection> gemm_;
  std::optional<MemoryBoundSection> memory_bound_;
  std::optional<AttentionSection> attention_;
  std::optional<HostCopySection> host_copy_;
  std::optional<CollectivesSection> collectives_;
  std::map<std::string, FitError> fit_quality_;
  std::optional<Provenance> provenance_;
  std::optional<RankSpread> rank_spread_;
  std::map<DType, LogInterpolator> gemm_log_efficiency_;  // over log2 (m, n, k, batch)
  std::vector<AttentionGroup> attention_groups_;

  // Memo of interpolated GEMM times, keyed by shape and dtype.
  struct GemmCache {
    std::mutex mutex;
    std::unordered_map<std::string, double> seconds;
  };
  std::shared_ptr<GemmCache> gemm_cache_ = std::make_shared<GemmCache>();
};

// log2 coordinates of a GEMM shape for interpolation: (m, n, k, batch).
Eigen::VectorXd gemm_log_coords(const GemmQuery& q);
// log2 coordinates of an attention shape: (batch_heads, seq, head_dim).
Eigen::VectorXd attention_log_coords(const AttentionQuery& q);

}  // namespace strata
