#include "costmodel/cost_model.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include <fmt/format.h>

#include "costmodel/size_curve.h"
#include "core/error.h"

namespace strata {
namespace {

// Other dtypes whose measurements or figures stand in for a dtype the profile
// lacks, best first: fp16 and bf16 run on the same tensor-core paths, as do
// tf32 and fp32 storage.
std::vector<DType> dtype_fallbacks(DType d) {
  switch (d) {
    case DType::kBf16: return {DType::kBf16, DType::kFp16};
    case DType::kFp16: return {DType::kFp16, DType::kBf16};
    case DType::kTf32: return {DType::kTf32, DType::kFp32};
    case DType::kFp32: return {DType::kFp32, DType::kTf32};
  }
  return {d};
}

template <typename T>
const T* find_dtype(const std::map<DType, T>& m, DType d) {
  for (DType c : dtype_fallbacks(d)) {
    auto it = m.find(c);
    if (it != m.end()) return &it->second;
  }
  return nullptr;
}

std::string eff_list(const std::map<DType, double>& m) {
  std::string out;
  for (const auto& [d, e] : m) {
    if (!out.empty()) out += ", ";
    out += fmt::format("{} {:.2f}", to_string(d), e);
  }
  return out;
}

}  // namespace

Eigen::VectorXd gemm_log_coords(const GemmQuery& q) {
  Eigen::VectorXd x(4);
  x << std::log2(static_cast<double>(q.m)), std::log2(static_cast<double>(q.n)),
      std::log2(static_cast<double>(q.k)), std::log2(static_cast<double>(q.batch));
  return x;
}

Eigen::VectorXd attention_log_coords(const AttentionQuery& q) {
  Eigen::VectorXd x(3);
  x << std::log2(static_cast<double>(q.batch_heads)), std::log2(attention_rate_seq(q)),
      std::log2(static_cast<double>(q.head_dim));
  return x;
}

CostModel::CostModel(const Profile& profile) : profile_(profile) {
  const nlohmann::json& cs = profile_.cost_sections;
  const std::string& file = profile_.file;
  if (cs.contains("gemm")) gemm_ = read_gemm_section(cs["gemm"], file, "$.gemm");
  if (cs.contains("memory_bound")) {
    memory_bound_ = read_memory_bound_section(cs["memory_bound"], file, "$.memory_bound");
  }
  if (cs.contains("attention")) {
    attention_ = read_attention_section(cs["attention"], file, "$.attention");
  }
  if (cs.contains("host_copy")) {
    host_copy_ = read_host_copy_section(cs["host_copy"], file, "$.host_copy");
  }
  if (cs.contains("collectives")) {
    collectives_ = read_collectives_section(cs["collectives"], file, "$.collectives");
  }
  if (cs.contains("fit_quality")) {
    fit_quality_ = read_fit_quality(cs["fit_quality"], file, "$.fit_quality");
  }
  if (cs.contains("rank_spread")) rank_spread_ = read_rank_spread(cs["rank_spread"], file, "$.rank_spread");
  if (cs.contains("provenance")) {
    provenance_ = read_provenance(cs["provenance"], file, "$.provenance");
  }
  if (host_copy_ && !host_copy_->host_to_device && !host_copy_->device_to_host &&
      !(profile_.device.pcie_bandwidth_bytes_per_s > 0.0)) {
    throw InputError(file, "$.device.pcie_gbytes_per_s",
                     "the datasheet host_copy model needs the host link bandwidth (> 0)");
  }

  if (gemm_) {
    for (const auto& [dtype, points] : gemm_->measured) {
      const std::string path = fmt::format("$.gemm.measured.{}", to_string(dtype));
      try {
        profile_.device.peak_flops(dtype);
      } catch (const InternalError&) {
        throw InputError(file, path,
                         fmt::format("$.device.peak_tflops has no {} peak to relate these to",
                                     to_string(dtype)));
      }
      Eigen::MatrixXd coords(static_cast<Eigen::Index>(points.size()), 4);
      Eigen::VectorXd values(static_cast<Eigen::Index>(points.size()));
      for (std::size_t i = 0; i < points.size(); ++i) {
        const GemmPoint& p = points[i];
        const GemmQuery q{p.m, p.n, p.k, p.batch, dtype};
        const auto row = static_cast<Eigen::Index>(i);
        coords.row(row) = gemm_log_coords(q).transpose();
        values(row) = std::log(ideal_gemm_seconds(q) / p.seconds);
      }
      gemm_log_efficiency_.emplace(dtype, LogInterpolator(std::move(coords), std::move(values)));
    }
  }
  if (attention_) {
    for (DType dtype : {DType::kBf16, DType::kFp16, DType::kFp32, DType::kTf32}) {
      for (bool backward : {false, true}) {
        for (bool causal : {false, true}) {
          std::vector<const AttentionPoint*> pts;
          for (const AttentionPoint& a : attention_->measured) {
            if (a.dtype == dtype && a.backward == backward && a.causal == causal) pts.push_back(&a);
          }
          if (pts.empty()) continue;
          double peak = 0.0;
          try {
            peak = profile_.device.peak_flops(dtype);
          } catch (const InternalError&) {
            throw InputError(file, "$.attention.measured",
                             fmt::format("$.device.peak_tflops has no {} peak to relate these to",
                                         to_string(dtype)));
          }
          Eigen::MatrixXd coords(static_cast<Eigen::Index>(pts.size()), 3);
          Eigen::VectorXd values(static_cast<Eigen::Index>(pts.size()));
          for (std::size_t i = 0; i < pts.size(); ++i) {
            const AttentionPoint& a = *pts[i];
            const AttentionQuery q{a.batch_heads, a.seq, a.head_dim, a.causal, a.backward, a.dtype};
            const auto row = static_cast<Eigen::Index>(i);
            coords.row(row) = attention_log_coords(q).transpose();
            values(row) = std::log(attention_flops(q) / (peak * a.seconds));
          }
          attention_groups_.push_back(
              {dtype, backward, causal, LogInterpolator(std::move(coords), std::move(values))});
        }
      }
    }
  }
}

double CostModel::peak_flops(DType dtype) const {
  try {
    return profile_.device.peak_flops(dtype);
  } catch (const InternalError&) {
    throw InputError(profile_.file, "$.device.peak_tflops",
                     fmt::format("has no {} peak, which the work asks for", to_string(dtype)));
  }
}

double CostModel::memory_efficiency() const {
  return memory_bound_ ? memory_bound_->efficiency : 1.0;
}

double CostModel::peak_compute_seconds(const GemmQuery& q) const {
  if (!gemm_) return gemm_flops(q) / peak_flops(q.dtype);
  return quantized_compute_seconds(q, gemm_->tile_m, gemm_->tile_n, profile_.device.compute_units,
                                   peak_flops(q.dtype));
}

double CostModel::ideal_gemm_seconds(const GemmQuery& q) const {
  const double compute = peak_compute_seconds(q);
  const double memory = gemm_bytes(q) / profile_.device.memory_bandwidth_bytes_per_s;
  return std::max(compute, memory);
}

double CostModel::datasheet_gemm_seconds(const GemmQuery& q) const {
  double efficiency = 1.0;
  if (gemm_) {
    const double* e = find_dtype(gemm_->max_efficiency, q.dtype);
    if (e == nullptr) {
      throw InputError(profile_.file, "$.gemm.max_efficiency",
                       fmt::format("has no efficiency for {} (has: {})", to_string(q.dtype),
                                   eff_list(gemm_->max_efficiency)));
    }
    efficiency = *e;
  }
  const double compute = peak_compute_seconds(q) / efficiency;
  const double memory =
      gemm_bytes(q) / (profile_.device.memory_bandwidth_bytes_per_s * memory_efficiency());
  return std::max(compute, memory) + (gemm_ ? gemm_->overhead_s : 0.0);
}

const LogInterpolator* CostModel::gemm_interpolator(DType dtype) const {
  if (gemm_log_efficiency_.empty()) return nullptr;
  if (const LogInterpolator* exact = find_dtype(gemm_log_efficiency_, dtype)) return exact;
  // A measured efficiency curve of another dtype is closer to this device than
  // a datasheet constant (the cpu backend measures fp32 only).
  return &gemm_log_efficiency_.begin()->second;
}

double CostModel::gemm_seconds(const GemmQuery& q) const {
  if (q.m <= 0 || q.n <= 0 || q.k <= 0 || q.batch <= 0) return 0.0;
  if (const LogInterpolator* interp = gemm_interpolator(q.dtype)) {
    std::string key(sizeof(std::int64_t) * 4 + 1, '\0');
    const std::int64_t dims[4] = {q.m, q.n, q.k, q.batch};
    std::memcpy(key.data(), dims, sizeof dims);
    key.back() = static_cast<char>(q.dtype);
    {
      std::lock_guard<std::mutex> lock(gemm_cache_->mutex);
      auto it = gemm_cache_->seconds.find(key);
      if (it != gemm_cache_->seconds.end()) return it->second;
    }
    const double efficiency = std::exp(interp->evaluate(gemm_log_coords(q)));
    const double seconds = ideal_gemm_seconds(q) / efficiency;
    std::lock_guard<std::mutex> lock(gemm_cache_->mutex);
    gemm_cache_->seconds.emplace(std::move(key), seconds);
    return seconds;
  }
  return datasheet_gemm_seconds(q);
}

double CostModel::kernel_seconds(KernelKind kind, double bytes, DType /*dtype*/) const {
  if (!(bytes > 0.0)) return 0.0;
  if (memory_bound_ && !memory_bound_->measured.empty()) {
    for (KernelKind k : {kind, KernelKind::kElementwise, KernelKind::kCopy}) {
      auto it = memory_bound_->measured.find(k);
      if (it != memory_bound_->measured.end()) return curve_seconds(it->second, bytes);
    }
  }
  const double overhead = memory_bound_ ? memory_bound_->overhead_s : 0.0;
  return bytes / (profile_.device.memory_bandwidth_bytes_per_s * memory_efficiency()) + overhead;
}

const CostModel::AttentionGroup* CostModel::attention_group(DType dtype, bool backward,
                                                            bool causal) const {
  // Same pass first; a causal query may use non-causal measurements and vice
  // versa (efficiency is relative to the FLOPs actually done); then other dtypes.
  for (DType d : dtype_fallbacks(dtype)) {
    for (bool c : {causal, !causal}) {
      for (const AttentionGroup& g : attention_groups_) {
        if (g.dtype == d && g.backward == backward && g.causal == c) return &g;
      }
    }
  }
  for (const AttentionGroup& g : attention_groups_) {
    if (g.backward == backward) return &g;
  }
  return nullptr;
}

double CostModel::attention_seconds(const AttentionQuery& q) const {
  if (q.batch_heads <= 0 || q.seq <= 0 || q.head_dim <= 0) return 0.0;
  const double peak = peak_flops(q.dtype);
  const double flops = attention_flops(q);
  if (const AttentionGroup* g = attention_group(q.dtype, q.backward, q.causal)) {
    const double efficiency = std::exp(g->log_efficiency.evaluate(attention_log_coords(q)));
    return flops / (peak * efficiency);
  }
  if (!attention_) return flops / peak;
  const double efficiency =
      q.backward ? attention_->backward_efficiency : attention_->forward_efficiency;
  return flops / (peak * efficiency) + attention_->overhead_s;
}

double CostModel::host_copy_seconds(double bytes) const {
  if (!(bytes > 0.0)) return 0.0;
  if (host_copy_ && (host_copy_->host_to_device || host_copy_->device_to_host)) {
    double sum = 0.0;
    int n = 0;
    for (const auto* c : {&host_copy_->host_to_device, &host_copy_->device_to_host}) {
      if (*c) {
        sum += curve_seconds(**c, bytes);
        ++n;
      }
    }
    return sum / n;
  }
  const double pcie = profile_.device.pcie_bandwidth_bytes_per_s;
  if (!(pcie > 0.0)) {
    throw InputError(profile_.file, "$.device.pcie_gbytes_per_s",
                     "host-device copies (optimizer offload) need the host link bandwidth; the "
                     "profile has none and no measured host_copy section");
  }
  const double efficiency = host_copy_ ? host_copy_->efficiency : 1.0;
  const double latency = host_copy_ ? host_copy_->latency_s : 0.0;
  return latency + bytes / (pcie * efficiency);
}

std::optional<double> CostModel::collective_seconds(CollectiveOp op, int group_size,
                                                    bool inter_node, double bytes) const {
  if (!collectives_) return std::nullopt;
  for (const CollectiveCurve& c : collectives_->measured) {
    if (c.op == op && c.group_size == group_size && c.inter_node == inter_node) {
      return curve_seconds(c.curve, bytes);
    }
  }
  return std::nullopt;
}

std::optional<double> CostModel::collective_efficiency(CollectiveOp op, bool inter_node) const {
  if (!collectives_) return std::nullopt;
  const double reference = inter_node ? collectives_->reference_inter_node_busbw_bytes_per_s
                                      : collectives_->reference_intra_node_busbw_bytes_per_s;
  if (!(reference > 0.0)) return std::nullopt;
  const CollectiveCurve* best = nullptr;
  for (const CollectiveCurve& c : collectives_->measured) {
    if (c.op == op && c.inter_node == inter_node &&
        (best == nullptr || c.group_size > best->group_size)) {
      best = &c;
    }
  }
  if (best == nullptr) return std::nullopt;
  const SizePoint& last = best->curve.points.back();
  const double busbw = last.bytes / last.seconds * busbw_factor(op, best->group_size);
  return busbw / reference;
}

bool CostModel::calibrated(const std::string& section) const {
  if (section == "gemm") return gemm_ && gemm_->origin == Origin::kMeasured;
  if (section == "memory_bound") return memory_bound_ && memory_bound_->origin == Origin::kMeasured;
  if (section == "attention") return attention_ && attention_->origin == Origin::kMeasured;
  if (section == "host_copy") return host_copy_ && host_copy_->origin == Origin::kMeasured;
  if (section == "collectives") return collectives_.has_value();
  return false;
}

std::vector<SectionOrigin> CostModel::origins() const {
  std::vector<SectionOrigin> out;
  const DeviceFacts& d = profile_.device;
  if (!gemm_) {
    out.push_back({"gemm", "absent", "peak roofline (efficiency 1, no wave quantization)"});
  } else if (gemm_->origin == Origin::kMeasured) {
    std::size_t n = 0;
    std::string dtypes;
    for (const auto& [dtype, pts] : gemm_->measured) {
      n += pts.size();
      dtypes += std::string(dtypes.empty() ? "" : ", ") + to_string(dtype);
    }
    out.push_back({"gemm", "measured",
                   fmt::format("{} shapes ({}), wave quantization {}x{} tiles over {} units", n,
                               dtypes, gemm_->tile_m, gemm_->tile_n, d.compute_units)});
  } else {
    const char* ceiling = gemm_->ceiling == "burst"       ? ", a burst rate (short runs at boost clock; a step "
                                                            "running for minutes holds a lower, power-limited clock)"
                          : gemm_->ceiling == "sustained" ? ", a sustained rate (after a thermal soak)"
                                                          : "";
    out.push_back({"gemm", "datasheet",
                   fmt::format("max efficiency {}{}; {}x{} tiles over {} units; {:.1f} us per call",
                               eff_list(gemm_->max_efficiency), ceiling, gemm_->tile_m, gemm_->tile_n,
                               d.compute_units, gemm_->overhead_s * 1e6)});
  }
  if (!memory_bound_) {
    out.push_back({"memory_bound", "absent", "full memory bandwidth"});
  } else if (memory_bound_->origin == Origin::kMeasured) {
    std::string kinds;
    for (const auto& [k, c] : memory_bound_->measured) {
      kinds += std::string(kinds.empty() ? "" : ", ") + to_string(k);
    }
    out.push_back({"memory_bound", "measured", "bandwidth over size for " + kinds});
  } else {
    out.push_back({"memory_bound", "datasheet",
                   fmt::format("{:.0f}% of {:.0f} GB/s, {:.1f} us per kernel",
                               100.0 * memory_bound_->efficiency,
                               d.memory_bandwidth_bytes_per_s / 1e9,
                               memory_bound_->overhead_s * 1e6)});
  }
  if (!attention_) {
    out.push_back({"attention", "absent", "peak FLOP/s"});
  } else if (attention_->origin == Origin::kMeasured) {
    out.push_back({"attention", "measured",
                   fmt::format("{} measured shapes", attention_->measured.size())});
  } else {
    out.push_back({"attention", "datasheet",
                   fmt::format("forward {:.0f}%, backward {:.0f}% of peak",
                               100.0 * attention_->forward_efficiency,
                               100.0 * attention_->backward_efficiency)});
  }
  if (!host_copy_) {
    out.push_back({"host_copy", "absent",
                   fmt::format("{:.0f} GB/s PCIe, no latency", d.pcie_bandwidth_bytes_per_s / 1e9)});
  } else if (host_copy_->origin == Origin::kMeasured) {
    out.push_back({"host_copy", "measured", "pinned copy time over size"});
  } else {
    out.push_back({"host_copy", "datasheet",
                   fmt::format("{:.0f}% of {:.0f} GB/s PCIe + {:.0f} us",
                               100.0 * host_copy_->efficiency, d.pcie_bandwidth_bytes_per_s / 1e9,
                               host_copy_->latency_s * 1e6)});
  }
  if (!collectives_) {
    out.push_back({"collectives", "absent", "topology model only"});
  } else {
    out.push_back({"collectives", "measured",
                   fmt::format("{} curves (operation, group size, placement)",
                               collectives_->measured.size())});
  }
  return out;
}

}  // namespace strata
