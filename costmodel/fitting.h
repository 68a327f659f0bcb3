// Turning measurements into measured cost-model sections, and judging the fit on
// measurements held out of it.
//
// A measured section keeps the datasheet section's parameters (tile sizes,
// efficiencies, sources) as the fall-back for what was not measured, and adds
// the measurements; the models themselves (log-space interpolation, size curves
// with alpha-beta lines) are evaluated by CostModel.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "costmodel/cost_sections.h"
#include "costmodel/profile.h"

namespace strata {

// Measurements of one collective over message sizes (any order, distinct sizes).
struct CollectiveMeasurement {
  CollectiveOp op = CollectiveOp::kAllReduce;
  int group_size = 2;
  bool inter_node = false;
  std::vector<SizePoint> points;
};

// base: the datasheet section (or a default one) whose parameters are kept.
// Throws InternalError on empty or invalid measurements (non-positive times).
GemmSection measured_gemm_section(GemmSection base, std::map<DType, std::vector<GemmPoint>> points);
MemoryBoundSection measured_memory_bound_section(
    MemoryBoundSection base, const std::map<KernelKind, std::vector<SizePoint>>& curves);
AttentionSection measured_attention_section(AttentionSection base, std::vector<AttentionPoint> points);
HostCopySection measured_host_copy_section(HostCopySection base, std::vector<SizePoint> host_to_device,
                                           std::vector<SizePoint> device_to_host);
// reference_*: the busbw the datasheet model assumes per placement (0: unknown).
CollectivesSection measured_collectives_section(const std::vector<CollectiveMeasurement>& measured,
                                                double reference_intra_node_busbw_bytes_per_s,
                                                double reference_inter_node_busbw_bytes_per_s,
                                                std::map<std::string, std::string> sources);

// Which measurements are held out of the fit to judge it (deterministic):
// GEMM and attention points with index % 5 == 2; size-curve points with
// index % 3 == 1 except the last (the ends of a curve fix its range).
bool held_out_gemm_point(std::size_t index);
bool held_out_curve_point(std::size_t index, std::size_t count);

// For every measured section of `profile`: refits without the held-out
// measurements, predicts them, and reports the median and maximum relative
// error |predicted - measured| / measured. Sections with nothing to hold out
// are left out.
std::map<std::string, FitError> held_out_quality(const Profile& profile);

// Per measured section, the median over its measurements of their spread
// (relative interquartile range of the repeats): how noisy the timings were.
std::map<std::string, double> median_spread(const Profile& profile);

}  // namespace strata
