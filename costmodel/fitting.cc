#include "costmodel/fitting.h"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "costmodel/cost_model.h"
#include "costmodel/size_curve.h"
#include "core/error.h"

namespace strata {
namespace {

void check_positive(double seconds, const char* what) {
  if (!(seconds > 0.0) || !std::isfinite(seconds)) {
    throw InternalError(fmt::format("{}: measured time must be positive, got {}", what, seconds));
  }
}

std::vector<SizePoint> sorted_points(std::vector<SizePoint> points, const char* what) {
  std::sort(points.begin(), points.end(),
            [](const SizePoint& a, const SizePoint& b) { return a.bytes < b.bytes; });
  for (std::size_t i = 0; i < points.size(); ++i) {
    check_positive(points[i].seconds, what);
    if (i > 0 && points[i].bytes == points[i - 1].bytes) {
      throw InternalError(fmt::format("{}: two measurements of {} bytes", what, points[i].bytes));
    }
  }
  return points;
}

// The curve refitted on the points kept for training.
SizeCurveData training_curve(const SizeCurveData& full) {
  std::vector<SizePoint> kept;
  for (std::size_t i = 0; i < full.points.size(); ++i) {
    if (!held_out_curve_point(i, full.points.size())) kept.push_back(full.points[i]);
  }
  return make_size_curve(std::move(kept));
}

// Relative errors of a curve's held-out points predicted by its training curve.
void curve_errors(const SizeCurveData& full, std::vector<double>& errors) {
  if (full.points.size() < 3) return;
  const SizeCurveData train = training_curve(full);
  for (std::size_t i = 0; i < full.points.size(); ++i) {
    if (!held_out_curve_point(i, full.points.size())) continue;
    const SizePoint& p = full.points[i];
    errors.push_back(std::abs(curve_seconds(train, p.bytes) - p.seconds) / p.seconds);
  }
}

FitError summarize(std::vector<double> errors) {
  FitError e;
  e.held_out = static_cast<int>(errors.size());
  std::sort(errors.begin(), errors.end());
  const std::size_t n = errors.size();
  e.median_rel_error = n % 2 == 1 ? errors[n / 2] : 0.5 * (errors[n / 2 - 1] + errors[n / 2]);
  e.max_rel_error = errors.back();
  return e;
}

template <typename T>
nlohmann::json as_json(const T& section) {
  return nlohmann::json::parse(to_json(section).dump());
}

}  // namespace

GemmSection measured_gemm_section(GemmSection base, std::map<DType, std::vector<GemmPoint>> points) {
  for (const auto& [dtype, pts] : points) {
    if (pts.empty()) throw InternalError(fmt::format("no {} GEMMs measured", to_string(dtype)));
    for (const GemmPoint& p : pts) {
      check_positive(p.seconds, "GEMM");
      if (p.m <= 0 || p.n <= 0 || p.k <= 0 || p.batch <= 0) {
        throw InternalError(fmt::format("GEMM {}x{}x{} batch {} has an empty dimension", p.m, p.n,
                                        p.k, p.batch));
      }
    }
  }
  if (points.empty()) throw InternalError("no GEMMs measured");
  base.origin = Origin::kMeasured;
  base.measured = std::move(points);
  return base;
}

MemoryBoundSection measured_memory_bound_section(
    MemoryBoundSection base, const std::map<KernelKind, std::vector<SizePoint>>& curves) {
  if (curves.empty()) throw InternalError("no memory-bound kernels measured");
  base.origin = Origin::kMeasured;
  base.measured.clear();
  for (const auto& [kind, pts] : curves) {
    base.measured[kind] = make_size_curve(sorted_points(pts, to_string(kind)));
  }
  return base;
}

AttentionSection measured_attention_section(AttentionSection base, std::vector<AttentionPoint> points) {
  if (points.empty()) throw InternalError("no attention measured");
  for (const AttentionPoint& a : points) check_positive(a.seconds, "attention");
  base.origin = Origin::kMeasured;
  base.measured = std::move(points);
  return base;
}

HostCopySection measured_host_copy_section(HostCopySection base, std::vector<SizePoint> host_to_device,
                                           std::vector<SizePoint> device_to_host) {
  if (host_to_device.empty() && device_to_host.empty()) throw InternalError("no host copies measured");
  base.origin = Origin::kMeasured;
  if (!host_to_device.empty()) {
    base.host_to_device = make_size_curve(sorted_points(std::move(host_to_device), "host_to_device"));
  }
  if (!device_to_host.empty()) {
    base.device_to_host = make_size_curve(sorted_points(std::move(device_to_host), "device_to_host"));
  }
  return base;
}

CollectivesSection measured_collectives_section(const std::vector<CollectiveMeasurement>& measured,
                                                double reference_intra_node_busbw_bytes_per_s,
                                                double reference_inter_node_busbw_bytes_per_s,
                                                std::map<std::string, std::string> sources) {
  if (measured.empty()) throw InternalError("no collectives measured");
  CollectivesSection s;
  s.origin = Origin::kMeasured;
  s.reference_intra_node_busbw_bytes_per_s = reference_intra_node_busbw_bytes_per_s;
  s.reference_inter_node_busbw_bytes_per_s = reference_inter_node_busbw_bytes_per_s;
  s.sources = std::move(sources);
  for (const CollectiveMeasurement& m : measured) {
    CollectiveCurve c;
    c.op = m.op;
    c.group_size = m.group_size;
    c.inter_node = m.inter_node;
    c.curve = make_size_curve(sorted_points(m.points, to_string(m.op)));
    s.measured.push_back(std::move(c));
  }
  return s;
}

bool held_out_gemm_point(std::size_t index) { return index % 5 == 2; }

bool held_out_curve_point(std::size_t index, std::size_t count) {
  return index % 3 == 1 && index + 1 < count;
}

std::map<std::string, FitError> held_out_quality(const Profile& profile) {
  const CostModel full(profile);
  std::map<std::string, FitError> out;

  if (full.calibrated("gemm")) {
    const GemmSection& g = *full.gemm_section();
    GemmSection train = g;
    std::vector<std::pair<GemmQuery, double>> held;
    for (auto& [dtype, pts] : train.measured) {
      std::vector<GemmPoint> kept;
      for (std::size_t i = 0; i < pts.size(); ++i) {
        if (held_out_gemm_point(i) && pts.size() > 2) {
          held.push_back({GemmQuery{pts[i].m, pts[i].n, pts[i].k, pts[i].batch, dtype}, pts[i].seconds});
        } else {
          kept.push_back(pts[i]);
        }
      }
      pts = std::move(kept);
    }
    if (!held.empty()) {
      Profile p = profile;
      p.cost_sections["gemm"] = as_json(train);
      const CostModel model(p);
      std::vector<double> errors;
      for (const auto& [q, t] : held) errors.push_back(std::abs(model.gemm_seconds(q) - t) / t);
      out["gemm"] = summarize(std::move(errors));
    }
  }

  if (full.calibrated("attention")) {
    const AttentionSection& a = *full.attention_section();
    AttentionSection train = a;
    train.measured.clear();
    std::vector<const AttentionPoint*> held;
    for (std::size_t i = 0; i < a.measured.size(); ++i) {
      if (held_out_gemm_point(i) && a.measured.size() > 2) {
        held.push_back(&a.measured[i]);
      } else {
        train.measured.push_back(a.measured[i]);
      }
    }
    if (!held.empty()) {
      Profile p = profile;
      p.cost_sections["attention"] = as_json(train);
      const CostModel model(p);
      std::vector<double> errors;
      for (const AttentionPoint* h : held) {
        const AttentionQuery q{h->batch_heads, h->seq, h->head_dim, h->causal, h->backward, h->dtype};
        errors.push_back(std::abs(model.attention_seconds(q) - h->seconds) / h->seconds);
      }
      out["attention"] = summarize(std::move(errors));
    }
  }

  auto curves_quality = [&out](const std::string& name, const std::vector<const SizeCurveData*>& curves) {
    std::vector<double> errors;
    for (const SizeCurveData* c : curves) curve_errors(*c, errors);
    if (!errors.empty()) out[name] = summarize(std::move(errors));
  };
  if (full.calibrated("memory_bound")) {
    std::vector<const SizeCurveData*> curves;
    for (const auto& [kind, c] : full.memory_bound_section()->measured) curves.push_back(&c);
    curves_quality("memory_bound", curves);
  }
  if (full.calibrated("host_copy")) {
    std::vector<const SizeCurveData*> curves;
    const HostCopySection& h = *full.host_copy_section();
    if (h.host_to_device) curves.push_back(&*h.host_to_device);
    if (h.device_to_host) curves.push_back(&*h.device_to_host);
    curves_quality("host_copy", curves);
  }
  if (full.calibrated("collectives")) {
    std::vector<const SizeCurveData*> curves;
    for (const CollectiveCurve& c : full.collectives_section()->measured) curves.push_back(&c.curve);
    curves_quality("collectives", curves);
  }
  return out;
}

std::map<std::string, double> median_spread(const Profile& profile) {
  const CostModel model(profile);
  std::map<std::string, std::vector<double>> spreads;
  if (model.calibrated("gemm")) {
    for (const auto& [dtype, pts] : model.gemm_section()->measured) {
      for (const GemmPoint& p : pts) spreads["gemm"].push_back(p.spread);
    }
  }
  if (model.calibrated("attention")) {
    for (const AttentionPoint& a : model.attention_section()->measured) spreads["attention"].push_back(a.spread);
  }
  auto add_curve = [&spreads](const std::string& name, const SizeCurveData& c) {
    for (const SizePoint& p : c.points) spreads[name].push_back(p.spread);
  };
  if (model.calibrated("memory_bound")) {
    for (const auto& [kind, c] : model.memory_bound_section()->measured) add_curve("memory_bound", c);
  }
  if (model.calibrated("host_copy")) {
    if (model.host_copy_section()->host_to_device) add_curve("host_copy", *model.host_copy_section()->host_to_device);
    if (model.host_copy_section()->device_to_host) add_curve("host_copy", *model.host_copy_section()->device_to_host);
  }
  if (model.calibrated("collectives")) {
    for (const CollectiveCurve& c : model.collectives_section()->measured) add_curve("collectives", c.curve);
  }
  std::map<std::string, double> out;
  for (auto& [name, v] : spreads) {
    std::sort(v.begin(), v.end());
    const std::size_t n = v.size();
    out[name] = n % 2 == 1 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
  }
  return out;
}

}  // namespace strata
